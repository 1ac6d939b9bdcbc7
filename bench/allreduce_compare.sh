#!/usr/bin/env bash
# All-reduce bus bandwidth of this engine's TCP ring beside PyTorch's gloo, on loopback,
# side by side in one run: ROUNDS rounds, each running bench_allreduce (under `gradcache
# launch`) then allreduce_gloo.py (Debian's python3-torch, for /usr/bin/python3); the table
# has the median bus bandwidth of each per message size and their ratio.
#
# usage: bash bench/allreduce_compare.sh [BUILD_DIR] [WORLD] [ROUNDS] [MAX_BYTES]
#        (defaults: build 2 3 67108864)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} world=${2:-2} rounds=${3:-3} max_bytes=${4:-67108864}
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || {
    echo "allreduce_compare: needs Debian's python3-torch (apt-get install python3-torch)" >&2
    exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
    "$build/cli/gradcache" launch -n "$world" -- "$build/bench/bench_allreduce" --max-bytes "$max_bytes" \
        | sed 's/^\[0\] //' | grep -v '^\[' >"$work/ours_$round.csv"
    /usr/bin/python3 bench/allreduce_gloo.py --world "$world" --max-bytes "$max_bytes" >"$work/gloo_$round.csv"
done
/usr/bin/python3 - "$work" "$rounds" "$world" <<'PY'
import csv, statistics, sys
work, rounds, world = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def busbw(name):
    table = {}
    for r in range(1, rounds + 1):
        for row in csv.DictReader(open(f"{work}/{name}_{r}.csv")):
            table.setdefault(int(row["bytes"]), []).append(float(row["busbw_gbps"]))
    return {size: statistics.median(values) for size, values in table.items()}
ours, gloo = busbw("ours"), busbw("gloo")
print(f"all-reduce of f32 on loopback, {world} ranks, median of {rounds} rounds (bus bandwidth, GB/s)")
print(f"{'bytes':>10} {'tcp ring':>9} {'gloo':>9} {'ring/gloo':>10}")
for size in sorted(ours):
    print(f"{size:>10} {ours[size]:>9.3f} {gloo[size]:>9.3f} {ours[size] / gloo[size]:>10.2f}")
PY
