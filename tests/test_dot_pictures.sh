#!/usr/bin/env bash
# The graphs the library writes as DOT, drawn by Graphviz: examples/02_autograd's MLP, and
# `gradcache verify --dot`'s plain and cached steps side by side (each tower's whole batch
# beside its first chunk, which saves a quarter of the bytes at 4 chunks). `dot -Tsvg` must
# accept each file. Skipped (77) without Graphviz's `dot` (CI installs it).
# $1: examples/02_autograd, $2: the gradcache program.
set -uo pipefail
example=${1:?usage: test_dot_pictures.sh path/to/02_autograd path/to/gradcache}
gradcache=${2:?usage: test_dot_pictures.sh path/to/02_autograd path/to/gradcache}
command -v dot >/dev/null || { echo "skip: no Graphviz dot"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "$*"; exit 1; }

"$example" "$work/mlp.dot" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
dot -Tsvg "$work/mlp.dot" -o "$work/mlp.svg" 2>"$work/dot.err" || fail "$(cat "$work/dot.err")"
for word in matmul gelu_erf mean_all leaf; do
    grep -q "$word" "$work/mlp.svg" || fail "the MLP's picture has no $word"
done

"$gradcache" verify --batch-size 32 --chunk-size 8 --dot "$work/steps.dot" >"$work/out" 2>&1 || fail "$(cat "$work/out")"
dot -Tsvg "$work/steps.dot" -o "$work/steps.svg" 2>"$work/dot.err" || fail "$(cat "$work/dot.err")"
for label in "plain step: the query tower, the whole batch" "plain step: the passage tower, the whole batch" \
    "cached step: the query tower, its first chunk" "cached step: the passage tower, its first chunk"; do
    grep -qF "$label" "$work/steps.svg" || fail "verify's picture has no cluster '$label'"
done
# the bytes saved for backward: a chunk's graph holds a quarter of the whole batch's
saved() { sed -n "/subgraph cluster_$1 /,/^  }/p" "$work/steps.dot" |
    grep -oE 'saved for backward: [0-9]+ tensors?, [0-9]+ bytes' | awk '{ s += $(NF - 1) } END { print s }'; }
plain=$(saved plain1) cached=$(saved cached1)
[ "$plain" -gt 0 ] && [ $((4 * cached)) -le $((plain + plain / 10)) ] ||
    fail "a chunk's graph saves $cached bytes, the whole batch's $plain"
echo "dot drew both pictures; the whole batch's graph saves $plain bytes, a chunk's $cached"
