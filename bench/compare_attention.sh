#!/usr/bin/env bash
# bench/compare_attention.sh: fused attention against the composed ops on the CPU, side by
# side: `gradcache bench speed` (plain step and GradCache) with --attention composed, then
# fused, alternated ROUNDS times per model so that a noisy machine's drift falls on both.
#
#   bash bench/compare_attention.sh [BUILD] [ROUNDS]     (defaults: build, 3)
#
# Models: tiny (dim 64, 4 heads, 2 layers, MLP 128) and small (128, 4, 4, 512), 32 tokens,
# batch 128, chunks of 32, one thread (GC_NUM_THREADS=1, as bench/RESULTS.md's CPU figures).
# Prints each run's table lines; compare the medians of the step times.
set -eu
build=${1:-build}
rounds=${2:-3}
models=("tiny --dim 64 --heads 4 --layers 2 --hidden 128" "small --dim 128 --heads 4 --layers 4 --hidden 512")
for model in "${models[@]}"; do
    name=${model%% *}
    for round in $(seq "$rounds"); do
        for attention in composed fused; do
            # shellcheck disable=SC2086 # the model's flags are words
            GC_NUM_THREADS=1 "$build/cli/gradcache" bench speed ${model#* } --max-length 32 --batch-size 128 \
                --chunks 32 --reps 5 --attention "$attention" |
                awk -v tag="$name round $round $attention" '$1 == "f32" { print tag ": " $0 }'
        done
    done
done
