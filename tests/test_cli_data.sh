#!/usr/bin/env bash
# gradcache data: `data check`, `data wordnet` and `data manpages` on good and bad input. Run by meson with
# the gradcache program as $1. Every bad input must exit non-zero with ONE line on stderr
# naming the file and line (or the flag). The part on the real WordNet runs only where
# /usr/share/wordnet is installed (Debian's wordnet-base); without it, the rest still runs
# and the test then reports a skip (77) unless something failed.
set -uo pipefail
gradcache=${1:?usage: test_cli_data.sh path/to/gradcache}
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# --- data check: every kind of bad pair file -----------------------------------------
good=$work/good.tsv
printf 'a dog\tchien\r\nthe cat\tchat' >"$good"
expect_ok "$gradcache" data check "$good"
grep -qF "$good: 2 examples, 0 hard negatives each" "$work/stdout" || fail "data check counts: $(cat "$work/stdout")"

bad=$work/bad.tsv
expect_error "$work/missing.tsv: cannot open" "$gradcache" data check "$work/missing.tsv"
mkdir "$work/folder.tsv" # unreadable as a file (chmod 000 would not stop root)
expect_error "$work/folder.tsv: cannot read" "$gradcache" data check "$work/folder.tsv"
: >"$bad"
expect_error "$bad: no examples" "$gradcache" data check "$bad"
printf 'a\tb\n\nc\td\n' >"$bad"
expect_error "$bad:2: empty line" "$gradcache" data check "$bad"
{ printf 'a\tb\n'; head -c 5000 /dev/zero | tr '\0' x; printf '\tc\n'; } >"$bad"
expect_error "$bad:2: line longer than the limit of 4096 bytes" "$gradcache" data check "$bad"
printf 'a\tb\nc\td\xc0\xaf\n' >"$bad"
expect_error "$bad:2: invalid UTF-8 (byte 0xC0 at column 4)" "$gradcache" data check "$bad"
printf 'a\tb\xed\xa0\x80\n' >"$bad"
expect_error "$bad:1: invalid UTF-8" "$gradcache" data check "$bad"
printf 'a\tb\xe2\x82' >"$bad"
expect_error "$bad:1: invalid UTF-8" "$gradcache" data check "$bad"
printf 'a\tb\nc\t\000d\n' >"$bad"
expect_error "$bad:2: NUL byte at column 3" "$gradcache" data check "$bad"
printf 'a\t\tb\n' >"$bad"
expect_error "$bad:1: empty field" "$gradcache" data check "$bad"
printf 'a\tb\tn\nc\td\n' >"$bad"
expect_error "$bad:2: 2 fields where line 1 has 3" "$gradcache" data check "$bad"
printf 'a\tb\rc\n' >"$bad"
expect_error "$bad:1: carriage return" "$gradcache" data check "$bad"
expect_error "missing FILE" "$gradcache" data check
expect_error "one FILE only" "$gradcache" data check "$good" "$good"

# --- flags -------------------------------------------------------------------------
expect_error "unknown flag --bogus" "$gradcache" data wordnet --bogus
expect_error "--held-out: expected a number in [0.001, 0.5], got '2'" "$gradcache" data wordnet --held-out 2
expect_error "--seed: expected an integer in [0, 4294967295], got '-1'" "$gradcache" data wordnet --seed -1
expect_error "--out needs a value" "$gradcache" data wordnet --out
expect_error "unknown subcommand 'words'" "$gradcache" data words
expect_ok "$gradcache" data wordnet --help
grep -qF "definition<TAB>word" "$work/stdout" || fail "data wordnet --help does not document the format"

# --- data wordnet: a missing or malformed WordNet leaves nothing behind -----------------
mkdir "$work/no-wordnet" "$work/out-missing"
expect_error "$work/no-wordnet/data.noun: cannot open: No such file or directory (install Debian's wordnet-base" \
    "$gradcache" data wordnet --wordnet "$work/no-wordnet" --out "$work/out-missing"
[ -z "$(ls -A "$work/out-missing")" ] || fail "files left in --out after a failure: $(ls -A "$work/out-missing")"
expect_error "cannot open" "$gradcache" data wordnet --wordnet "$work/no-wordnet" --out "$work/out-new"
[ ! -e "$work/out-new" ] || fail "--out created although WordNet is missing"

# A small WordNet of our own: the license lines, glosses with examples, '_' in words,
# adjective markers, a tab inside a gloss; many synsets so that both sides get some.
fake=$work/fake-wordnet
mkdir "$fake"
{
    printf '  1 This software and database is being provided to you, the LICENSEE, by  \n'
    printf '  2 Princeton University under the following license.  \n'
    for i in $(seq 10 59); do
        printf '000%s00 03 n 02 thing_%s 0 other_thing_%s 1 000 | definition number %s; "an example"  \n' "$i" "$i" "$i" "$i"
    done
} >"$fake/data.noun"
printf '00001740 29 v 01 breathe 0 000 | draw air into,\tand expel out of, the lungs: "I can breathe better"  \n' >"$fake/data.verb"
printf '00014358 00 s 02 abounding 0 galore(ip) 0 001 & 00013887 a 0000 | existing in abundance; "whiskey galore"  \n' >"$fake/data.adj"
printf '00001837 02 r 01 a_cappella 0 000 | without musical accompaniment  \n' >"$fake/data.adv"
expect_ok "$gradcache" data wordnet --wordnet "$fake" --out "$work/fake-out" --held-out 0.3
{
    for i in $(seq 10 59); do
        printf 'definition number %s\tthing %s\n' "$i" "$i"
        printf 'definition number %s\tother thing %s\n' "$i" "$i"
    done
    printf 'draw air into, and expel out of, the lungs\tbreathe\n'
    printf 'existing in abundance\tabounding\n'
    printf 'existing in abundance\tgalore\n'
    printf 'without musical accompaniment\ta cappella\n'
} | LC_ALL=C sort >"$work/fake-want"
LC_ALL=C sort "$work/fake-out/train.tsv" "$work/fake-out/dev.tsv" >"$work/fake-got"
cmp -s "$work/fake-want" "$work/fake-got" || fail "pairs from the small WordNet: $(diff "$work/fake-want" "$work/fake-got")"
[ "$(ls "$work/fake-out")" = "$(printf 'dev.tsv\ntrain.tsv')" ] || fail "--out holds more than the two files: $(ls "$work/fake-out")"

printf '00001740 03 n 01 entity 0 003 | that which is perceived\nnot a synset line\n' >"$fake/data.noun"
expect_error "$fake/data.noun:2: not a WordNet synset line" "$gradcache" data wordnet --wordnet "$fake" --out "$work/fake-out2"
[ ! -e "$work/fake-out2" ] || fail "--out created although WordNet is malformed"
# Read a bounded line at a time: a data file that is a stream of zeros (or any line past
# 64 KiB, or one holding a NUL byte) is refused at that line, after at most 64 KiB of it.
ln -sf /dev/zero "$fake/data.noun"
expect_error "$fake/data.noun:1: line longer than the limit of 65536 bytes" \
    timeout 20 "$gradcache" data wordnet --wordnet "$fake" --out "$work/fake-out2"
rm "$fake/data.noun"
printf '00001740 03 n 01 entity 0 003 | that which\0 is perceived\n' >"$fake/data.noun"
expect_error "$fake/data.noun:1: NUL byte (not a WordNet data file)" \
    "$gradcache" data wordnet --wordnet "$fake" --out "$work/fake-out2"
[ ! -e "$work/fake-out2" ] || fail "--out created although WordNet is malformed"

# --- data manpages: a small manual folder of generated pages, gzip and plain -------------
man=$work/man
mkdir -p "$man/man1" "$man/man3"
for i in $(seq 1 40); do
    page="$man/man$((1 + 2 * (i % 2)))/tool$i.$((1 + 2 * (i % 2)))"
    printf '.TH TOOL%d 1\n.SH NAME\ntool%d \\- does task number %d\n.SH DESCRIPTION\n.B tool%d\nperforms the task numbered %d for its caller.\n' \
        "$i" "$i" "$i" "$i" "$i" >"$page"
    [ $((i % 3)) -eq 0 ] && gzip "$page"
done
printf '.so man1/tool1.1\n' >"$man/man1/alias.1"
expect_ok "$gradcache" data manpages --man "$man" --out "$work/man-beir" --held-out 0.2
grep -qF "$man: 40 pages read, 1 files skipped" "$work/stdout" || fail "data manpages counts: $(cat "$work/stdout")"
grep -qF "40 documents (descriptions), 40 queries (NAME lines)" "$work/stdout" || fail "data manpages: $(cat "$work/stdout")"
grep -qF '{"_id":"q0","text":"does task number 1"}' "$work/man-beir/queries.jsonl" || fail "queries.jsonl: $(head -2 "$work/man-beir/queries.jsonl")"
grep -qF '"text":"tool7 performs the task numbered 7 for its caller."}' "$work/man-beir/corpus.jsonl" || fail "corpus.jsonl"
for split in train dev test; do
    [ "$(wc -l <"$work/man-beir/qrels/$split.tsv")" -gt 1 ] || fail "qrels/$split.tsv has no judgement"
done
expect_ok "$gradcache" data manpages --man "$man" --out "$work/man-again" --held-out 0.2
diff -r "$work/man-beir" "$work/man-again" >/dev/null || fail "two runs of data manpages differ"
expect_error "$work/nowhere: cannot open the folder" "$gradcache" data manpages --man "$work/nowhere" --out "$work/x"
expect_error "--max-words" "$gradcache" data manpages --max-words 1
expect_ok "$gradcache" data manpages --help

# --- data wordnet on the real WordNet ---------------------------------------------------
skipped=0
if [ -d /usr/share/wordnet ]; then
    out=$work/wordnet
    expect_ok "$gradcache" data wordnet --out "$out"
    cp "$work/stdout" "$work/wordnet.stdout"
    cat "$work/wordnet.stdout"
    for side in train dev; do
        expect_ok "$gradcache" data check "$out/$side.tsv"
        lines=$(wc -l <"$out/$side.tsv")
        grep -qF "$out/$side.tsv: $lines examples" "$work/stdout" || fail "data check $side.tsv: $(cat "$work/stdout")"
        grep -qF "$out/$side.tsv: $lines pairs" "$work/wordnet.stdout" || fail "$side.tsv has $lines lines, not the count printed"
        cut -f1 "$out/$side.tsv" | LC_ALL=C sort -u >"$work/$side.definitions"
    done
    shared=$(LC_ALL=C comm -12 "$work/train.definitions" "$work/dev.definitions" | wc -l)
    [ "$shared" -eq 0 ] || fail "$shared definitions are in both train.tsv and dev.tsv"
    [ "$(wc -l <"$out/dev.tsv")" -gt 1000 ] || fail "dev.tsv has fewer than 1000 pairs"
    expect_ok "$gradcache" data wordnet --out "$work/again"
    cmp -s "$out/dev.tsv" "$work/again/dev.tsv" || fail "two runs gave different splits"
else
    echo "skip: /usr/share/wordnet is absent (apt-get install wordnet-base); the real-WordNet part did not run"
    skipped=1
fi

cli_summary || exit 1
[ "$skipped" -eq 0 ] || exit 77
exit 0
