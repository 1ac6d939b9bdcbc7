#!/usr/bin/env bash
# gradcache encode and eval with --adapter: a PEFT LoRA adapter folder (the one
# tests/make_lora_fixture.py made) over the tiny BERT changes every embedding and encodes the
# same twice; eval runs with it; a missing folder or an adapter for modules the model lacks is
# one line naming --adapter. The numbers themselves are tests/test_lora_peft.c's. train --lora-r:
# bad flags refused with exit 2 in one line; a run writes OUT/adapter/ and OUT/best/adapter/ (no
# whole model), eval --model BASE --adapter OUT/adapter gives the run's last logged MRR again,
# and so does eval --model OUT alone (encode --model OUT the same embeddings, and from another
# working folder after a relative --init), a run folder whose base is gone is one line and exit
# 1, --merge writes OUT/merged that encodes alike, a bf16 run over tiny Qwen2 keeps f32
# adapters and resumes bit for bit, and a resumed run with another rank is refused.
# Run by meson with the gradcache program as $1 and the fixtures folder as $2.
set -uo pipefail
gradcache=${1:?usage: test_cli_lora.sh path/to/gradcache path/to/fixtures}
fixtures=${2:?usage: test_cli_lora.sh path/to/gradcache path/to/fixtures}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
tiny=$fixtures/tiny_bert
adapter=$fixtures/tiny_bert_lora

printf '%s\n' "the cat sat on the mat" "a dog" "the big dog of the cat" >"$work/texts.txt"
for command in encode eval; do
    expect_ok "$gradcache" "$command" --help
    grep -q -- "--adapter" "$work/stdout" || fail "$command --help lists no --adapter"
done

expect_ok "$gradcache" encode --model "$tiny" --input "$work/texts.txt" --output "$work/base.tsv" --format tsv
expect_ok "$gradcache" encode --model "$tiny" --adapter "$adapter" --input "$work/texts.txt" \
    --output "$work/adapted.tsv" --format tsv
expect_ok "$gradcache" encode --model "$tiny" --adapter "$adapter" --input "$work/texts.txt" \
    --output "$work/again.tsv" --format tsv --batch-size 1
check cmp -s "$work/adapted.tsv" "$work/again.tsv" "the adapted embeddings differ between two runs"
# every row differs from the base's
check [ "$(paste "$work/base.tsv" "$work/adapted.tsv" | awk -F'\t' '{ if ($1 != $(NF / 2 + 1)) n++ } END { print n }')" = 3 ] \
    "the adapter leaves some embedding as the base's"

write_word_pairs "$work/pairs.tsv"
expect_ok "$gradcache" eval --model "$tiny" --adapter "$adapter" --data "$work/pairs.tsv" --json
grep -q '"mrr"' "$work/stdout" || fail "eval --adapter printed no metrics: $(cat "$work/stdout")"

expect_exit 1 "--adapter: " "$gradcache" encode --model "$tiny" --adapter "$work/none" --input "$work/texts.txt" \
    --output "$work/x"
mkdir "$work/qwen"
printf '{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}\n' >"$work/qwen/adapter_config.json"
expect_exit 1 "--adapter: lora: target module 'q_proj' matches no Linear" \
    "$gradcache" eval --model "$tiny" --adapter "$work/qwen" --data "$work/pairs.tsv"
check [ ! -e "$work/x" ] "a refused encode left an output file"

# --- train --lora-r: flags refused with exit 2 in one line, before anything is written ---
lora=(--data "$work/pairs.tsv" --init "$tiny" --max-length 16 --batch-size 16 --gc --gc-chunk-size 8 --steps 4
      --log-every 4 --lora-r 4 --lora-alpha 8 --lora-dropout 0.1)
expect_ok "$gradcache" train --help
for flag in --lora-r --lora-alpha --lora-dropout --lora-targets; do
    grep -q -- "$flag" "$work/stdout" || fail "train --help lacks $flag"
done
expect_exit 2 "--lora-r needs --lora-targets" "$gradcache" train "${lora[@]}" --out "$work/refused"
expect_exit 2 "--lora-r needs --init" "$gradcache" train --data "$work/pairs.tsv" --model-size tiny --lora-r 4 \
    --lora-targets query --out "$work/refused"
expect_exit 2 "--lora-alpha, --lora-dropout and --lora-targets need --lora-r" "$gradcache" train \
    --data "$work/pairs.tsv" --init "$tiny" --lora-targets query --out "$work/refused"
expect_exit 2 "--lora-dropout 1: expected a probability in [0, 1)" "$gradcache" train "${lora[@]}" \
    --lora-targets query --lora-dropout 1 --out "$work/refused"
expect_exit 2 "--lora-r: lora: target module 'q_proj' matches no Linear" "$gradcache" train "${lora[@]}" \
    --lora-targets q_proj --out "$work/refused"
check [ ! -e "$work/refused" ] "a refused run wrote $work/refused"

# --- a run writes PEFT's adapter folder; eval over the base gives its last evaluation again ---
expect_ok "$gradcache" train "${lora[@]}" --lora-targets query,value --eval-every 2 --eval-data "$work/pairs.tsv" \
    --out "$work/run"
for file in adapter/adapter_config.json adapter/adapter_model.safetensors best/adapter/adapter_model.safetensors; do
    check [ -f "$work/run/$file" ] "the LoRA run wrote no $file"
done
check [ ! -e "$work/run/model.safetensors" ] "the LoRA run wrote a whole model"
grep -q "wrote $work/run/adapter and" "$work/stdout" || fail "summary: $(cat "$work/stdout")"
logged=$(grep '^{"eval":{"step":4,' "$work/run/log.jsonl" | sed -E 's/.*"mrr":([^,]+).*/\1/')
expect_ok "$gradcache" eval --model "$tiny" --adapter "$work/run/adapter" --max-length 16 --data "$work/pairs.tsv" \
    --json --batch-size 8
got=$(sed -E 's/.*"mrr":([^,]+).*/\1/' "$work/stdout")
check awk -v a="$got" -v b="$logged" 'BEGIN { d = a - b; exit (b == "" || d * d >= 1e-12) }' \
    "gradcache eval --adapter gives MRR $got, the run's last evaluation $logged"
# --model OUT alone: the run folder names its base (adapter_config.json's base_model_name_or_path)
expect_ok "$gradcache" eval --model "$work/run" --max-length 16 --data "$work/pairs.tsv" --json --batch-size 8
check [ "$(sed -E 's/.*"mrr":([^,]+).*/\1/' "$work/stdout")" = "$got" ] \
    "eval --model OUT gives another MRR than eval --model BASE --adapter OUT/adapter"
expect_ok "$gradcache" eval --model "$work/run/best" --max-length 16 --data "$work/pairs.tsv" --json
expect_ok "$gradcache" encode --model "$work/run" --input "$work/texts.txt" --output "$work/run.tsv" --format tsv
expect_ok "$gradcache" encode --model "$tiny" --adapter "$work/run/adapter" --input "$work/texts.txt" \
    --output "$work/run_adapter.tsv" --format tsv
check cmp -s "$work/run.tsv" "$work/run_adapter.tsv" "encode --model OUT differs from --model BASE --adapter OUT/adapter"
expect_ok "$gradcache" encode --model "$work/run" --precision bf16 --input "$work/texts.txt" --output "$work/run16.tsv" \
    --format tsv
# a second adapter over the run's, and a base that is gone: one line, exit 1, no abort
expect_exit 1 "has adapters already" "$gradcache" eval --model "$work/run" --adapter "$adapter" --data "$work/pairs.tsv"
mkdir -p "$work/moved"
cp -r "$work/run/adapter" "$work/moved/"
sed -i "s|\"base_model_name_or_path\": \"[^\"]*\"|\"base_model_name_or_path\": \"$work/gone\"|" \
    "$work/moved/adapter/adapter_config.json"
expect_exit 1 "'$work/gone', is not a model folder" "$gradcache" eval --model "$work/moved" --data "$work/pairs.tsv"
expect_exit 1 "'$work/gone', is not a model folder" "$gradcache" encode --model "$work/moved" \
    --input "$work/texts.txt" --output "$work/x"
# --merge: OUT/merged, a whole model folder with the adapters folded in, encodes as the base
# with the adapter does (f32: the merge rounds each weight once more, 1e-5 holds); and needs
# --lora-r
expect_exit 2 "--merge needs --lora-r" "$gradcache" train --data "$work/pairs.tsv" --init "$tiny" --merge \
    --out "$work/refused"
expect_ok "$gradcache" train "${lora[@]}" --lora-targets query,value,dense --merge --out "$work/merge"
grep -q "^wrote $work/merge/merged: the adapters folded into $tiny" "$work/stdout" || fail "--merge: $(cat "$work/stdout")"
check [ -f "$work/merge/merged/model.safetensors" -a -f "$work/merge/merged/config.json" -a \
    -f "$work/merge/merged/tokenizer.json" ] "--merge wrote no whole model folder: $(ls "$work/merge/merged")"
expect_ok "$gradcache" encode --model "$work/merge/merged" --input "$work/texts.txt" --output "$work/merged.tsv" \
    --format tsv
expect_ok "$gradcache" encode --model "$work/merge" --input "$work/texts.txt" --output "$work/unmerged.tsv" --format tsv
check awk -F'\t' 'NR == FNR { for (i = 1; i <= NF; i++) want[FNR, i] = $i; next }
                   { for (i = 1; i <= NF; i++) { d = $i - want[FNR, i]; if (d * d > 1e-10) bad = 1 } }
                   END { exit bad }' "$work/unmerged.tsv" "$work/merged.tsv" \
    "the merged folder encodes otherwise than the base with the adapter"
cmp -s "$work/merged.tsv" "$work/base.tsv" && fail "the merged folder encodes as the base alone"
# a relative --init: the run folder names its base by its absolute path, so eval --model OUT
# finds it from another working folder
absolute_gradcache=$(realpath "$gradcache")
(cd "$fixtures" && "$absolute_gradcache" train "${lora[@]/#$tiny/tiny_bert}" --lora-targets query --steps 1 \
    --out "$work/relative" >/dev/null 2>"$work/stderr") || fail "a LoRA run from a relative --init: $(cat "$work/stderr")"
check grep -q "\"base_model_name_or_path\": \"$(realpath "$tiny")\"" "$work/relative/adapter/adapter_config.json" \
    "the run's adapter names its base as: $(grep base_model "$work/relative/adapter/adapter_config.json")"
(cd / && "$absolute_gradcache" eval --model "$work/relative" --max-length 16 --data "$work/pairs.tsv" >/dev/null \
    2>"$work/stderr") || fail "eval --model OUT of a relative --init, from /: $(cat "$work/stderr")"
# --precision bf16 over tiny Qwen2: f32 adapters on all seven projections (PEFT's dtype over a
# 16-bit base), and a run stopped and resumed writes the straight run's adapters bit for bit
qwen=(--data "$work/pairs.tsv" --init "$fixtures/tiny_qwen2" --max-length 16 --batch-size 16 --gc --gc-chunk-size 4
      --steps 3 --lora-r 4 --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --precision bf16)
expect_ok "$gradcache" train "${qwen[@]}" --out "$work/bf16"
grep -q '"dtype":"F32"' "$work/bf16/adapter/adapter_model.safetensors" || fail "the bf16 run's adapters are not f32"
grep -q '"dtype":"BF16"' "$work/bf16/adapter/adapter_model.safetensors" && fail "the bf16 run saved bf16 adapters"
expect_ok "$gradcache" train "${qwen[@]}" --stop-after 2 --out "$work/bf16_resumed"
expect_ok "$gradcache" train "${qwen[@]}" --out "$work/bf16_resumed" --resume
check cmp -s "$work/bf16/adapter/adapter_model.safetensors" "$work/bf16_resumed/adapter/adapter_model.safetensors" \
    "a resumed bf16 LoRA run wrote other adapters than the straight run"
# resumed with another rank: refused naming the flag
expect_error "was written with --lora-r 4, this run has --lora-r 8" "$gradcache" train "${lora[@]}" \
    --lora-targets query,value --lora-r 8 --eval-every 2 --eval-data "$work/pairs.tsv" --out "$work/run" --resume

cli_summary
