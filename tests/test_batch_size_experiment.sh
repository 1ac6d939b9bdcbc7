#!/usr/bin/env bash
# bench/batch_size_experiment.sh on a tiny BEIR folder and the tiny BERT fixture: the runs it
# makes (batch sizes, seeds, the learning rate scaled by the square-root rule, Gradient Cache
# above --gc-above, a batch larger than the set skipped), its results and summary, a rerun that
# continues instead of redoing, a changed plan refused, --train-every's subset and --dry-run.
# Run by meson with the gradcache program as $1 and the fixtures folder as $2; seconds.
set -uo pipefail
gradcache=${1:?usage: test_batch_size_experiment.sh path/to/gradcache fixtures}
fixtures=${2:?usage: test_batch_size_experiment.sh path/to/gradcache fixtures}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
script=$(dirname "${BASH_SOURCE[0]}")/../bench/batch_size_experiment.sh
build=$(dirname "$(dirname "$gradcache")")

# --- a BEIR folder of the tiny BERT's words: 40 training judgements, 12 test ones -------------
beir=$work/beir
mkdir -p "$beir/qrels"
words=(the cat dog sat on mat an of run big)
printf 'query-id\tcorpus-id\tscore\n' | tee "$beir/qrels/train.tsv" >"$beir/qrels/test.tsv"
for i in $(seq 0 51); do
    query="${words[$((i % 10))]} ${words[$((i / 10 % 10))]} ${words[$(((i * 3) % 10))]}"
    passage="${words[$(((i * 7) % 10))]} ${words[$((i / 5 % 10))]}"
    printf '{"_id": "q%d", "text": "%s"}\n' "$i" "$query" >>"$beir/queries.jsonl"
    printf '{"_id": "d%d", "title": "", "text": "%s"}\n' "$i" "$passage" >>"$beir/corpus.jsonl"
    printf 'q%d\td%d\t1\n' "$i" "$i" >>"$beir/qrels/$( ((i < 40)) && echo train || echo test).tsv"
done

experiment=(bash "$script" --build "$build" --model "$fixtures/tiny_bert" --set tiny="$beir"
            --batches 4,8,64 --seeds 1,2 --base-lr 1e-3 --base-batch 4 --gc-above 4 --chunk 2
            --max-length 16 --mem-limit 1G)

# --- the plan ----------------------------------------------------------------------------------
expect_ok "${experiment[@]}" --out "$work/dry" --dry-run
check grep -q "^== tiny: 40 training judgements" "$work/stdout" "dry run: $(cat "$work/stdout")"
check grep -q "^tiny batch 4 seed 2: 10 steps, lr 0.001, gc false: train " "$work/stdout" "dry run, batch 4: $(cat "$work/stdout")"
check grep -q "^tiny batch 8 seed 1: 5 steps, lr 0.00141, gc true: train .*--gc --gc-chunk-size 2" "$work/stdout" \
    "dry run, batch 8 (lr 1e-3 * sqrt 2, Gradient Cache): $(cat "$work/stdout")"
check grep -q "^tiny batch 64: skipped, more than the 40 training judgements" "$work/stdout" "dry run, batch 64: $(cat "$work/stdout")"
check grep -q "^plan: 160 training examples in all" "$work/stdout" "dry run's total (2 x (40 + 40)): $(cat "$work/stdout")"
check [ ! -e "$work/dry" ] "a dry run wrote $(ls "$work/dry" 2>&1)"

expect_ok "${experiment[@]}" --out "$work/dry" --dry-run --train-every 3
check grep -q "^== tiny: 14 training judgements" "$work/stdout" "--train-every 3 keeps lines 1, 4, ..., 40: $(cat "$work/stdout")"
check grep -q "^tiny batch 8 seed 1: 1 steps" "$work/stdout" "--train-every 3, batch 8: $(cat "$work/stdout")"

# --- the runs ------------------------------------------------------------------------------------
out=$work/exp
expect_ok "${experiment[@]}" --out "$out"
results=$out/results.jsonl
check [ "$(wc -l <"$results")" -eq 5 ] "results: $(wc -l <"$results") lines, want the zero-shot and 2 batches x 2 seeds"
for run in b4-s1 b4-s2 b8-s1 b8-s2; do
    check [ -f "$out/tiny/$run/model.safetensors" ] "no model in $out/tiny/$run"
done
check grep -q '^{"set":"tiny","batch":0,"seed":0,.*"measures":{"ndcg_at_10":' "$results" "no zero-shot line: $(cat "$results")"
check grep -q '^{"set":"tiny","batch":8,"seed":2,"lr":0.00141,"gc":true,"steps":5,"measures":{"ndcg_at_10":[0-9.]*,' "$results" \
    "batch 8 seed 2's line: $(cat "$results")"
grep -q '"peak_bytes":[1-9]' <(grep '"batch":4,' "$results") || fail "a run without its peak memory: $(cat "$results")"
# Gradient Cache ran in chunks of 2 for batch 8, and not for batch 4
check grep -q '"chunk_sizes":\[2,2\]' "$out/tiny/b8-s1/log.jsonl" "batch 8 was not cached in chunks of 2"
check grep -q '"chunk_sizes":\[4,4\]' "$out/tiny/b4-s1/log.jsonl" "batch 4 was cached: $(head -1 "$out/tiny/b4-s1/log.jsonl")"
# the seeds differ, so the two runs of a batch differ
cmp -s "$out/tiny/b4-s1/model.safetensors" "$out/tiny/b4-s2/model.safetensors" && fail "seeds 1 and 2 trained the same model"
# the summary: a zero-shot row, and per batch the mean and sample sd over the 2 seeds
summary=$out/summary.md
check grep -q '^| tiny | zero-shot | 0 |' "$summary" "summary: $(cat "$summary")"
row=$(grep '^| tiny | 8 | 5 | 0.00141 | yes | 2 |' "$summary") || fail "summary, batch 8: $(cat "$summary")"
mean=$(awk -F'"ndcg_at_10":' '/"batch":8,/ { split($2, v, ","); s += v[1]; n++ } END { printf "%.4f", s / n }' "$results")
[[ $row == *"| $mean ± "* ]] || fail "summary's batch 8 mean is not the seeds' mean $mean: $row"

# --- a rerun continues; another plan in the same folder is refused ----------------------------
expect_ok "${experiment[@]}" --out "$out"
check [ "$(grep -c "done before" "$work/stdout")" -eq 4 ] "a rerun redid runs: $(cat "$work/stdout")"
check [ "$(wc -l <"$results")" -eq 5 ] "a rerun added results: $(wc -l <"$results") lines"
sed -i '/"batch":4,"seed":2,/d' "$results"
expect_ok "${experiment[@]}" --out "$out"
check grep -q "^tiny batch 4 seed 2: nDCG@10 " "$work/stdout" "a deleted line was not redone: $(cat "$work/stdout")"
expect_exit 2 "holds another experiment" "${experiment[@]}" --out "$out" --epochs 2
expect_exit 2 "not a whole number" "${experiment[@]}" --out "$out" --seeds 1,x
expect_exit 2 "--set wants NAME=DIR" bash "$script" --set tiny --build "$build"

cli_summary
