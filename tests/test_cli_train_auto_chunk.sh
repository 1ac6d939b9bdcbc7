#!/usr/bin/env bash
# Automatic chunk sizing (gc_cache_step's auto_chunk) where a retry must redo more than one
# cached step: with --accumulate 2 in one process, a memory limit that refuses chunks of 16 in
# the update's second batch (the first's gradients are live then) makes the update start over
# with chunks of 8; under gradcache launch, the same limit on process 0 alone makes both
# processes retry with chunks of 8. Each run must end with the model of a run given chunks of 8
# from the start, byte for byte, and log them. The limit is the midpoint of the two chunk sizes'
# measured peaks (weight packing off, so that the peak is all the limit holds). The batches are
# large enough for those peaks to stay above what AdamW's state needs at the first update (the
# parameters, their gradients and two moments: 2.9 MB), which the limit must not refuse. A
# tiny model, seconds on two cores.
# usage: test_cli_train_auto_chunk.sh GRADCACHE
set -uo pipefail
gradcache=${1:?usage: test_cli_train_auto_chunk.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
export GC_DIST_TIMEOUT=20
pairs=$work/pairs.tsv
write_word_pairs "$pairs"
same_file() { [ "$(sha256sum <"$1")" = "$(sha256sum <"$2")" ]; }
# midpoint LOG_8 LOG_4: a byte limit between the first step's peaks of the two runs
midpoint() { echo $((($(field "$1" 1 peak_bytes) + $(field "$2" 1 peak_bytes)) / 2)); }

# expect_auto NAME RUN_16 RUN_8 LIMIT: the run NAME (chunks of 16 asked for, under LIMIT) used
# chunks of 8 and trained RUN_8's model
expect_auto() {
    check [ "$(field "$work/$1/log.jsonl" 1 chunk_sizes)" = "[8" ] \
        "$1: chunk sizes $(field "$work/$1/log.jsonl" 1 chunk_sizes) under a limit of $4 bytes (wanted 8)"
    check same_file "$work/$1/model.safetensors" "$work/$3/model.safetensors" \
        "$1: automatic chunks of 8 trained another model than chunks of 8 given (limit $4 bytes)"
    check [ "$(field "$work/$2/log.jsonl" 1 peak_bytes)" -gt "$4" ] "$2: chunks of 16 fit under $4 bytes: no retry tested"
}

# --accumulate 2, one process
accumulated=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --accumulate 2 --gc
             --steps 1 --weight-packing off)
for chunk in 16 8; do expect_ok "${accumulated[@]}" --gc-chunk-size "$chunk" --out "$work/acc$chunk"; done
limit=$(midpoint "$work/acc16/log.jsonl" "$work/acc8/log.jsonl")
expect_ok "${accumulated[@]}" --gc-chunk-size 16 --mem-limit "$limit" --out "$work/acc_auto"
expect_auto acc_auto acc16 acc8 "$limit"

# two processes, process 0 alone under the limit (each holds 16 of the 32 examples)
launched=("$gradcache" launch -n 2 -- bash -c 'if [ "$RANK" = 0 ]; then export GC_MEM_LIMIT=$LIMIT; fi; exec "$@"' bash
          "$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 32 --gc --steps 1
          --weight-packing off)
for chunk in 16 8; do expect_ok timeout 120 env LIMIT= "${launched[@]}" --gc-chunk-size "$chunk" --out "$work/dp$chunk"; done
limit=$(midpoint "$work/dp16/log.jsonl" "$work/dp8/log.jsonl")
expect_ok timeout 120 env LIMIT="$limit" "${launched[@]}" --gc-chunk-size 16 --out "$work/dp_auto"
expect_auto dp_auto dp16 dp8 "$limit"
# the same with --accumulate 2 (16 examples of each batch per process): both start the update over
expect_ok timeout 120 env LIMIT= "${launched[@]}" --accumulate 2 --gc-chunk-size 16 --out "$work/dpacc16"
expect_ok timeout 120 env LIMIT= "${launched[@]}" --accumulate 2 --gc-chunk-size 8 --out "$work/dpacc8"
limit=$(midpoint "$work/dpacc16/log.jsonl" "$work/dpacc8/log.jsonl")
expect_ok timeout 120 env LIMIT="$limit" "${launched[@]}" --accumulate 2 --gc-chunk-size 16 \
    --out "$work/dpacc_auto"
expect_auto dpacc_auto dpacc16 dpacc8 "$limit"
cli_summary
