#!/usr/bin/env bash
# gradcache train and eval on a small generated pair file ("def of X"<TAB>"X" for 200 random
# words): training with and without Gradient Cache, the log, --checkpoint-layers and --resume
# giving the same model bit for bit, eval's metrics, and bad input (one line on stderr naming the
# flag or file, a non-zero exit, nothing written). Run by meson with the gradcache program as
# $1. A tiny model, 24 tokens and batches of 16 keep the whole script to seconds on two cores.
set -uo pipefail
gradcache=${1:?usage: test_cli_train.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

# --- data: 200 distinct random words ------------------------------------------------------
pairs=$work/pairs.tsv
write_word_pairs "$pairs"
check [ "$(wc -l <"$pairs")" -eq 200 ] "the generated pair file has $(wc -l <"$pairs") lines"
common=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --steps 20 --log-every 10)

# --- training with Gradient Cache and without ------------------------------------------
for mode in gc plain; do
    flags=()
    [ "$mode" = gc ] && flags=(--gc --gc-chunk-size 4,8)
    out=$work/$mode
    expect_ok "$gradcache" train "${common[@]}" "${flags[@]}" --out "$out"
    grep -q "trained steps 1-20 of 20" "$work/stdout" || fail "$mode: no summary: $(cat "$work/stdout")"
    # stderr is not a terminal here: plain progress lines every --log-every steps
    check [ "$(grep -c '^step [0-9]*/20 epoch' "$work/stderr")" -eq 2 ] "$mode: progress lines: $(cat "$work/stderr")"
    for file in log.jsonl checkpoint.safetensors model.safetensors; do
        check [ -s "$out/$file" ] "$mode: no $file"
    done
    check [ "$(wc -l <"$out/log.jsonl")" -eq 20 ] "$mode: the log has $(wc -l <"$out/log.jsonl") lines, not 20"
    for key in epoch loss lr grad_norm examples_per_second peak_bytes chunk_sizes loss_scale skipped global_loss seconds; do
        grep -q "^{\"step\":20,.*\"$key\":" "$out/log.jsonl" || fail "$mode: no $key in the log"
    done
    # the model learns: the last loss is below the first (seeded, so not a matter of luck)
    first=$(field "$out/log.jsonl" 1 loss)
    last=$(field "$out/log.jsonl" 20 loss)
    check awk -v first="$first" -v last="$last" 'BEGIN { exit !(last < first) }' \
        "$mode: loss did not fall ($first -> $last)"
done
sizes=$(field "$work/gc/log.jsonl" 1 chunk_sizes)
check [ "$sizes" = "[4" ] "gc: chunk sizes $sizes..."

# With one chunk per side the cached step draws the plain step's dropout masks: the same loss
# and, to rounding (the two sum the gradients in another order), the same gradient norm.
expect_ok "$gradcache" train "${common[@]}" --steps 1 --gc --gc-chunk-size 16 --out "$work/one_chunk"
check [ "$(field "$work/one_chunk/log.jsonl" 1 loss)" = "$(field "$work/plain/log.jsonl" 1 loss)" ] \
    "one-chunk GradCache loss $(field "$work/one_chunk/log.jsonl" 1 loss) differs from plain"
check awk -v a="$(field "$work/one_chunk/log.jsonl" 1 grad_norm)" -v b="$(field "$work/plain/log.jsonl" 1 grad_norm)" \
    'BEGIN { d = a - b; exit !(d * d <= 1e-10 * b * b) }' "one-chunk GradCache gradient norm differs from plain"

# --- --checkpoint-layers: the layers recomputed in backward train the same model, byte for byte
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --checkpoint-layers --out "$work/ckpt"
cmp -s "$work/gc/model.safetensors" "$work/ckpt/model.safetensors" || fail "--checkpoint-layers trained another model"

# --- --resume: 10 steps, stop, 10 more == 20 straight, bit for bit ----------------------
resumed=$work/resumed
resumes_bitwise "$resumed" "$work/gc"
expect_error "was written with --lr 0.0005, this run has --lr 0.001" \
    "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --out "$resumed" --resume --lr 0.001
expect_error "$work/nothing/checkpoint.safetensors: cannot open" \
    "$gradcache" train "${common[@]}" --out "$work/nothing" --resume

# --- tied encoder, hard negatives ---------------------------------------------------------
expect_ok "$gradcache" train "${common[@]}" --steps 3 --tied --gc --hard-negatives 1 --out "$work/tied"
grep -q '"encoder.embeddings.tokens.weight"' "$work/tied/model.safetensors" || fail "tied: no encoder.* parameters"
sizes=$(field "$work/tied/log.jsonl" 1 chunk_sizes)
check [ "$sizes" = "[8" ] "tied: chunk sizes $sizes..."

# --- under --mem-limit: a plain step of 64 does not fit (it needs about 13 MB here), a cached
# one halves its chunks until it does ------------------------------------------------------
limited=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 64 --steps 2 --mem-limit 8M)
expect_error "memory limit reached on cpu" "$gradcache" train "${limited[@]}" --out "$work/limited_plain"
grep -q "try --gc" "$work/stderr" || fail "a plain step out of memory does not suggest --gc: $(cat "$work/stderr")"
expect_ok "$gradcache" train "${limited[@]}" --gc --gc-chunk-size 64 --out "$work/limited_gc"
check awk -v sizes="$(field "$work/limited_gc/log.jsonl" 2 chunk_sizes)" 'BEGIN { exit !(substr(sizes, 2) + 0 < 64) }' \
    "--mem-limit: the chunks were not made smaller: $(field "$work/limited_gc/log.jsonl" 2 chunk_sizes)"

# --- eval ----------------------------------------------------------------------------------
expect_ok "$gradcache" eval --model "$work/gc" --data "$pairs"
grep -qE '^Recall@1 [01]\.[0-9]{4}  Recall@10 [01]\.[0-9]{4}  MRR [01]\.[0-9]{4}  \(200 queries, 200 candidates\)$' \
    "$work/stdout" || fail "eval output: $(cat "$work/stdout")"
expect_ok "$gradcache" eval --model "$work/tied/model.safetensors" --data "$work" --split pairs --json
metric='[01]\.[0-9]+'
grep -qE "^\{\"recall_at_1\":$metric,\"recall_at_10\":$metric,\"mrr\":$metric,\"queries\":200,\"candidates\":200,\"subset\":false\}\$" \
    "$work/stdout" || fail "eval --json output: $(cat "$work/stdout")"

# --- bad input: one line naming the flag or the file, nothing written ----------------------
# --loss tiled computes the same step's loss and gradient tile by tile (f32: to rounding).
expect_ok "$gradcache" train "${common[@]}" --steps 1 --gc --gc-chunk-size 16 --loss tiled --out "$work/tiled"
for key in loss grad_norm; do
    check awk -v a="$(field "$work/tiled/log.jsonl" 1 $key)" -v b="$(field "$work/one_chunk/log.jsonl" 1 $key)" \
        'BEGIN { d = a - b; exit !(d * d <= 1e-10 * b * b) }' "--loss tiled: $key differs from the full loss's"
done
expect_error "$work/missing.tsv: cannot open" "$gradcache" train --data "$work/missing.tsv" --out "$work/bad_run"
check [ ! -e "$work/bad_run" ] "a failed run left $work/bad_run behind"
expect_error "$work/plain/train.tsv: cannot open" "$gradcache" train --data "$work/plain" --out "$work/bad_run"
expect_error "unknown flag --bogus" "$gradcache" train "${common[@]}" --bogus
expect_error "--batch-size: expected an integer" "$gradcache" train "${common[@]}" --batch-size 0
expect_error "--batch-size 500: $pairs has only 200 examples" "$gradcache" train "${common[@]}" --batch-size 500
expect_error "--hard-negatives 2: $pairs has 1 negative column" "$gradcache" train "${common[@]}" --hard-negatives 2
expect_error "--gc-chunk-size: expected N or N,M" "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,x
expect_error "--gc-chunk-size needs --gc" "$gradcache" train "${common[@]}" --gc-chunk-size 4
expect_error "--loss tiled needs --gc" "$gradcache" train "${common[@]}" --loss tiled
expect_error "--loss: expected one of" "$gradcache" train "${common[@]}" --gc --loss flat
expect_error "--guide-margin and --guide-margin-strategy need --guide" "$gradcache" train "${common[@]}" --guide-margin 0.1
expect_error "--guide-margin-strategy: expected one of absolute relative" "$gradcache" train "${common[@]}" \
    --guide-margin-strategy sideways
# --guide: a pretrained BERT (its own tokenizer) guiding the byte-level preset, through the flags
fixtures=$(dirname "${BASH_SOURCE[0]}")/fixtures
expect_ok "$gradcache" train "${common[@]}" --steps 2 --gc --guide "$fixtures/tiny_bert" --guide-margin 0.05 \
    --guide-margin-strategy relative --out "$work/guided"
check [ "$(wc -l <"$work/guided/log.jsonl")" -ge 2 ] "--guide: the run logged no steps"
expect_error "--guide: " "$gradcache" train "${common[@]}" --guide "$work/missing" --out "$work/bad_run"
# --teacher-scores: distillation through the flags, on the fixture pairs with a negative each
distill=(--data "$fixtures/word_pairs.tsv" --teacher-scores "$fixtures/word_pairs_teacher.tsv" --hard-negatives 1
         --model-size tiny --max-length 16 --batch-size 16 --steps 2 --gc)
expect_ok "$gradcache" train "${distill[@]}" --distill kl --student-temperature 0.05 --distill-weight 0.5 \
    --out "$work/distilled"
check [ "$(wc -l <"$work/distilled/log.jsonl")" -eq 2 ] "--teacher-scores: the run logged no steps"
expect_error "--distill and --distill-weight need --teacher-scores" "$gradcache" train "${common[@]}" --distill kl
expect_error "--student-temperature and --teacher-temperature need --distill kl" "$gradcache" train \
    "${distill[@]}" --teacher-temperature 2 --out "$work/bad_run"
expect_error "--teacher-scores: $pairs:1: score 1 is not a number" "$gradcache" train "${distill[@]}" \
    --teacher-scores "$pairs" --out "$work/bad_run"
expect_error "--steps and --epochs cannot be used together" "$gradcache" train "${common[@]}" --epochs 1
expect_error "--data is required" "$gradcache" train --steps 1
check [ ! -e "$work/bad_run" ] "a failed run left $work/bad_run behind"
expect_error "--model: safetensors: $work/missing: cannot open" \
    "$gradcache" eval --model "$work/missing" --data "$pairs"
expect_error "--data: $work/missing.tsv: cannot open" "$gradcache" eval --model "$work/gc" --data "$work/missing.tsv"
expect_error "--model: safetensors: $pairs:" "$gradcache" eval --model "$pairs" --data "$pairs"
expect_error "unknown flag --bogus" "$gradcache" eval --model "$work/gc" --data "$pairs" --bogus

# the plan first, before any step; after the first step its time and the run's at that pace
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4 --accumulate 2 --out "$work/planned"
check [ "$(head -n 1 "$work/stderr")" = "plan: steps 1-20 of 20, each 32 pairs (2 batches of 16 in chunks of 4/4, 1 \
process); an epoch: 200 pairs, 6 steps" ] "the plan is not stderr's first line: $(head -n 2 "$work/stderr")"
check grep -qE "^step 1 took [0-9.]+ s: the 20 steps take about [0-9.]+ (s|min|h)$" <(sed -n 2p "$work/stderr") \
    "no estimate after the first step: $(head -n 2 "$work/stderr")"

cli_summary
