#!/usr/bin/env bash
# bench/batch_size_experiment.sh: the experiment Gradient Cache exists for (docs/EXPERIMENTS.md).
# One pretrained model fine-tuned on BEIR-format sets at several batch sizes, the same number of
# epochs each, the learning rate scaled with the batch, several seeds; every run evaluated on
# the set's test qrels. Prints (and writes to OUT/summary.md) nDCG@10 with its spread across
# seeds, Recall@100, each run's peak memory and its time.
#
#   bash bench/batch_size_experiment.sh --set wordnet=data/wordnet-beir \
#       --set manpages=data/manpages-beir [flags]
#
# Flags (defaults in brackets):
#   --set NAME=DIR     a BEIR folder (corpus.jsonl, queries.jsonl, qrels/train.tsv, test.tsv);
#                      repeat for several sets (required)
#   --model DIR        the pretrained model folder every run starts from [models/minilm]
#   --build DIR        the build folder holding cli/gradcache [build]
#   --out DIR          where runs, results.jsonl and summary.md go [runs/batch-size]
#   --batches LIST     batch sizes [32,256,2048,8192]; one larger than a set's training
#                      judgements is skipped for that set, and the summary says so
#   --seeds LIST       seeds [1,2,3]
#   --epochs N         epochs, the same for every batch size [1]
#   --train-every K    train on every K-th judgement of qrels/train.tsv only (a subset spread
#                      evenly over the file, the same for every run) [1: all]
#   --base-lr X        the learning rate at --base-batch; a batch B trains at
#   --base-batch B0    X * sqrt(B / B0): the square-root rule for Adam-type optimizers
#                      (Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive
#                      Gradient Algorithms"; Hoffer et al. 2017) [2e-5 at 32]
#   --gc-above N       batches above N train with Gradient Cache, the others plainly [256]
#   --chunk N          Gradient Cache's chunk rows [32]
#   --mem-limit L      the one memory limit of every run [4G]
#   --max-length N     tokens per text [64]
#   --eval-limit Q     evaluate on the first Q judged test queries (0: all) [0]
#   --corpus-limit N   search the first N documents and the judged ones (0: all) [0]
#   --device D         cpu or cuda [cpu]
#   --dry-run          print the plan (each run's flags and steps, the total examples) and stop
#
# Every run is a folder OUT/SET/bBATCH-sSEED, and a line in OUT/results.jsonl once evaluated; a
# rerun skips the runs that have their line, so an interrupted experiment continues where it
# stopped (delete a line to redo that run). Each set's model before fine-tuning is evaluated
# once too (batch 0 in the results, "zero-shot" in the summary). Time is the training's wall
# time and its CPU time (user + system, from /usr/bin/time when present): on a shared machine
# the CPU time is the steadier figure.
#
# The flags other than --set, --dry-run and --out are recorded in OUT/plan.txt at the first run;
# a rerun with different ones is refused (the results would mix two experiments).
set -euo pipefail

model=models/minilm build=build out=runs/batch-size
batches=32,256,2048,8192 seeds=1,2,3 epochs=1 train_every=1
base_lr=2e-5 base_batch=32 gc_above=256 chunk=32 mem_limit=4G max_length=64
eval_limit=0 corpus_limit=0 device=cpu dry_run=0
sets=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "batch_size_experiment: $*" >&2; exit 2; }

while (($#)); do
    case $1 in
        --help|-h) usage; exit 0 ;;
        --dry-run) dry_run=1; shift; continue ;;
    esac
    (($# >= 2)) || die "$1 needs a value"
    case $1 in
        --set) [[ $2 == ?*=?* ]] || die "--set wants NAME=DIR, not '$2'"; sets+=("$2") ;;
        --model) model=$2 ;; --build) build=$2 ;; --out) out=$2 ;;
        --batches) batches=$2 ;; --seeds) seeds=$2 ;; --epochs) epochs=$2 ;;
        --train-every) train_every=$2 ;; --base-lr) base_lr=$2 ;; --base-batch) base_batch=$2 ;;
        --gc-above) gc_above=$2 ;; --chunk) chunk=$2 ;; --mem-limit) mem_limit=$2 ;;
        --max-length) max_length=$2 ;; --eval-limit) eval_limit=$2 ;;
        --corpus-limit) corpus_limit=$2 ;; --device) device=$2 ;;
        *) die "unknown flag $1 (--help lists them)" ;;
    esac
    shift 2
done
((${#sets[@]})) || die "give at least one --set NAME=DIR"
for value in "$epochs" "$train_every" "$base_batch" "$gc_above" "$chunk" "$max_length" \
             "$eval_limit" "$corpus_limit" ${batches//,/ } ${seeds//,/ }; do
    [[ $value =~ ^[0-9]+$ ]] || die "'$value' is not a whole number"
done
((epochs > 0 && train_every > 0 && base_batch > 0)) || die "--epochs, --train-every, --base-batch must be positive"
gradcache=$build/cli/gradcache
[[ -x $gradcache ]] || die "$gradcache is not built (ninja -C $build)"
[[ -f $model/config.json ]] || die "$model is not a model folder (gradcache model fetch minilm)"
for entry in "${sets[@]}"; do
    dir=${entry#*=}
    [[ -f $dir/qrels/train.tsv && -f $dir/qrels/test.tsv ]] || die "$dir: no qrels/train.tsv and test.tsv"
done

# the learning rate of batch $1: base * sqrt(batch / base batch), printed as %.3g
scaled_lr() { awk -v b="$1" -v b0="$base_batch" -v lr="$base_lr" 'BEGIN { printf "%.3g", lr * sqrt(b / b0) }'; }

# a field of a flat JSON object: json_field TEXT KEY
json_field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }

# The training judgements of set folder $1 kept by --train-every, as a BEIR folder of their own
# under OUT (corpus and queries linked): every K-th line of qrels/train.tsv after its header.
train_folder() {
    local name=$1 dir=$2
    if ((train_every == 1)); then echo "$dir"; return; fi
    local sub=$out/data/$name-every$train_every
    if [[ ! -f $sub/qrels/train.tsv ]]; then
        mkdir -p "$sub/qrels"
        ln -sf "$(realpath "$dir/corpus.jsonl")" "$sub/corpus.jsonl"
        ln -sf "$(realpath "$dir/queries.jsonl")" "$sub/queries.jsonl"
        awk -v k="$train_every" 'NR == 1 || (NR - 2) % k == 0' "$dir/qrels/train.tsv" >"$sub/qrels/train.tsv.tmp"
        mv "$sub/qrels/train.tsv.tmp" "$sub/qrels/train.tsv"
    fi
    echo "$sub"
}

# eval_json MODEL_ARGS... : the test split's measures as one JSON line
eval_json() {
    "$gradcache" eval "$@" --split test --limit "$eval_limit" --corpus-limit "$corpus_limit" \
        --max-length "$max_length" --json 2>>"$out/eval.log"
}

plan="model=$(realpath "$model") batches=$batches seeds=$seeds epochs=$epochs train_every=$train_every"
plan+=" lr=$base_lr@$base_batch gc_above=$gc_above chunk=$chunk mem_limit=$mem_limit"
plan+=" max_length=$max_length eval_limit=$eval_limit corpus_limit=$corpus_limit device=$device"
if ((!dry_run)); then
    mkdir -p "$out"
    if [[ -f $out/plan.txt ]]; then
        [[ $(cat "$out/plan.txt") == "$plan" ]] ||
            die "$out holds another experiment ($(cat "$out/plan.txt")); use another --out"
    else
        echo "$plan" >"$out/plan.txt"
    fi
fi
results=$out/results.jsonl
((dry_run)) || touch "$results"
has_result() { [[ -f $results ]] && grep -q "^{\"set\":\"$1\",\"batch\":$2,\"seed\":$3," "$results"; }

timer=()
[[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f '%e %U %S' -o)

total_examples=0
for entry in "${sets[@]}"; do
    name=${entry%%=*} dir=${entry#*=}
    data=$(train_folder "$name" "$dir")
    judgements=$(($(wc -l <"$data/qrels/train.tsv") - 1))
    echo "== $name: $judgements training judgements (of $dir, every $train_every), test qrels of $dir"

    if ((!dry_run)) && ! has_result "$name" 0 0; then
        measures=$(eval_json --model "$model" --beir "$dir")
        echo "{\"set\":\"$name\",\"batch\":0,\"seed\":0,\"lr\":0,\"gc\":false,\"steps\":0,\"measures\":$measures,\"peak_bytes\":0,\"packed_bytes\":0,\"wall_s\":0,\"cpu_s\":0}" >>"$results"
        echo "$name zero-shot: nDCG@10 $(json_field "$measures" ndcg_at_10)"
    fi

    for batch in ${batches//,/ }; do
        if ((batch > judgements)); then
            echo "$name batch $batch: skipped, more than the $judgements training judgements"
            continue
        fi
        lr=$(scaled_lr "$batch")
        flags=(--init "$model" --data "$data" --batch-size "$batch" --epochs "$epochs" --lr "$lr"
               --max-length "$max_length" --mem-limit "$mem_limit" --device "$device"
               --save-every 0 --checkpoint-minutes 0)
        gc=false
        if ((batch > gc_above)); then gc=true; flags+=(--gc --gc-chunk-size "$chunk"); fi
        steps=$((judgements / batch * epochs))
        for seed in ${seeds//,/ }; do
            total_examples=$((total_examples + steps * batch))
            run=$out/$name/b$batch-s$seed
            if ((dry_run)); then
                echo "$name batch $batch seed $seed: $steps steps, lr $lr, gc $gc: train ${flags[*]} --seed $seed --out $run"
                continue
            fi
            has_result "$name" "$batch" "$seed" && { echo "$name batch $batch seed $seed: done before"; continue; }
            rm -rf "$run"
            mkdir -p "$(dirname "$run")"
            start=$(date +%s.%N)
            "${timer[@]}" ${timer:+"$out/time.txt"} "$gradcache" train "${flags[@]}" --seed "$seed" \
                --out "$run" >"$out/train.log" 2>&1 || { tail -5 "$out/train.log" >&2; die "$name batch $batch seed $seed: train failed (log: $out/train.log)"; }
            wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
            cpu=0
            [[ ${#timer[@]} -gt 0 ]] && cpu=$(awk 'END { printf "%.1f", $2 + $3 }' "$out/time.txt")
            peak=$(sed -n 's/.*"peak_bytes":\([0-9]*\).*/\1/p' "$run/log.jsonl" | sort -n | tail -1)
            packed=$(sed -n 's/.*"packed_bytes":\([0-9]*\).*/\1/p' "$run/log.jsonl" | sort -n | tail -1)
            measures=$(eval_json --model "$run" --beir "$dir")
            echo "{\"set\":\"$name\",\"batch\":$batch,\"seed\":$seed,\"lr\":$lr,\"gc\":$gc,\"steps\":$steps,\"measures\":$measures,\"peak_bytes\":${peak:-0},\"packed_bytes\":${packed:-0},\"wall_s\":$wall,\"cpu_s\":$cpu}" >>"$results"
            echo "$name batch $batch seed $seed: nDCG@10 $(json_field "$measures" ndcg_at_10), peak $((${peak:-0} >> 20)) MiB, ${wall} s"
        done
    done
done
if ((dry_run)); then
    echo "plan: $total_examples training examples in all ($plan)"
    exit 0
fi

# The summary: a row per set and batch, means over the seeds with the sample standard deviation
# and the range of nDCG@10.
awk '
    function field(key,   v) {
        if (!match($0, "\"" key "\":[^,}]*")) return ""
        v = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
        gsub(/"/, "", v)
        return v
    }
    {
        key = field("set") SUBSEP field("batch")
        if (!(key in n)) order[++rows] = key
        x = field("ndcg_at_10") + 0
        n[key]++; sum[key] += x; sumsq[key] += x * x
        if (n[key] == 1 || x < lo[key]) lo[key] = x
        if (n[key] == 1 || x > hi[key]) hi[key] = x
        r100[key] += field("recall_at_100"); lr[key] = field("lr"); gc[key] = field("gc"); steps[key] = field("steps")
        peak[key] = field("peak_bytes") > peak[key] ? field("peak_bytes") : peak[key]
        wall[key] += field("wall_s"); cpu[key] += field("cpu_s")
    }
    END {
        print "| set | batch | steps | lr | Gradient Cache | seeds | nDCG@10 mean ± sd | nDCG@10 range | Recall@100 | peak memory | train time (wall / CPU) |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= rows; i++) {
            k = order[i]; split(k, part, SUBSEP); m = sum[k] / n[k]
            sd = n[k] > 1 ? sqrt((sumsq[k] - n[k] * m * m) / (n[k] - 1)) : 0
            if (sd != sd || sd < 0) sd = 0
            if (part[2] == 0) {
                printf "| %s | zero-shot | 0 | - | - | - | %.4f | - | %.4f | - | - |\n", part[1], m, r100[k] / n[k]
                continue
            }
            printf "| %s | %d | %d | %s | %s | %d | %.4f ± %.4f | %.4f–%.4f | %.4f | %.0f MiB | %.0f s / %.0f s |\n",
                part[1], part[2], steps[k], lr[k], gc[k] == "true" ? "yes" : "no", n[k], m, sd, lo[k], hi[k],
                r100[k] / n[k], peak[k] / 1048576, wall[k] / n[k], cpu[k] / n[k]
        }
    }' "$results" | tee "$out/summary.md"
