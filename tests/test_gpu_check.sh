#!/bin/bash
# bench/gpu_check.sh without a GPU ($1: the script, $2: the build folder): its dry run checks
# every step's programs and flags against this build, so that a GPU session's minutes are not
# spent on a misspelt flag. Also: a flag no program documents is caught, the summary holds a
# row per step, a wrong part stops with the usage, and the side-by-side table is made without
# PyTorch. Skipped (77) without the benchmarks (-Dbench=false).
set -u
script=$1
build=$2
[ -x "$build/bench/bench_matmul" ] || { echo "skip: this build has no benchmarks"; exit 77; }
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
dir=$work

OUT=$dir/out GC_GPU_CHECK_BUILD=$build bash "$script" --dry-run all >"$dir/stdout" 2>&1 ||
    fail "dry run of every part: $(grep -B1 'would not start' "$dir/out/gpu_check.log")"
summary=$dir/out/gpu_check.md
[ -s "$summary" ] || fail "no summary written"
for step in cuda_suite_synced cuda_suite memcheck dist_nccl verify_f32 train_gc bench_matmul bench_bandwidth \
    bench_speed bench_speed_keep_last engine_4096 torch_4096 engine_large torch_large side_by_side; do
    grep -q "^| $step | dry run: would start |" "$summary" || fail "no row for step $step: $(cat "$summary")"
done
grep -q '^- NCCL: ' "$summary" || fail "the summary does not say which NCCL"
grep -q 'test_dist_nccl' "$summary" && ! grep -q '| cuda_suite .*test_dist_nccl' "$summary" ||
    fail "test_dist_nccl runs in its own step, not in the cuda suite's"

# a copy of the script with one flag misspelt: its dry run fails and names the flag
sed 's/--keep-last-graph/--keep-last-graf/' "$script" >"$dir/gpu_check.sh"
mkdir -p "$dir/bench" && cp "$dir/gpu_check.sh" "$dir/bench/gpu_check.sh"
ln -s "$(cd "$(dirname "$script")/.." && pwd)/tests" "$dir/tests"
cp "$(dirname "$script")/torch_gradcache.py" "$dir/bench/"
if OUT=$dir/bad GC_GPU_CHECK_BUILD=$build bash "$dir/bench/gpu_check.sh" --dry-run bench >"$dir/bad.out" 2>&1; then
    fail "a misspelt flag passed the dry run"
fi
grep -q -- '--keep-last-graf is not among its documented flags' "$dir/bad/gpu_check.log" ||
    fail "the misspelt flag is not named: $(cat "$dir/bad/gpu_check.log")"
grep -q '^| bench_speed_keep_last | DRY RUN: would not start |' "$dir/bad/gpu_check.md" ||
    fail "the summary does not mark the step: $(cat "$dir/bad/gpu_check.md")"

# the side-by-side table needs no PyTorch (import torch made to fail, whatever is installed)
printf 'mode,batch,chunk,peak_bytes,step_ms,fits\nplain,8,8,2097152,2.0,1\ngc,8,4,1048576,3.0,1\n' >"$dir/engine.csv"
printf 'mode,batch,chunk,peak_bytes,step_ms,fits\nplain,8,8,4194304,4.0,1\ngc,8,4,1048576,2.0,1\n' >"$dir/torch.csv"
python3 -c 'import runpy, sys
sys.modules["torch"] = None
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")' "$(dirname "$script")/torch_gradcache.py" --compare \
    "$dir/engine.csv" "$dir/torch.csv" >"$dir/table" 2>&1 || fail "--compare without PyTorch: $(cat "$dir/table")"
grep -q '^| plain | 8 | 8 | 2.0 | 4.0 | 0.50 | 2.0 | 4.0 | 0.50 |' "$dir/table" ||
    fail "--compare without PyTorch, plain row: $(cat "$dir/table")"

bash "$script" nonsense >"$dir/usage" 2>&1 && fail "an unknown part was accepted"
grep -q "unknown part 'nonsense'" "$dir/usage" || fail "no message for an unknown part: $(cat "$dir/usage")"

[ "$failures" -eq 0 ] && echo "gpu_check: dry run checks passed"
exit $((failures > 0))
