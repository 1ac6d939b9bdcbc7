#!/usr/bin/env bash
# docs/TOUR.md's stops name `file:function`; every one must exist: the file in the repository
# and the name in it (a function, or a macro or type defined there). Run by meson with the
# source root as $1.
set -uo pipefail
root=${1:?usage: test_tour.sh SOURCE_ROOT}
cd "$root" || exit 99
failures=0 checked=0
for place in $(grep -oE '`[A-Za-z0-9_./-]+\.(c|h|cu|cuh):[A-Za-z_][A-Za-z0-9_]*`' docs/TOUR.md | tr -d '`' | sort -u); do
    file=${place%%:*} name=${place#*:}
    checked=$((checked + 1))
    if [ ! -f "$file" ]; then
        echo "docs/TOUR.md names $place: there is no $file"
        failures=$((failures + 1))
    elif ! grep -qE "(^|[^A-Za-z0-9_])$name[[:space:]]*\(" "$file"; then
        echo "docs/TOUR.md names $place: $file has no $name"
        failures=$((failures + 1))
    fi
done
[ "$checked" -ge 20 ] || { echo "only $checked file:function places found in docs/TOUR.md"; exit 1; }
[ "$failures" -eq 0 ] && echo "the tour's $checked places exist"
exit $((failures > 0))
