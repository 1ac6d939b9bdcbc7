#!/usr/bin/env bash
# gradcache train --precision on a small generated pair file: f16 and bf16 against f32 (the
# loss after 20 steps within a stated bound), f16's skipped steps and loss scale in the log,
# f32 masters and the scaler's state in the checkpoint, bitwise resume in f16, a checkpoint of
# another precision refused, eval of a 16-bit model, and an unknown precision. Run by meson
# with the gradcache program as $1 and tests/edit_safetensors as $2; a test of its own because 16-bit runs are slow on the CPU
# (every kernel converts to f32 and back).
set -uo pipefail
gradcache=${1:?usage: test_cli_train_precision.sh path/to/gradcache path/to/edit_safetensors}
edit=${2:?usage: test_cli_train_precision.sh path/to/gradcache path/to/edit_safetensors}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
common=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --steps 20 --log-every 10)
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --out "$work/gc"

# --- --precision: f16 and bf16 with f32 master weights ------------------------------------
# The same 20 GradCache steps as $work/gc (f32). bf16 (8-bit mantissa, f32 range) needs no loss
# scaling and ends within 5% of the f32 loss: the rounding of 16-bit weights and activations
# over 20 steps. f16 starts at PyTorch's scale 2^16, too large for this model's gradients
# (cosine at temperature 0.05 makes them large): its first steps overflow and are skipped
# (no update, the scale halved) until the scale settles -- 3 of the 20 here; the skipped
# updates leave it behind the f32 run, so its bound is looser: within 25%, the loss falling.
f32_last=$(field "$work/gc/log.jsonl" 20 loss)
for precision in bf16 f16; do
    out=$work/$precision
    expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --precision $precision --out "$out"
    last=$(field "$out/log.jsonl" 20 loss)
    bound=0.05
    [ $precision = f16 ] && bound=0.25
    check awk -v a="$last" -v b="$f32_last" -v r=$bound 'BEGIN { d = a - b; exit !(d * d <= r * r * b * b) }' \
        "$precision: loss after 20 steps $last, f32 $f32_last (more than $bound apart)"
    check grep -q "optimizer.master.query.embeddings.tokens.weight" "$out/checkpoint.safetensors" \
        "$precision: no f32 master weights in the checkpoint"
done
check [ "$(field "$work/bf16/log.jsonl" 20 loss_scale)" = 1 ] "bf16: a loss scale in the log"
skipped=$(grep -c '"skipped":true' "$work/f16/log.jsonl")
check [ "$skipped" -ge 1 -a "$skipped" -le 4 ] "f16: $skipped steps skipped, expected 1 to 4"
check [ "$(field "$work/f16/log.jsonl" 20 loss_scale)" = $((65536 >> skipped)) ] \
    "f16: final loss scale $(field "$work/f16/log.jsonl" 20 loss_scale) after $skipped skipped steps"
check awk -v first="$(field "$work/f16/log.jsonl" 1 loss)" -v last="$(field "$work/f16/log.jsonl" 20 loss)" \
    'BEGIN { exit !(last < first) }' "f16: the loss did not fall"
check grep -q '"scaler.scale"' "$work/f16/checkpoint.safetensors" "f16: no loss scaler in the checkpoint"
# f16 resumes bitwise too: masters, moments and the scaler's state are in the checkpoint
resumed=$work/resumed_f16
resumes_bitwise "$resumed" "$work/f16" --precision f16
# a checkpoint of another precision is refused, naming it (never converted silently)
expect_error "was written with --precision f16, this run has --precision bf16" \
    "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --precision bf16 --out "$resumed" --resume
expect_error "was written with --precision f32, this run has --precision f16" \
    "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --precision f16 --out "$work/gc" --resume
# eval reads a model trained in 16 bits, in its dtype (model.dtype), and a bad dtype is refused
expect_ok "$gradcache" eval --model "$work/bf16" --data "$pairs"
check grep -q '"model.dtype":"bf16"' "$work/bf16/model.safetensors" "the bf16 model does not say model.dtype bf16"
"$edit" "$work/bf16/model.safetensors" "$work/f8.safetensors" set model.dtype=f8 ||
    { echo "setup: edit_safetensors failed" >&2; exit 99; }
expect_error "metadata 'model.dtype' is 'f8', expected f32, f16 or bf16" \
    "$gradcache" eval --model "$work/f8.safetensors" --data "$pairs"

expect_error "--precision: expected one of f32 f16 bf16, got 'f8'" "$gradcache" train "${common[@]}" --precision f8

cli_summary
