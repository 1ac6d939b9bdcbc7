#!/usr/bin/env bash
# The CPU comparisons README quotes, in one run, each engine pinned to the same cores
# (bench/cpu_conditions.py):
#   - the training step against PyTorch (bench/compare_torch.py): the plain step and the
#     Gradient Cache step (chunks of 32), presets tiny and small, batches 128 and 512, on WordNet
#     pairs, 1 and 2 threads;
#   - encoding with all-MiniLM-L6-v2 at max length 128 against PyTorch and ONNX Runtime with and
#     without its BERT optimizer (bench/compare_encode.py): one-text latency and throughput at
#     batch 32 and 128, on the WordNet definitions, 1 and 2 threads.
# Each prints its conditions, medians, spreads and load per round, into OUT/torch.txt and
# OUT/encode.txt, and the whole result into OUT/torch.json and OUT/encode.json; OUT/tables.md
# has them as markdown tables (bench/cpu_table.py), for bench/RESULTS.md and README.
#
#   bench/compare_cpu.sh [--python PY] [--build DIR] [--model DIR] [--data DIR] [--out DIR]
#                        [--rounds N] [--quick] [--dry-run]
#
# --quick: a short form that proves the scripts run end to end (tiny preset at batch 32, 16
# texts, 2 rounds), not figures. --dry-run: the plans and the pinning checks, no model run (no
# PyTorch needed). Setup: the Python (default python3) needs torch, transformers, onnx and
# onnxruntime (see bench/compare_encode.py's docstring); the build, models/minilm
# (bench/make_minilm_folder.py) and data/wordnet (`build/cli/gradcache data wordnet --out
# data/wordnet`). The full run should take 20 to 30 minutes on a quiet two-core machine (an
# estimate from the steps' CPU time; most of it the small preset at batch 512 and the encode
# throughput rounds), far longer on a loaded one. --quick took 2 minutes on a loaded one.
set -euo pipefail

bench=$(cd "$(dirname "$0")" && pwd)
python=python3 build=build model=models/minilm data=data/wordnet out=cpu-compare rounds=3 quick=0 dry=()
while (($#)); do
    case $1 in
        --python) python=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --dry-run) dry=(--dry-run); shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare_cpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if ((quick)); then
    torch_set=(--presets tiny --batches 32 --chunk 16 --reps 1 --warmup 1 --rounds 2)
    encode_set=(--batches 8 --latency-texts 16 --throughput-texts 16 --rounds 2)
else
    torch_set=(--presets tiny,small --batches 128,512 --chunk 32 --reps 2 --warmup 1 --rounds "$rounds")
    encode_set=(--batches 32,128 --latency-texts 100 --throughput-texts 512 --rounds "$rounds")
fi
mkdir -p "$out"

run() { # name, then the script's command line: its output into OUT/name.txt as well
    local name=$1
    shift
    echo "== $*"
    "$@" | tee "$out/$name.txt"
}

json() { # the --json argument of a real run
    ((${#dry[@]})) || echo --json "$out/$1.json"
}

run torch "$python" "$bench/compare_torch.py" --build "$build" --data "$data" --threads 1,2 --max-length 32 \
    "${torch_set[@]}" $(json torch) "${dry[@]}"
run encode "$python" "$bench/compare_encode.py" --build "$build" --model "$model" --data "$data" --threads 1,2 \
    --max-length 128 "${encode_set[@]}" $(json encode) "${dry[@]}"
if ((${#dry[@]} == 0)); then
    "$python" "$bench/cpu_table.py" "$out/torch.json" "$out/encode.json" >"$out/tables.md"
fi
echo "compare_cpu.sh: results in $out/"
