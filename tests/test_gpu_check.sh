#!/bin/bash
# bench/gpu_check.sh without a GPU ($1: the script, $2: the build folder): its dry run checks
# every step's programs and flags against this build, so that a GPU session's minutes are not
# spent on a misspelt flag. Also: a carried NCCL tarball (bench/build_nccl.sh's; a fake one here)
# is unpacked and built with, and the NCCL steps planned for it; a flag no program documents is caught, the summary holds a
# row per step, a wrong part stops with the usage, and the side-by-side table is made without
# PyTorch. Skipped (77) without the benchmarks (-Dbench=false).
set -u
script=$1
build=$2
[ -x "$build/bench/bench_matmul" ] || { echo "skip: this build has no benchmarks"; exit 77; }
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
dir=$work

# A carried NCCL 2.30.7 (a header that says so is all a dry run reads), unpacked under TMPDIR
mkdir -p "$dir/fake_nccl/nccl-2.30.7-sm90/include" "$dir/carried" "$dir/tmp"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 30\n#define NCCL_PATCH 7\n' \
    >"$dir/fake_nccl/nccl-2.30.7-sm90/include/nccl.h"
tar -C "$dir/fake_nccl" -cJf "$dir/carried/nccl-2.30.7-sm90.tar.xz" nccl-2.30.7-sm90
export GC_GPU_CHECK_NCCL_DIR=$dir/carried TMPDIR=$dir/tmp
carried=$dir/tmp/gc_nccl/nccl-2.30.7-sm90

# Each part is one call of the device tool: its dry run starts every step, and its plan (the
# sum of the steps' limits, the build's included) fits the call's budget.
for part in check shipped nccl train bench compare minilm profile; do
    OUT=$dir/$part GC_GPU_CHECK_BUILD=$build bash "$script" --dry-run "$part" >"$dir/$part.stdout" 2>&1 ||
        fail "dry run of $part: $(grep -B1 'would not start' "$dir/$part/gpu_check.log"; tail -2 "$dir/$part.stdout")"
    grep -q "plan for $part: the steps' limits add up to [0-9]*s of a 570s budget (fits one call: yes)" \
        "$dir/$part.stdout" || fail "$part: no plan that fits: $(tail -3 "$dir/$part.stdout")"
done
summary=$dir/check/gpu_check.md
[ -s "$summary" ] || fail "no summary written"
# a step with a short limit of its own (test_decoder_ops_cuda: 5 s) runs; only a spent budget skips
grep -q '^| synced/test_decoder_ops_cuda | dry run: would start | [0-9]* | 5 |' "$summary" ||
    fail "test_decoder_ops_cuda is not a step of its own limit: $(grep decoder_ops "$summary")"
grep -q 'out of time' "$dir"/*/gpu_check.md && fail "a dry run skipped a step: $(grep -h 'out of time' "$dir"/*/gpu_check.md)"
for step in configure build synced/test_reduce_cuda synced/test_large_cuda synced/test_host_sync_cuda memcheck_reduce \
    racecheck_norm; do
    grep -q "^| $step | dry run: would start |" "$summary" || fail "no row for step $step: $(cat "$summary")"
done
# every cuda test is a step of its own, with its own limit, and test_dist_nccl is not among them
rows=$(grep -c '^| synced/' "$summary")
[ "$rows" -ge 17 ] || fail "the check part has $rows steps of the cuda suite"
grep -q '^| synced/test_large_cuda | dry run: would start | [0-9]* | 40 |' "$summary" ||
    fail "test_large_cuda's step does not have its own limit: $(grep test_large_cuda "$summary")"
grep -q '^| synced/test_dist_nccl' "$summary" && fail "test_dist_nccl runs in the suite's steps"
grep -q '^| dist_nccl | dry run: would start | [0-9]* | 300 |' "$dir/nccl/gpu_check.md" ||
    fail "test_dist_nccl's step does not have its own limit: $(cat "$dir/nccl/gpu_check.md")"
grep -qF -- "- NCCL: 2.30.7 in $carried (two ranks on one GPU)" "$summary" ||
    fail "the summary does not name the carried NCCL: $(grep -- '- NCCL' "$summary")"
grep -qF -- "-Dnccl-root=$carried" "$summary" || fail "the configure step does not build with the carried NCCL"
[ -f "$carried/include/nccl.h" ] || fail "the carried NCCL was not unpacked to $carried"
grep -q '^| train_nccl | dry run: would start |' "$dir/nccl/gpu_check.md" ||
    fail "nccl: no launched training over NCCL: $(cat "$dir/nccl/gpu_check.md")"
for step in verify_f32 train_gc; do grep -q "^| $step | dry run" "$dir/train/gpu_check.md" || fail "train: no $step"; done
for step in bench_matmul bench_bandwidth bench_speed bench_speed_keep_last; do
    grep -q "^| $step | dry run" "$dir/bench/gpu_check.md" || fail "bench: no $step"
done
# issue 36's table: each side at max length 32 and 128, then the table of each length
for length in 32 128; do
    for side in engine_f32 engine_bf16 torch_eager_f32 torch_sdpa_f32 torch_sdpa_bf16 table; do
        grep -q "^| length${length}_$side | dry run" "$dir/compare/gpu_check.md" || fail "compare: no length${length}_$side"
    done
    # the step's whole command: three lines below its heading
    grep -A3 "^### length${length}_engine_f32 " "$dir/compare/gpu_check.md" | grep -q -- "--max-length $length\>" ||
        fail "compare: the engine's run at length $length is not at that length: $(cat "$dir/compare/gpu_check.md")"
done
grep -A3 '^### length32_torch_sdpa_bf16 ' "$dir/compare/gpu_check.md" | grep -q -- '--attention sdpa --precision bf16' ||
    fail "compare: no autocast bf16 + SDPA run: $(cat "$dir/compare/gpu_check.md")"
for step in minilm_folder minilm_engine minilm_st minilm_table; do
    grep -q "^| $step | dry run" "$dir/minilm/gpu_check.md" || fail "minilm: no $step"
done
for step in ncu_step kernel_table; do
    grep -q "^| $step | dry run" "$dir/profile/gpu_check.md" || fail "profile: no $step"
done
# all seven parts are more than one call holds: the dry run says so and fails
if OUT=$dir/all GC_GPU_CHECK_BUILD=$build bash "$script" --dry-run all >"$dir/all.stdout" 2>&1; then
    fail "the plan of all seven parts passed as one call"
fi
grep -q "(fits one call: no)" "$dir/all.stdout" || fail "all: the plan is not refused: $(tail -2 "$dir/all.stdout")"

# GC_TEST_ONLY runs the cases named, and a case that does not exist fails the program
GC_TEST_ONLY=test_last_1d,test_i32 "$build/tests/test_reduce" >"$dir/only.out" 2>&1 ||
    fail "GC_TEST_ONLY of two cases: $(cat "$dir/only.out")"
all_checks=$("$build/tests/test_reduce" 2>&1 | sed -n 's/^\([0-9]*\) checks.*/\1/p')
only_checks=$(sed -n 's/^\([0-9]*\) checks.*/\1/p' "$dir/only.out")
[ "$only_checks" -gt 0 ] && [ "$only_checks" -lt "$all_checks" ] ||
    fail "GC_TEST_ONLY ran $only_checks checks of $all_checks"
GC_TEST_ONLY=test_last_1d,test_no_such_case "$build/tests/test_reduce" >"$dir/only_bad.out" 2>&1 &&
    fail "a misspelt GC_TEST_ONLY case passed"
grep -q "names 2 cases; 1 of them are cases here" "$dir/only_bad.out" ||
    fail "the misspelt case is not reported: $(cat "$dir/only_bad.out")"
# a copy of the script with one flag and one case misspelt: its dry runs fail and name them
mkdir -p "$dir/bench"
sed 's/--keep-last-graph/--keep-last-graf/; s/test_longest_row/test_longest_rowz/' "$script" >"$dir/bench/gpu_check.sh"
ln -s "$(cd "$(dirname "$script")/.." && pwd)/tests" "$dir/tests"
cp "$(dirname "$script")/torch_gradcache.py" "$dir/bench/"
if OUT=$dir/bad GC_GPU_CHECK_BUILD=$build bash "$dir/bench/gpu_check.sh" --dry-run bench >"$dir/bad.out" 2>&1; then
    fail "a misspelt flag passed the dry run"
fi
grep -q -- '--keep-last-graf is not among its documented flags' "$dir/bad/gpu_check.log" ||
    fail "the misspelt flag is not named: $(cat "$dir/bad/gpu_check.log")"
grep -q '^| bench_speed_keep_last | DRY RUN: would not start |' "$dir/bad/gpu_check.md" ||
    fail "the summary does not mark the step: $(cat "$dir/bad/gpu_check.md")"
if OUT=$dir/bad_case GC_GPU_CHECK_BUILD=$build bash "$dir/bench/gpu_check.sh" --dry-run check >"$dir/bad_case.out" 2>&1
then
    fail "a misspelt GC_TEST_ONLY case passed the dry run"
fi
grep -q 'tests/test_reduce_cuda.c has no case test_longest_rowz' "$dir/bad_case/gpu_check.log" ||
    fail "the misspelt case is not named: $(grep -A3 memcheck_reduce "$dir/bad_case/gpu_check.log")"

# the comparison's table needs no PyTorch (import torch made to fail, whatever is installed)
printf 'mode,batch,chunk,loss,peak_bytes,cache_bytes,packed_bytes,workspace_bytes,step_ms,fits\n%s\n%s\n' \
    plain,8,8,full,1048576,0,0,1048576,2.0,1 gc,8,4,tiled,1048576,1,0,1048576,3.0,1 >"$dir/engine.csv"
printf 'mode,batch,chunk,loss,peak_bytes,step_ms,fits\nplain,8,8,full,4194304,4.0,1\ngc,8,4,full,,,0\n' >"$dir/torch.csv"
python3 -c 'import runpy, sys
sys.modules["torch"] = None
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")' "$(dirname "$script")/compare_table.py" --batches 8 \
    "engine f32=$dir/engine.csv" "PyTorch f32=$dir/torch.csv" >"$dir/table" 2>&1 || fail "compare_table: $(cat "$dir/table")"
# the engine's peak counts its workspace: 2 MiB against PyTorch's 4
grep -q '^| PyTorch f32 | full | 4.0 | 4 | 2.00 | 2.00 |$' "$dir/table" || fail "compare_table, plain row: $(cat "$dir/table")"
grep -q '^| PyTorch f32 | full | 4 | does not fit | - | - | - | - |$' "$dir/table" ||
    fail "compare_table, a run that did not fit: $(cat "$dir/table")"

# the kernel table from ncu's summary: the program's own output before the header skipped, a
# kernel's launch shapes added up, the unit read, the rest in one row
cat >"$dir/ncu.csv" <<'CSV'
the program's own table
"ID","Kernel Name","Invocations","Metric Name","Metric Unit","Average"
"1","void gemm<float>(const float *, int)","2","gpu__time_duration.sum","us","3.00"
"1","void gemm<float>(const float *, int)","1","gpu__time_duration.sum","ns","2,000.00"
"1","void add(float *)","4","gpu__time_duration.sum","ns","500.00"
"1","void fill(float *)","1","gpu__time_duration.sum","ns","1,000.00"
CSV
python3 "$(dirname "$script")/ncu_kernels.py" "$dir/ncu.csv" --top 2 >"$dir/kernels" 2>&1 ||
    fail "ncu_kernels.py: $(cat "$dir/kernels")"
grep -q '^8 launches, 0.01 ms of kernel time' "$dir/kernels" || fail "ncu_kernels.py total: $(cat "$dir/kernels")"
grep -q '^| `gemm<float>` | 72.7% | 3 | 2.7 |' "$dir/kernels" || fail "ncu_kernels.py gemm: $(cat "$dir/kernels")"
grep -q '^| 1 other kernels | 9.1% | 1 | 1.0 |' "$dir/kernels" || fail "ncu_kernels.py rest: $(cat "$dir/kernels")"

bash "$script" nonsense >"$dir/usage" 2>&1 && fail "an unknown part was accepted"
grep -q "unknown part 'nonsense'" "$dir/usage" || fail "no message for an unknown part: $(cat "$dir/usage")"

[ "$failures" -eq 0 ] && echo "gpu_check: dry run checks passed"
exit $((failures > 0))
