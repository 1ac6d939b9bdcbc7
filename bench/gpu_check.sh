#!/usr/bin/env bash
# bench/gpu_check.sh: what a session with a GPU runs, in calls of under 10 minutes each:
# build for the GPU, prove the CUDA backend correct, then measure it, against PyTorch too.
#
#   bash bench/gpu_check.sh PART... [--previous FILE] [--dry-run]
#
# Parts, run in the order given (each builds first if the build is missing or stale), in the
# order a session runs them, most needed first (each fits one call with the build included):
#   check    build (release, sm_90 + PTX), the cuda suite with GC_CUDA_SYNC=1 (a kernel's fault
#            named at its own launch), each test a step of its own; compute-sanitizer's memcheck
#            and racecheck on a small fixed subset of the kernel tests' cases (GC_TEST_ONLY)
#   shipped  the cuda suite as shipped (index errors deferred to the next synchronisation)
#   nccl     test_dist_nccl (the dist tests' collectives, distributed GradCache, the ring loss
#            and ZeRO through NCCL, their parameters against the TCP ring's) and gradcache launch
#            of two ranks training on cuda through NCCL: two ranks on the one GPU when the NCCL
#            found is 2.30 or later (see NCCL below)
#   train    gradcache verify (f32, f64, the base model) and train (GradCache, plain) on the GPU
#   bench    bench_matmul, bench_bandwidth, bench_autograd, bench_cache, gradcache bench speed
#            (base model, batch 4096, chunks 64/128/256, with and without --keep-last-graph)
#   compare  the engine (gradcache bench memory, f32 and bf16) and PyTorch (bench/torch_gradcache.py:
#            eager f32, SDPA f32, autocast bf16 + SDPA) on the base model at batch 4096, max
#            length 32 then 128: the plain step, GradCache at chunks 128 and 512 (the engine's
#            loss tiled and full, PyTorch's full and chunked), step time and peak memory side by
#            side in one table per length (bench/compare_table.py)
#   minilm   all-MiniLM-L6-v2 (its shape, random weights) with GradCache at batch 4096 in bf16:
#            the engine against sentence-transformers' CachedMultipleNegativesRankingLoss
#   profile  Nsight Compute's kernel times over a plain and a cached step of the base model,
#            as a table of the kernels that take the time (bench/ncu_kernels.py)
#   all      all eight (more than one call holds: the dry run says so and exits 1)
#
# A step's time limit is its test's own (tests/meson.build's timeout, a GPU's figure for the
# cuda suite) or, for the other programs, the figure beside it below; a call's steps must fit
# its budget together, the build's included, and --dry-run prints that sum. Results are
# written after every step, so a call cut short keeps what it finished.
#
# Each call writes two files to $OUT (the device tool's folder; gpu_check_out/ when unset):
# gpu_check.md, the summary to paste into bench/RESULTS.md (device, every figure, the exact
# commands), and gpu_check.log, every step's whole output (compare and minilm add each side's
# CSV file, length32.engine_f32.csv and so on). --previous FILE puts an earlier
# call's summary first, so that the last call's file is the whole record.
#
# --dry-run checks the script without a GPU (tests/test_gpu_check.sh, in the cpu suite): no
# build and nothing run; each step is recorded with its command and limit after checking that
# its programs exist in the build folder (GC_GPU_CHECK_BUILD, built already), that every
# --flag it passes to one of ours is in that program's --help (or, for a Python script, in
# its source) and that every case GC_TEST_ONLY names is a case of that test. It ends with the
# plan: the sum of the step limits against the budget. It exits 1 when a step would not start
# or the plan does not fit.
#
# NCCL: two ranks on one GPU need NCCL 2.30 or later (and NCCL_MULTI_RANK_GPU_ENABLE=1, which
# the NCCL steps set). The machines have 2.28 (the toolkit's, PyTorch's), and the 2.30 wheel
# (about 300 MB) is past what the device tool carries, so bench/build_nccl.sh builds 2.30.7 for
# sm_90 alone into .nccl/nccl-2.30.7-sm90.tar.xz (git ignores .nccl/), small enough to carry:
# when GC_GPU_CHECK_NCCL_DIR (default .nccl) holds an nccl-*.tar.xz, it is unpacked under
# ${TMPDIR:-/tmp}/gc_nccl/ (once: the build's rpath points there, so later calls on a warm
# machine keep it). The newest of that, GC_GPU_CHECK_NCCL_ROOT, the nvidia-nccl-cu13 package of
# the machine's python3 (PyTorch's) and the CUDA toolkit's is built with (-Dnccl-root); older
# than 2.30 with one GPU, test_dist_nccl runs the world of one process, the launched training
# is skipped, and the summary says so. A build folder configured before keeps its NCCL: with
# another, give a fresh GC_GPU_CHECK_BUILD.
#
# With the session's device tool (15 minutes of device time, starts and idle time included; a
# call may run 10 minutes; a machine left idle goes back after 30 s). On the first H200 run
# (2026-11-26) the build took 12 s on 16 cores and the five parts about 5 minutes; check,
# shipped, train and bench take two calls on a warm machine, each part writing its own folder
# under $OUT:
#   run(command='O=$OUT; OUT=$O/check bash bench/gpu_check.sh check shipped;
#                OUT=$O/train bash bench/gpu_check.sh train', carry=['.nccl'], timeout_s=440)
#   run(command='O=$OUT; OUT=$O/bench bash bench/gpu_check.sh bench', carry=['.nccl'], timeout_s=350)
#   run(command='OUT=$OUT/nccl bash bench/gpu_check.sh nccl', carry=['.nccl'], timeout_s=580)
# (carry .nccl, built here first with bash bench/build_nccl.sh, in every call: a call without
# it on a fresh machine builds with the machine's 2.28; the nccl part alone on a fresh machine
# is the one call that runs every dist test over NCCL at world 2 on the one GPU.)
# (--previous FILE, with .gpu/ carried, joins a call's summary to an earlier one's).
# compare (grown since: issue 36's table) and minilm were planned without a GPU: about 4
# minutes and 1 by the H100's figures of 2026-11-26 (max length 128 estimated at 4 times
# 32's), against limits of 570 s and 290 s with the build. One call on a warm machine, the
# second part given what the call has left:
#   run(command='O=$OUT; OUT=$O/compare bash bench/gpu_check.sh compare;
#                OUT=$O/minilm GC_GPU_CHECK_BUDGET=$((580 - SECONDS)) bash bench/gpu_check.sh minilm',
#       timeout_s=600)
#
# Environment: GC_GPU_CHECK_BUDGET (seconds a call may take, default 570: the steps' limits
# are cut to what is left of it), GC_GPU_CHECK_BUILD (the build folder, default build-gpu),
# GC_GPU_CHECK_ARCH (default 90).
set -u
cd "$(dirname "$0")/.."

usage() { awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"; }

parts=()
previous=
dry_run=false
while [ $# -gt 0 ]; do
    case $1 in
        check | shipped | nccl | train | bench | compare | minilm | profile) parts+=("$1") ;;
        all) parts+=(check shipped nccl train bench compare minilm profile) ;;
        --previous) previous=${2:?--previous needs a file}; shift ;;
        --dry-run) dry_run=true ;;
        -h | --help) usage; exit 0 ;;
        *) echo "gpu_check: unknown part '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
[ ${#parts[@]} -gt 0 ] || { usage >&2; exit 2; }

budget=${GC_GPU_CHECK_BUDGET:-570}
build=${GC_GPU_CHECK_BUILD:-build-gpu}
arch=${GC_GPU_CHECK_ARCH:-90}
out=${OUT:-gpu_check_out}
mkdir -p "$out"
summary=$out/gpu_check.md
log=$out/gpu_check.log
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$log"
export PATH="/usr/local/cuda/bin:$PATH"

# meson and ninja come from pip on the GPU machines: their commands, or their modules.
meson=(meson)
command -v meson >/dev/null || meson=(python3 -m mesonbuild.mesonmain)
if ! command -v ninja >/dev/null && python3 -c 'import ninja' 2>/dev/null; then
    mkdir -p "$work/bin"
    printf '#!/bin/sh\nexec python3 -m ninja "$@"\n' >"$work/bin/ninja"
    chmod +x "$work/bin/ninja"
    export PATH="$work/bin:$PATH"
fi
gradcache=$build/cli/gradcache
# The model of the comparisons: the trainer's base preset (train/dual_encoder.c) without its
# final projection, as gradcache bench builds it; base_model at max length 32.
base_sizes=(--dim 256 --layers 6 --heads 8 --hidden 1024 --dropout 0.1)
base_model=("${base_sizes[@]}" --max-length 32)

# --- recording -----------------------------------------------------------------------------
steps_table=()   # one markdown row per step
details=()       # per step: the command and its output's end, as markdown
planned=0        # the sum of the steps' limits: the call's plan

# step NAME LIMIT COMMAND...: runs COMMAND with at most LIMIT seconds (less when the budget
# is nearly spent), its output appended to the log; records status, time and the output's
# last lines, and writes the summary, so that a call cut short keeps every finished step. A
# dry run records the step and its whole limit (the plan) without running it.
step() {
    local name=$1 limit=$2
    shift 2
    planned=$((planned + limit))
    local left=$((budget - SECONDS - 15))
    ! $dry_run && [ "$limit" -gt "$left" ] && limit=$left
    # Skipped only when the budget is spent: a step whose own limit is short (5 s) still runs.
    local command="$*"
    # for the table: one line, pipes escaped, at most 160 characters
    local shown=${command//$'\n'/ }
    shown=${shown//|/\\|}
    [ ${#shown} -gt 160 ] && shown="${shown:0:157}..."
    if ! $dry_run && [ "$left" -lt 10 ]; then
        steps_table+=("| $name | skipped: out of time | 0 | $limit | \`$shown\` |")
        echo "=== $name: skipped, out of time" >>"$log"
        write_summary
        return 0
    fi
    echo "=== $name (limit ${limit}s): $command" | tee -a "$log"
    local start=$SECONDS rc=0
    if $dry_run; then
        would_start "$@" >"$work/step.out" 2>&1 || rc=$?
    else
        timeout --kill-after=10 "$limit" "$@" >"$work/step.out" 2>&1 || rc=$?
    fi
    local seconds=$((SECONDS - start)) status=ok
    $dry_run && status="dry run: would start"
    cat "$work/step.out" >>"$log"
    if $dry_run && [ $rc -ne 0 ]; then
        status="DRY RUN: would not start"
        dry_run_failures=$((dry_run_failures + 1))
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="timed out after ${limit}s"
    elif [ $rc -eq 77 ]; then
        status="skipped (77)"
    elif [ $rc -ne 0 ]; then
        status="FAILED (exit $rc)"
    fi
    echo "    $status, ${seconds}s" | tee -a "$log"
    steps_table+=("| $name | $status | $seconds | $limit | \`$shown\` |")
    details+=("### $name — $status, ${seconds}s"$'\n\n```sh\n'"$command"$'\n```\n\n```\n'"$(tail -n 80 "$work/step.out")"$'\n```\n')
    write_summary
    return $rc
}

# --- dry run ---------------------------------------------------------------------------------
dry_run_failures=0

# would_start COMMAND...: whether COMMAND would start here: its program and the build's files
# it names exist, each --flag it gives one of our programs is one that program documents, and
# each case that GC_TEST_ONLY names is one of the test's (GC_TEST_CASE in its source).
# Prints what is wrong; 0 when nothing is.
would_start() {
    local words=("$@") problems=0 word cases=
    while [ "${words[0]}" = env ] || [[ ${words[0]} == *=* ]]; do
        [[ ${words[0]} == GC_TEST_ONLY=* ]] && cases=${words[0]#GC_TEST_ONLY=}
        words=("${words[@]:1}")
    done
    # a launcher's program after -- (gradcache launch -n 2 -- gradcache train ...) is a command
    # of its own, its flags documented by its own --help
    local i
    for i in "${!words[@]}"; do
        if [ "${words[i]}" = -- ]; then
            would_start "${words[@]:0:i}" || problems=1
            would_start "${words[@]:i+1}" || problems=1
            return $problems
        fi
    done
    for word in "${words[@]}"; do
        case $word in
            "$build"/*) [ -e "$word" ] || { echo "no $word in the build"; problems=1; } ;;
        esac
        if [ -n "$cases" ] && [[ $word == "$build"/tests/* ]]; then
            local source=tests/${word##*/}.c name
            for name in ${cases//,/ }; do
                grep -qF "GC_TEST_CASE($name)" "$source" 2>/dev/null ||
                    { echo "$source has no case $name (GC_TEST_ONLY)"; problems=1; }
            done
        fi
    done
    # the GPU machine's own tools (KINDS.md) need not be here
    case ${words[0]##*/} in nvidia-smi | compute-sanitizer | cuobjdump | ncu) return $problems ;; esac
    command -v "${words[0]}" >/dev/null || [ -x "${words[0]}" ] || {
        echo "no program ${words[0]}"
        problems=1
    }
    # the text our program documents its flags in: --help of the program (and subcommand), or
    # a Python script's own source (argparse's add_argument lines)
    local documented=
    if [ "${words[0]}" = "$gradcache" ] || [[ ${words[0]} == "$build"/bench/* ]]; then
        local prefix=("${words[0]}")
        for word in "${words[@]:1}"; do
            [[ $word == -* ]] && break
            prefix+=("$word")
        done
        documented=$("${prefix[@]}" --help 2>&1)
    elif [ "${words[0]}" = python3 ] && [[ ${words[1]:-} == bench/*.py ]]; then
        documented=$(cat "${words[1]}")
    else
        return $problems
    fi
    for word in "${words[@]}"; do
        [[ $word == --* ]] || continue
        grep -qE -- "(^|[^a-z0-9-])${word}([^a-z0-9-]|\$)" <<<"$documented" || {
            echo "${words[0]}: $word is not among its documented flags"
            problems=1
        }
    done
    return $problems
}

write_summary() {
    {
        if [ -n "$previous" ] && [ -f "$previous" ]; then
            cat "$previous"
            echo
        fi
        echo "## $(date -u +%Y-%m-%d) — ${gpu_name:-no GPU found}: gpu_check ${parts[*]}$($dry_run && echo " (dry run)")"
        echo
        echo "- device: ${gpu_line:-nvidia-smi found no GPU}"
        echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo "unknown (no .git)")$(git diff --quiet HEAD 2>/dev/null || echo ", with local changes")"
        echo "- command: \`bash bench/gpu_check.sh ${parts[*]}\` (build $build, sm_$arch + PTX, release), $((SECONDS))s of a ${budget}s budget"
        echo "- plan: the steps' limits add up to ${planned}s"
        echo "- toolchain: ${toolchain:-unknown}"
        echo "- NCCL: ${nccl_line:-none found}"
        echo
        echo "| step | status | seconds | limit | command |"
        echo "| --- | --- | ---: | ---: | --- |"
        printf '%s\n' "${steps_table[@]}"
        echo
        printf '%s\n' "${details[@]}"
    } >"$summary"
}

# At the end (or when cut short): the summary, and in a dry run whether the plan fits one call.
finish() {
    write_summary
    echo "gpu_check: summary in $summary, whole output in $log"
    rm -rf "$work"
    $dry_run || return 0
    local fits=yes
    [ "$planned" -le "$budget" ] || fits=no
    echo "gpu_check: plan for ${parts[*]}: the steps' limits add up to ${planned}s of a ${budget}s budget" \
        "(fits one call: $fits)" | tee -a "$log"
    [ "$fits" = yes ] && [ "$dry_run_failures" -eq 0 ] || exit 1
}
trap finish EXIT

# --- the machine ---------------------------------------------------------------------------
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,pstate --format=csv,noheader 2>/dev/null | head -1)
toolchain="$(nvcc --version 2>/dev/null | tail -1); $(cc --version 2>/dev/null | head -1); $("${meson[@]}" --version 2>/dev/null | sed 's/^/meson /'); $(python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"
step machine 15 bash -c 'nvidia-smi; nproc; free -g; ls /usr/local/cuda/lib64 2>/dev/null | grep -E "^lib(cudart|cublas|nccl)\.so" ; command -v nvcc compute-sanitizer cuobjdump meson ninja'

# --- build ---------------------------------------------------------------------------------
# The carried NCCL (bench/build_nccl.sh's tarball in GC_GPU_CHECK_NCCL_DIR), unpacked once under
# ${TMPDIR:-/tmp}/gc_nccl; prints the folder it holds, nothing when there is no tarball.
carried_nccl() {
    local tarballs=("${GC_GPU_CHECK_NCCL_DIR:-.nccl}"/nccl-*.tar.xz) # with several, the last by name
    local tarball=${tarballs[-1]}
    [ -f "$tarball" ] || return 0
    local into=${TMPDIR:-/tmp}/gc_nccl name
    name=$(basename "$tarball" .tar.xz)
    if [ ! -f "$into/$name/include/nccl.h" ] && ! { mkdir -p "$into" && tar -xJf "$tarball" -C "$into"; }; then
        echo "gpu_check: could not unpack $tarball" >&2
        return 0
    fi
    echo "$into/$name"
}

# The newest NCCL there is (a folder with include/nccl.h): the carried one, GC_GPU_CHECK_NCCL_ROOT,
# the Python package nvidia-nccl-cu13 (PyTorch's), the toolkit's. Sets nccl_root, nccl_version
# (e.g. 23203 for 2.32.3) and nccl_line.
nccl_root=
nccl_version=0
find_nccl() {
    local candidates=("$(carried_nccl)" "${GC_GPU_CHECK_NCCL_ROOT:-}" /usr/local/cuda) root version
    candidates+=("$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)")
    for root in "${candidates[@]}"; do
        [ -n "$root" ] && [ -f "$root/include/nccl.h" ] || continue
        version=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / { v[$2] = $3 }
                       END { print v["NCCL_MAJOR"] * 10000 + v["NCCL_MINOR"] * 100 + v["NCCL_PATCH"] }' \
            "$root/include/nccl.h")
        if [ "$version" -gt "$nccl_version" ]; then
            nccl_root=$root
            nccl_version=$version
        fi
    done
    if [ -z "$nccl_root" ]; then
        nccl_line="none found (test_dist_nccl skips)"
    else
        nccl_line="$((nccl_version / 10000)).$((nccl_version / 100 % 100)).$((nccl_version % 100)) in $nccl_root"
        [ "$nccl_version" -ge 23000 ] && nccl_line+=" (two ranks on one GPU)" ||
            nccl_line+=" (before 2.30: test_dist_nccl runs one rank only, the launched training is skipped)"
    fi
}
find_nccl

built=false
build_once() {
    $built && return 0
    built=true
    # a dry run builds nothing: it checks the steps against the build that is there, and plans
    # the configure step a bare machine needs
    if $dry_run; then
        [ -f "$build/build.ninja" ] || { echo "gpu_check: --dry-run needs a build in $build" >&2; exit 2; }
    fi
    if $dry_run || [ ! -f "$build/build.ninja" ]; then
        local nccl_option=()
        [ -n "$nccl_root" ] && nccl_option=("-Dnccl-root=$nccl_root")
        step configure 30 "${meson[@]}" setup "$build" --buildtype=release -Dcuda=enabled "-Dcuda-arch=$arch" \
            -Dtests=true -Dbench=true "${nccl_option[@]}" || $dry_run || return 1
    fi
    # then what the library holds: machine code for sm_$arch and PTX for compute_$arch
    local fatbinary="cuobjdump --list-elf --list-ptx $build/libgradcache.so | sort | uniq -c | head -20"
    # 90 s: the whole build took 12 s on the H200's 16 cores (its slowest nvcc file bounds it)
    step build 90 bash -c "ninja -C $build -j $(nproc) && $fatbinary" || $dry_run || return 1
}

# --- check and shipped: the cuda suite, compute-sanitizer ------------------------------------
# The cuda suite's tests as "name<TAB>limit<TAB>command" lines: each test's command and its own
# time limit (tests/meson.build gives the cuda suite a GPU's figures), test_dist_nccl left out
# (a step of its own).
cuda_tests() {
    "${meson[@]}" introspect --tests "$build" | python3 -c '
import json, shlex, sys
for test in json.load(sys.stdin):
    if any(s.split(":")[-1] == "cuda" for s in test["suite"]) and test["name"] != "test_dist_nccl":
        print(test["name"], test["timeout"], shlex.join(test["cmd"]), sep="\t")'
}

# suite_steps LABEL ENV...: each cuda test a step of its own, named LABEL/test, with its own
# limit, so that every test's result is recorded whatever happens to the others.
suite_steps() {
    local label=$1 name limit command
    shift
    local listed
    listed=$(cuda_tests) && [ -n "$listed" ] || { step "$label" 10 false; return 0; }
    while IFS=$'\t' read -r name limit command; do
        # shellcheck disable=SC2086 # the command was joined by shlex: its words hold no blanks
        step "$label/$name" "$limit" env "$@" $command
    done <<<"$listed"
}

# test_limit NAME: a test's own time limit (tests/meson.build).
test_limit() {
    "${meson[@]}" introspect --tests "$build" |
        python3 -c 'import json, sys; print(next(t["timeout"] for t in json.load(sys.stdin) if t["name"] == sys.argv[1]))' "$1"
}

part_check() {
    build_once || return 0
    # with a wait after every launch, so that a kernel's fault names its own launch
    suite_steps synced GC_CUDA_SYNC=1
    # Out-of-bounds accesses and shared-memory races in the kernels, on a few cases of the kernel
    # tests (compute-sanitizer is 10-100x slower); it refuses the GPU of a gVisor machine (KINDS.md).
    local sanitizer
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    step memcheck_reduce 30 env GC_TEST_ONLY=test_random_rows,test_empty_rows,test_longest_row,test_sum_middle \
        "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/test_reduce_cuda"
    step racecheck_norm 30 env GC_TEST_ONLY=test_softmax_nonfinite,test_layernorm_random \
        "$sanitizer" --tool racecheck --error-exitcode 1 "$build/tests/test_norm_cuda"
    step racecheck_sum_middle 30 env GC_TEST_ONLY=test_sum_middle \
        "$sanitizer" --tool racecheck --error-exitcode 1 "$build/tests/test_reduce_cuda"
    step memcheck_elementwise 30 env GC_TEST_ONLY=test_binary,test_binary_merged,test_binary_scalar \
        "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/test_elementwise_cuda"
    # (fused attention's kernels share no memory between threads, only warp shuffles: no racecheck)
    step memcheck_attention 20 env GC_TEST_ONLY=test_against_cpu \
        "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/test_attention_fused_cuda"
}

part_shipped() {
    build_once || return 0
    # as shipped: index errors deferred to the next synchronisation, no waits
    suite_steps shipped
}

# --- nccl: the dist tests and the trainer over NCCL ----------------------------------------
part_nccl() {
    build_once || return 0
    # NCCL's collectives, distributed GradCache and ZeRO against the TCP ring's, two ranks sharing
    # the GPU where NCCL allows it (2.30+); the dist suite proper is CPU-only (CI runs it)
    step dist_nccl "$(test_limit test_dist_nccl)" env NCCL_MULTI_RANK_GPU_ENABLE=1 "$build/tests/test_dist_nccl"
    # the trainer over NCCL: two ranks launched on the GPU(s), a few GradCache steps of the tiny model
    local gpus
    gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
    if [ "$nccl_version" -lt 23000 ] && [ "$gpus" -lt 2 ] && ! $dry_run; then
        steps_table+=("| train_nccl | skipped: two ranks on one GPU need NCCL 2.30+ | 0 | 0 | |")
        return 0
    fi
    synthetic_pairs "$work/pairs.tsv"
    step train_nccl 90 env NCCL_MULTI_RANK_GPU_ENABLE=1 GC_DIST_TIMEOUT=60 "$gradcache" launch -n 2 -- "$gradcache" \
        train --data "$work/pairs.tsv" --device cuda --model-size tiny --batch-size 256 --gc --gc-chunk-size 32 \
        --steps 10 --log-every 5 --out "$work/run_nccl"
}

# --- train: the program on the GPU -----------------------------------------------------------
# synthetic_pairs FILE: 20,000 query-passage pairs for training runs (no WordNet on the machines).
synthetic_pairs() {
    awk 'BEGIN { for (i = 0; i < 20000; i++) printf "what is item %d of group %d\tthe item numbered %d\n", i, i % 97, i }' \
        >"$1"
}

part_train() {
    build_once || return 0
    step verify_f32 30 "$gradcache" verify --device cuda
    step verify_f64 30 "$gradcache" verify --device cuda --dtype f64
    step verify_base 60 "$gradcache" verify --device cuda --batch-size 256 --chunk-size 32 "${base_model[@]}"
    # A short training run on synthetic pairs (no WordNet there): GradCache, then plain.
    synthetic_pairs "$work/pairs.tsv"
    step train_gc 90 "$gradcache" train --data "$work/pairs.tsv" --device cuda --model-size base --batch-size 1024 \
        --gc --gc-chunk-size 128 --steps 30 --log-every 10 --out "$work/run_gc"
    step train_plain 60 "$gradcache" train --data "$work/pairs.tsv" --device cuda --model-size base --batch-size 1024 \
        --steps 30 --log-every 10 --out "$work/run_plain"
}

# --- bench: the GPU benchmarks -------------------------------------------------------------
part_bench() {
    build_once || return 0
    step bench_matmul 90 "$build/bench/bench_matmul" --cuda-only --reps 5
    step bench_bandwidth 45 "$build/bench/bench_bandwidth" --device cuda --mib 1024 --reps 20
    step bench_autograd 60 "$build/bench/bench_autograd" --reps 5
    step bench_cache 60 "$build/bench/bench_cache" --device cuda --batch 4096 --reps 5
    step bench_speed 90 "$gradcache" bench speed --device cuda --batch-size 4096 --chunks 64,128,256 --reps 3 \
        --warmup 1 "${base_model[@]}"
    step bench_speed_keep_last 60 "$gradcache" bench speed --device cuda --batch-size 4096 --chunks 64,128,256 \
        --reps 2 --warmup 1 --keep-last-graph "${base_model[@]}"
}

# --- compare and minilm: the engine against PyTorch, side by side -----------------------------
# compare_runs NAME LENGTH BATCHES REPS LOSSES LIMITS...: at max length LENGTH and each of
# BATCHES, the plain step and GradCache at chunks 128 and 512 (a warm-up step, then REPS
# measured), each side a step of its own writing a CSV row per run (LIMITS: the five steps'
# limits in the order below), then their tables. The engine in f32 and bf16; PyTorch eager
# f32 (the engine's attention ops), with SDPA in f32 and with autocast bf16 + SDPA. LOSSES
# both: the engine's f32 run with its tiled and its full loss, PyTorch's SDPA f32 run with its
# full and chunked one; else the engine's tiled and PyTorch's full. A run that does not fit
# the GPU is a result, not a failure.
compare_runs() {
    local name=$1 length=$2 batches=$3 reps=$4 losses=$5 limits=("${@:6}")
    local model=("${base_sizes[@]}" --max-length "$length") csv=$out/$name
    local runs=(--device cuda --batches "$batches" --chunks "128,512" --reps "$reps" --warmup 1)
    local torch=(python3 bench/torch_gradcache.py "${runs[@]}" "${model[@]}")
    local engine_loss=tiled torch_loss=full
    [ "$losses" = both ] && engine_loss=both torch_loss=both
    step "${name}_engine_f32" "${limits[0]}" "$gradcache" bench memory "${runs[@]}" --precision f32 \
        --loss "$engine_loss" --csv "$csv.engine_f32.csv" "${model[@]}"
    step "${name}_engine_bf16" "${limits[1]}" "$gradcache" bench memory "${runs[@]}" --precision bf16 \
        --csv "$csv.engine_bf16.csv" "${model[@]}"
    step "${name}_torch_eager_f32" "${limits[2]}" "${torch[@]}" --attention manual --csv "$csv.eager_f32.csv"
    step "${name}_torch_sdpa_f32" "${limits[3]}" "${torch[@]}" --attention sdpa --loss "$torch_loss" \
        --csv "$csv.sdpa_f32.csv"
    step "${name}_torch_sdpa_bf16" "${limits[4]}" "${torch[@]}" --attention sdpa --precision bf16 \
        --csv "$csv.sdpa_bf16.csv"
    step "${name}_table" 5 python3 bench/compare_table.py --batches "$batches" \
        --title "base model (dim 256, 6 layers, 8 heads, hidden 1024), max length $length" \
        "engine f32=$csv.engine_f32.csv" "engine bf16=$csv.engine_bf16.csv" \
        "PyTorch eager f32=$csv.eager_f32.csv" "PyTorch SDPA f32=$csv.sdpa_f32.csv" \
        "PyTorch autocast+SDPA bf16=$csv.sdpa_bf16.csv"
}

# The base model at max length 32, then 128: there a plain step of 4096 needs about 150 GiB in
# f32 (64 times the CPU's 2.35 GiB at batch 64; 32's is 29 GiB), past an H100's and an H200's
# memory (a row that says so), so batch 1024 gives the plain step and GradCache / plain too;
# fewer steps there, each about 4 times 32's. The limits are about twice the steps' estimates.
part_compare() {
    build_once || return 0
    compare_runs length32 32 4096 3 both 25 20 30 35 25
    compare_runs length128 128 1024,4096 2 one 60 40 60 55 45
}

# all-MiniLM-L6-v2 trained with Gradient Cache at batch 4096 (max length 32, chunk 128) in
# bf16: the engine on the model's folder against sentence-transformers'
# CachedMultipleNegativesRankingLoss at the same mini-batch (autocast bf16), each with its
# plain step. No network on the GPU machine: the folder has the model's shape and tokenizer,
# its weights random (bench/make_minilm_folder.py, with transformers).
part_minilm() {
    build_once || return 0
    local folder=$work/minilm csv=$out/minilm
    local runs=(--device cuda --batches 4096 --chunks 128 --reps 3 --warmup 1 --max-length 32 --precision bf16)
    step minilm_folder 40 python3 bench/make_minilm_folder.py "$folder"
    step minilm_engine 30 "$gradcache" bench memory --init "$folder" "${runs[@]}" --csv "$csv.engine.csv"
    step minilm_st 50 python3 bench/torch_gradcache.py --sentence-transformers "$folder" "${runs[@]}" \
        --csv "$csv.st.csv"
    step minilm_table 5 python3 bench/compare_table.py --batches 4096 \
        --title "all-MiniLM-L6-v2 (random weights), max length 32, bf16" \
        "engine bf16=$csv.engine.csv" "sentence-transformers CachedMNRL bf16=$csv.st.csv"
}

# --- profile: where the GPU time of a step goes ---------------------------------------------
part_profile() {
    build_once || return 0
    local ncu
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    # Each kernel replayed alone (serialised), 2,500 launches: the plain step and the start of
    # the cached one at batch 512. The clocks are left alone (METHOD.md); the summary's CSV
    # follows the program's own output on stdout.
    step ncu_step 150 bash -c "$ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
        --csv -c 2500 $gradcache bench speed --device cuda --batch-size 512 --chunks 128 --reps 1 --warmup 0 \
        ${base_model[*]} >$work/ncu.csv"
    step kernel_table 20 python3 bench/ncu_kernels.py "$work/ncu.csv" --top 20
}

for part in "${parts[@]}"; do
    "part_$part"
done
