#!/usr/bin/env bash
# examples/02_autograd writes its graph as DOT, and Graphviz draws it: `dot -Tsvg` accepts the
# file and the picture shows the ops and the leaves. Skipped (77) without Graphviz's `dot`
# (CI installs it). $1: the example program.
set -uo pipefail
example=${1:?usage: test_example_dot.sh path/to/02_autograd}
command -v dot >/dev/null || { echo "skip: no Graphviz dot"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$example" "$work/graph.dot" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
dot -Tsvg "$work/graph.dot" -o "$work/graph.svg" 2>"$work/dot.err" || { cat "$work/dot.err"; exit 1; }
for word in matmul gelu_erf mean_all leaf; do
    grep -q "$word" "$work/graph.svg" || { echo "the picture has no $word"; exit 1; }
done
echo "dot drew $(grep -c '<g id="node' "$work/graph.svg") nodes"
