#!/usr/bin/env bash
# Every source file the README and the docs name exists: a path with a folder (tensor/cpu/x.c,
# gradcache/cache.h) from the repository's root (a header also under include/), a bare name
# (kernels_cpu.h) somewhere in the tree. Names with a wildcard (cli/*.c) and paths outside the
# repository (/usr/...) are not files of ours. Run by meson with the source root as $1.
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
[ "$failures" -eq 0 ] && echo "every source file the docs name exists"
exit $((failures > 0))
