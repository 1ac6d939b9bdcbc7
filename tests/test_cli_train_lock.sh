#!/usr/bin/env bash
# One writer per run folder, as a user meets it: two gradcache train processes started alone
# (a Slurm batch script without srun runs each so) into one folder -- the second is refused
# with one line naming the first's pid and host, exit 2, and the first's log is untouched;
# the first killed with SIGKILL leaves nothing that blocks the next run. Run by meson with the
# gradcache program as $1; a tiny model, seconds on two cores.
set -uo pipefail
gradcache=${1:?usage: test_cli_train_lock.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --gc --gc-chunk-size 8)
run=$work/run

# the first writer: a run far too long to end by itself, in the background
"${train[@]}" --steps 1000000 --out "$run" >"$work/first.out" 2>"$work/first.err" &
first=$!
# it holds the folder once its lock file names it, and has started once it logged a step
for _ in $(seq 1 600); do
    grep -q "^pid $first on host" "$run/lock" 2>/dev/null && [ -s "$run/log.jsonl" ] && break
    sleep 0.1
done
check grep -q "^pid $first on host .* since " "$run/lock" "the lock file does not name the first run: $(cat "$run/lock")"

expect_exit 2 "$run is being written by pid $first on host $(hostname)" "${train[@]}" --steps 2 --out "$run"
grep -q "one writer per run folder" "$work/stderr" || fail "the refusal does not say why: $(cat "$work/stderr")"
# the refused run touched nothing: the first run's log only grew, its first line is still there
check grep -q '^{"step":1,' "$run/log.jsonl" "the refused run cut the first run's log"

kill -KILL "$first"
wait "$first" 2>/dev/null
expect_ok "${train[@]}" --steps 2 --out "$run"
check grep -q "trained steps 1-2 of 2" "$work/stdout" "after the holder was killed: $(cat "$work/stdout" "$work/stderr")"
check [ "$(wc -l <"$run/log.jsonl")" -eq 2 ] "the new run's log has $(wc -l <"$run/log.jsonl") lines"

cli_summary
