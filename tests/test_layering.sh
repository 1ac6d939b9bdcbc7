#!/usr/bin/env bash
# The library's layers include only downwards (docs/DESIGN.md, "Layers"). Every #include of the
# library's sources and public headers is resolved to the folder it names and checked against the
# table below, whose rows run from the bottom up: a folder may include its own files, libc and
# POSIX, and the folders its row names, which must be rows above it, so that the table cannot
# describe a cycle. A public header (include/gradcache/) counts as the folder that implements it.
# Besides the table: outside tensor/, nothing in the library reaches the kernel table
# (tensor/backend*.h, tensor/cpu/), and nothing outside cli/ includes a cli/ file. A new folder
# or public header fails here until it is given its place. Run by meson with the source root as $1.
set -uo pipefail
root=${1:?usage: test_layering.sh SOURCE_ROOT}
cd "$root" || exit 99

#  folder          may include (rows above it only)
layers='
   base
   tensor          base
   autograd        base tensor
   nn/layers       base tensor autograd
   nn/optim        base tensor autograd nn/layers
   nn/io           base tensor autograd nn/layers
   nn/tokenize     base tensor
   nn/pretrained   base tensor autograd nn/layers nn/io nn/tokenize
   dist            base tensor autograd nn/layers nn/optim
   nn/losses       base tensor autograd dist
   gradcache       base tensor autograd nn/layers nn/optim nn/losses dist
   train           base tensor autograd nn/layers nn/optim nn/io nn/tokenize nn/pretrained dist nn/losses gradcache
   fetch           base train
   plot            base
   umbrella        base tensor autograd nn/layers nn/optim nn/io nn/tokenize nn/pretrained dist nn/losses gradcache train fetch plot
'
# the folder of each public header (gradcache.h includes them all: no library file may)
declare -A public=(
    [error.h]=base [clock.h]=base [hash.h]=base [files.h]=base [config.h]=base
    [dtype.h]=tensor [device.h]=tensor [tensor.h]=tensor [memory.h]=tensor [ops.h]=tensor [random.h]=tensor
    [autograd.h]=autograd
    [nn.h]=nn/layers [rng.h]=nn/layers [optim.h]=nn/optim [loss_scaler.h]=nn/optim [checkpoint.h]=nn/io
    [tokenizer.h]=nn/tokenize [pretrained.h]=nn/pretrained
    [dist.h]=dist [ddp.h]=dist [zero.h]=dist [launch.h]=dist [loss.h]=nn/losses
    [cache.h]=gradcache [train.h]=train [measure.h]=train [model_fetch.h]=fetch [plot.h]=plot [gradcache.h]=umbrella
)

failures=0
fail() { echo "$1"; failures=$((failures + 1)); }

declare -A allowed=() # "folder target" -> 1
rows=()
while read -r folder uses; do
    [ -n "$folder" ] || continue
    for use in $uses; do
        [[ " ${rows[*]} " == *" $use "* ]] || fail "table: $folder names $use, which is not a row above it"
        allowed["$folder $use"]=1
    done
    rows+=("$folder")
done <<<"$layers"

# the row a library path belongs to (the longest row that is a prefix of it), or nothing
folder_of() {
    local path=$1 row best=
    if [[ $path == include/gradcache/* ]]; then
        best=${public[${path#include/gradcache/}]-}
        [ -n "$best" ] || best="?public"
    else
        for row in "${rows[@]}"; do
            [[ $path == "$row"/* && ${#row} -gt ${#best} ]] && best=$row
        done
    fi
    folder=$best
}

# a path with its "x/../" removed
normalise() {
    local path=$1
    while [[ $path =~ ^(.*/)?[^/.][^/]*/\.\./(.*)$ ]]; do path=${BASH_REMATCH[1]}${BASH_REMATCH[2]}; done
    normalised=$path
}

# git's list; outside a clone, the source folders (not a build folder inside the tree)
sources=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null ||
          find base tensor autograd nn dist gradcache train include cli bench examples tests \
              -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
checked=0
while IFS= read -r file; do
    case $file in
    cli/* ) continue ;;
    bench/* | examples/* | tests/*)
        grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"cli/' "$file" && fail "$file includes a cli/ file"
        continue ;;
    esac
    folder_of "$file"
    me=$folder
    if [ -z "$me" ]; then fail "$file: its folder has no row in the table"; continue; fi
    if [ "$me" = "?public" ]; then fail "$file: a public header with no folder in the table"; continue; fi
    dir=$(dirname "$file")
    while IFS= read -r include; do
        checked=$((checked + 1))
        # as the compiler looks: beside the file, then under include/ and the root
        normalise "$dir/$include"
        if [[ $include == gradcache/* && ( -f include/$include || $include == gradcache/config.h ) ]]; then
            target=include/$include
        elif [ -f "$normalised" ]; then
            target=$normalised
        elif [ -f "$include" ]; then
            target=$include
        else
            fail "$file includes \"$include\", which is not in the repository"; continue
        fi
        folder_of "$target"
        if [[ -z $folder || $folder == "?public" ]]; then
            fail "$file includes $target, which belongs to no row of the table"
        elif [[ $folder != "$me" && -z ${allowed["$me $folder"]-} ]]; then
            fail "$file ($me) includes $target ($folder): $me may not include $folder"
        elif [[ $me != tensor && $target =~ ^tensor/(backend|cpu/) ]]; then
            fail "$file includes $target: only tensor/ reaches the kernel table"
        fi
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*("([^"]+)"|<(gradcache\/[^>]+)>).*/\2\3/p' "$file")
done <<<"$sources"

[ "$checked" -gt 100 ] || fail "only $checked includes found: the pattern is broken"
[ "$failures" -eq 0 ] && echo "all $checked includes of the library point down"
exit $((failures > 0))
