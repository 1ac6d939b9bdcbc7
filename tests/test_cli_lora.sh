#!/usr/bin/env bash
# gradcache encode and eval with --adapter: a PEFT LoRA adapter folder (the one
# tests/make_lora_fixture.py made) over the tiny BERT changes every embedding and encodes the
# same twice; eval runs with it; a missing folder or an adapter for modules the model lacks is
# one line naming --adapter. The numbers themselves are tests/test_lora_peft.c's.
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

cli_summary
