#!/usr/bin/env bash
# --checkpoint-minutes, as a user meets it: a run killed with SIGKILL long before its first
# --save-every checkpoint still has the checkpoint its minutes wrote, and --resume continues
# from it; two processes under gradcache launch with a time so short that every step passes
# it agree on every checkpoint (saving is collective: a rank that saved alone would hang its
# peers) and finish. Run by meson with the gradcache program as $1; a tiny model, seconds.
set -uo pipefail
gradcache=${1:?usage: test_cli_train_checkpoint_minutes.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
export GC_DIST_TIMEOUT=20

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --gc --gc-chunk-size 8
       --steps 1000000 --save-every 1000000 --checkpoint-minutes 0.00001)

# killed after a few steps: the time rule checkpointed, the step rule never did
run=$work/killed
"${train[@]}" --out "$run" >"$work/first.out" 2>"$work/first.err" &
first=$!
for _ in $(seq 1 600); do
    [ -s "$run/checkpoint.safetensors" ] && [ "$(wc -l <"$run/log.jsonl")" -ge 3 ] && break
    sleep 0.1
done
kill -KILL "$first"
wait "$first" 2>/dev/null
check [ -s "$run/checkpoint.safetensors" ] "no checkpoint before the kill: $(cat "$work/first.err")"
saved=$(grep -ao '"train.step":"[0-9]*"' "$run/checkpoint.safetensors" | grep -o '[0-9]*')
check [ "${saved:-0}" -ge 1 ] "the checkpoint holds step '${saved:-}'"
expect_ok "${train[@]}" --out "$run" --resume --stop-after $((saved + 2))
check grep -q "trained steps $((saved + 1))-$((saved + 2)) of 1000000" "$work/stdout" \
    "--resume after the kill: $(cat "$work/stdout" "$work/stderr")"

# two processes, a checkpoint after every step: every one agreed, the run ends
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --stop-after 6 --out "$work/two"
check grep -q "^\[0\] trained steps 1-6 of 1000000" "$work/stdout" "two processes: $(cat "$work/stdout" "$work/stderr")"
check [ "$(wc -l <"$work/two/log.jsonl")" -eq 6 ] "two processes: the log has $(wc -l <"$work/two/log.jsonl") lines"

cli_summary
