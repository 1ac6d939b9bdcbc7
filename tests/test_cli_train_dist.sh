#!/usr/bin/env bash
# gradcache train under gradcache launch (data-parallel over TCP on loopback): two processes
# train and process 0 alone writes the run folder; a launched world of one equals an
# unlaunched run byte for byte; a two-process run stopped and resumed equals one that was not,
# byte for byte; resuming with another number of processes is refused; a process that dies
# stops the run with one line from the others, leaves the last checkpoint intact (resuming
# from it gives the uninterrupted run's model), and nothing behind. A tiny model, seconds on
# two cores.
# usage: test_cli_train_dist.sh GRADCACHE
set -uo pipefail
gradcache=${1:?usage: test_cli_train_dist.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
export GC_DIST_TIMEOUT=20

check() {
    local message=${*: -1}
    checks=$((checks + 1))
    "${@:1:$#-1}" || fail "$message"
}
same_file() { [ "$(sha256sum <"$1")" = "$(sha256sum <"$2")" ]; }

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 17 --gc --gc-chunk-size 4
       --steps 8 --log-every 4)

# two processes; process 0 writes the log, the checkpoint and the model
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/two"
check grep -q "^\[0\] trained steps 1-8 of 8" "$work/stdout" "no summary from process 0: $(cat "$work/stdout")"
check [ "$(grep -c '^\[1\]' "$work/stdout" "$work/stderr" | awk -F: '{ s += $2 } END { print s }')" -eq 0 ] \
    "process 1 printed something: $(grep '^\[1\]' "$work/stdout" "$work/stderr")"
check [ "$(wc -l <"$work/two/log.jsonl")" -eq 8 ] "the log has $(wc -l <"$work/two/log.jsonl") lines"
check [ -s "$work/two/model.safetensors" ] "no model"
check grep -q '"dist.world_size":"2"' "$work/two/checkpoint.safetensors" "the checkpoint does not say 2 processes"

# a launched world of one is an unlaunched run
expect_ok timeout 120 "$gradcache" launch -n 1 -- "${train[@]}" --out "$work/one_launched"
expect_ok timeout 120 "${train[@]}" --out "$work/one"
check same_file "$work/one/model.safetensors" "$work/one_launched/model.safetensors" \
    "a launched world of one trained another model"

# stopped after 3 steps and resumed: the same files as straight through
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --stop-after 3
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --resume
check grep -q "^\[0\] trained steps 4-8 of 8" "$work/stdout" "resume: $(cat "$work/stdout")"
for file in model.safetensors checkpoint.safetensors; do
    check same_file "$work/resumed/$file" "$work/two/$file" "resumed: $file differs from the straight run's"
done
expect_error "was written by a run of 2 processes, this run has 1" "${train[@]}" --out "$work/resumed" --resume

# a process killed mid-run (unlaunched, so that nothing else stops the others): the other
# stops with one line naming the collective and the process, in well under the timeout
long=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --gc --steps 100000
      --save-every 2 --out "$work/killed")
port=$((20000 + RANDOM % 20000))
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${long[@]}" >/dev/null 2>&1 & # env execs it
victim=$!
checks=$((checks + 1))
start=$SECONDS
status=0
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "${long[@]}" >"$work/stdout" \
    2>"$work/stderr" &
survivor=$!
for _ in $(seq 200); do [ -s "$work/killed/checkpoint.safetensors" ] && break; sleep 0.05; done
kill -9 "$victim"
wait "$survivor" || status=$?
wait "$victim" 2>/dev/null
[ "$status" -eq 1 ] || fail "the surviving process: exit status $status, wanted 1"
[ $((SECONDS - start)) -lt 15 ] || fail "the surviving process took $((SECONDS - start)) s to stop"
[ "$(wc -l <"$work/stderr")" -eq 1 ] && grep -q "rank 1 closed its connection" "$work/stderr" ||
    fail "the surviving process's message: $(cat "$work/stderr")"

# under the launcher: its exit status is the killed process's, its last checkpoint is intact
# (resuming from it gives the straight run's model), and nothing is left running
checks=$((checks + 1))
status=0
timeout 120 "$gradcache" launch -n 2 -- sh -c '
    if [ "$RANK" = 1 ]; then (sleep 1.5; kill -9 $$) & fi
    exec "$@"' sh "${train[@]}" --steps 400 --save-every 3 --out "$work/interrupted" >"$work/stdout" 2>"$work/stderr" ||
    status=$?
[ "$status" -eq 137 ] || fail "launch with a process killed: exit status $status, wanted 137: $(tail -3 "$work/stderr")"
check [ -s "$work/interrupted/checkpoint.safetensors" ] "no checkpoint was left by the interrupted run"
check [ -z "$(pgrep -f "$work/interrupted")" ] "processes of the interrupted run are left: $(pgrep -af "$work/interrupted")"
expect_ok timeout 300 "$gradcache" launch -n 2 -- "${train[@]}" --steps 400 --save-every 3 --out "$work/interrupted" --resume
expect_ok timeout 300 "$gradcache" launch -n 2 -- "${train[@]}" --steps 400 --save-every 3 --out "$work/uninterrupted"
check same_file "$work/interrupted/model.safetensors" "$work/uninterrupted/model.safetensors" \
    "resumed after a kill: another model than the uninterrupted run's"

# bad input: one line from a process (under the launcher, the same line from each)
expect_error "--batch-size 1: every one of the 2 processes needs at least one example" \
    env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "${train[@]}" --batch-size 1 --out "$work/bad"
checks=$((checks + 1))
timeout 60 "$gradcache" launch -n 2 -- "${train[@]}" --batch-size 1 --out "$work/bad" >/dev/null 2>"$work/stderr" &&
    fail "--batch-size 1 with 2 processes was accepted"
[ "$(sed 's/^\[[01]\] //' "$work/stderr" | sort -u | wc -l)" -eq 1 ] || fail "under the launcher: $(cat "$work/stderr")"
check [ ! -e "$work/bad" ] "a refused run left $work/bad behind"
cli_summary
