#!/bin/bash
# bench/torch_gradcache.py, the PyTorch side of the GPU comparison, on the CPU at tiny sizes
# ($1: the gradcache program, $2: the script): its Gradient Cache gives the plain step's
# gradients (f64), its benchmark writes the engine's CSV columns, and --compare lines a run of
# `gradcache bench memory` up with it. Skipped (77) where no python3 has PyTorch (Debian's
# python3-torch installs it for /usr/bin/python3).
set -u
gradcache=$1
script=$2
. "$(dirname "$0")/find_python.sh"
find_python torch
if [ -z "$python" ]; then
    echo "skip: no python3 with PyTorch (apt-get install python3-torch)"
    exit 77
fi
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
dir=$work

"$python" "$script" --check >"$dir/check" 2>&1 || fail "--check: $(cat "$dir/check")"
[ "$(grep -c ' ok$' "$dir/check")" -eq 3 ] || fail "--check: want 3 passing cases: $(cat "$dir/check")"

model=(--dim 16 --layers 1 --heads 2 --hidden 32 --max-length 8)
"$python" "$script" --batches 8 --chunks 4 --reps 1 --warmup 0 --csv "$dir/torch.csv" "${model[@]}" \
    >"$dir/bench" 2>&1 || fail "benchmark: $(cat "$dir/bench")"
[ "$(head -1 "$dir/torch.csv")" = "mode,batch,chunk,peak_bytes,step_ms,fits" ] || fail "CSV header: $(head -1 "$dir/torch.csv")"
grep -q '^plain,8,8,[0-9]*,[0-9.]*,1$' "$dir/torch.csv" || fail "no plain row: $(cat "$dir/torch.csv")"
grep -q '^gc,8,4,[0-9]*,[0-9.]*,1$' "$dir/torch.csv" || fail "no GradCache row: $(cat "$dir/torch.csv")"

"$gradcache" bench memory --batches 8 --chunks 4 --reps 1 --csv "$dir/engine.csv" "${model[@]}" >"$dir/engine" 2>&1 ||
    fail "gradcache bench memory: $(cat "$dir/engine")"
"$python" "$script" --compare "$dir/engine.csv" "$dir/torch.csv" >"$dir/table" 2>&1 || fail "--compare: $(cat "$dir/table")"
grep -q '^| plain | 8 | 8 | [0-9.]* | [0-9.]* | [0-9.]* |' "$dir/table" || fail "--compare, plain: $(cat "$dir/table")"
grep -q '^| gc | 8 | 4 | [0-9.]* | [0-9.]* | [0-9.]* |' "$dir/table" || fail "--compare, GradCache: $(cat "$dir/table")"

[ "$failures" -eq 0 ] && echo "torch_gradcache: all checks passed"
exit $((failures > 0))
