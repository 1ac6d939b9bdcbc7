#!/usr/bin/env bash
# gradcache mine: hard negatives mined with a small trained run from tests/fixtures/word_pairs.tsv
# (64 definition -> word pairs) and from a BEIR-format folder, the pair file it writes (its
# columns, no negative equal to the line's positive, the same file for any block size and for
# the same seed), `train --hard-negatives` reading it, and refusals: a bad flag exits 2, a bad
# file 1, each with one line on stderr. Run by meson with the gradcache program as $1. A tiny
# model and 64 texts keep it to seconds.
set -uo pipefail
gradcache=${1:?usage: test_cli_mine.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
pairs=$(dirname "${BASH_SOURCE[0]}")/fixtures/word_pairs.tsv

# expect_exit STATUS WANT COMMAND...: exits STATUS with one line on stderr containing WANT.
expect_exit() {
    local want_status=$1 status=0
    shift
    expect_error "$@"
    "${@:2}" >/dev/null 2>&1 || status=$?
    check [ "$status" -eq "$want_status" ] "${*:2}: exit $status, want $want_status"
}

run=$work/run
expect_ok "$gradcache" train --data "$pairs" --model-size tiny --max-length 16 --batch-size 8 --steps 2 --out "$run"

# --- mining from a pair file: 2 negatives a line, none the line's own word ----------------------
mined=$work/mined.tsv
expect_ok "$gradcache" mine --model "$run" --data "$pairs" --num-negatives 2 --out "$mined"
grep -q "^mined 2 negatives for 64 of 64 lines (64 distinct queries, 64 candidates) into $mined$" "$work/stdout" ||
    fail "mine's summary: $(cat "$work/stdout")"
grep -q "candidates 64/64 encoded and searched" "$work/stderr" || fail "mine's progress: $(cat "$work/stderr")"
check [ "$(wc -l <"$mined")" -eq 64 ] "the mined file has $(wc -l <"$mined") lines, want 64"
awk -F'\t' 'NF != 4 || $3 == $2 || $4 == $2 || $3 == $4 { bad = 1 } END { exit bad }' "$mined" ||
    fail "a mined line is not query, positive, two other distinct words: $(head -3 "$mined")"
# the queries and positives are the input's, in its order; every negative is one of its words
check [ "$(cut -f1,2 "$mined")" = "$(cut -f1,2 "$pairs")" ] "the mined file changed the queries or positives"
awk -F'\t' 'NR == FNR { word[$2] = 1; next } !($3 in word) || !($4 in word) { bad = 1 } END { exit bad }' \
    "$pairs" "$mined" || fail "a negative is no positive of the file"

# the same file for any block and batch size, and for the same seed
expect_ok "$gradcache" mine --model "$run" --data "$pairs" --num-negatives 2 --out "$work/blocks.tsv" --block 5 --batch-size 3
check cmp -s "$mined" "$work/blocks.tsv" "--block 5 --batch-size 3 mined other negatives"
expect_ok "$gradcache" mine --model "$run" --data "$pairs" --num-negatives 2 --sampling random --seed 4 --range-max 20 --out "$work/r1.tsv"
expect_ok "$gradcache" mine --model "$run" --data "$pairs" --num-negatives 2 --sampling random --seed 4 --range-max 20 --out "$work/r2.tsv"
check cmp -s "$work/r1.tsv" "$work/r2.tsv" "--sampling random --seed 4 twice mined other negatives"
# --range-min 1 skips each query's best candidate: the top file's first negative is never taken
expect_ok "$gradcache" mine --model "$run" --data "$pairs" --num-negatives 1 --range-min 1 --out "$work/skip.tsv"
check [ "$(paste <(cut -f3 "$mined") <(cut -f3 "$work/skip.tsv") | awk -F'\t' '$1 == $2' | wc -l)" -eq 0 ] \
    "--range-min 1 took a query's best candidate"

# a query of two lines has both positives: with 62 of the 64 candidates asked for, every other
# candidate is its negative and neither positive is (sentence-transformers'
# grouping of a query's lines)
{ cat "$pairs"; head -2 "$pairs" | tail -1 | awk -F'\t' -v q="$(head -1 "$pairs" | cut -f1)" '{ print q "\t" $2 "\t" $3 }'; } \
    >"$work/twice.tsv"
expect_ok "$gradcache" mine --model "$run" --data "$work/twice.tsv" --num-negatives 62 --range-max 62 --out "$work/twice-mined.tsv"
grep -q "for 65 of 65 lines (64 distinct queries, 64 candidates)" "$work/stdout" || fail "two lines of a query: $(cat "$work/stdout")"
first=$(head -1 "$pairs" | cut -f2) second=$(head -2 "$pairs" | tail -1 | cut -f2)
awk -F'\t' -v a="$first" -v b="$second" -v q="$(head -1 "$pairs" | cut -f1)" \
    '$1 == q { for (i = 3; i <= NF; i++) if ($i == a || $i == b) bad = 1; n++; if (NF != 64) bad = 1 } END { exit bad || n != 2 }' \
    "$work/twice-mined.tsv" || fail "a query's other positive was mined as its negative"

# training reads the mined negatives
expect_ok "$gradcache" train --data "$mined" --hard-negatives 2 --model-size tiny --max-length 16 --batch-size 8 \
    --steps 2 --out "$work/run2"

# --- a BEIR folder: its train qrels' queries, the whole corpus as candidates -------------------
beir=$work/beir
mkdir -p "$beir/qrels"
printf 'query-id\tcorpus-id\tscore\n' >"$beir/qrels/train.tsv"
for i in $(seq 0 29); do
    printf '{"_id": "d%d", "text": "word number %d"}\n' "$i" "$i" >>"$beir/corpus.jsonl"
    printf '{"_id": "q%d", "text": "def of %d"}\n' "$i" "$i" >>"$beir/queries.jsonl"
    [ "$i" -lt 10 ] && printf 'q%d\td%d\t1\n' "$i" "$i" >>"$beir/qrels/train.tsv"
done
expect_ok "$gradcache" mine --model "$run" --data "$beir" --num-negatives 3 --out "$work/beir.tsv"
grep -q "for 10 of 10 lines (10 distinct queries, 30 candidates)" "$work/stdout" || fail "mine a BEIR folder: $(cat "$work/stdout")"
awk -F'\t' 'NF != 5 || $3 == $2 || $4 == $2 || $5 == $2 || $3 !~ /^word number/ { bad = 1 } END { exit bad }' \
    "$work/beir.tsv" || fail "a BEIR line mined its own positive or no corpus text: $(head -2 "$work/beir.tsv")"

# --- refusals: flags exit 2, files 1 --------------------------------------------------------
expect_exit 2 "--out is required" "$gradcache" mine --model "$run" --data "$pairs"
expect_exit 2 "--num-negatives" "$gradcache" mine --model "$run" --data "$pairs" --out "$work/x.tsv" --num-negatives 0
expect_exit 2 "--sampling" "$gradcache" mine --model "$run" --data "$pairs" --out "$work/x.tsv" --sampling best
expect_exit 2 "--margin" "$gradcache" mine --model "$run" --data "$pairs" --out "$work/x.tsv" --margin abc
expect_exit 2 "--range-max 3: leaves fewer than --num-negatives 3 ranks after --range-min 1" \
    "$gradcache" mine --model "$run" --data "$pairs" --out "$work/x.tsv" --range-min 1 --range-max 3
expect_exit 1 "$work/none.tsv" "$gradcache" mine --model "$run" --data "$work/none.tsv" --out "$work/x.tsv"
printf 'a\tb\n\nc\td\n' >"$work/bad.tsv"
expect_exit 1 "$work/bad.tsv" "$gradcache" mine --model "$run" --data "$work/bad.tsv" --out "$work/x.tsv"
expect_exit 1 "--model" "$gradcache" mine --model "$work/nothing" --data "$pairs" --out "$work/x.tsv"
# every candidate refused: exit 1, the reason the last line on stderr (after the progress)
status=0
"$gradcache" mine --model "$run" --data "$pairs" --out "$work/x.tsv" --num-negatives 2 --max-score -1 \
    >/dev/null 2>"$work/stderr" || status=$?
check [ "$status" -eq 1 ] "--max-score -1: exit $status, want 1"
check [ "$(tail -1 "$work/stderr")" = "gradcache mine: no line got 2 negatives: widen --range-max or loosen the filters" ] \
    "--max-score -1: $(cat "$work/stderr")"
check [ ! -e "$work/x.tsv" ] "a refused mine wrote its --out"

cli_summary
