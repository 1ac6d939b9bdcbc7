#!/usr/bin/env bash
# gradcache train --eval-every under gradcache launch (two processes over TCP on loopback): every
# process evaluates, process 0 alone logs and writes DIR/best/, neither waits for the other past
# a step, and --early-stop ends both at the same evaluation (frozen weights: every evaluation
# ties the first), where one process stops too. Run by meson with the gradcache program as $1.
set -uo pipefail
usage="usage: test_cli_train_eval_dist.sh path/to/gradcache"
gradcache=${1:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
export GC_DIST_TIMEOUT=20

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
train=("$gradcache" train --data "$pairs" --model-size tiny --max-length 16 --batch-size 16 --gc --gc-chunk-size 4
       --steps 10 --log-every 10 --eval-every 2 --eval-data "$pairs" --eval-limit 64)

expect_ok timeout 120 "$gradcache" launch -n 2 -- "${train[@]}" --out "$work/two"
check [ "$(grep -c '^{"eval":' "$work/two/log.jsonl")" -eq 5 ] "$(grep -c '^{"eval":' "$work/two/log.jsonl") evaluations"
check [ -s "$work/two/best/model.safetensors" ] "no best model"
check [ "$(grep -c '^\[1\]' "$work/stderr")" -eq 0 ] "process 1 printed: $(grep '^\[1\]' "$work/stderr")"

# the same stop in one and in two processes
for n in 1 2; do
    expect_ok timeout 120 "$gradcache" launch -n $n -- "${train[@]}" --lr 1e-12 --early-stop 2 --out "$work/early$n"
    grep -q "^\[0\] trained steps 1-6 of 10" "$work/stdout" || fail "$n processes: $(cat "$work/stdout")"
    check [ "$(grep -c '"early_stop":true' "$work/early$n/log.jsonl")" -eq 1 ] "$n processes: no stop logged"
done

cli_summary
