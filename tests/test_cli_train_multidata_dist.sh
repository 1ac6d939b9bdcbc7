#!/usr/bin/env bash
# gradcache train on several datasets (--data a,b) under gradcache launch (two processes over
# TCP on loopback): every process takes the same dataset at each step (the schedule is a
# function of the seed and the step), the batch split over them as with one dataset, and a run
# stopped and resumed equals one that was not, byte for byte. A tiny model: seconds on two cores.
set -uo pipefail
gradcache=${1:?usage: test_cli_train_multidata_dist.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
export GC_DIST_TIMEOUT=20

write_word_pairs "$work/all.tsv"
sed -n 1,68p "$work/all.tsv" >"$work/a.tsv"        # 4 batches of 17
sed -n 69,200p "$work/all.tsv" | cut -f1,2 >"$work/b.tsv" # 7, no negative column
train=("$gradcache" train --data "$work/a.tsv,$work/b.tsv" --sampling proportional --model-size tiny --max-length 24
       --batch-size 17 --gc --gc-chunk-size 4 --steps 12 --log-every 4)

expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/two"
check [ "$(wc -l <"$work/two/log.jsonl")" -eq 12 ] "the log has $(wc -l <"$work/two/log.jsonl") lines"
# the schedule of one process: every process took the step's dataset, or the steps would not agree
expect_ok "${train[@]}" --out "$work/one"
datasets() { sed -E 's/.*"dataset":([0-9]+).*/\1/' "$1" | tr -d '\n'; }
check [ "$(datasets "$work/two/log.jsonl")" = "$(datasets "$work/one/log.jsonl")" ] \
    "two processes took the datasets $(datasets "$work/two/log.jsonl"), one process $(datasets "$work/one/log.jsonl")"
# stopped after step 5 and resumed: the straight run's model, checkpoint and log
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --stop-after 5 --out "$work/resumed"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --resume --out "$work/resumed"
for file in model.safetensors checkpoint.safetensors; do
    check cmp -s "$work/resumed/$file" "$work/two/$file" "two processes: the resumed $file differs from the straight run's"
done
check cmp -s <(computed "$work/resumed/log.jsonl") <(computed "$work/two/log.jsonl") \
    "two processes: the resumed log differs from the straight run's"

cli_summary
