#!/usr/bin/env bash
# gradcache train on several datasets (--data a,b,c): a pair file, a folder holding train.tsv
# and another pair file, with one, no and one negative column. Round-robin takes them in turn
# and proportionally each epoch takes every dataset's batches once; the log names each step's
# dataset and, every --log-every steps, each dataset's mean loss; --resume continues bit for bit
# and refuses another list or sampling, or an edited checkpoint's per-dataset sums; bad lists
# are refused with one line. Run by meson with the gradcache program as $1 and
# edit_safetensors as $2. A tiny model and batches of 16: seconds on two cores.
set -uo pipefail
usage="usage: test_cli_train_multidata.sh path/to/gradcache path/to/edit_safetensors"
gradcache=${1:?$usage}
edit=${2:?$usage}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"

# --- data: 48, 80 and 72 examples: 3, 5 and 4 batches of 16 ------------------------------
write_word_pairs "$work/all.tsv"
a=$work/a.tsv b=$work/b c=$work/c.tsv
mkdir -p "$b"
sed -n 1,48p "$work/all.tsv" >"$a"
sed -n 49,128p "$work/all.tsv" | cut -f1,2 >"$b/train.tsv" # no negative column
sed -n 129,200p "$work/all.tsv" >"$c"
data=$a,$b,$c
common=(--data "$data" --model-size tiny --max-length 24 --batch-size 16 --steps 20 --log-every 10)

# dataset_losses STEP FILE: the step's per-dataset means, comma-separated (empty: none logged).
dataset_losses() {
    grep "^{\"step\":$1," "$2" | sed -nE 's/.*"dataset_losses":\[([^]]*)\].*/\1/p'
}

expect_ok "$gradcache" train --help
check grep -q -- "--sampling" "$work/stdout" "train --help does not describe --sampling"

# --- round-robin (the default): a, b, c, a, ...; an epoch is 3 x a's 3 batches -------------
rr=$work/round_robin
expect_ok "$gradcache" train "${common[@]}" --gc --gc-chunk-size 4,8 --out "$rr"
check [ "$(wc -l <"$rr/log.jsonl")" -eq 20 ] "round-robin: the log has $(wc -l <"$rr/log.jsonl") lines"
for step in $(seq 1 20); do
    want=$(((step - 1) % 3))
    check [ "$(field "$rr/log.jsonl" "$step" dataset)" = "$want" ] "round-robin: step $step took dataset $(field "$rr/log.jsonl" "$step" dataset), not $want"
    check [ "$(field "$rr/log.jsonl" "$step" epoch)" = "$(((step - 1) / 9))" ] "round-robin: step $step's epoch"
done
check [ "$(field "$rr/log.jsonl" 2 dataset_name)" = "\"$b\"" ] "round-robin: step 2's name $(field "$rr/log.jsonl" 2 dataset_name)"
# the means at steps 10 and 20 only, each over its dataset's steps since the previous point
check [ "$(grep -c dataset_losses "$rr/log.jsonl")" -eq 2 ] "round-robin: dataset_losses on $(grep -c dataset_losses "$rr/log.jsonl") lines, not 2"
for d in 0 1 2; do
    want=$(for step in $(seq 11 20); do [ $(((step - 1) % 3)) -eq $d ] && field "$rr/log.jsonl" "$step" loss; done |
        awk '{ sum += $1; n++ } END { printf "%.17g", sum / n }')
    got=$(dataset_losses 20 "$rr/log.jsonl" | cut -d, -f$((d + 1)))
    # the same terms summed in the same order, written exactly: only the printing may differ
    check close_to "$got" "$want" 1e-15 "round-robin: dataset $d's mean at step 20 is $got, its steps' $want"
done

# --- proportional: each epoch of 12 steps takes a 3 times, b 5 times, c 4 times -------------
prop=$work/proportional
expect_ok "$gradcache" train "${common[@]}" --steps 24 --sampling proportional --gc --gc-chunk-size 4,8 --out "$prop"
for epoch in 0 1; do
    counts=$(for step in $(seq $((epoch * 12 + 1)) $((epoch * 12 + 12))); do field "$prop/log.jsonl" "$step" dataset; done |
        sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
    check [ "$counts" = "0:3 1:5 2:4 " ] "proportional: epoch $epoch took $counts"
done
order() { for step in $(seq $(($1 * 12 + 1)) $(($1 * 12 + 12))); do field "$prop/log.jsonl" "$step" dataset; done | tr -d '\n'; }
check [ "$(order 0)" != "$(order 1)" ] "proportional: both epochs took the datasets in the order $(order 0)"

# --- --resume: 10 steps, stop, 10 more == 20 straight, bit for bit ---------------------------
resumes_bitwise "$work/rr_resumed" "$rr"
common_prop=("${common[@]}" --sampling proportional)
expect_ok "$gradcache" train "${common_prop[@]}" --gc --gc-chunk-size 4,8 --out "$work/prop20"
common_saved=("${common[@]}")
common=("${common_prop[@]}")
resumes_bitwise "$work/prop_resumed" "$work/prop20"
common=("${common_saved[@]}")
# another list, another order of it, or another sampling: refused, naming the setting
expect_error "was written with --data" \
    "$gradcache" train "${common[@]}" --data "$a,$c,$b" --gc --gc-chunk-size 4,8 --out "$work/rr_resumed" --resume
expect_error "was written with --data" \
    "$gradcache" train "${common[@]}" --data "$a,$b" --gc --gc-chunk-size 4,8 --out "$work/rr_resumed" --resume
expect_error "was written with --data" \
    "$gradcache" train "${common[@]}" --data "$a" --gc --gc-chunk-size 4,8 --out "$work/rr_resumed" --resume
expect_error "was written with --sampling round-robin, this run has --sampling proportional" \
    "$gradcache" train "${common_prop[@]}" --gc --gc-chunk-size 4,8 --out "$work/rr_resumed" --resume

# an edited checkpoint's per-dataset sums (step 5: between logging points, so not all zero)
expect_ok "$gradcache" train "${common[@]}" --stop-after 5 --out "$work/five"
check grep -q '"train.dataset1.loss_steps":"2"' "$work/five/checkpoint.safetensors" \
    "step 5: the checkpoint does not count dataset 1's two steps"
# try_edited WANT EDIT...: --resume from step 5's checkpoint, edited, is refused naming the entry
try_edited() {
    local want=$1
    shift
    rm -rf "$work/edited" && mkdir "$work/edited"
    "$edit" "$work/five/checkpoint.safetensors" "$work/edited/checkpoint.safetensors" "$@" \
        || { echo "setup: edit_safetensors failed" >&2; exit 99; }
    expect_exit 1 "$want" "$gradcache" train "${common[@]}" --out "$work/edited" --resume
}
try_edited "metadata 'train.dataset1.loss_steps' is '6', expected an integer in [0, 5]" set train.dataset1.loss_steps=6
try_edited "train.dataset2.loss_sum" unset train.dataset2.loss_sum
try_edited "metadata 'train.dataset0.loss_sum' is 1, with no step counted" \
    set train.dataset0.loss_steps=0 set train.dataset0.loss_sum=1
try_edited "unexpected metadata 'train.dataset3.loss_sum'" set train.dataset3.loss_sum=0

# --no-duplicates keeps each dataset's batches apart within it; --accumulate 2 takes an update's
# two batches from one dataset (32 of a's 48 examples): both run, and name the datasets in turn
for flag in --no-duplicates "--accumulate 2"; do
    # shellcheck disable=SC2086
    expect_ok "$gradcache" train "${common[@]}" --steps 3 $flag --out "$work/flag"
    check [ "$(sed -E 's/.*"dataset":([0-9]+).*/\1/' "$work/flag/log.jsonl" | tr -d '\n')" = "012" ] \
        "$flag: the datasets of its steps: $(cat "$work/flag/log.jsonl")"
    rm -rf "$work/flag"
done

# --- one dataset: the log as before, no dataset fields --------------------------------------
expect_ok "$gradcache" train "${common[@]}" --data "$a" --steps 2 --out "$work/one"
check [ "$(grep -c '"dataset' "$work/one/log.jsonl")" -eq 0 ] "one dataset: the log names datasets"

# --- bad lists and settings: one line naming the flag or file, nothing trained --------------
expect_exit 2 "dataset 2 is empty" "$gradcache" train "${common[@]}" --data "$a,,$c" --out "$work/bad"
expect_exit 2 "dataset 3 is empty" "$gradcache" train "${common[@]}" --data "$a,$c," --out "$work/bad"
expect_exit 2 "dataset 1 is empty" "$gradcache" train "${common[@]}" --data ",$a" --out "$work/bad"
expect_exit 2 "more than 64 datasets" \
    "$gradcache" train "${common[@]}" --data "$(printf "$a,%.0s" $(seq 64))$a" --out "$work/bad"
expect_exit 1 "$work/missing.tsv" "$gradcache" train "${common[@]}" --data "$a,$work/missing.tsv" --out "$work/bad"
printf 'query without a positive\n' >"$work/malformed.tsv"
expect_exit 1 "$work/malformed.tsv" "$gradcache" train "${common[@]}" --data "$a,$work/malformed.tsv" --out "$work/bad"
expect_exit 2 "--hard-negatives 1: $b/train.tsv has 0 negative columns" \
    "$gradcache" train "${common[@]}" --hard-negatives 1 --out "$work/bad"
expect_exit 2 "--batch-size 60: $a has only 48 examples" "$gradcache" train "${common[@]}" --batch-size 60 --out "$work/bad"
expect_exit 2 "--sampling proportional needs several datasets" \
    "$gradcache" train "${common[@]}" --data "$a" --sampling proportional --out "$work/bad"
expect_exit 2 "--sampling: expected one of" "$gradcache" train "${common[@]}" --sampling sometimes --out "$work/bad"
cut -f2 "$a" | sed 's/.*/1\t0/' >"$work/scores.tsv"
expect_exit 2 "--teacher-scores with 3 datasets" \
    "$gradcache" train "${common[@]}" --data "$a,$c,$a" --hard-negatives 1 --teacher-scores "$work/scores.tsv" --out "$work/bad"
check [ ! -e "$work/bad" ] "a refused run left $work/bad behind"

cli_summary
