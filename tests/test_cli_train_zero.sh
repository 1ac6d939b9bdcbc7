#!/usr/bin/env bash
# gradcache train --zero under gradcache launch: 2 processes at --zero 1, 2 and 2b train what
# --zero 0 trains (model and checkpoint to 1e-5, below), with --accumulate 2 too; rank 0 alone
# says once which launcher's environment started the run; a sharded run's checkpoint holds
# AdamW's whole state (the unsharded run's tensors), resumes bitwise with as many processes and
# at another stage, and with another number of processes (4, and 1 unlaunched; a plain ZeRO-0
# run too) as the data-order rule of docs/TRAIN.md says; --zero 2b with shares of unequal chunk
# counts trains what --zero 0 trains. A tiny model.
#
# The tolerance: ZeRO-1 and 2 reduce-scatter what ZeRO-0 all-reduces (the ring's first half:
# the same sums) and clip with the shards' sums of squares added in another order (the f64
# total of f32 sums: the same norm here, so these runs are bitwise equal, but the library
# promises only rounding); 2b adds every chunk's average into the shard instead of averaging
# the chunks' sum, so its gradients differ by f32 rounding, which AdamW's division by sqrt(v)
# carries into the parameters: 7e-7 after 6 steps. 1e-5 is 14 times that and a fiftieth of one
# step's update (lr 5e-4), so a dropped or doubled chunk or a stale shard is caught.
# usage: test_cli_train_zero.sh GRADCACHE COMPARE_SAFETENSORS
set -uo pipefail
usage="usage: test_cli_train_zero.sh path/to/gradcache path/to/compare_safetensors"
gradcache=${1:?$usage}
compare=${2:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
export GC_DIST_TIMEOUT=60
tolerance=1e-5
same_file() { [ "$(sha256sum <"$1")" = "$(sha256sum <"$2")" ]; }
# close A B: the two files' tensors within the tolerance
close() { "$compare" "$1" "$2" "$tolerance" >"$work/compared" || { cat "$work/compared" >&2; return 1; }; }

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
# a batch of 16: as many rows, hence chunks, on each of 1, 2 or 4 processes
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --gc --gc-chunk-size 4
       --steps 6 --log-every 3)
launch() { timeout 300 "$gradcache" launch -n "$@"; }

expect_ok launch 2 -- "${train[@]}" --out "$work/z0"
check [ "$(grep -c 'gradcache train: 2 processes started by torchrun' "$work/stderr")" -eq 1 ] \
    "not one line naming the launcher: $(cat "$work/stderr")"
check grep -q '^\[0\] gradcache train: 2 processes started by torchrun' "$work/stderr" \
    "the launcher's line is not rank 0's: $(cat "$work/stderr")"
for stage in 1 2 2b; do
    expect_ok launch 2 -- "${train[@]}" --zero "$stage" --out "$work/z$stage"
    check grep -q "^\[0\] trained steps 1-6 of 6" "$work/stdout" "--zero $stage: $(cat "$work/stdout")"
    for file in model.safetensors checkpoint.safetensors; do
        check close "$work/z$stage/$file" "$work/z0/$file" "--zero $stage: $file is not --zero 0's"
    done
done

# --accumulate 2: two cached steps summed per update, one reduction (2b: one per chunk, into the
# shards) and one AdamW step; every stage trains --zero 0's model (the same tolerance)
expect_ok launch 2 -- "${train[@]}" --steps 3 --accumulate 2 --out "$work/acc_z0"
for stage in 1 2 2b; do
    expect_ok launch 2 -- "${train[@]}" --steps 3 --accumulate 2 --zero "$stage" --out "$work/acc_z$stage"
    check grep -q "^\[0\] trained steps 1-3 of 3" "$work/stdout" "--accumulate 2 --zero $stage: $(cat "$work/stdout")"
    check close "$work/acc_z$stage/checkpoint.safetensors" "$work/acc_z0/checkpoint.safetensors" \
        "--accumulate 2 --zero $stage: the checkpoint is not --zero 0's"
done

# stopped at ZeRO-2 and resumed: at ZeRO-2 the same bytes as straight through, at ZeRO-1 too
expect_ok launch 2 -- "${train[@]}" --zero 2 --stop-after 3 --out "$work/stopped"
cp -r "$work/stopped" "$work/stopped_copy"
expect_ok launch 2 -- "${train[@]}" --zero 2 --resume --out "$work/stopped"
check grep -q "^\[0\] trained steps 4-6 of 6" "$work/stdout" "resumed: $(cat "$work/stdout")"
for file in model.safetensors checkpoint.safetensors; do
    check same_file "$work/stopped/$file" "$work/z2/$file" "resumed at ZeRO-2: $file is not the straight run's"
done
cp -r "$work/stopped_copy" "$work/other_stage"
expect_ok launch 2 -- "${train[@]}" --zero 1 --resume --out "$work/other_stage"
check close "$work/other_stage/model.safetensors" "$work/z2/model.safetensors" "resumed at ZeRO-1: another model"

# another number of processes: the same global batches, other dropout streams for the rows,
# so another model, but a run that goes on: 4 processes at ZeRO-1, one process alone, and a
# plain data-parallel run
cp -r "$work/stopped_copy" "$work/four"
expect_ok launch 4 -- "${train[@]}" --zero 1 --resume --out "$work/four"
check grep -q "^\[0\] trained steps 4-6 of 6" "$work/stdout" "resumed with 4 processes: $(cat "$work/stdout")"
check grep -q '"dist.world_size":"4"' "$work/four/checkpoint.safetensors" "the checkpoint does not say 4 processes"
check [ "$(wc -l <"$work/four/log.jsonl")" -eq 6 ] "4 processes: the log has $(wc -l <"$work/four/log.jsonl") lines"
# plain data-parallel (ZeRO-0) the same way: 2 processes stopped, 4 resumed
expect_ok launch 2 -- "${train[@]}" --stop-after 3 --out "$work/plain"
expect_ok launch 4 -- "${train[@]}" --resume --out "$work/plain"
check grep -q "^\[0\] trained steps 4-6 of 6" "$work/stdout" "ZeRO-0 resumed with 4 processes: $(cat "$work/stdout")"
cp -r "$work/stopped_copy" "$work/one"
expect_ok "${train[@]}" --resume --out "$work/one"
check grep -q "^trained steps 4-6 of 6" "$work/stdout" "resumed alone: $(cat "$work/stdout")"
check [ -z "$(grep -o '"dist.world_size"' "$work/one/checkpoint.safetensors")" ] "one process wrote a world size"
# ranks 2 and 3, of which the 2-process checkpoint has no dropout stream, began theirs past
# every offset it holds: drawing nothing any rank of that name might have drawn before
offset() { grep -ao "\"rng\.$2cpu\.offset\":\"[0-9]*\"" "$1" | grep -o '[0-9]*"$' | tr -d '"'; }
rank0=$(offset "$work/stopped_copy/checkpoint.safetensors" "")
rank1=$(offset "$work/stopped_copy/checkpoint.safetensors" rank1.)
before=$((rank0 > rank1 ? rank0 : rank1))
check [ "$(offset "$work/four/checkpoint.safetensors" rank2.)" -gt "$before" ] \
    "rank 2's stream is at $(offset "$work/four/checkpoint.safetensors" rank2.), not past the checkpoint's $before"

# f16 with the loss scaler: ZeRO-2 skips the overflowing steps --zero 0 skips and trains
# the same model (3 steps: f16 is slow on the CPU)
expect_ok launch 2 -- "${train[@]}" --steps 3 --precision f16 --out "$work/f16_z0"
expect_ok launch 2 -- "${train[@]}" --steps 3 --precision f16 --zero 2 --out "$work/f16_z2"
skipped() { grep -o '"skipped":[a-z]*' "$1/log.jsonl"; }
check [ "$(skipped "$work/f16_z2")" = "$(skipped "$work/f16_z0")" ] "f16: other steps skipped at ZeRO-2"
check close "$work/f16_z2/checkpoint.safetensors" "$work/f16_z0/checkpoint.safetensors" \
    "f16: ZeRO-2's checkpoint (masters included) is not ZeRO-0's"

# 2b with 17 examples over 2 processes: 9 and 8 query rows, 3 and 2 chunks of 4; the process
# with fewer takes part in the third reduction with nothing of its own, and the run trains what
# --zero 0 trains (the same tolerance)
expect_ok launch 2 -- "${train[@]}" --steps 3 --batch-size 17 --out "$work/uneven_z0"
expect_ok launch 2 -- "${train[@]}" --steps 3 --batch-size 17 --zero 2b --out "$work/uneven_z2b"
check close "$work/uneven_z2b/checkpoint.safetensors" "$work/uneven_z0/checkpoint.safetensors" \
    "--zero 2b with unequal chunk counts: the checkpoint is not --zero 0's"
cli_summary
