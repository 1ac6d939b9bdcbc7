#!/usr/bin/env bash
# What gradcache trusts of its input, tried as a careless or hostile user would: model files
# and checkpoints that are damaged or edited (made by edit_safetensors, $2, from real ones),
# a collapsed or broken model, a stream that is no pair file, the leftovers of a killed run,
# and flags at their limits. Each refusal is one line on stderr naming the file and the
# entry (or the flag) and a non-zero exit; each acceptance is checked for what it printed.
# Run by meson with the gradcache program as $1.
set -uo pipefail
gradcache=${1:?usage: test_cli_checks.sh path/to/gradcache path/to/edit_safetensors}
edit=${2:?usage: test_cli_checks.sh path/to/gradcache path/to/edit_safetensors}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# A file made from another by edits: edited SOURCE NAME EDIT... -> $work/NAME
edited() {
    local source=$1 name=$2
    shift 2
    "$edit" "$source" "$work/$name" "$@" || { echo "setup: edit_safetensors failed" >&2; exit 99; }
    echo "$work/$name"
}

# --- runs to start from: a tiny model, 4 steps, with and without Gradient Cache -----------
pairs=$work/pairs.tsv
for i in $(seq 1 40); do printf 'def of word%d\tword%d\n' "$i" "$i"; done >"$pairs"
common=(--data "$pairs" --model-size tiny --max-length 16 --batch-size 8 --steps 4)
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4 --stop-after 2 --out "$work/gc"
expect_ok "$gradcache" train "${common[@]}" --stop-after 2 --out "$work/plain"
model=$work/gc/model.safetensors
checkpoint=$work/gc/checkpoint.safetensors
for file in "$model" "$checkpoint"; do
    grep -q '"gradcache.data_xxh64":"[0-9a-f]\{16\}"' "$file" || fail "$file has no data checksum"
done

# --- 1. eval cannot be fooled: ties count against the query, nan is an error ---------------
# A projection of zeros makes every embedding 0 and every score alike: each positive ranks
# last of the 40 candidates (MRR 1/40), where counting ties in its favour printed 1.0000.
collapsed=$(edited "$model" collapsed.safetensors fill query.projection.weight=0 fill query.projection.bias=0 \
    fill passage.projection.weight=0 fill passage.projection.bias=0)
expect_ok "$gradcache" eval --model "$collapsed" --data "$pairs"
grep -qx 'Recall@1 0.0000  Recall@10 0.0000  MRR 0.0250  (40 queries, 40 candidates)' "$work/stdout" \
    || fail "a collapsed model: $(cat "$work/stdout")"
broken=$(edited "$model" nan.safetensors fill query.projection.bias=nan)
expect_error "the embedding of query row 0 (of 40, from 0) holds nan or inf" \
    "$gradcache" eval --model "$broken" --data "$pairs"
broken=$(edited "$model" inf.safetensors fill passage.projection.bias=inf)
expect_error "the embedding of candidate row 0 (of 40, from 0) holds nan or inf" \
    "$gradcache" eval --model "$broken" --data "$pairs"

# --- 2. resume: every value from the file range-checked before use -------------------------
resume=(train "${common[@]}" --gc --gc-chunk-size 4 --resume)
# try_resume CHECKPOINT WANT [FLAGS...]: --resume from a copy of CHECKPOINT refused with WANT
try_resume() {
    local source=$1 want=$2
    shift 2
    rm -rf "$work/try" && mkdir -p "$work/try" && cp "$source" "$work/try/checkpoint.safetensors"
    expect_error "$want" "$gradcache" "$@" --out "$work/try"
}
try_resume "$(edited "$checkpoint" c1 set train.query_chunk_size=9223372036854775807)" \
    "metadata 'train.query_chunk_size' is '9223372036854775807', expected an integer in [1, 4]" "${resume[@]}"
try_resume "$(edited "$checkpoint" c2 set rng.cpu.offset=18446744073709551615)" \
    "metadata 'rng.cpu.offset' is 18446744073709551615, past the largest offset" "${resume[@]}"
try_resume "$(edited "$checkpoint" c3 set optimizer.step=9223372036854775807)" \
    "optimizer.step 9223372036854775807 differs from train.step 2" "${resume[@]}"
try_resume "$(edited "$checkpoint" c4 set train.step=9223372036854775807)" \
    "metadata 'train.step' is '9223372036854775807', expected an integer in [0, 4]" "${resume[@]}"
try_resume "$(edited "$checkpoint" c5 set train.position=8)" \
    "train.epoch 0 and train.position 8 are not where train.step 2 falls" "${resume[@]}"
try_resume "$(edited "$checkpoint" c6 set rng.cpu.seed=1)" "metadata 'rng.cpu.seed' is 1, but this run's --seed" \
    "${resume[@]}"
# an entry a checkpoint of this run does not hold: another rank's generator, an unknown key
try_resume "$(edited "$checkpoint" c6b set rng.rank1.cpu.seed=1)" "unexpected metadata 'rng.rank1.cpu.seed'" \
    "${resume[@]}"
try_resume "$(edited "$checkpoint" c6c set train.learning_rate=1)" "unexpected metadata 'train.learning_rate'" \
    "${resume[@]}"
# the model's description, against the model the run's flags build: every entry, by value
try_resume "$(edited "$checkpoint" c6d set format=gradcache-dual-encoder-2)" \
    "metadata 'format' is 'gradcache-dual-encoder-2', but the model these flags build has 'gradcache-dual-encoder-1'" \
    "${resume[@]}"
try_resume "$(edited "$checkpoint" c6e set model.dim=128)" \
    "metadata 'model.dim' is '128', but the model these flags build has '64'" "${resume[@]}"
try_resume "$(edited "$checkpoint" c6f set model.dropout=0.5)" \
    "metadata 'model.dropout' is '0.5', but the model these flags build has '0.1'" "${resume[@]}"
try_resume "$(edited "$checkpoint" c6g set model.tied=1)" \
    "metadata 'model.tied' is '1', but the model these flags build has '0'" "${resume[@]}"
try_resume "$(edited "$checkpoint" c6h unset model.dtype)" "has no metadata 'model.dtype'" "${resume[@]}"

# --- 3. eval refuses a small file describing a huge model before allocating it --------------
# (under a 64 MB limit: building the model first would fail on memory, not on this check)
huge=$(edited "$model" huge.safetensors set model.dim=65536)
expect_error "$huge: the model it describes (model.dim 65536, model.layers 2," \
    env GC_MEM_LIMIT=64M "$gradcache" eval --model "$huge" --data "$pairs"
grep -qE "needs [0-9]+ bytes of parameters, the file holds [0-9]+$" "$work/stderr" \
    || fail "a huge model: $(cat "$work/stderr")"

# --- 4. resume refuses what would break the bitwise claim ----------------------------------
param=query.projection.weight
try_resume "$(edited "$checkpoint" c7 drop "optimizer.exp_avg.$param" drop "optimizer.exp_avg_sq.$param")" \
    "has no AdamW moments for '$param' (optimizer.exp_avg.$param) at step 2" "${resume[@]}"
try_resume "$(edited "$checkpoint" c8 copy "optimizer.exp_avg.$param=optimizer.bogus.$param")" \
    "unexpected tensor 'optimizer.bogus.$param'" "${resume[@]}"
try_resume "$(edited "$checkpoint" c9 set optimizer.step=1)" "optimizer.step 1 differs from train.step 2" \
    "${resume[@]}"
try_resume "$(edited "$checkpoint" c10 copy "$param=extra.weight")" "unexpected tensor 'extra.weight'" "${resume[@]}"
try_resume "$(edited "$work/plain/checkpoint.safetensors" c11 set train.query_chunk_size=4)" \
    "metadata 'train.query_chunk_size' is stored, but chunk sizes belong to --gc runs" \
    train "${common[@]}" --resume
# and the untouched checkpoints still resume (the checks refuse only what is wrong)
expect_ok "$gradcache" "${resume[@]}" --out "$work/gc"
expect_ok "$gradcache" train "${common[@]}" --resume --out "$work/plain"
grep -q "trained steps 3-4 of 4" "$work/stdout" || fail "plain resume: $(cat "$work/stdout")"

# --- 5. a stream that is no pair file is refused at its first bad line ----------------------
# The writer keeps the pipe open: a reader that wants the whole stream first never ends.
mkfifo "$work/stream"
{ printf 'q\tp\nbad\tline\0\n'; exec sleep 60; } >"$work/stream" &
writer=$!
expect_error "$work/stream:2: NUL byte at column 9" timeout 20 "$gradcache" data check "$work/stream"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
expect_error "/dev/zero:1: line longer than the limit of 4096 bytes" timeout 20 "$gradcache" data check /dev/zero

# --- 6. the leftovers of a run killed while saving are removed at the next start -------------
# (a pid above any pid_max is a process that is gone; this shell's is alive)
run=$work/gc
for name in .checkpoint.safetensors.tmp.99999999 model.safetensors.tmp.99999998 .model.safetensors.tmp.$$ \
    notes.tmp.99999999; do
    echo leftover >"$run/$name"
done
expect_ok "$gradcache" "${resume[@]}" --out "$run"
grep -q "nothing to do" "$work/stdout" || fail "resume of a finished run: $(cat "$work/stdout")"
check [ ! -e "$run/.checkpoint.safetensors.tmp.99999999" ] "a hidden leftover of a dead run was kept"
check [ ! -e "$run/model.safetensors.tmp.99999998" ] "an old-style leftover of a dead run was kept"
check [ -e "$run/.model.safetensors.tmp.$$" ] "a live process's temporary file was removed"
check [ -e "$run/notes.tmp.99999999" ] "a file that is not a leftover was removed"
rm -f "$run/.model.safetensors.tmp.$$" "$run/notes.tmp.99999999"

# --- 7. the model loader: the dtype and the set of tensors must be the described ones --------
expect_error "tensor 'query.projection.weight' is I32 in the file but F32" \
    "$gradcache" eval --model "$(edited "$model" i32.safetensors retype query.projection.weight=i32)" --data "$pairs"
expect_error "unexpected tensor 'passage.layers.1." \
    "$gradcache" eval --model "$(edited "$model" layers.safetensors set model.layers=1)" --data "$pairs"
expect_error "unexpected tensor 'query.extra'" \
    "$gradcache" eval --model "$(edited "$model" extra.safetensors copy query.projection.bias=query.extra)" \
    --data "$pairs"

# a model path that is no regular file: refused at once, never waited on or read unbounded
mkfifo "$work/fifo"
expect_error "safetensors: $work/fifo: not a regular file" timeout 20 "$gradcache" eval --model "$work/fifo" --data "$pairs"
expect_error "safetensors: /dev/zero: not a regular file" timeout 20 "$gradcache" eval --model /dev/zero --data "$pairs"

# --- the data checksum: a flipped bit is refused; a file without the checksum loads ---------
# flip_bit FILE: one bit of the third byte from the end (tensor data) inverted, in place
flip_bit() {
    local size byte
    size=$(stat -c %s "$1")
    byte=$(od -An -tu1 -j $((size - 3)) -N1 "$1" | tr -d ' ')
    # shellcheck disable=SC2059 # the format is the octal escape of the new byte
    printf "\\$(printf %o $((byte ^ 4)))" | dd of="$1" bs=1 seek=$((size - 3)) conv=notrunc status=none
}
flipped=$work/flipped.safetensors
cp "$model" "$flipped"
flip_bit "$flipped"
check [ "$(cmp -l "$model" "$flipped" | wc -l)" -eq 1 ] "the flipped copy differs in $(cmp -l "$model" "$flipped" | wc -l) bytes"
expect_error "$flipped: the tensor data does not match its checksum" \
    "$gradcache" eval --model "$flipped" --data "$pairs"
cp "$checkpoint" "$work/flipped_checkpoint"
flip_bit "$work/flipped_checkpoint"
try_resume "$work/flipped_checkpoint" "the tensor data does not match its checksum" "${resume[@]}"
elsewhere=$(edited "$model" elsewhere.safetensors plain)
grep -q gradcache.data_xxh64 "$elsewhere" && fail "edit_safetensors plain kept the checksum"
expect_ok "$gradcache" eval --model "$elsewhere" --data "$pairs"

# --- 8. flags at their limits -----------------------------------------------------------------
expect_error "--seed: expected an integer in [0, 9007199254740992], got '9007199254740993'" \
    "$gradcache" train "${common[@]}" --seed 9007199254740993 --out "$work/never"
expect_error "--mem-limit: expected a size of at least 1 byte" \
    "$gradcache" train "${common[@]}" --mem-limit 0 --out "$work/never"
expect_error "--batch-size: expected an integer in [1, 16777216], got ' 8'" \
    "$gradcache" train "${common[@]}" --batch-size ' 8' --out "$work/never"
expect_error "--lr: expected a number" "$gradcache" train "${common[@]}" --lr ' 0.001' --out "$work/never"
expect_error "--batch-size: expected an integer" "$gradcache" eval --model "$model" --data "$pairs" --batch-size +8
# the launcher's variables too: strtol would skip a tab or a newline as it skips a space
expect_error "expected an integer from 1 to 1048576" \
    env WORLD_SIZE=$'\t1' RANK=0 "$gradcache" train "${common[@]}" --out "$work/never"
expect_error "expected an integer from 0 to 0" \
    env WORLD_SIZE=1 RANK=$'\n0' "$gradcache" train "${common[@]}" --out "$work/never"
check [ ! -e "$work/never" ] "a refused run left $work/never behind"
# a batch of one: the loss is -log 1, printed as 0, not -0
expect_ok "$gradcache" train --data "$pairs" --model-size tiny --max-length 16 --batch-size 1 --steps 2 \
    --out "$work/one"
grep -q -- '-0\.0000' "$work/stdout" "$work/stderr" && fail "a batch of one prints -0: $(cat "$work/stdout")"
grep -q '"loss":0,' "$work/one/log.jsonl" || fail "a batch of one logs: $(head -1 "$work/one/log.jsonl")"
# bench speed under --mem-limit: a batch that does not fit is an error, not gigabytes
expect_error "memory limit reached" timeout 60 "$gradcache" bench speed --batch-size 1048576 --mem-limit 64M

cli_summary
