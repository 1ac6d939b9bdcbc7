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

# expect_error WANT COMMAND...: non-zero exit, exactly one line on stderr, containing WANT
# (besides the plan `train` prints before its first step: the failure is one line). The exit
# status is left in $error_status.
expect_error() {
    local want=$1 status=0
    shift
    checks=$((checks + 1))
    "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
    error_status=$status
    local message
    message=$(grep -v '^plan: ' "$work/stderr")
    if [ "$status" -eq 0 ]; then
        fail "$* exited 0; wanted an error with '$want'"
    elif [ "$(grep -cv '^plan: ' "$work/stderr")" -ne 1 ]; then
        fail "$*: wanted one line on stderr, got: $message"
    elif [[ $message != *"$want"* ]]; then
        fail "$*: wanted '$want' in: $message"
    fi
}

# expect_exit STATUS WANT COMMAND...: expect_error, and the exit status is STATUS (2 a usage
# error, 1 a failure while running: a file's).
expect_exit() {
    local want_status=$1
    shift
    expect_error "$@"
    [ "$error_status" -eq "$want_status" ] || fail "${*:2}: exited $error_status, wanted $want_status"
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

# write_sentence_pairs FILE: 24 pairs of the tiny BERT's words (tests/fixtures/tiny_bert), queries
# of 1 to 12 words and passages of 1 to 4 in orders of their own, so that sorting by length moves
# rows on both sides.
write_sentence_pairs() {
    local words=(the cat dog sat on mat an of run big) i j query passage
    for i in $(seq 0 23); do
        query="" passage=""
        for j in $(seq 0 $(((i * 7) % 12))); do query+=" ${words[$(((i + j) % 10))]}"; done
        for j in $(seq 0 $(((i * 5) % 4))); do passage+=" ${words[$(((i * 3 + j) % 10))]}"; done
        printf '%s\t%s\n' "${query# }" "${passage# }"
    done >"$1"
}

# without_dropout FOLDER COPY: COPY is the BERT model folder FOLDER with its dropout set to 0.
without_dropout() {
    cp -r "$1" "$2" &&
        sed -i -E 's/"(hidden|attention_probs)_dropout_prob": [0-9.]+/"\1_dropout_prob": 0/' "$2/config.json" &&
        [ "$(grep -c '_dropout_prob": 0,' "$2/config.json")" -eq 2 ]
}

# close_to A B REL: A and B are numbers and |A - B| <= REL |B|.
close_to() {
    [[ $1 =~ ^-?[0-9] && $2 =~ ^-?[0-9] ]] &&
        awk -v a="$1" -v b="$2" -v rel="$3" 'BEGIN { d = a - b; exit !(d * d <= rel * rel * b * b) }'
}

# The closing line; returns non-zero when a check failed.
cli_summary() {
    echo "$checks checks, $failures failed"
    [ "$failures" -eq 0 ]
}
