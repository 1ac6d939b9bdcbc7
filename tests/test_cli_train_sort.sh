#!/usr/bin/env bash
# gradcache train --gc-sort-lengths: refused without --gc; it trains (the preset, its dropout on)
# and its checkpoint keeps the flag; with dropout 0 (the tiny BERT fixture, its dropout set to 0)
# step 1's loss and gradient norm are the unsorted run's and the plain run's, with and without
# --gc-chunk-tokens. Run by meson with the gradcache program as $1 and the tiny BERT as $2.
set -uo pipefail
usage="usage: test_cli_train_sort.sh path/to/gradcache path/to/tiny_bert"
gradcache=${1:?$usage}
tiny=${2:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

# --- refused without --gc; the preset trains with it ------------------------------------
pairs=$work/pairs.tsv
write_word_pairs "$pairs"
common=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --steps 10 --log-every 10)
expect_error "--gc-sort-lengths needs --gc" "$gradcache" train "${common[@]}" --gc-sort-lengths --out "$work/refused"
check [ ! -e "$work/refused" ] "a refused run wrote $work/refused"
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4 --gc-sort-lengths --stop-after 5 --out "$work/preset"
first=$(field "$work/preset/log.jsonl" 1 loss)
last=$(field "$work/preset/log.jsonl" 5 loss)
check awk -v first="$first" -v last="$last" 'BEGIN { exit !(last < first) }' "loss did not fall ($first -> $last)"
# other chunks draw other dropout masks: a resumed run must sort as the run did
expect_error "flag.gc-sort-lengths" "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4 --out "$work/preset" --resume
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4 --gc-sort-lengths --out "$work/preset" --resume
grep -q "trained steps 6-10 of 10" "$work/stdout" || fail "resume: $(cat "$work/stdout")"

# --- dropout 0: the same step whatever the chunks' order --------------------------------
bert=$work/bert0
without_dropout "$tiny" "$bert" || { echo "setup: no dropout-free copy of $tiny" >&2; exit 99; }
write_sentence_pairs "$work/bert_pairs.tsv"
tune=(--init "$bert" --data "$work/bert_pairs.tsv" --batch-size 12 --max-length 16 --steps 1)
expect_ok "$gradcache" train "${tune[@]}" --out "$work/plain"
# The same rows' numbers computed in other chunks: each row's sums (attention over its keys, the
# mean pooling) run over its chunk's width, which the cut to the chunk's longest text changes, so
# a vectorised sum may group them otherwise, and the parameter gradients add the chunks in another
# order: f32 rounding, a few ulps in the loss (1e-6 relative) and more in the gradient norm, a
# sum over every parameter's (1e-5); a row out of place would move either by far more.
for variant in "rows:" "sorted:--gc-sort-lengths" "budget:--gc-chunk-tokens 12" \
    "sorted_budget:--gc-chunk-tokens 12 --gc-sort-lengths"; do
    name=${variant%%:*}
    read -ra flags <<<"${variant#*:}"
    expect_ok "$gradcache" train "${tune[@]}" --gc --gc-chunk-size 3 "${flags[@]}" --out "$work/$name"
    for key in loss:1e-6 grad_norm:1e-5; do
        got=$(field "$work/$name/log.jsonl" 1 "${key%%:*}")
        want=$(field "$work/plain/log.jsonl" 1 "${key%%:*}")
        check close_to "$got" "$want" "${key#*:}" "$name: step 1's ${key%%:*} $got, the plain step's $want"
    done
done
check close_to "$(field "$work/sorted/log.jsonl" 1 loss)" "$(field "$work/rows/log.jsonl" 1 loss)" 1e-6 \
    "sorted chunks: step 1's loss $(field "$work/sorted/log.jsonl" 1 loss), unsorted $(field "$work/rows/log.jsonl" 1 loss)"

cli_summary
