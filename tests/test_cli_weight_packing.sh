#!/usr/bin/env bash
# --weight-packing on|off on every command that multiplies by weights: on, a GradCache step's
# weights keep their packed panels and the run log, the progress line and bench memory report
# them (packed bytes > 0); off, none are kept (0 bytes); either way the same model, byte for
# byte, and the same embeddings; a bad value is refused with one line naming the flag; each
# command's --help lists it. Run by meson with the gradcache program as $1 and the tiny BERT
# fixture folder as $2. A tiny model and 3 steps: seconds on two cores.
set -uo pipefail
gradcache=${1:?usage: test_cli_weight_packing.sh path/to/gradcache path/to/tiny_bert}
tiny=${2:?usage: test_cli_weight_packing.sh path/to/gradcache path/to/tiny_bert}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
common=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 16 --steps 3 --log-every 1 --gc
    --gc-chunk-size 4,8)

# --- train: the panels reported on, none off, the same model and the same computed log -----
for packing in on off; do
    expect_ok "$gradcache" train "${common[@]}" --weight-packing "$packing" --out "$work/$packing"
    for step in 1 2 3; do
        packed=$(field "$work/$packing/log.jsonl" "$step" packed_bytes)
        if [ "$packing" = on ]; then
            check [ "${packed:-0}" -gt 0 ] "train --weight-packing on: step $step logs packed_bytes '$packed'"
        else
            check [ "$packed" = 0 ] "train --weight-packing off: step $step logs packed_bytes '$packed'"
        fi
    done
    if [ "$packing" = on ]; then
        grep -q '^step 3/3 .* + packed [0-9.]* [KM]iB' "$work/stderr" ||
            fail "train --weight-packing on: no packed bytes on the progress line: $(cat "$work/stderr")"
    else
        grep -q 'packed' "$work/stderr" &&
            fail "train --weight-packing off: packed bytes reported: $(cat "$work/stderr")"
    fi
done
for file in model.safetensors checkpoint.safetensors; do
    check cmp -s "$work/on/$file" "$work/off/$file" "train: $file differs with --weight-packing on and off"
done
check cmp -s <(computed "$work/on/log.jsonl" | sed 's/"packed_bytes":[0-9]*,//') \
    <(computed "$work/off/log.jsonl" | sed 's/"packed_bytes":[0-9]*,//') \
    "train: the logs differ with --weight-packing on and off (beyond packed_bytes)"
expect_error "--weight-packing: expected one of on off, got 'yes'" \
    "$gradcache" train "${common[@]}" --weight-packing yes --out "$work/bad"
check [ ! -e "$work/bad" ] "train --weight-packing yes left $work/bad behind"

# --- eval and encode: the same numbers either way ------------------------------------------
for packing in on off; do
    expect_ok "$gradcache" eval --model "$work/on" --data "$pairs" --batch-size 8 --json --weight-packing "$packing"
    cp "$work/stdout" "$work/eval_$packing.json"
    expect_ok "$gradcache" encode --model "$tiny" --input "$pairs" --output "$work/encode_$packing.tsv" --format tsv \
        --batch-size 16 --quiet --weight-packing "$packing"
done
check cmp -s "$work/eval_on.json" "$work/eval_off.json" "eval: the metrics differ with --weight-packing on and off"
check cmp -s "$work/encode_on.tsv" "$work/encode_off.tsv" \
    "encode: the embeddings differ with --weight-packing on and off"
expect_error "--weight-packing: expected one of on off" \
    "$gradcache" encode --model "$tiny" --input "$pairs" --output "$work/x.tsv" --format tsv --weight-packing 1

# --- bench memory: the packed column; GradCache rows keep panels on, no row does off --------
for packing in on off; do
    expect_ok "$gradcache" bench memory --batches 16 --chunks 8 --weight-packing "$packing" --csv "$work/$packing.csv"
    column=$(head -1 "$work/$packing.csv" | tr ',' '\n' | grep -n '^packed_bytes$' | cut -d: -f1)
    check [ -n "$column" ] "bench memory: no packed_bytes column: $(head -1 "$work/$packing.csv")"
    gc_packed=$(awk -F, -v c="${column:-1}" '$1 == "gc" { print $c }' "$work/$packing.csv")
    if [ "$packing" = on ]; then
        check [ "${gc_packed:-0}" -gt 0 ] "bench memory --weight-packing on: GradCache packed '$gc_packed' bytes"
    else
        check awk -F, -v c="${column:-1}" 'NR > 1 && $c != 0 { exit 1 }' "$work/off.csv" \
            "bench memory --weight-packing off: packed bytes in $(cat "$work/off.csv")"
    fi
    grep -q '^  mode .* packed ' "$work/stdout" ||
        fail "bench memory: no packed column in the table: $(cat "$work/stdout")"
done
expect_error "--weight-packing: expected one of on off" "$gradcache" bench speed --weight-packing auto

# --- every command that multiplies by weights lists the flag -------------------------------
for command in train eval encode "bench memory" "bench speed" verify; do
    # shellcheck disable=SC2086 # "bench memory" is two words
    expect_ok "$gradcache" $command --help
    grep -q -- "--weight-packing" "$work/stdout" || fail "gradcache $command --help does not list --weight-packing"
done

cli_summary
