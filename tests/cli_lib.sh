# Shared by the command-line tests (sourced, not run): a work folder removed on exit,
# check counting (check), and the two expectations every test of bad input uses. The sourcing
# script sets `gradcache` and ends with `cli_summary`.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# check CONDITION-COMMAND... MESSAGE: counts a check; fails with MESSAGE when the command fails.
check() {
    local message=${*: -1}
    checks=$((checks + 1))
    "${@:1:$#-1}" || fail "$message"
}

# expect_error WANT COMMAND...: non-zero exit, exactly one line on stderr, containing WANT.
expect_error() {
    local want=$1 status=0
    shift
    checks=$((checks + 1))
    "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
    local message
    message=$(cat "$work/stderr")
    if [ "$status" -eq 0 ]; then
        fail "$* exited 0; wanted an error with '$want'"
    elif [ "$(wc -l <"$work/stderr")" -ne 1 ]; then
        fail "$*: wanted one line on stderr, got: $message"
    elif [[ $message != *"$want"* ]]; then
        fail "$*: wanted '$want' in: $message"
    fi
}

# expect_ok COMMAND...: exit 0; its stdout and stderr are left in $work/stdout, $work/stderr.
expect_ok() {
    checks=$((checks + 1))
    "$@" >"$work/stdout" 2>"$work/stderr" || fail "$* exited non-zero: $(cat "$work/stderr")"
}

# write_word_pairs FILE: 200 "def of X"<TAB>"X"<TAB>"Y" lines for 200 distinct random words
# (awk's generator, seeded: the same file everywhere).
write_word_pairs() {
    awk 'BEGIN {
        srand(7)
        while (n < 200) {
            word = ""
            length_ = 3 + int(rand() * 6)
            for (i = 0; i < length_; i++) word = word substr("abcdefghijklmnopqrstuvwxyz", 1 + int(rand() * 26), 1)
            if (!(word in seen)) { seen[word] = 1; words[n++] = word }
        }
        for (i = 0; i < n; i++) printf "def of %s\t%s\t%s\n", words[i], words[i], words[(i + 1) % n]
    }' >"$1"
}

# The closing line; returns non-zero when a check failed.
cli_summary() {
    echo "$checks checks, $failures failed"
    [ "$failures" -eq 0 ]
}
