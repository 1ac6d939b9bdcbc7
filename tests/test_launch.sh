#!/usr/bin/env bash
# gradcache launch: the environment each process gets, output relayed as whole prefixed
# lines, a failing or killed process stopping the run with its status, signals passed on,
# SIGKILL after the grace period, per-rank log files, and bad usage. After every run, no
# process it started (grandchildren included) may be left: checked with kill -0 on the pids
# the processes wrote. Every run has a timeout: nothing here can hang.
# usage: test_launch.sh GRADCACHE DIST_CHILD
set -u
gradcache=$1 child=$2
source "$(dirname "$0")/cli_lib.sh"

# whether process $1 runs (a zombie, killed and waiting for init to reap it, does not)
running() {
    local state
    state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

# no process whose pid a run wrote into $work/pids is alive (a SIGKILL is delivered
# asynchronously: each gets a second to be gone)
expect_none_left() {
    checks=$((checks + 1))
    local file pid
    for file in "$work"/pids/*; do
        [ -e "$file" ] || continue
        pid=$(cat "$file")
        for _ in $(seq 20); do running "$pid" || break; sleep 0.05; done
        if running "$pid"; then
            fail "$1: process $pid ($(basename "$file")) is still running"
            kill -9 "$pid" 2>/dev/null
        fi
    done
    rm -rf "$work/pids"
    mkdir -p "$work/pids"
}

# expect_status WANT SECONDS COMMAND...: the exit status, within SECONDS
expect_status() {
    local want=$1 limit=$2 status=0
    shift 2
    checks=$((checks + 1))
    local start=$SECONDS
    timeout 60 "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
    [ "$status" -eq "$want" ] || fail "$*: exit status $status, wanted $want: $(head -3 "$work/stderr")"
    [ $((SECONDS - start)) -le "$limit" ] || fail "$*: took $((SECONDS - start)) s, wanted at most $limit"
}
mkdir -p "$work/pids"

# the environment, as torchrun gives it
expect_status 0 20 "$gradcache" launch -n 4 -- "$child" --env
for rank in 0 1 2 3; do
    checks=$((checks + 1))
    grep -qE "^\[$rank\] env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=4 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=[0-9]+$" \
        "$work/stdout" || fail "rank $rank's environment: $(grep "^\[$rank\]" "$work/stdout")"
done
secret=$work/secret
head -c 32 /dev/urandom >"$secret" && chmod 600 "$secret"
expect_status 0 20 env GC_DIST_SECRET_FILE="$secret" \
    "$gradcache" launch -n 2 --nnodes 3 --node-rank 2 --master-addr 127.0.0.1 --master-port 29999 -- "$child" --env
checks=$((checks + 1))
grep -q "^\[5\] env RANK=5 WORLD_SIZE=6 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999$" \
    "$work/stdout" || fail "node 2 of 3: $(cat "$work/stdout")"

# the run's secret: a fresh one per run on one machine, the same for all its processes; none
# passed on where GC_DIST_SECRET_FILE names one (every process reads the file), which is
# checked first and needed for several machines
# shellcheck disable=SC2016 # expanded by each process's shell
print_secret=(sh -c 'echo "secret ${GC_DIST_SECRET:-none}"')
expect_status 0 20 "$gradcache" launch -n 2 -- "${print_secret[@]}"
first=$(sed -n 's/^\[0\] secret //p' "$work/stdout")
checks=$((checks + 1))
[[ $first =~ ^[0-9a-f]{64}$ ]] && grep -qx "\[1\] secret $first" "$work/stdout" ||
    fail "the secret of a run: $(cat "$work/stdout")"
expect_status 0 20 "$gradcache" launch -n 1 -- "${print_secret[@]}"
checks=$((checks + 1))
grep -q "^\[0\] secret [0-9a-f]\{64\}$" "$work/stdout" && ! grep -q "$first" "$work/stdout" ||
    fail "the next run's secret: $(cat "$work/stdout"), the first run's $first"
expect_status 0 20 env GC_DIST_SECRET_FILE="$secret" "$gradcache" launch -n 1 -- "${print_secret[@]}"
check [ "$(cat "$work/stdout")" = "[0] secret none" ] "with GC_DIST_SECRET_FILE: $(cat "$work/stdout")"
expect_error "2 nodes need GC_DIST_SECRET_FILE" \
    "$gradcache" launch -n 1 --nnodes 2 --master-addr 127.0.0.1 --master-port 29999 -- "$child" --env
chmod 644 "$secret"
expect_error "can be read or written by other users (chmod 600 it)" \
    env GC_DIST_SECRET_FILE="$secret" "$gradcache" launch -n 1 -- "$child" --env
chmod 600 "$secret"
head -c 31 /dev/urandom >"$work/short_secret" && chmod 600 "$work/short_secret"
expect_error "holds a secret of 31 bytes" env GC_DIST_SECRET_FILE="$work/short_secret" "$gradcache" launch -n 1 -- "$child"

# 4 x 2000 interleaved lines arrive whole; a 100,000-byte line is cut at 65,536; an
# unfinished last line is passed on
expect_status 0 30 "$gradcache" launch -n 4 -- "$child" --lines 2000 --long-line 100000 --no-newline
checks=$((checks + 1))
bad=$(grep -cvE '^\[([0-3])\] (rank \1 line [0-9]+|unfinished)$' "$work/stdout")
[ "$bad" -eq 0 ] || fail "$bad mangled lines: $(grep -vE '^\[([0-3])\] (rank \1 line [0-9]+|unfinished)$' "$work/stdout" | head -2)"
for rank in 0 1 2 3; do
    checks=$((checks + 1))
    [ "$(grep -c "^\[$rank\] rank $rank line" "$work/stdout")" -eq 2000 ] || fail "rank $rank: not 2000 lines"
    checks=$((checks + 1))
    [ "$(grep -c "^\[$rank\] unfinished$" "$work/stdout")" -eq 1 ] || fail "rank $rank: no unfinished line"
done
checks=$((checks + 1))
awk '{ print length($0) }' "$work/stderr" | sort -n | uniq -c | tr -s ' ' | grep -q "^ 4 34468$" &&
    awk '{ print length($0) }' "$work/stderr" | sort -n | uniq -c | tr -s ' ' | grep -q "^ 4 65540$" ||
    fail "the long lines: $(awk '{ print length($0) }' "$work/stderr" | sort -n | uniq -c | tr '\n' ' ')"

# a line of exactly 65,536 bytes passes whole (no empty line after it); a NUL byte passes too
expect_status 0 20 "$gradcache" launch -n 1 -- "$child" --long-line 65536 --nul
checks=$((checks + 1))
[ "$(awk '{ print length($0) }' "$work/stderr" | tr '\n' ' ')" = "65540 " ] ||
    fail "a line of 65,536 bytes: line lengths $(awk '{ print length($0) }' "$work/stderr" | tr '\n' ' ')"
checks=$((checks + 1))
cmp -s "$work/stdout" <(printf '[0] before\0after\n') || fail "a NUL byte: $(od -c "$work/stdout" | head -2)"

# the reader of the launcher's output going away costs that output, not the run: the
# launcher does not die of SIGPIPE, the processes finish, their status is the launcher's
checks=$((checks + 1))
status=$(set -o pipefail; timeout 60 "$gradcache" launch -n 2 -- "$child" --lines 20000 --only 1 --exit 5 2>/dev/null |
    head -1 >/dev/null; echo $?)
[ "$status" -eq 5 ] || fail "the output's reader gone: exit status $status, wanted 5 (a process's status)"
# ... and the processes themselves get SIGPIPE's default disposition, not the launcher's
expect_status 0 20 "$gradcache" launch -n 1 -- "$child" --sigpipe
checks=$((checks + 1))
[ "$(cat "$work/stdout")" = "[0] sigpipe default" ] || fail "the processes' SIGPIPE: $(cat "$work/stdout")"

# expect_failure_line PATTERN: the launcher's stderr holds exactly one line of its own (the
# processes' lines are prefixed with their rank), matching PATTERN (grep -E)
expect_failure_line() {
    checks=$((checks + 1))
    local own
    own=$(grep -v '^\[[0-9]*\] ' "$work/stderr")
    [ "$(grep -c '' <<<"$own")" -eq 1 ] && grep -qE "^$1$" <<<"$own" ||
        fail "the launcher's line: wanted one matching '$1', got: ${own:-nothing}"
}

# one process fails: the launcher exits with its status, the others (and what they started)
# are stopped well before their sleep ends, and one line of the launcher's names it
expect_status 3 10 "$gradcache" launch -n 3 -- "$child" --pids "$work/pids" --grandchild "$work/pids" \
    --only 1 --exit 3 --only -1 --sleep 30
expect_failure_line "gradcache launch: rank 1 \(pid $(cat "$work/pids/pid.1")\) exited with status 3, the first process to fail; the launcher stopped the 2 others"
expect_none_left "a process exiting 3"
expect_status 137 10 "$gradcache" launch -n 3 -- "$child" --pids "$work/pids" --only 2 --kill-self --only -1 --sleep 30
expect_failure_line "gradcache launch: rank 2 \(pid $(cat "$work/pids/pid.2")\) was killed by SIGKILL \(Killed\), the first process to fail; the launcher stopped the 2 others"
expect_none_left "a process killed by SIGKILL"
# a program failing without a word: still the line, naming the first of them
expect_status 1 10 "$gradcache" launch -n 2 -- false
expect_failure_line "gradcache launch: rank [01] \(pid [0-9]+\) exited with status 1, the first process to fail; (the launcher stopped the 1 other|no other process was running)"

# kill -9 of rank 1 from outside, as the kernel's OOM killer does, while rank 0 runs on: the
# line every time (the processes' own output may or may not come first), no process left
for trial in 1 2 3 4 5 6; do
    checks=$((checks + 1))
    status=0
    timeout 60 "$gradcache" launch -n 2 -- "$child" --pids "$work/pids" --sleep 30 >"$work/stdout" 2>"$work/stderr" &
    launcher=$!
    for _ in $(seq 200); do [ -s "$work/pids/pid.1" ] && [ -s "$work/pids/pid.0" ] && break; sleep 0.05; done
    victim=$(cat "$work/pids/pid.1")
    kill -9 "$victim"
    wait "$launcher" || status=$?
    [ "$status" -eq 137 ] || fail "kill -9 of rank 1, trial $trial: exit status $status, wanted 137"
    expect_failure_line "gradcache launch: rank 1 \(pid $victim\) was killed by SIGKILL \(Killed\), the first process to fail; the launcher stopped the 1 other"
    expect_none_left "kill -9 of rank 1, trial $trial"
done

# signals sent to the launcher reach every process
for signal in TERM INT HUP QUIT; do
    checks=$((checks + 1))
    status=0
    timeout 60 "$gradcache" launch -n 2 -- "$child" --pids "$work/pids" --grandchild "$work/pids" --sleep 30 \
        >/dev/null 2>&1 &
    launcher=$!
    for _ in $(seq 100); do [ "$(ls "$work/pids" | wc -l)" -ge 4 ] && break; sleep 0.05; done
    kill -s "$signal" "$launcher"
    wait "$launcher" || status=$?
    want=$((128 + $(kill -l "$signal")))
    [ "$status" -eq "$want" ] || fail "SIG$signal to the launcher: exit status $status, wanted $want"
    expect_none_left "SIG$signal to the launcher"
done

# a process that ignores SIGTERM gets SIGKILL after --grace
expect_status 3 8 "$gradcache" launch -n 2 --grace 1 -- "$child" --pids "$work/pids" --ignore-term \
    --only 0 --exit 3 --only 1 --sleep 30
expect_none_left "a process ignoring SIGTERM"

# --log-dir: each rank's output in files of its own, unprefixed
expect_status 0 20 "$gradcache" launch -n 2 --log-dir "$work/logs" -- "$child" --lines 3 --long-line 5
checks=$((checks + 1))
[ "$(cat "$work/logs/rank_1.out")" = "$(printf 'rank 1 line 0\nrank 1 line 1\nrank 1 line 2')" ] &&
    [ "$(cat "$work/logs/rank_0.err")" = "xxxxx" ] || fail "--log-dir: $(ls "$work/logs")"

# a program that cannot run: 127, one line naming it (then the launcher's own)
expect_status 127 10 "$gradcache" launch -n 1 -- "$work/no-such-program"
checks=$((checks + 1))
[ "$(grep -c '^\[0\] ' "$work/stderr")" -eq 1 ] && grep -q "^\[0\] .*cannot run '$work/no-such-program'" "$work/stderr" ||
    fail "a missing program: $(cat "$work/stderr")"
expect_failure_line "gradcache launch: rank 0 \(pid [0-9]+\) exited with status 127, the first process to fail; no other process was running"

# bad usage: one line, exit 2
expect_error "-n is required" "$gradcache" launch -- "$child"
expect_error "no program" "$gradcache" launch -n 2
expect_error "no program" "$gradcache" launch -n 2 --
expect_error "-n" "$gradcache" launch -n 0 -- "$child"
expect_error "--node-rank 2" "$gradcache" launch -n 1 --nnodes 2 --node-rank 2 --master-addr a --master-port 1 -- "$child"
expect_error "--master-addr and --master-port" "$gradcache" launch -n 1 --nnodes 2 -- "$child"
expect_error "--master-port" "$gradcache" launch -n 1 --master-port 70000 -- "$child"
expect_error "unknown flag --bogus" "$gradcache" launch -n 1 --bogus -- "$child"
cli_summary
