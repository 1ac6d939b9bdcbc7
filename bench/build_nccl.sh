#!/usr/bin/env bash
# Builds NCCL's library from its source for sm_90 (H100/H200) alone and packs it small
# enough for the device tool to carry (it carries at most 64 MiB of working tree per call).
#   bash bench/build_nccl.sh SRC_DIR [OUT]     (OUT defaults to .nccl/, which git ignores)
# SRC_DIR is an unpacked NCCL source tree, e.g. from the mirror:
#   mkdir -p /tmp/nccl-src && git -C /work/.mirror/NVIDIA+nccl/repo archive v2.30.7-1 | tar -x -C /tmp/nccl-src
# Writes OUT/nccl-VERSION-sm90.tar.xz holding include/nccl.h, lib/libnccl.so* (stripped) and
# LICENSE.txt; unpack it and configure with -Dnccl-root=<that folder>. Only the kernels of the
# collectives gradcache issues are built (NCCL's ONLY_FUNCS; see below), so another program's
# collective of another dtype or op fails with NCCL's "unsupported" error. Environment:
# CUDA_HOME (default /usr/local/cuda), JOBS (default: the machine's cores), NCCL_FUNCS (an
# ONLY_FUNCS pattern; "all": every kernel, several times the build time and size).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    [ "${1:-}" = --help ] || [ "${1:-}" = -h ]
    exit $?
fi
src=$(cd "$1" && pwd)
out=$(mkdir -p "${2:-.nccl}" && cd "${2:-.nccl}" && pwd)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
jobs=${JOBS:-$(nproc)}
build="$src/build"
# dist/nccl_backend.c's collectives: all-reduce and reduce-scatter of sum, avg (PreMulSum for
# floats, SumPostDiv for integers), max and min (MinMax) over f32, f64, f16, bf16 and i32 (whose
# sum NCCL runs as u32's), all-gather, broadcast, and send/recv (bytes). Every algorithm and
# protocol of each, so that NCCL's choice is the one a full build makes. NCCL generates a
# kernel source per function group: this builds 42 of the 132 of 2.30.7.
reductions="(Sum|PreMulSum|SumPostDiv|MinMax) (f32|f64|f16|bf16|i32|u32) * *"
funcs=${NCCL_FUNCS:-"AllReduce $reductions|ReduceScatter $reductions|AllGather * *|Broadcast * *|SendRecv"}
[ "$funcs" = all ] && funcs=

start=$(date +%s)
# NCCL generates the kernels' sources once, for the ONLY_FUNCS of its first build: regenerated
# when the pattern was another (what they compile to is rebuilt from them); with the same one, a
# build cut short goes on where it stopped
stamp="$build/only_funcs"
if [ "$(cat "$stamp" 2>/dev/null)" != "$funcs" ]; then
    rm -rf "$build/obj/device/gensrc"
    mkdir -p "$build" && printf '%s' "$funcs" >"$stamp"
fi
# src.build is the library alone (no packages, no tests); one gencode keeps the fat binary to
# the one architecture we are lent.
make -C "$src" -j"$jobs" src.build CUDA_HOME="$cuda_home" BUILDDIR="$build" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" ONLY_FUNCS="$funcs"
seconds=$(($(date +%s) - start))

# The version from the header it built, so the tarball's name cannot disagree with its contents.
version=$(awk '/#define NCCL_MAJOR/ {ma=$3} /#define NCCL_MINOR/ {mi=$3} /#define NCCL_PATCH/ {pa=$3}
               END {print ma "." mi "." pa}' "$build/include/nccl.h")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/nccl-$version-sm90"
mkdir -p "$pkg/include" "$pkg/lib"
cp "$build/include/nccl.h" "$pkg/include/"
cp -P "$build"/lib/libnccl.so* "$pkg/lib/"
cp "$src/LICENSE.txt" "$pkg/"
# Symbols are of no use to the tests and are most of the unstripped library.
strip --strip-unneeded "$pkg"/lib/libnccl.so.*.*.*
tarball="$out/nccl-$version-sm90.tar.xz"
tar -C "$stage" -cf - "nccl-$version-sm90" | xz -9 -T"$jobs" > "$tarball"

unpacked=$(du -sb "$pkg" | cut -f1)
packed=$(stat -c %s "$tarball")
echo "nccl $version for sm_90: $tarball"
echo "compressed_bytes $packed ($((packed / 1048576)) MiB)"
echo "unpacked_bytes $unpacked ($((unpacked / 1048576)) MiB)"
echo "build_seconds $seconds (make -j$jobs)"
