#!/bin/bash
# gradcache verify, bench memory and bench speed, end to end ($1: the gradcache program, $2: the
# tiny BERT fixture folder).
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
# 16 bits: the tolerance derived from the precision, (chunks + 1) u with 4 chunks here: 5 x 2^-11
# for f16, 5 x 2^-8 for bf16. The difference shows the precision was used: above f32's 1e-5 in
# f16 (an f32 step differs by 1e-7), above f16's tolerance in bf16 -- each passes at its own
# tolerance only.
# verify_16 DTYPE TOLERANCE LOWER: passes with tolerance TOLERANCE printed, its difference above LOWER
verify_16() {
    expect_status 0 verify --dtype "$1"
    local summary difference
    summary=$(grep '^largest relative difference' "$dir/out")
    [[ $summary == *"tolerance $2: ok" ]] || fail "verify --dtype $1: not 'tolerance $2: ok': $summary"
    difference=$(awk '{ print $4 }' <<<"$summary")
    awk -v d="$difference" -v lower="$3" 'BEGIN { exit !(d > lower) }' ||
        fail "verify --dtype $1: a difference of $difference, not above $3: not computed in $1"
    expect_status 1 verify --dtype "$1" --tolerance "$3"
}
verify_16 f16 2.441e-03 1e-5
verify_16 bf16 1.953e-02 2.441e-03
expect_status 0 verify --help
grep -q '(chunks + 1) u' "$dir/out" || fail "verify --help does not give the 16-bit tolerances"

# --- bench memory: table, CSV rows and columns, a well-formed SVG, temporary files gone ---
expect_status 0 bench memory --batches 16,64 --chunks 8,32 --csv "$dir/memory.csv" --svg "$dir/memory.svg"
# A plain row at every batch and at every chunk size; GradCache for every chunk up to the batch.
want_rows="plain,8,8,full plain,16,16,full gc,16,8,tiled plain,32,32,full plain,64,64,full gc,64,8,tiled gc,64,32,tiled"
got_rows=$(tail -n +2 "$dir/memory.csv" | cut -d, -f1-4 | tr '\n' ' ' | sed 's/ $//')
[ "$got_rows" = "$want_rows" ] || fail "bench memory: CSV rows '$got_rows', want '$want_rows'"
[ "$(head -1 "$dir/memory.csv")" = "mode,batch,chunk,loss,peak_bytes,cache_bytes,packed_bytes,workspace_bytes,step_ms,fits" ] ||
    fail "bench memory: CSV header $(head -1 "$dir/memory.csv")"
# the CPU backend keeps no workspace of its own (CUDA's cuBLAS workspace is counted there)
awk -F, 'NR > 1 && !($5 > 0 && $8 == 0 && $9 > 0 && $10 == 1) { exit 1 }' "$dir/memory.csv" ||
    fail "bench memory: a row without positive measurements: $(cat "$dir/memory.csv")"
grep -q '^  gc  *64  *8 ' "$dir/out" || fail "bench memory: no table row for gc 64 8: $(cat "$dir/out")"
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$dir/memory.svg" ||
    fail "bench memory: the SVG is not well-formed XML"
grep -q 'GradCache, chunk 32, tiled loss' "$dir/memory.svg" || fail "bench memory: no line for chunk 32 in the chart"
# The cache: the representations (32 wide, f32: 8 KiB a side) of 64 queries and 64 passages and their gradients.
grep -q '^gc,64,8,tiled,[0-9]*,32768,' "$dir/memory.csv" || fail "bench memory: cache_bytes of gc 64/8 is not 32768"
grep -q '^plain,64,64,full,[0-9]*,0,' "$dir/memory.csv" || fail "bench memory: the plain step has a cache"

# --init: a pretrained folder instead of the sized model (the tiny BERT fixture, $2)
tiny=${2:?usage: test_cli_bench.sh path/to/gradcache path/to/tiny_bert}
expect_status 0 bench memory --init "$tiny" --max-length 8 --batches 4 --chunks 2 --csv "$dir/init.csv"
grep -q "pretrained $tiny (tied, max length 8)" "$dir/out" || fail "bench memory --init: no pretrained model named"
grep -q '^gc,4,2,tiled,' "$dir/init.csv" || fail "bench memory --init: no GradCache row: $(cat "$dir/init.csv")"
expect_status 0 verify --init "$tiny" --max-length 8 --batch-size 6 --chunk-size 2
grep -q '^  encoder\.' "$dir/out" || fail "verify --init: no encoder parameters: $(cat "$dir/out")"

# --loss both: each GradCache run with the tiled and with the full loss, a chart line each.
expect_status 0 bench memory --batches 256 --chunks 16 --loss both --csv "$dir/both.csv" --svg "$dir/both.svg"
tiled=$(grep '^gc,256,16,tiled,' "$dir/both.csv" | cut -d, -f5)
full=$(grep '^gc,256,16,full,' "$dir/both.csv" | cut -d, -f5)
[ -n "$tiled" ] && [ -n "$full" ] || fail "bench memory --loss both: rows missing: $(cat "$dir/both.csv")"
grep -q 'GradCache, chunk 16, full loss' "$dir/both.svg" || fail "bench memory --loss both: no line for the full loss"

# Flat apart from the cache: at 1024 pairs in chunks of 16 the cached step's peak, less the
# cache and the input batch (1024 x 16 tokens, i32 ids and f32 masks, two sides: the caller's
# data), is at most 1.5x the plain step's peak at 16 pairs (4 MiB). The full loss's
# 1024 x 1024 scores, their softmax and gradient (20 MiB) would break it.
expect_status 0 bench memory --batches 1024 --chunks 16 --csv "$dir/flat.csv"
plain16=$(grep '^plain,16,16,' "$dir/flat.csv" | cut -d, -f5)
awk -F, -v plain="$plain16" -v inputs=$((1024 * 16 * 8 * 2)) \
    '$1 == "gc" { found = 1; if ($5 - $6 - inputs > 1.5 * plain) above = 1 } END { exit !found || above }' \
    "$dir/flat.csv" ||
    fail "bench memory: the cached step at 1024 is not flat: $(cat "$dir/flat.csv")"

# Under a limit the plain step at 256 pairs exceeds (~38 MiB) and GradCache in chunks of 16
# does not (~2 MiB): a result, not a failure.
expect_status 0 bench memory --batches 16,256 --chunks 16 --mem-limit 16M --csv "$dir/limit.csv" --svg "$dir/limit.svg"
grep -q '^plain,256,256,full,,,,,,0$' "$dir/limit.csv" ||
    fail "bench memory --mem-limit: plain 256 not reported as not fitting"
grep -q '^gc,256,16,tiled,[0-9]*,[0-9]*,[0-9]*,0,[0-9.]*,1$' "$dir/limit.csv" ||
    fail "bench memory --mem-limit: gc 256/16 does not fit"
grep -q '^  plain  *256  *256 full  *does not fit' "$dir/out" || fail "bench memory --mem-limit: no 'does not fit' row"
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$dir/limit.svg" ||
    fail "bench memory --mem-limit: the SVG is not well-formed XML"
grep -q 'does not fit' "$dir/limit.svg" || fail "bench memory --mem-limit: the chart does not mark the run"
[ -z "$(find "$dir" -name '.*.tmp-*')" ] || fail "temporary files left behind: $(find "$dir" -name '.*.tmp-*')"

# The CSV is rewritten after every run, so that a sweep stopped by a time limit (gpu_check.sh)
# keeps the runs it finished: the small runs' rows are there while the large ones (4096 pairs,
# GradCache in 1024 chunks: seconds) still run. Its own folder: the kill may leave a temporary file.
mkdir "$dir/partial"
"$gradcache" bench memory --batches 8,4096 --chunks 4 --reps 1 --warmup 0 --dim 16 --hidden 32 \
    --csv "$dir/partial/memory.csv" >/dev/null 2>&1 &
sweep=$!
partial=
for _ in $(seq 600); do
    kill -0 "$sweep" 2>/dev/null || break
    if [ -s "$dir/partial/memory.csv" ]; then
        partial=$(cat "$dir/partial/memory.csv")
        break
    fi
    sleep 0.05
done
kill "$sweep" 2>/dev/null
wait "$sweep" 2>/dev/null
[ -n "$partial" ] || fail "bench memory: no CSV while the sweep ran"
# (a finished program is a zombie until waited for: the last run's row shows the file came late)
grep -q '^gc,4096,' <<<"$partial" && fail "bench memory: the CSV was written only at the end: $partial"
grep -q '^plain,4,4,full,[0-9]*,0,[0-9]*,0,[0-9.]*,1$' <<<"$partial" ||
    fail "bench memory: the first run is not in the CSV written during the sweep: $partial"

# --- bench speed: the ratios ---
expect_status 0 bench speed --batch-size 32 --chunks 8,16,64 --reps 1 --warmup 0
grep -q 'time/plain' "$dir/out" || fail "bench speed: no ratio column"
grep -Eq '^  f32  *gc  *8  *[0-9.]+  *[0-9]+\.[0-9]{2}  *-  *[0-9.]+  *[0-9]+\.[0-9]{2}$' "$dir/out" ||
    fail "bench speed: no ratios for chunk 8: $(cat "$dir/out")"
grep -q '^  f32  *gc  *64 ' "$dir/out" && fail "bench speed: a chunk larger than the batch was run"
# several precisions in one run, each against f32's same step
expect_status 0 bench speed --batch-size 16 --chunks 8 --reps 1 --warmup 0 --dim 16 --hidden 32 --precision f32,f16,bf16
for precision in f16 bf16; do
    grep -Eq "^  $precision  *gc  *8  *[0-9.]+  *[0-9]+\.[0-9]{2}  *[0-9]+\.[0-9]{2}  *[0-9.]+  *[0-9]+\.[0-9]{2}\$" "$dir/out" ||
        fail "bench speed --precision: no $precision row against f32: $(cat "$dir/out")"
done
expect_status 0 bench memory --batches 16 --chunks 8 --dim 16 --hidden 32 --precision bf16 --csv "$dir/bf16.csv"
grep -q 'parameters in bf16' "$dir/out" || fail "bench memory --precision: the header does not say bf16: $(cat "$dir/out")"
# the cache (16 rows x dim 16, two models, representations and gradients) in 2-byte bf16
grep -q '^gc,16,8,tiled,[0-9]*,2048,[0-9]*,0,[0-9.]*,1$' "$dir/bf16.csv" ||
    fail "bench memory --precision bf16: no gc row with a 2048-byte cache: $(cat "$dir/bf16.csv")"
expect_status 0 bench speed --batch-size 16 --chunks 8 --reps 1 --warmup 0 --keep-last-graph
grep -q "keeping the last chunk's graph" "$dir/out" || fail "bench speed --keep-last-graph: not said: $(head -1 "$dir/out")"
grep -q '^  f32  *gc  *8 ' "$dir/out" || fail "bench speed --keep-last-graph: no GradCache row: $(cat "$dir/out")"

# --- bad input: one line naming the flag, exit 2, no output file ---
expect_usage_error --batch-size verify --batch-size 0
expect_usage_error --bogus verify --bogus
expect_usage_error --heads verify --heads 3
expect_usage_error --dtype verify --dtype f8
expect_usage_error --tolerance verify --tolerance abc
expect_usage_error --batches bench memory --batches 16,x
expect_usage_error --chunks bench memory --chunks 0
expect_usage_error --loss bench memory --loss flat
expect_usage_error --mem-limit bench memory --mem-limit lots
expect_usage_error --csv bench memory --csv "$dir/missing/memory.csv"
expect_usage_error --reps bench speed --reps 0
expect_usage_error --chunks bench speed --chunks 8,,16
expect_usage_error --precision bench speed --precision f32,f8
expect_usage_error --precision bench speed --precision f16,f16
expect_usage_error --precision bench memory --precision f64
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
