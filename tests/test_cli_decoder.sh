#!/usr/bin/env bash
# gradcache with decoder-family model folders (tests/make_decoder_fixture.py): tiny Qwen3, with
# sentence-transformers' files and a query prompt, in bf16; tiny Llama, untied (an lm_head) and
# in three shards, in f16 with the loss scaler. For each: eval of the folder as it is, train
# --init with Gradient Cache and the tiled loss (f32 master weights), the run folder a model
# folder (the folder's own files copied, the weights in one model.safetensors, no index of
# shards), --resume continuing bitwise, eval of the result. Then the query prompt used by train
# and eval (and refused when it leaves no room for the text), verify on either folder, a run
# saved over the sharded folder it came from, and broken folders: one line naming the file and
# the problem, a non-zero exit. (tests/test_decoder_transformers.sh loads such run folders in
# transformers.) Run by meson with the gradcache program as $1 and tests/fixtures as $2.
set -uo pipefail
gradcache=${1:?usage: test_cli_decoder.sh path/to/gradcache path/to/fixtures}
fixtures=${2:?usage: test_cli_decoder.sh path/to/gradcache path/to/fixtures}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

pairs=$fixtures/word_pairs.tsv # 64 "def of X"<TAB>X<TAB>Y lines
qwen3=$fixtures/tiny_qwen3
llama=$fixtures/tiny_llama
# 64 tokens: the fixtures' positions, room for Qwen3's query prompt and a definition
common=(--data "$pairs" --max-length 64 --batch-size 16 --steps 20 --log-every 10 --lr 1e-3)

# weight_names FILE: the tensor names of a safetensors file's header, one a line
weight_names() {
    head -c "$(od -An -tu8 -N8 "$1" | tr -d ' ')" <(tail -c +9 "$1") | grep -o '"[^"]*":{"dtype"' | cut -d'"' -f2
}

# --- each family: eval, train --init, the run folder, --resume, eval of the result --------
for case in "qwen3 $qwen3 bf16" "llama $llama f16"; do
    read -r name folder precision <<<"$case"
    expect_ok "$gradcache" eval --model "$folder" --data "$pairs" --json
    grep -q '"recall_at_1":' "$work/stdout" || fail "$name: eval of the model folder printed: $(cat "$work/stdout")"
    run=$work/$name
    flags=(--init "$folder" --precision "$precision" --loss tiled)
    expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 "${flags[@]}" --out "$run"
    grep -q "trained steps 1-20 of 20" "$work/stdout" || fail "$name: no summary: $(cat "$work/stdout")"
    # Llama's lm_head is no part of the encoder: noted (and written back, below)
    [ "$name" = qwen3 ] || grep -q "$llama: 1 weight unused by the encoder (lm_head.weight)" "$work/stderr" ||
        fail "llama: train --init did not report the lm_head: $(cat "$work/stderr")"
    for file in config.json tokenizer.json model.safetensors log.jsonl checkpoint.safetensors; do
        check [ -s "$run/$file" ] "$name: the run folder has no $file"
    done
    check cmp -s "$folder/config.json" "$run/config.json" "$name: config.json was not copied as it is"
    check cmp -s "$folder/tokenizer.json" "$run/tokenizer.json" "$name: tokenizer.json was not copied as it is"
    # LlamaModel's names, bare, whatever prefix the folder had; the 16-bit weights as trained
    check grep -qx 'layers.1.self_attn.q_proj.weight' <(weight_names "$run/model.safetensors") \
        "$name: model.safetensors is not under LlamaModel's names: $(weight_names "$run/model.safetensors" | head -3)"
    check grep -q "\"layers.1.self_attn.q_proj.weight\":{\"dtype\":\"${precision^^}\"" "$run/model.safetensors" \
        "$name: the weights are not saved in $precision"
    check bash -c "! cmp -s '$folder/model.safetensors' '$run/model.safetensors'" "$name: training changed no weight"
    expect_ok "$gradcache" eval --model "$run" --data "$pairs"
    grep -q "^Recall@1 " "$work/stdout" || fail "$name: eval of the run folder printed: $(cat "$work/stdout")"
    resumes_bitwise "$work/$name-resumed" "$run" "${flags[@]}"
done

# Qwen3's sentence-transformers files, copied: the run loads with its pooling, normalisation
# and prompts
for file in config_sentence_transformers.json modules.json 1_Pooling/config.json; do
    check cmp -s "$qwen3/$file" "$work/qwen3/$file" "qwen3: $file was not copied as it is"
done
# Llama's lm_head written back, its generation_config.json copied, its shards replaced by one
# model.safetensors with no index left to name them
check grep -qx 'lm_head.weight' <(weight_names "$work/llama/model.safetensors") "llama: the lm_head was not written back"
check cmp -s "$llama/generation_config.json" "$work/llama/generation_config.json" \
    "llama: generation_config.json was not copied"
check [ ! -e "$work/llama/model.safetensors.index.json" ] "llama: the run folder has an index of shards"
check bash -c "! ls '$work/llama' | grep -q 'model-0000'" "llama: the run folder has shards"

# --- the query prompt: the same folder without it trains and ranks differently -------------
plain=$work/qwen3-no-prompt
cp -r "$qwen3" "$plain" && rm "$plain/config_sentence_transformers.json"
for model in "$qwen3" "$plain"; do
    expect_ok "$gradcache" train "${common[@]}" --steps 1 --init "$model" --out "$work/prompt-run"
    field "$work/prompt-run/log.jsonl" 1 loss >>"$work/prompt-losses"
    rm -r "$work/prompt-run"
    expect_ok "$gradcache" eval --model "$model" --data "$pairs" --json
    cat "$work/stdout" >>"$work/prompt-metrics"
done
check [ "$(sort -u "$work/prompt-losses" | wc -l)" -eq 2 ] "train ignores the query prompt: $(cat "$work/prompt-losses")"
check [ "$(sort -u "$work/prompt-metrics" | wc -l)" -eq 2 ] "eval ignores the query prompt: $(cat "$work/prompt-metrics")"
# a prompt that fills every token of a text is refused, not trained or ranked on
prompt_fills="$qwen3/config_sentence_transformers.json: the query prompt is 16 tokens or more, leaving none of the 16"
expect_error "$prompt_fills" "$gradcache" train "${common[@]}" --max-length 16 --init "$qwen3" --out "$work/x"
check [ ! -e "$work/x" ] "a refused run left $work/x behind"
expect_error "$prompt_fills" "$gradcache" eval --max-length 16 --model "$qwen3" --data "$pairs"

# --- verify and the benchmarks take a decoder folder too (synthetic tokens, no prompt) ------
for model in "$qwen3" "$llama"; do
    expect_ok "$gradcache" verify --init "$model" --batch-size 8 --chunk-size 2 --max-length 16
    grep -q "tolerance 1.000e-05: ok" "$work/stdout" || fail "verify --init $model printed: $(cat "$work/stdout")"
done

# --- a run saved over the sharded folder it came from: the index goes with the shards' role --
own=$work/own-llama
cp -r "$llama" "$own"
expect_ok "$gradcache" train "${common[@]}" --steps 2 --init "$own" --out "$own"
check [ ! -e "$own/model.safetensors.index.json" ] "a run saved over its sharded folder left the stale index"
expect_ok "$gradcache" eval --model "$own" --data "$pairs"

# --- broken folders: one line naming the file and the problem -------------------------------
bad=$work/bad
cp -r "$qwen3" "$bad"
sed -i 's/"num_key_value_heads": 2/"num_key_value_heads": 3/' "$bad/config.json"
for command in "train ${common[*]} --init $bad --out $work/x" "eval --data $pairs --model $bad"; do
    # shellcheck disable=SC2086 # the words of the command
    expect_error "$bad/config.json: num_attention_heads 4 does not split into num_key_value_heads 3" "$gradcache" $command
done
cp "$qwen3/config.json" "$bad/config.json"
sed -i 's/"model_type": "qwen3"/"model_type": "gemma"/' "$bad/config.json"
expect_error "$bad/config.json: \"model_type\" is \"gemma\", not one of the supported \"bert\", \"llama\"" \
    "$gradcache" eval --model "$bad" --data "$pairs"
cp "$qwen3/config.json" "$bad/config.json"
sed -i 's/"prompts": {/"prompts": [{/; s/^  },/  }],/' "$bad/config_sentence_transformers.json"
expect_error "$bad/config_sentence_transformers.json: \"prompts\" is not an object" \
    "$gradcache" train "${common[@]}" --init "$bad" --out "$work/x"
# positions that leave no room for text after the special tokens: eval refuses the folder as train does
cp "$qwen3/config_sentence_transformers.json" "$bad/"
cp "$qwen3/config.json" "$bad/config.json" && sed -i 's/"max_position_embeddings": 64/"max_position_embeddings": 1/' \
    "$bad/config.json"
expect_exit 1 "$bad/config.json: its 1 positions (max_position_embeddings) leave no room" \
    "$gradcache" eval --model "$bad" --data "$pairs"
rm -r "$bad" && cp -r "$llama" "$bad" && rm "$bad/model-00002-of-00003.safetensors"
expect_error "$bad/model-00002-of-00003.safetensors: cannot open" \
    "$gradcache" train "${common[@]}" --init "$bad" --out "$work/x"
check [ ! -e "$work/x" ] "a refused run left $work/x behind"
cli_summary
