#!/usr/bin/env bash
# Short gradcache commands under valgrind with the flags of the report that found the CPU
# kernels' threads never joined (a worker's TLS, 320-400 bytes, "possibly lost" in every
# command), plus --leak-check=full, without which memcheck only summarises leaks and never
# counts one as an error (the report's own exit status 99 came from the loader's false
# positive below):
#   valgrind --leak-check=full --errors-for-leak-kinds=possible --error-exitcode=99 gradcache ...
# each must exit 0. GC_NUM_THREADS=2, so that the worker threads start whatever the machine.
# In a build with CUDA, tests/valgrind.supp silences a false positive of the dynamic loader
# that the CUDA libraries trigger before main.
# Skipped (77) without valgrind, and in a sanitizer build (valgrind cannot run one).
# usage: test_cli_valgrind.sh GRADCACHE CUDA(true|false) SANITIZE(b_sanitize) SUPPRESSIONS
set -uo pipefail
gradcache=$1 cuda=$2 sanitize=$3 suppressions=$4
command -v valgrind >/dev/null || { echo "valgrind is not installed: skipped"; exit 77; }
[ "$sanitize" = none ] || { echo "a $sanitize build: valgrind cannot run it: skipped"; exit 77; }
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

flags=(--leak-check=full --errors-for-leak-kinds=possible --error-exitcode=99)
[ "$cuda" = true ] && flags+=(--suppressions="$suppressions")

# under_valgrind COMMAND...: exit 0 under valgrind; its report in $work/valgrind.N
runs=0
under_valgrind() {
    runs=$((runs + 1))
    checks=$((checks + 1))
    local status=0
    GC_NUM_THREADS=2 valgrind "${flags[@]}" "$gradcache" "$@" >"$work/valgrind.$runs" 2>&1 || status=$?
    [ "$status" -eq 0 ] || fail "valgrind ... gradcache $*: exit status $status: $(grep -E 'lost:|ERROR SUMMARY' \
        "$work/valgrind.$runs" | sed 's/^==[0-9]*== *//' | tr '\n' ' ')"
}

write_word_pairs "$work/pairs.tsv"
under_valgrind train --data "$work/pairs.tsv" --model-size tiny --batch-size 8 --max-length 16 --steps 2 \
    --out "$work/run"
under_valgrind eval --model "$work/run" --data "$work/pairs.tsv"
cli_summary
