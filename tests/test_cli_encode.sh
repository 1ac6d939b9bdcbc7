#!/usr/bin/env bash
# gradcache encode on the tiny BERT of tests/fixtures/tiny_bert: TSV and safetensors outputs,
# a file and standard input, the input's order kept whatever the batch size (each text's row
# equals its row encoded alone), --precision bf16, progress on standard error; and bad input:
# no --output, safetensors to standard output, an empty input, a NUL byte, a missing model,
# and a --max-length that leaves no room for text (encode and eval); --prompt and --prompt-name
# on tests/fixtures/tiny_qwen3 (the same bytes either way; an unknown name or both refused).
# Run by meson with the gradcache program as $1 and the tiny model folder as $2.
set -uo pipefail
gradcache=${1:?usage: test_cli_encode.sh path/to/gradcache path/to/tiny_bert}
tiny=${2:?usage: test_cli_encode.sh path/to/gradcache path/to/tiny_bert}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

texts=$work/texts.txt
printf '%s\n' "the cat sat on the mat" "a dog" "the big dog of the cat ran on and on and on" "" "cat" \
    "the mat" "a run of the big cat" >"$texts"
count=$(wc -l <"$texts")

expect_ok "$gradcache" encode --help
grep -q -- "--max-length" "$work/stdout" || fail "encode --help lists no --max-length: $(cat "$work/stdout")"

# --- TSV: a row per text, in order; every batch size gives the same bytes -------------------
expect_ok "$gradcache" encode --model "$tiny" --input "$texts" --output "$work/all.tsv" --format tsv --batch-size 3
check [ "$(wc -l <"$work/all.tsv")" -eq "$count" ] "the TSV has $(wc -l <"$work/all.tsv") rows for $count texts"
expect_ok "$gradcache" encode --model "$tiny" --output - --format tsv --batch-size 1 --threads 1 --quiet <"$texts"
check cmp -s "$work/all.tsv" "$work/stdout" "batches of 1 from standard input differ from batches of 3"
line=1
while IFS= read -r text; do
    printf '%s\n' "$text" | "$gradcache" encode --model "$tiny" --output - --format tsv >"$work/one.tsv" ||
        fail "encoding line $line alone failed"
    check [ "$(sed -n "${line}p" "$work/all.tsv")" = "$(cat "$work/one.tsv")" ] "row $line is not line $line's vector"
    line=$((line + 1))
done <"$texts"

# --- safetensors, bf16; progress on standard error ------------------------------------------
expect_ok "$gradcache" encode --model "$tiny" --input "$texts" --output "$work/all.safetensors" --batch-size 2
check [ -s "$work/all.safetensors" ] "no safetensors file"
grep -q "encoded $count/$count texts" "$work/stderr" || fail "no progress line: $(cat "$work/stderr")"
expect_ok "$gradcache" encode --model "$tiny" --input "$texts" --output "$work/bf16.tsv" --format tsv --precision bf16
check [ "$(wc -l <"$work/bf16.tsv")" -eq "$count" ] "bf16 gave $(wc -l <"$work/bf16.tsv") rows"

# --- refused ----------------------------------------------------------------------------------
expect_error "--output is required" "$gradcache" encode --model "$tiny" --input "$texts"
expect_error "standard output takes --format tsv only" "$gradcache" encode --model "$tiny" --output -
: >"$work/empty.txt"
expect_error "no text to encode" "$gradcache" encode --model "$tiny" --input "$work/empty.txt" --output "$work/x"
printf 'fine\nbad\0byte\n' >"$work/nul.txt"
expect_error "line 2 holds a NUL byte" "$gradcache" encode --model "$tiny" --input "$work/nul.txt" --output "$work/x"
expect_error "--model" "$gradcache" encode --model "$work/nowhere" --input "$texts" --output "$work/x"
check [ ! -e "$work/x" ] "a failed encode left an output file"
# a length that leaves no room for text after [CLS] and [SEP]: the flag's error, exit 2 (a decoder
# folder whose own positions leave none: tests/test_cli_decoder.sh)
for length in 1 2; do
    expect_exit 2 "--max-length: max length $length leaves no room for text after the 2 special tokens" \
        "$gradcache" encode --model "$tiny" --max-length "$length" --input "$texts" --output "$work/x"
done
write_word_pairs "$work/pairs.tsv"
expect_exit 2 "--max-length: max length 2 leaves no room for text" \
    "$gradcache" eval --model "$tiny" --max-length 2 --data "$work/pairs.tsv"
check [ ! -e "$work/x" ] "a refused encode left an output file"

# --- prompts (tests/fixtures/tiny_qwen3's; their values: test_encode_prompt.c) ---------------
qwen3=$(dirname "$tiny")/tiny_qwen3
query_prompt=$(printf 'Instruct: Given a question, find its answer\nQuery:')
expect_ok "$gradcache" encode --help
grep -q -- "--prompt-name" "$work/stdout" || fail "encode --help lists no --prompt-name: $(cat "$work/stdout")"
expect_ok "$gradcache" encode --model "$qwen3" --input "$texts" --output "$work/named.tsv" --format tsv --prompt-name query
expect_ok "$gradcache" encode --model "$qwen3" --input "$texts" --output "$work/given.tsv" --format tsv \
    --prompt "$query_prompt"
check cmp -s "$work/named.tsv" "$work/given.tsv" "--prompt-name query and --prompt with its text differ"
expect_ok "$gradcache" encode --model "$qwen3" --input "$texts" --output "$work/plain.tsv" --format tsv
cmp -s "$work/named.tsv" "$work/plain.tsv" && fail "--prompt-name query changed nothing"
expect_exit 2 "--prompt-name: $qwen3/config_sentence_transformers.json: the prompt \"nope\" is not one of its" \
    "$gradcache" encode --model "$qwen3" --input "$texts" --output "$work/x" --prompt-name nope
expect_exit 2 "--prompt and --prompt-name: one prompt" \
    "$gradcache" encode --model "$qwen3" --input "$texts" --output "$work/x" --prompt-name query --prompt "q: "
check [ ! -e "$work/x" ] "a refused encode left an output file"

cli_summary
