#!/usr/bin/env bash
# gradcache on BEIR-format folders: `data wordnet --beir` on a small fake WordNet, `train --data`
# from a folder's train qrels, `eval --beir` (its measures line, --json, --run's TREC run file,
# --limit, blocks of any size giving the same figures) and bad input (one line on stderr naming
# the file and line or the flag, a non-zero exit). Run by meson with the gradcache program as
# $1. A tiny model and a corpus of 60 words keep it to seconds.
set -uo pipefail
gradcache=${1:?usage: test_cli_beir.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# --- a folder: 60 words, a definition each; train judges the first 40, test the other 20 (one
# of them graded 2, one query with nothing relevant), dev none of them -------------------------
beir=$work/beir
mkdir -p "$beir/qrels"
awk -v dir="$beir" 'BEGIN {
    srand(11)
    while (n < 60) {
        word = ""
        for (i = 0; i < 3 + int(rand() * 5); i++) word = word substr("abcdefghijklmnopqrstuvwxyz", 1 + int(rand() * 26), 1)
        if (!(word in seen)) { seen[word] = 1; words[n++] = word }
    }
    print "query-id\tcorpus-id\tscore" > (dir "/qrels/train.tsv")
    print "query-id\tcorpus-id\tscore" > (dir "/qrels/test.tsv")
    for (i = 0; i < n; i++) {
        printf "{\"_id\": \"w%d\", \"title\": \"\", \"text\": \"%s\"}\n", i, words[i] > (dir "/corpus.jsonl")
        printf "{\"_id\": \"def%d\", \"text\": \"def of %s\"}\n", i, words[i] > (dir "/queries.jsonl")
        side = i < 40 ? "train" : "test"
        printf "def%d\tw%d\t%d\n", i, i, (i == 45 ? 2 : i == 50 ? 0 : 1) > (dir "/qrels/" side ".tsv")
    }
    printf "def45\tw46\t1\n" > (dir "/qrels/test.tsv")
}'
check [ "$(wc -l <"$beir/corpus.jsonl")" -eq 60 ] "the generated corpus has $(wc -l <"$beir/corpus.jsonl") lines"

# --- training from the folder's train qrels ---------------------------------------------------
run=$work/run
expect_ok "$gradcache" train --data "$beir" --model-size tiny --max-length 16 --batch-size 8 --steps 3 --out "$run"
grep -q "trained steps 1-3 of 3" "$work/stdout" || fail "train from a BEIR folder: $(cat "$work/stdout")"

# --- eval --beir: the measures, the JSON, the run file ---------------------------------------
# Recall@100 is 0.95: all 60 documents are retrieved, and def50, judged with nothing relevant,
# scores 0 and counts in the mean, as trec_eval counts it
expect_ok "$gradcache" eval --model "$run" --beir "$beir"
grep -qE '^nDCG@10 [0-9.]+  Recall@10 [0-9.]+  Recall@100 0.9500  MRR@10 [0-9.]+  MAP@100 [0-9.]+  \(20 test queries, 60 documents\)$' \
    "$work/stdout" || fail "eval --beir: $(cat "$work/stdout")"
grep -q "corpus 60/60 encoded and searched" "$work/stderr" || fail "eval --beir progress: $(cat "$work/stderr")"
expect_ok "$gradcache" eval --model "$run" --beir "$beir" --json --run "$work/test.run"
json=$(cat "$work/stdout")
for key in ndcg_at_10 recall_at_10 recall_at_100 mrr_at_10 map_at_100; do
    [[ $json == *"\"$key\":"* ]] || fail "eval --beir --json lacks $key: $json"
done
[[ $json == *'"queries":20,"documents":60,"subset":false}' ]] || fail "eval --beir --json: $json"
# every judged query, every document (60 < --top-k 100), ranks 1..60, the query's own word in it
check [ "$(wc -l <"$work/test.run")" -eq 1200 ] "run file: $(wc -l <"$work/test.run") lines, want 20 x 60"
awk 'NF != 6 || $2 != "Q0" || $6 != "gradcache" || $4 != (NR - 1) % 60 + 1 { bad = 1 } END { exit bad }' \
    "$work/test.run" || fail "run file lines are not 'query Q0 doc rank score tag': $(head -3 "$work/test.run")"
# the ranks follow trec_eval's order: scores never rise within a query
awk '$4 > 1 && $5 > last { bad = 1 } { last = $5 } END { exit bad }' "$work/test.run" ||
    fail "run file scores rise within a query"
check grep -q "^def45 Q0 w46 " "$work/test.run" "run file lacks def45's documents"
# blocks of 7 documents and batches of 5 texts compute the same figures, bit for bit
expect_ok "$gradcache" eval --model "$run" --beir "$beir" --json --block 7 --batch-size 5
check [ "$(cat "$work/stdout")" = "$json" ] "--block 7 changed the figures: $(cat "$work/stdout") vs $json"
expect_ok "$gradcache" eval --model "$run" --beir "$beir" --json --limit 5
[[ $(cat "$work/stdout") == *'"queries":5,"documents":60,"subset":true}' ]] || fail "--limit 5: $(cat "$work/stdout")"
# --corpus-limit 10: the first 10 documents and the 20 judged for the test queries (w40..w59)
expect_ok "$gradcache" eval --model "$run" --beir "$beir" --corpus-limit 10 --run "$work/subset.run"
grep -q "Recall@100 0.9500 .*(20 test queries, 30 documents: the first ones and the judged ones)" "$work/stdout" ||
    fail "--corpus-limit 10: $(cat "$work/stdout")"
check [ "$(cut -d' ' -f3 "$work/subset.run" | sort -u | tr '\n' ' ')" = \
    "$(printf 'w%d\n' 0 1 2 3 4 5 6 7 8 9 $(seq 40 59) | sort | tr '\n' ' ')" ] "--corpus-limit 10 searched other documents"
expect_ok "$gradcache" eval --model "$run" --beir "$beir" --split train --limit 3
grep -q "(3 train queries: the first judged ones, 60 documents)" "$work/stdout" || fail "--split train: $(cat "$work/stdout")"

# --- bad input and flags ---------------------------------------------------------------------
expect_error "--beir and --data" "$gradcache" eval --model "$run" --beir "$beir" --data "$beir"
expect_error "--run needs --beir" "$gradcache" eval --model "$run" --data "$beir" --run "$work/x.run"
expect_error "--matryoshka works with --data only" "$gradcache" eval --model "$run" --beir "$beir" --matryoshka 32
expect_error "--top-k: expected an integer in [100," "$gradcache" eval --model "$run" --beir "$beir" --top-k 10
expect_error "$beir/qrels/dev.tsv: cannot open" "$gradcache" eval --model "$run" --beir "$beir" --split dev
bad=$work/bad
cp -r "$beir" "$bad"
sed -i '3s/.*/{"_id": "w2", "text": 7}/' "$bad/corpus.jsonl"
expect_error "$bad/corpus.jsonl:3: \"text\" is an integer, not a string" "$gradcache" eval --model "$run" --beir "$bad"
expect_error "$bad/corpus.jsonl:3:" "$gradcache" train --data "$bad" --model-size tiny --steps 1 --out "$work/bad-run"
cp "$beir/corpus.jsonl" "$bad/corpus.jsonl"
printf 'def1\tw99\t1\n' >>"$bad/qrels/test.tsv"
expect_error "$bad/qrels/test.tsv:23: document \"w99\" is not in corpus.jsonl" \
    "$gradcache" eval --model "$run" --beir "$bad"
check [ ! -e "$work/x.run" ] "a refused eval wrote its run file"

# --- data wordnet --beir on a small fake WordNet --------------------------------------------
wordnet=$work/wordnet
mkdir "$wordnet"
awk 'BEGIN { for (i = 0; i < 200; i++) printf "%08d 03 n 02 word%d 0 other_word%d 0 000 | definition number %d; \"an example\"\n", i, i, i, i }' \
    >"$wordnet/data.noun"
: >"$wordnet/data.verb"; : >"$wordnet/data.adj"; : >"$wordnet/data.adv"
expect_ok "$gradcache" data wordnet --beir --wordnet "$wordnet" --out "$work/wn" --held-out 0.1
grep -qE "^$work/wn: 400 documents \(words\), 200 queries \(definitions\); qrels: train [0-9]+, dev [0-9]+, test [0-9]+$" \
    "$work/stdout" || fail "data wordnet --beir: $(cat "$work/stdout")"
counts=$(sed -E 's/.*train ([0-9]+), dev ([0-9]+), test ([0-9]+)/\1 \2 \3/' "$work/stdout")
read -r n_train n_dev n_test <<<"$counts"
check [ $((n_train + n_dev + n_test)) -eq 400 ] "qrels: $counts, want 400 in all"
check grep -qx '{"_id":"q0","text":"definition number 0"}' "$work/wn/queries.jsonl" "queries.jsonl: $(head -1 "$work/wn/queries.jsonl")"
# the test split holds exactly the definitions the pair files' dev.tsv holds
expect_ok "$gradcache" data wordnet --wordnet "$wordnet" --out "$work/wn-pairs" --held-out 0.1
check [ "$(wc -l <"$work/wn-pairs/dev.tsv")" -eq "$n_test" ] "test qrels $n_test, dev.tsv $(wc -l <"$work/wn-pairs/dev.tsv")"
expect_ok "$gradcache" data wordnet --beir --wordnet "$wordnet" --out "$work/wn-again" --held-out 0.1
check cmp -s "$work/wn/qrels/test.tsv" "$work/wn-again/qrels/test.tsv" "data wordnet --beir is not deterministic"
expect_ok "$gradcache" train --data "$work/wn" --model-size tiny --max-length 16 --batch-size 8 --steps 1 --out "$work/wn-run"
# --held-out 0.5: every definition in test or dev, none left for train
expect_error "qrels/train.tsv would have no judgement" "$gradcache" data wordnet --beir --wordnet "$wordnet" --out "$work/wn-none" --held-out 0.5
check [ ! -e "$work/wn-none/corpus.jsonl" ] "a refused data wordnet --beir wrote corpus.jsonl"

cli_summary
