#!/usr/bin/env bash
# docs/TOUR.md's stops and docs/DESIGN.md's path of a step name `file:function`; every one must
# exist: the file in the repository and the function in it. And the tour names every example
# program, so a new one cannot be left out of the reading order. Run by meson with the source
# root as $1.
set -uo pipefail
root=${1:?usage: test_tour.sh SOURCE_ROOT}
cd "$root" || exit 99
failures=0 checked=0
tour=$(grep -oE '`[A-Za-z0-9_./-]+\.(c|h|cu|cuh):[A-Za-z_][A-Za-z0-9_]*`' docs/TOUR.md | wc -l)
places=$(grep -ohE '`[A-Za-z0-9_./-]+\.(c|h|cu|cuh):[A-Za-z_][A-Za-z0-9_]*`' docs/TOUR.md docs/DESIGN.md | tr -d '`' | sort -u)
for place in $places; do
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
for example in examples/*.c; do
    grep -qF "$(basename "$example" .c)" docs/TOUR.md && continue
    echo "docs/TOUR.md does not name $example"
    failures=$((failures + 1))
done
[ "$tour" -ge 20 ] || { echo "only $tour file:function places found in docs/TOUR.md"; exit 1; }
[ "$failures" -eq 0 ] && echo "the $checked places the tour and the design name exist"
exit $((failures > 0))
