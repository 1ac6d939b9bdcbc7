#!/usr/bin/env bash
# gradcache with a pretrained model folder, on the tiny BERT of tests/fixtures/tiny_bert
# (tests/make_bert_fixture.py; the real model is tested where it is fetched, by
# test_bert_minilm): eval of the folder as it is, train --init with Gradient Cache writing a
# run folder that is itself a model folder (Hugging Face names, the tokenizer and the
# sentence-transformers files copied), --resume continuing bitwise, eval of the result, and
# bad input: a folder without config.json, another architecture, another tokenizer type, a
# config.json the weights do not fit (a weight of another shape, layers too few or too many),
# an impossible size, a checksum mismatch: one line naming the file, a non-zero exit.
# Run by meson with the gradcache program as $1 and the tiny model folder as $2.
set -uo pipefail
gradcache=${1:?usage: test_cli_pretrained.sh path/to/gradcache path/to/tiny_bert}
tiny=${2:?usage: test_cli_pretrained.sh path/to/gradcache path/to/tiny_bert}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# --- data: definitions of the tiny vocabulary's words -----------------------------------
pairs=$work/pairs.tsv
for word in the cat dog sat on mat an of run big; do
    for n in 1 2 3; do printf 'the %s of %s, number %s\t%s %s\n' "$word" "$word" "$n" "$word" "$n"; done
done >"$pairs"
common=(--init "$tiny" --data "$pairs" --gc --gc-chunk-size 2,4 --batch-size 8 --max-length 16 --steps 4 --lr 1e-3)

# --- eval of the folder as it is (zero-shot) ----------------------------------------------
expect_ok "$gradcache" eval --model "$tiny" --data "$pairs" --json
grep -q '"recall_at_1":' "$work/stdout" || fail "eval of the model folder printed: $(cat "$work/stdout")"
expect_ok "$gradcache" eval --model "$tiny" --data "$pairs" --limit 12
grep -q "(12 queries, 12 candidates: a fixed subset, the first pairs of $pairs)" "$work/stdout" ||
    fail "eval --limit does not say it used a subset: $(cat "$work/stdout")"

# --- fine-tuning: the run folder is a model folder ----------------------------------------
run=$work/run
expect_ok "$gradcache" train "${common[@]}" --out "$run"
grep -q "3 weights unused by the encoder (embeddings.position_ids, pooler.dense.bias, pooler.dense.weight)" \
    "$work/stderr" || fail "train --init did not report the unused weights: $(cat "$work/stderr")"
for file in config.json tokenizer.json modules.json 1_Pooling/config.json model.safetensors log.jsonl \
    checkpoint.safetensors; do
    check [ -s "$run/$file" ] "the run folder has no $file"
done
check cmp -s "$tiny/config.json" "$run/config.json" "config.json was not copied as it is"
check grep -q '"encoder.layer.1.attention.self.query.weight"' "$run/model.safetensors" \
    "model.safetensors is not under Hugging Face's names"
check grep -q '"pooler.dense.weight"' "$run/model.safetensors" "the pooler was not written back"
check bash -c "! cmp -s '$tiny/model.safetensors' '$run/model.safetensors'" "training changed no weight"
expect_ok "$gradcache" eval --model "$run" --data "$pairs"
grep -q "^Recall@1 " "$work/stdout" || fail "eval of the run folder printed: $(cat "$work/stdout")"

# --- resume: stopping after step 2 and resuming gives the same model, bit for bit ----------
resumed=$work/resumed
expect_ok "$gradcache" train "${common[@]}" --stop-after 2 --out "$resumed"
expect_ok "$gradcache" train "${common[@]}" --resume --out "$resumed"
check cmp -s "$run/model.safetensors" "$resumed/model.safetensors" "a resumed run differs from an uninterrupted one"
expect_error "was written with --init $tiny, this run has --init $work/other" \
    bash -c "cp -r '$tiny' '$work/other' && '$gradcache' train --init '$work/other' --data '$pairs' --gc \
        --gc-chunk-size 2,4 --batch-size 8 --max-length 16 --steps 4 --lr 1e-3 --resume --out '$resumed'"

# --- bad input --------------------------------------------------------------------------
bad=$work/bad
mkdir -p "$bad"
expect_error "--init: $bad/config.json: cannot open" "$gradcache" train --init "$bad" --data "$pairs" --batch-size 8 --max-length 16 --out "$work/x"
cp -r "$tiny/." "$bad/"
sed -i 's/"model_type": "bert"/"model_type": "roberta"/' "$bad/config.json"
expect_error "$bad/config.json: \"model_type\" is \"roberta\", not one of the supported \"bert\"" \
    "$gradcache" eval --model "$bad" --data "$pairs"
cp "$tiny/config.json" "$bad/config.json"
sed -i 's/"intermediate_size": 64/"intermediate_size": 48/' "$bad/config.json"
expect_error "$bad/model.safetensors: weight 'encoder.layer.0.intermediate.dense.weight' is [64, 32], but $bad/config.json (intermediate_size 48, hidden_size 32) describes [48, 32]" \
    "$gradcache" train --init "$bad" --data "$pairs" --batch-size 8 --max-length 16 --out "$work/x"
# a config.json that leaves some of the file's encoder out would run another model: refused
# by eval and train alike (the pooler and position_ids, no part of the encoder, stay a note)
cp "$tiny/config.json" "$bad/config.json"
sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$bad/config.json"
unused="$bad/model.safetensors: 16 weights of the encoder are unused by $bad/config.json (num_hidden_layers 1, type_vocab_size 2): encoder.layer.1."
expect_error "$unused" "$gradcache" eval --model "$bad" --data "$pairs"
expect_error "$unused" "$gradcache" train --init "$bad" --data "$pairs" --batch-size 8 --max-length 16 --out "$work/x"
# one that describes more than the file holds is refused from the file's header, before the
# model is built (under a 1 MB limit: building it first would fail on memory, not on this check)
sed -i 's/"num_hidden_layers": 1/"num_hidden_layers": 1000/' "$bad/config.json"
expect_error "$bad/model.safetensors: 15968 weights of the encoder $bad/config.json describes (num_hidden_layers 1000) are missing" \
    env GC_MEM_LIMIT=1M "$gradcache" eval --model "$bad" --data "$pairs"
cp "$tiny/config.json" "$bad/config.json"
sed -i 's/"type_vocab_size": 2/"type_vocab_size": 0/' "$bad/config.json"
expect_error "$bad/config.json: \"type_vocab_size\" is 0, outside [1, 1000000]" "$gradcache" eval --model "$bad" --data "$pairs"
cp "$tiny/config.json" "$bad/config.json"
sed -i 's/"type": "WordPiece"/"type": "Unigram"/g' "$bad/tokenizer.json"
grep -q '"type": "Unigram"' "$bad/tokenizer.json" || fail "the test could not rewrite the tokenizer's type"
expect_error "$bad/tokenizer.json: model type \"Unigram\" is neither WordPiece" "$gradcache" eval --model "$bad" --data "$pairs"
expect_error "max_position_embeddings is 24, fewer than the 100 tokens asked for" "$gradcache" train --init "$tiny" --data "$pairs" --batch-size 8 --max-length 100 --out "$work/x"
check [ ! -e "$work/x" ] "a failed run left $work/x behind"
# a model folder already there is checked file by file, never trusted
mkdir -p "$work/models/minilm" && echo '{}' >"$work/models/minilm/config.json"
expect_error "$work/models/minilm/config.json: checksum mismatch" \
    "$gradcache" model fetch minilm --out "$work/models/minilm"
expect_error "unknown model 'gpt'" "$gradcache" model fetch gpt
cli_summary
