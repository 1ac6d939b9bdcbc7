#!/usr/bin/env bash
# gradcache train --loss ring|gather|auto under gradcache launch: two processes train the same
# run with the loss around the ring and with the gathered loss, and every step's loss and
# gradient norm agree, with --guide (the GIST loss), --teacher-scores (distillation), and --positives
# with --matryoshka too; the log and the summary say which ran;
# auto gathers a batch this small; a plain step or the full loss with the ring is refused. A
# tiny model, seconds on two cores.
# usage: test_cli_train_ring.sh GRADCACHE
set -uo pipefail
gradcache=${1:?usage: test_cli_train_ring.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# shellcheck source=tests/train_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
export GC_DIST_TIMEOUT=20

pairs=$work/pairs.tsv
write_word_pairs "$pairs"
# 17 examples: 9 rows on process 0 and 8 on process 1; a hard negative each
common=(--data "$pairs" --model-size tiny --max-length 24 --batch-size 17 --gc --gc-chunk-size 4 --steps 6
        --hard-negatives 1)
# run LOSS RAN SUMMARY: two processes with --loss LOSS; every step of the log says RAN, and
# process 0's summary SUMMARY
run() {
    expect_ok timeout 120 "$gradcache" launch -n 2 -- "$gradcache" train "${common[@]}" --loss "$1" --out "$work/$1"
    local said
    said=$(grep -o '"global_loss":"[a-z]*"' "$work/$1/log.jsonl" | uniq -c | tr -s ' ')
    check [ "$said" = " 6 \"global_loss\":\"$2\"" ] "--loss $1: not every one of 6 steps says $2: $said"
    check grep -q "^\[0\] trained steps 1-6 of 6 .* ($3); wrote" "$work/stdout" \
        "--loss $1: the summary does not say '$3': $(cat "$work/stdout")"
}
run ring ring "the loss around the ring"
run gather gather "the loss over the gathered batch"
run auto gather "the loss over the gathered batch" # 2 x 51 rows of 256 bytes: 26 KB, not a quarter of the limit

# The same loss and gradient norm at every step, to a relative 1e-5. Both sum the same f32
# terms in other orders (the ring's online log-sum-exp over the blocks in flight, its value in
# f64; the gather's tiles over the whole batch), a few f32 roundings (6e-8 each) apart; the
# runs' parameters then differ by as much after each update, which 6 steps of AdamW carry
# without amplifying (measured: 3e-7 at the worst). A loss that missed a block of negatives or
# a gradient not scaled like the gather's moves step 1's value or step 2's by far more.
# same_steps RING GATHER LABEL: the two runs' logs agree on loss and grad_norm at steps 1-6
same_steps() {
    local step key a b
    for step in 1 2 3 4 5 6; do
        for key in loss grad_norm; do
            a=$(field "$1/log.jsonl" $step $key) b=$(field "$2/log.jsonl" $step $key)
            check awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d * d <= 1e-10 * b * b) }' \
                "${3}step $step: the ring's $key $a, the gather's $b"
        done
    done
}
same_steps "$work/ring" "$work/gather" ""

# one process has nothing to gather or pass around
expect_ok timeout 120 "$gradcache" train "${common[@]}" --steps 1 --loss ring --out "$work/alone"
check grep -q '"global_loss":"local"' "$work/alone/log.jsonl" "one process: $(cat "$work/alone/log.jsonl")"
checks=$((checks + 1))
grep -q 'the loss around\|the loss over' "$work/stdout" &&
    fail "one process: the summary names an exchange: $(cat "$work/stdout")"

# every_way NAME FLAGS...: two processes with FLAGS and --loss ring, gather and auto into
# $work/NAME_LOSS, every step of each log saying ring, gather and gather (auto gathers where the
# rows beside the batch are given before the cache would choose), and the ring's steps the gather's
every_way() {
    local name=$1 loss said
    shift
    for loss in ring gather auto; do
        local ran=$loss
        [ "$loss" = auto ] && ran=gather
        expect_ok timeout 120 "$gradcache" launch -n 2 -- "$gradcache" train "${common[@]}" "$@" --loss "$loss" \
            --out "$work/${name}_$loss"
        said=$(grep -o '"global_loss":"[a-z]*"' "$work/${name}_$loss/log.jsonl" | uniq -c | tr -s ' ')
        check [ "$said" = " 6 \"global_loss\":\"$ran\"" ] "$name, --loss $loss: not every one of 6 steps says $ran: $said"
    done
    same_steps "$work/${name}_ring" "$work/${name}_gather" "$name, "
}

# --guide (that one-step run guiding): the GIST loss around the ring, each process with its own
# guide rows travelling beside its passages, takes the steps the gathered GIST loss takes -- the
# same tolerance and reasons as above (the masks are the same: the guide's f32 scores of each
# pair are computed alike, and none of these falls within a rounding of its threshold); auto
# gathers with a guide (its rows are given before the cache would choose)
every_way guided --guide "$work/alone" --guide-margin 0.05
# the guide masks something: the unguided run's first loss (the same initial model) is higher
a=$(field "$work/guided_ring/log.jsonl" 1 loss) b=$(field "$work/ring/log.jsonl" 1 loss)
check awk -v a="$a" -v b="$b" 'BEGIN { exit !(a < b) }' "--guide: step 1's loss $a, without a guide $b"

# --teacher-scores (MarginMSE plus the contrastive loss): each process's own teacher rows with the
# ring, the global batch's gathered; the same steps both ways (the same tolerance: the distillation
# term is each query's own, summed per process then over the processes), and auto gathers
awk '{ printf "%g\t%g\n", 3 + (NR % 4) * 0.25, 1 - (NR % 3) * 0.5 }' "$pairs" >"$work/teacher.tsv"
every_way distilled --teacher-scores "$work/teacher.tsv" --distill-weight 0.5
# the distillation term adds to the contrastive loss: step 1's loss (the same initial model) is higher
a=$(field "$work/distilled_ring/log.jsonl" 1 loss) b=$(field "$work/ring/log.jsonl" 1 loss)
check awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > b) }' "--teacher-scores: step 1's loss $a, without $b"

# --positives 2 (the loss the mean of one ring pass per positive) with --matryoshka (the passes run
# at every prefix): the same steps both ways, the same tolerance and reasons
every_way nested --hard-negatives 0 --positives 2 --matryoshka 64,16
# both change the loss: step 1's loss (the same initial model) differs from the plain ring's
a=$(field "$work/nested_ring/log.jsonl" 1 loss) b=$(field "$work/ring/log.jsonl" 1 loss)
check awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d * d > 1e-4) }' "--positives 2 --matryoshka: step 1's loss $a, the plain ring's $b"

expect_error "--loss ring needs --gc" "$gradcache" train --data "$pairs" --model-size tiny --loss ring
expect_ok "$gradcache" train --help
check grep -q 'ring (each its own; the passages travel)' "$work/stdout" "--help does not describe --loss ring"
cli_summary
