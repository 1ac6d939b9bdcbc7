#!/usr/bin/env bash
# gradcache train --eval-every: flags that need one another refused with exit 2 and a bad
# --eval-data with exit 1, both in one line before anything is written; a run evaluates every N
# steps and at the last (a log line each, a line on stderr), keeps DIR/best/ (which gradcache
# eval reads and gives the logged figure again), early-stops, and says so when resumed. Run by
# meson with the gradcache program as $1.
set -uo pipefail
usage="usage: test_cli_train_eval.sh path/to/gradcache"
gradcache=${1:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
common=(--data "$pairs" --model-size tiny --max-length 16 --batch-size 16 --steps 5 --log-every 5)

# --- refused before training: the flags (2), the file (1) -------------------------------
expect_exit 2 "--eval-every needs --eval-data" "$gradcache" train "${common[@]}" --eval-every 2 --out "$work/refused"
expect_exit 2 "need --eval-every" "$gradcache" train "${common[@]}" --eval-data "$pairs" --out "$work/refused"
expect_exit 2 "need --eval-every" "$gradcache" train "${common[@]}" --early-stop 3 --out "$work/refused"
expect_exit 2 "--eval-metric: expected one of" "$gradcache" train "${common[@]}" --eval-every 2 --eval-data "$pairs" \
    --eval-metric ndcg --out "$work/refused"
expect_exit 2 "--eval-metric ndcg@10: $pairs is a pair file" "$gradcache" train "${common[@]}" --eval-every 2 \
    --eval-data "$pairs" --eval-metric ndcg@10 --out "$work/refused"
expect_exit 1 "--eval-data: $work/missing.tsv" "$gradcache" train "${common[@]}" --eval-every 2 \
    --eval-data "$work/missing.tsv" --out "$work/refused"
check [ ! -e "$work/refused" ] "a refused run wrote $work/refused"
expect_ok "$gradcache" train --help
for flag in --eval-every --eval-data --eval-metric --eval-limit --early-stop; do
    grep -q -- "$flag" "$work/stdout" || fail "--help lacks $flag"
done

# --- evaluations at 2, 4 and the last step (5); DIR/best/ for gradcache eval ------------
expect_ok "$gradcache" train "${common[@]}" --eval-every 2 --eval-data "$pairs" --eval-limit 100 --out "$work/run"
steps=$(grep '^{"eval":' "$work/run/log.jsonl" | sed -E 's/^\{"eval":\{"step":([0-9]+).*/\1/' | tr '\n' ' ')
check [ "$steps" = "2 4 5 " ] "evaluations after steps '$steps', wanted 2 4 5"
check [ "$(grep -c "gradcache train: step [245]: mrr " "$work/stderr")" -eq 3 ] "stderr: $(cat "$work/stderr")"
grep -q "^best mrr .* at step [245]" "$work/stdout" || fail "summary: $(cat "$work/stdout")"
check [ -f "$work/run/best/model.safetensors" ] "no $work/run/best/model.safetensors"
best_step=$(sed -E 's/.*"step":([0-9]+).*/\1/' "$work/run/best/best.json")
logged=$(grep "^{\"eval\":{\"step\":$best_step," "$work/run/log.jsonl" | sed -E 's/.*"mrr":([^,]+).*/\1/')
expect_ok "$gradcache" eval --model "$work/run/best" --data "$pairs" --limit 100 --json --batch-size 8
got=$(sed -E 's/.*"mrr":([^,]+).*/\1/' "$work/stdout")
check awk -v a="$got" -v b="$logged" 'BEGIN { d = a - b; exit !(d * d < 1e-12) }' \
    "gradcache eval of best/ gives MRR $got, the log $logged at step $best_step"

# --- --early-stop: frozen weights (an lr below their rounding) tie, no improvement ------
expect_ok "$gradcache" train "${common[@]}" --steps 10 --lr 1e-12 --eval-every 1 --eval-data "$pairs" --early-stop 2 \
    --out "$work/early"
grep -q "gradcache train: early stop at step 3" "$work/stderr" || fail "early stop: $(cat "$work/stderr")"
grep -q "trained steps 1-3 of 10" "$work/stdout" || fail "early stop: $(cat "$work/stdout")"
expect_ok "$gradcache" train "${common[@]}" --steps 10 --lr 1e-12 --eval-every 1 --eval-data "$pairs" --early-stop 2 \
    --out "$work/early" --resume
grep -q "stopped early at step 3 of 10" "$work/stdout" || fail "resumed early stop: $(cat "$work/stdout")"
# the settings are the checkpoint's
expect_error "was written with --early-stop 2, this run has --early-stop 3" "$gradcache" train "${common[@]}" --steps 10 --lr 1e-12 --eval-every 1 \
    --eval-data "$pairs" --early-stop 3 --out "$work/early" --resume

cli_summary
