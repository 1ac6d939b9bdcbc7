#!/usr/bin/env bash
# Every source file the README and the docs name exists: a path with a folder (tensor/cpu/x.c,
# gradcache/cache.h) from the repository's root (a header also under include/), a bare name
# (kernels_cpu.h) somewhere in the tree. Names with a wildcard (cli/*.c) and paths outside the
# repository (/usr/...) are not files of ours. And every `file:function` reference (the tour's
# and the design's, tensor/tensor.c:gc_empty) names a function that file defines: a line that
# starts at the left margin, as every definition here does, with the name and its '('. Run by
# meson with the source root as $1.
set -uo pipefail
root=${1:?usage: test_doc_paths.sh SOURCE_ROOT}
cd "$root" || exit 99
tracked=$(git ls-files 2>/dev/null || find . -type f | sed 's|^\./||')
# names the docs use for files that are not ours: a user's program in a build command, and a
# file of another NCCL installation
outside="app.c include/nccl.h"
failures=0
for doc in README.md docs/*.md; do
    # words ending in a source-file suffix, with the characters a path may hold
    for name in $(grep -oE '[A-Za-z0-9_./*-]+\.(c|h|cu|cuh|sh|py|build)\b' "$doc" | sort -u); do
        case $name in *'*'* | /* | ../* | *://*) continue ;; esac
        name=${name#./}
        [[ " $outside " == *" $name "* ]] && continue
        if [[ $name == */* ]]; then
            grep -qxF -e "$name" -e "include/$name" <<<"$tracked" && continue
        else
            grep -qE "(^|/)${name//./\\.}\$" <<<"$tracked" && continue
        fi
        echo "$doc names $name, which is not in the repository"
        failures=$((failures + 1))
    done
done
references=0
for doc in README.md docs/*.md; do
    for reference in $(grep -oE '[A-Za-z0-9_./-]+\.(c|h|cu|cuh):[A-Za-z_][A-Za-z0-9_]*' "$doc" | sort -u); do
        file=${reference%%:*} function=${reference#*:}
        references=$((references + 1))
        [ -f "$file" ] || file=include/$file
        if [ ! -f "$file" ]; then
            echo "$doc refers to $reference, but there is no ${reference%%:*}"
        elif ! grep -qE "^[A-Za-z_].*[ *]${function}\(" "$file"; then
            echo "$doc refers to $reference, but ${reference%%:*} defines no $function"
        else
            continue
        fi
        failures=$((failures + 1))
    done
done
[ "$references" -gt 0 ] || { echo "no file:function reference found: the pattern is broken"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "every source file the docs name exists, and all $references file:function references resolve"
exit $((failures > 0))
