#!/bin/bash
# gradcache verify, bench memory and bench speed, end to end ($1: the gradcache program).
# Small sizes throughout: the whole script takes a few seconds on two cores.
set -u
gradcache=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run ARGS...: runs the program; stdout in $dir/out, stderr in $dir/err, the status in $status.
run() {
    "$gradcache" "$@" >"$dir/out" 2>"$dir/err"
    status=$?
}

# expect_status WANT ARGS...
expect_status() {
    local want=$1
    shift
    run "$@"
    [ "$status" -eq "$want" ] || fail "gradcache $* exited $status, want $want; stderr: $(cat "$dir/err")"
}

# expect_usage_error FLAG ARGS...: exit 2 and one line on stderr naming FLAG.
expect_usage_error() {
    local flag=$1
    shift
    expect_status 2 "$@"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "gradcache $*: want one line on stderr, got: $(cat "$dir/err")"
    grep -q -- "$flag" "$dir/err" || fail "gradcache $*: the error does not name $flag: $(cat "$dir/err")"
}

# --- verify: passes at the defaults, fails under an absurd tolerance ---
expect_status 0 verify
grep -q '^largest relative difference .*: ok$' "$dir/out" || fail "verify: no passing summary line: $(tail -1 "$dir/out")"
grep -q '^  query.layers.1.mlp.out.weight  *\[32, 64\]  *[0-9.e+-]*$' "$dir/out" ||
    fail "verify: no line for query.layers.1.mlp.out.weight with its shape"
# Chunked and full-batch gradients are summed in different orders: never equal to 1e-30.
expect_status 1 verify --tolerance 1e-30
grep -q 'ABOVE THE TOLERANCE' "$dir/out" || fail "verify --tolerance 1e-30: no failing summary line"
expect_status 0 verify --tied --dtype f64 --batch-size 12 --chunk-size 5
grep -q '^  encoder.embeddings.tokens.weight ' "$dir/out" || fail "verify --tied: no encoder.* parameters"

# --- bench memory: table, CSV rows and columns, a well-formed SVG, temporary files gone ---
expect_status 0 bench memory --batches 16,64 --chunks 8,32 --csv "$dir/memory.csv" --svg "$dir/memory.svg"
# A plain row at every batch and at every chunk size; GradCache for every chunk up to the batch.
want_rows="plain,8,8 plain,16,16 gc,16,8 plain,32,32 plain,64,64 gc,64,8 gc,64,32"
got_rows=$(tail -n +2 "$dir/memory.csv" | cut -d, -f1-3 | tr '\n' ' ' | sed 's/ $//')
[ "$got_rows" = "$want_rows" ] || fail "bench memory: CSV rows '$got_rows', want '$want_rows'"
[ "$(head -1 "$dir/memory.csv")" = "mode,batch,chunk,peak_bytes,step_ms,fits" ] ||
    fail "bench memory: CSV header $(head -1 "$dir/memory.csv")"
awk -F, 'NR > 1 && !($4 > 0 && $5 > 0 && $6 == 1) { exit 1 }' "$dir/memory.csv" ||
    fail "bench memory: a row without positive measurements: $(cat "$dir/memory.csv")"
grep -q '^  gc  *64  *8 ' "$dir/out" || fail "bench memory: no table row for gc 64 8: $(cat "$dir/out")"
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$dir/memory.svg" ||
    fail "bench memory: the SVG is not well-formed XML"
grep -q 'GradCache, chunk 32' "$dir/memory.svg" || fail "bench memory: no line for chunk 32 in the chart"

# Under a limit the plain step at 256 pairs exceeds (~38 MiB) and GradCache in chunks of 16
# does not (~2 MiB): a result, not a failure.
expect_status 0 bench memory --batches 16,256 --chunks 16 --mem-limit 16M --csv "$dir/limit.csv" --svg "$dir/limit.svg"
grep -q '^plain,256,256,,,0$' "$dir/limit.csv" || fail "bench memory --mem-limit: plain 256 not reported as not fitting"
grep -q '^gc,256,16,[0-9]*,[0-9.]*,1$' "$dir/limit.csv" || fail "bench memory --mem-limit: gc 256/16 does not fit"
grep -q '^  plain  *256  *256  *does not fit' "$dir/out" || fail "bench memory --mem-limit: no 'does not fit' row"
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$dir/limit.svg" ||
    fail "bench memory --mem-limit: the SVG is not well-formed XML"
grep -q 'does not fit' "$dir/limit.svg" || fail "bench memory --mem-limit: the chart does not mark the run"
[ -z "$(find "$dir" -name '.*.tmp-*')" ] || fail "temporary files left behind: $(find "$dir" -name '.*.tmp-*')"

# --- bench speed: the ratios ---
expect_status 0 bench speed --batch-size 32 --chunks 8,16,64 --reps 1 --warmup 0
grep -q 'time/plain' "$dir/out" || fail "bench speed: no ratio column"
grep -Eq '^  gc  *8  *[0-9.]+  *[0-9]+\.[0-9]{2}  *[0-9.]+  *[0-9]+\.[0-9]{2}$' "$dir/out" ||
    fail "bench speed: no ratios for chunk 8: $(cat "$dir/out")"
grep -q '^  gc  *64 ' "$dir/out" && fail "bench speed: a chunk larger than the batch was run"
expect_status 0 bench speed --batch-size 16 --chunks 8 --reps 1 --warmup 0 --keep-last-graph
grep -q "keeping the last chunk's graph" "$dir/out" || fail "bench speed --keep-last-graph: not said: $(head -1 "$dir/out")"
grep -q '^  gc  *8 ' "$dir/out" || fail "bench speed --keep-last-graph: no GradCache row: $(cat "$dir/out")"

# --- bad input: one line naming the flag, exit 2, no output file ---
expect_usage_error --batch-size verify --batch-size 0
expect_usage_error --bogus verify --bogus
expect_usage_error --heads verify --heads 3
expect_usage_error --dtype verify --dtype f16
expect_usage_error --tolerance verify --tolerance abc
expect_usage_error --batches bench memory --batches 16,x
expect_usage_error --chunks bench memory --chunks 0
expect_usage_error --mem-limit bench memory --mem-limit lots
expect_usage_error --csv bench memory --csv "$dir/missing/memory.csv"
expect_usage_error --reps bench speed --reps 0
expect_usage_error --chunks bench speed --chunks 8,,16
expect_usage_error "'fast'" bench fast
expect_usage_error --svg bench memory --batches 16 --chunks 8 --svg
[ ! -e "$dir/missing" ] || fail "a failed run created $dir/missing"
for command in verify "bench memory" "bench speed" bench; do
    # shellcheck disable=SC2086 # the command's words
    expect_status 0 $command --help
    grep -q 'usage: gradcache' "$dir/out" || fail "gradcache $command --help prints no usage"
done

[ "$failures" -eq 0 ] && echo "all checks passed"
exit $((failures > 0))
