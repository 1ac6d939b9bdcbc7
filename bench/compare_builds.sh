#!/usr/bin/env bash
# Training-step time of two builds side by side (before/after a change): runs
# bench/bench_train_step of each in turn, ROUNDS times, and prints the medians and their ratio.
#   bash bench/compare_builds.sh BASE_BUILD NEW_BUILD THREADS ROUNDS [bench_train_step flags...]
# e.g. bash bench/compare_builds.sh /tmp/base/build build 1 5 --model-size tiny --batch 128 --reps 2
set -euo pipefail
if [ $# -lt 4 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    [ "${1:-}" = --help ] || [ "${1:-}" = -h ]
    exit $?
fi
base=$1 new=$2 threads=$3 rounds=$4
shift 4
steps() {
    local build=$1
    shift
    GC_NUM_THREADS=$threads "$build/bench/bench_train_step" "$@" | awk '/^step_ms/ {print $2}'
}
base_ms=() new_ms=()
for _ in $(seq "$rounds"); do
    base_ms+=($(steps "$base" "$@"))
    new_ms+=($(steps "$new" "$@"))
done
python3 - "${base_ms[*]}" "${new_ms[*]}" "$threads" "$*" <<'EOF'
import statistics, sys
base, new = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
b, n = statistics.median(base), statistics.median(new)
print(f"{sys.argv[3]} threads, {sys.argv[4]}: base {b:.1f} ms, new {n:.1f} ms, new/base {n / b:.2f} "
      f"(median of {len(base)} steps each)")
EOF
