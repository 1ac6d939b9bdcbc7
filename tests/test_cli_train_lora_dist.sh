#!/usr/bin/env bash
# gradcache train --lora-r under gradcache launch (two processes over TCP on loopback): the
# adapters alone are reduced and updated, so two processes log the losses and gradient norms of
# one process with the same global batch, each step, to f32 rounding (the base without dropout,
# as test_cli_train_dist.sh's sorting check: each process draws its own masks); so do --zero 1
# (AdamW's state of the adapters sharded) and --loss ring; process 0 alone writes the adapter
# folder, and a stopped and resumed two-process run writes the straight run's, byte for byte.
# usage: test_cli_train_lora_dist.sh GRADCACHE TINY_BERT_FOLDER
set -uo pipefail
usage="usage: test_cli_train_lora_dist.sh path/to/gradcache path/to/tiny_bert"
gradcache=${1:?$usage}
tiny=${2:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
export GC_DIST_TIMEOUT=20
same_file() { [ "$(sha256sum <"$1")" = "$(sha256sum <"$2")" ]; }

without_dropout "$tiny" "$work/bert0" || { echo "setup: no dropout-free copy of $tiny" >&2; exit 99; }
write_sentence_pairs "$work/pairs.tsv"
steps=4
train=("$gradcache" train --init "$work/bert0" --data "$work/pairs.tsv" --gc --gc-chunk-size 3 --batch-size 12
       --max-length 16 --steps $steps --lr 1e-3 --lora-r 4 --lora-targets query,value)

expect_ok timeout 120 "${train[@]}" --out "$work/one"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/two"
check grep -q "^\[0\] trained steps 1-$steps of $steps" "$work/stdout" "two processes: $(cat "$work/stdout")"
check [ -s "$work/two/adapter/adapter_model.safetensors" ] "two processes: no adapter folder"
check [ ! -e "$work/two/model.safetensors" ] "two processes: a whole model written"
check grep -q '"dist.world_size":"2"' "$work/two/checkpoint.safetensors" "the checkpoint does not say 2 processes"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --zero 1 --out "$work/zero1"
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --loss ring --out "$work/ring"
# f32: the same sums split over two processes, in other orders (test_cli_train_dist.sh's 1e-6, 1e-5)
for run in two zero1 ring; do
    for step in $(seq 1 $steps); do
        for key in loss:1e-6 grad_norm:1e-5; do
            got=$(field "$work/$run/log.jsonl" "$step" "${key%%:*}")
            want=$(field "$work/one/log.jsonl" "$step" "${key%%:*}")
            check close_to "$got" "$want" "${key#*:}" "$run: step $step's ${key%%:*} $got, one process $want"
        done
    done
done

expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --stop-after 2
expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/resumed" --resume
for file in adapter/adapter_model.safetensors checkpoint.safetensors; do
    check same_file "$work/resumed/$file" "$work/two/$file" "resumed: $file differs from the straight run's"
done

cli_summary
