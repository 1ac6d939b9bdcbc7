#!/bin/bash
# bench/torch_gradcache.py, the PyTorch side of the GPU comparison (bench/gpu_check.sh's
# compare and minilm parts), on the CPU at tiny sizes ($1: the gradcache program, $2: the
# bench folder, $3: the tiny BERT folder): its Gradient Cache and chunked loss give the plain
# step's gradients (f64); every variant the GPU runs (attention, precision, loss,
# sentence-transformers' cached loss) writes its CSV rows, and bench/compare_table.py lines
# them up with `gradcache bench memory`'s; the MiniLM-shaped folder is one both sides load.
# Skipped (77) where no python3 has PyTorch (Debian's python3-torch installs it for
# /usr/bin/python3); a variant whose module is missing (SDPA before PyTorch 2,
# sentence-transformers, transformers) is skipped alone, and said so. GC_TEST_PYTHON: a
# python with them all (a venv's).
set -u
gradcache=$1
bench=$2
tiny_bert=$3
. "$(dirname "$0")/find_python.sh"
find_python torch
if [ -z "$python" ]; then
    echo "skip: no python3 with PyTorch (apt-get install python3-torch)"
    exit 77
fi
torch_python=$python
find_python torch sentence_transformers
st_python=$python
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
dir=$work
script=$bench/torch_gradcache.py

"$torch_python" "$script" --check >"$dir/check" 2>&1 || fail "--check: $(cat "$dir/check")"
[ "$(grep -c ' ok$' "$dir/check")" -eq 5 ] || fail "--check: want 5 passing cases: $(cat "$dir/check")"

# run_variant NAME PYTHON FLAGS...: one variant at batch 8, chunk 4; its CSV in $dir/NAME.csv.
# 0 when it ran, 77 when it skipped (said on stdout), 1 after a failure.
model=(--dim 16 --layers 1 --heads 2 --hidden 32 --max-length 8)
runs=(--batches 8 --chunks 4 --reps 1 --warmup 0)
run_variant() {
    local name=$1 python=$2 status=0
    shift 2
    if [ -z "$python" ]; then
        echo "skip: $name (no python3 with its modules)"
        return 77
    fi
    "$python" "$script" "${runs[@]}" --csv "$dir/$name.csv" "$@" >"$dir/$name" 2>&1 || status=$?
    if [ "$status" -eq 77 ]; then
        echo "skip: $name: $(tail -1 "$dir/$name")"
    elif [ "$status" -ne 0 ]; then
        fail "$name: $(cat "$dir/$name")"
        return 1
    elif [ "$(head -1 "$dir/$name.csv")" != "mode,batch,chunk,loss,peak_bytes,step_ms,fits" ]; then
        fail "$name: CSV header $(head -1 "$dir/$name.csv")"
        return 1
    fi
    return "$status"
}
# has_row NAME MODE CHUNK LOSS: the variant's CSV has a measured row of them (the CPU has no peak)
has_row() {
    grep -q "^$2,8,$3,$4,,[0-9.]*,1\$" "$dir/$1.csv" || fail "$1: no $2 row with the $4 loss: $(cat "$dir/$1.csv")"
}

if run_variant eager_f32 "$torch_python" --attention manual "${model[@]}"; then
    has_row eager_f32 plain 8 full
    has_row eager_f32 gc 4 full
fi
if run_variant sdpa_f32 "$torch_python" --attention sdpa --loss both "${model[@]}"; then
    for loss in full chunked; do
        has_row sdpa_f32 plain 8 $loss
        has_row sdpa_f32 gc 4 $loss
    done
fi
if run_variant sdpa_bf16 "$torch_python" --attention sdpa --precision bf16 "${model[@]}"; then
    has_row sdpa_bf16 plain 8 full
    has_row sdpa_bf16 gc 4 full
    grep -q 'bf16 autocast (f32 parameters)' "$dir/sdpa_bf16" || fail "sdpa_bf16: not under autocast: $(cat "$dir/sdpa_bf16")"
fi
if run_variant st_cached "$st_python" --sentence-transformers "$tiny_bert" --max-length 8; then
    has_row st_cached plain 8 full
    has_row st_cached gc 4 full
    grep -q "CachedMultipleNegativesRankingLoss on $tiny_bert" "$dir/st_cached" ||
        fail "st_cached: not sentence-transformers' loss: $(cat "$dir/st_cached")"
fi
"$torch_python" "$script" --sentence-transformers "$tiny_bert" --loss chunked >"$dir/st_loss" 2>&1 &&
    fail "--sentence-transformers with --loss chunked was accepted"

# the engine's CSV and PyTorch's in one table (the workspace column read; ratios to the engine)
"$gradcache" bench memory --batches 8 --chunks 4 --reps 1 --csv "$dir/engine.csv" "${model[@]}" >"$dir/engine" 2>&1 ||
    fail "gradcache bench memory: $(cat "$dir/engine")"
python3 "$bench/compare_table.py" --batches 8 "engine f32=$dir/engine.csv" "PyTorch eager f32=$dir/eager_f32.csv" \
    "PyTorch bf16=$dir/no_such.csv" >"$dir/table" 2>&1 || fail "compare_table: $(cat "$dir/table")"
grep -q '^| engine f32 | full | [0-9.]* | [0-9]* | 1.00 | 1.00 |$' "$dir/table" || fail "table, engine: $(cat "$dir/table")"
grep -q '^| PyTorch eager f32 | full | [0-9.]* | - | [0-9.]* | - |$' "$dir/table" || fail "table, PyTorch: $(cat "$dir/table")"
grep -q '^| engine f32 | tiled | 4 | [0-9.]* | [0-9.]* | [0-9]* | 1.00 | 1.00 |$' "$dir/table" ||
    fail "table, engine GradCache: $(cat "$dir/table")"
grep -q '^| PyTorch bf16 | - | no result |' "$dir/table" || fail "table, a missing file: $(cat "$dir/table")"

# The MiniLM-shaped folder: transformers writes it, the engine loads it (GradCache at batch 4)
# and so does sentence-transformers (its cached loss at mini-batch 2).
if [ -z "$st_python" ]; then
    echo "skip: the MiniLM folder (no python3 with transformers and sentence-transformers)"
elif ! "$st_python" "$bench/make_minilm_folder.py" "$dir/minilm" >"$dir/folder" 2>&1; then
    fail "make_minilm_folder.py: $(cat "$dir/folder")"
else
    "$gradcache" bench memory --init "$dir/minilm" --max-length 8 --batches 4 --chunks 2 --precision bf16 \
        --csv "$dir/minilm_engine.csv" >"$dir/minilm_engine" 2>&1 || fail "engine on the MiniLM folder: $(cat "$dir/minilm_engine")"
    grep -q '^gc,4,2,tiled,' "$dir/minilm_engine.csv" || fail "engine on the MiniLM folder: $(cat "$dir/minilm_engine.csv")"
    runs=(--batches 4 --chunks 2 --reps 1 --warmup 0)
    if run_variant minilm_st "$st_python" --sentence-transformers "$dir/minilm" --max-length 8 --precision bf16; then
        grep -q '^gc,4,2,full,,[0-9.]*,1$' "$dir/minilm_st.csv" || fail "minilm_st: $(cat "$dir/minilm_st.csv")"
    fi
fi

[ "$failures" -eq 0 ] && echo "torch_gradcache: all checks passed"
exit $((failures > 0))
