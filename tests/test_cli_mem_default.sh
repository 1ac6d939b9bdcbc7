#!/usr/bin/env bash
# The memory limit of train and bench speed when none is given: 2/3 of the memory available
# at the start (Linux's MemAvailable), printed (bench speed under its header, train after each
# progress line's peak); a limit too small for the run (GC_MEM_LIMIT, --mem-limit) stops it with
# exit status 1 and ONE line naming the limit and where it came from, never anything the
# kernel kills. Run by meson with the gradcache program as $1.
set -uo pipefail
gradcache=${1:?usage: test_cli_mem_default.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
unset GC_MEM_LIMIT

# bytes "15.2 GiB": the number of bytes gradcache's 3-digit figure stands for
bytes() {
    awk -v n="$1" -v unit="$2" 'BEGIN {
        split("B KiB MiB GiB TiB", units, " "); for (k = 1; k <= 5 && units[k] != unit; k++) {}
        printf "%.0f\n", n * 1024 ^ (k - 1) }'
}

# within A B LOW HIGH: LOW <= A / B <= HIGH
within() {
    awk -v a="$1" -v b="$2" -v low="$3" -v high="$4" 'BEGIN { exit !(b > 0 && a / b >= low && a / b <= high) }'
}
available=$(awk '/^MemAvailable:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo)

tiny_speed=(bench speed --batch-size 8 --chunks 4 --reps 1 --warmup 0 --dim 16 --layers 1 --hidden 32 --max-length 8)
# a step of 64 needs some MiB
speed_64=(bench speed --batch-size 64 --chunks 8 --reps 1 --warmup 0)

# --- the default: printed, 2/3 of what is available ----------------------------------------
expect_ok "$gradcache" "${tiny_speed[@]}"
line=$(grep '^memory limit: ' "$work/stdout")
pattern='^memory limit: ([0-9.]+) ([KMGT]iB) on cpu \(the default, 2/3 of the ([0-9.]+) ([KMGT]iB) available; --mem-limit to change\)$'
if [[ $line =~ $pattern ]]; then
    limit=$(bytes "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
    of=$(bytes "${BASH_REMATCH[3]}" "${BASH_REMATCH[4]}")
    check within "$limit" "$of" 0.66 0.67 "bench speed's default $limit is not 2/3 of $of"
    # read a moment apart on a machine others use: within 1/8
    check within "$of" "$available" 0.875 1.125 "bench speed's available $of is not MemAvailable's $available"
else
    fail "bench speed: no line of the default memory limit: $(head -3 "$work/stdout")"
fi

data=$work/pairs.tsv
write_word_pairs "$data"
train=(train --data "$data" --model-size tiny --batch-size 8 --max-length 16 --steps 2 --log-every 1)
expect_ok "$gradcache" "${train[@]}" --out "$work/run"
pattern=' peak [0-9.]+ [KMG]iB of ([0-9.]+) ([KMGT]iB) ETA '
if [[ $(grep -m1 " ETA " "$work/stderr") =~ $pattern ]]; then
    check within "$(bytes "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")" "$available" 0.58 0.76 \
        "train's default limit ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} is not 2/3 of $available bytes"
else
    fail "train: no memory limit after the peak: $(head -3 "$work/stderr")"
fi

# --- too small a limit: one line saying where the limit came from ----------------------------
GC_MEM_LIMIT=1M expect_error "memory limit reached on cpu" "$gradcache" "${speed_64[@]}"
check grep -q ' (the limit: GC_MEM_LIMIT)$' "$work/stderr" "bench speed under GC_MEM_LIMIT: $(cat "$work/stderr")"
check grep -qx 'memory limit: 1 MiB on cpu (GC_MEM_LIMIT)' "$work/stdout" "bench speed: $(head -2 "$work/stdout")"
expect_error "memory limit reached on cpu" "$gradcache" "${speed_64[@]}" --mem-limit 1M
check grep -q ' (the limit: --mem-limit)$' "$work/stderr" "bench speed --mem-limit: $(cat "$work/stderr")"
GC_MEM_LIMIT=1M expect_error "memory limit reached on cpu" "$gradcache" "${train[@]}" --out "$work/limited"
check grep -q ' (the limit: GC_MEM_LIMIT) ' "$work/stderr" "train under GC_MEM_LIMIT: $(cat "$work/stderr")"
GC_MEM_LIMIT=200K expect_error "cannot build the model: memory limit reached on cpu" "$gradcache" "${train[@]}" \
    --out "$work/limited"
check grep -q ' (the limit: GC_MEM_LIMIT)$' "$work/stderr" "train's model under GC_MEM_LIMIT: $(cat "$work/stderr")"
cli_summary
