#!/usr/bin/env bash
# Two builds of one benchmark side by side by the CPU work they do, for a machine shared with
# other jobs, where wall times drift: runs BASE and NEW in turn (the first in odd rounds, the
# second in even ones) ROUNDS times under `perf stat`, and prints the medians of the
# process's CPU time (task-clock: it counts only while the process runs, so a busy machine
# stretches it far less than wall time; user-mode cycles and instructions too where the
# machine has the counters), of its median step_ms where the program prints step lines
# (bench_train_step), of its texts_per_s or latency_median_ms where it prints them
# (bench_encode), and NEW/BASE.
#   bash bench/compare_cycles.sh BASE NEW THREADS ROUNDS [benchmark flags...]
# e.g. bash bench/compare_cycles.sh /tmp/base/bench_train_step build/bench/bench_train_step 1 5 \
#          --model-size tiny --batch 128 --reps 4
#      bash bench/compare_cycles.sh /tmp/base/bench_encode build/bench/bench_encode 1 5 \
#          --model models/minilm --texts TEXTS --batch 32 --count 512
set -euo pipefail
if [ $# -lt 4 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    [ "${1:-}" = --help ] || [ "${1:-}" = -h ]
    exit $?
fi
base=$1 new=$2 threads=$3 rounds=$4
shift 4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { # run BINARY TAG ROUND ARGS...
    local binary=$1 tag=$2 round=$3
    shift 3
    GC_NUM_THREADS=$threads perf stat -x, -e task-clock,cycles:u,instructions:u -o "$out/$tag.$round.perf" \
        "$binary" "$@" >"$out/$tag.$round.out"
}
for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then run "$base" base "$round" "$@"; run "$new" new "$round" "$@"
    else run "$new" new "$round" "$@"; run "$base" base "$round" "$@"; fi
done
python3 - "$out" "$rounds" "$threads" "$*" <<'PY'
import glob, os, statistics, sys
out, rounds, threads, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def figures(tag):
    counts, steps, rates, latencies = {"task-clock": [], "cycles:u": [], "instructions:u": []}, [], [], []
    for r in range(1, rounds + 1):
        for line in open(os.path.join(out, f"{tag}.{r}.perf")):
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] in counts and fields[0].replace(".", "").isdigit():
                counts[fields[2]].append(float(fields[0]))
        ms = [float(l.split()[1]) for l in open(os.path.join(out, f"{tag}.{r}.out")) if l.startswith("step_ms ")]
        if ms: steps.append(statistics.median(ms))
        lines = open(os.path.join(out, f"{tag}.{r}.out")).readlines()
        rates += [float(l.split()[1]) for l in lines if l.startswith("texts_per_s ")]
        latencies += [float(l.split()[1]) for l in lines if l.startswith("latency_median_ms ")]
    medians = [statistics.median(v) if v else None for v in counts.values()]
    return medians + [statistics.median(v) if v else None for v in (steps, rates, latencies)]
base, new = figures("base"), figures("new")
print(f"{threads} threads, {flags}; medians of {rounds} alternated rounds (load now: {os.getloadavg()[0]:.1f})")
for name, i in (("CPU ms", 0), ("user cycles", 1), ("user instructions", 2), ("step ms (wall)", 3),
                ("texts/s (wall)", 4), ("latency ms (wall)", 5)):
    if base[i] is None: continue
    print(f"  {name:18s} base {base[i]:14.4g}  new {new[i]:14.4g}  new/base {new[i] / base[i]:.3f}")
PY
