#!/usr/bin/env bash
# bench/build_nccl.sh ($1) on a fake NCCL source tree, whose make src.build records the
# variables it was given and leaves what NCCL's build leaves (a header, the library and its
# links): the build is asked for sm_90 and the backend's kernels alone, the tarball is named
# after the header's version and holds the header, the stripped library, its links and the
# licence, the sizes and the time are printed, and the kernels' sources generated for one
# pattern are kept for the same one (a build cut short goes on) but not for another.
set -u
script=$1
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
for tool in make xz cc readelf; do
    command -v "$tool" >/dev/null || { echo "skip: no $tool"; exit 77; }
done

src=$work/nccl-src
mkdir -p "$src"
printf 'NCCL licence\n' >"$src/LICENSE.txt"
printf 'int nccl_fake(void) { return 2; }\n' >"$work/fake.c"
cat >"$src/Makefile" <<'MAKE'
src.build:
	mkdir -p $(BUILDDIR)/include $(BUILDDIR)/lib $(BUILDDIR)/obj/device/gensrc
	printf '%s\n' '$(ONLY_FUNCS)' >$(BUILDDIR)/only_funcs_given
	printf '%s\n' '$(NVCC_GENCODE)' >$(BUILDDIR)/gencode_given
	printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 30\n#define NCCL_PATCH 7\n' >$(BUILDDIR)/include/nccl.h
	cc -shared -fPIC -g -o $(BUILDDIR)/lib/libnccl.so.2.30.7 $(CURDIR)/../fake.c
	ln -sf libnccl.so.2.30.7 $(BUILDDIR)/lib/libnccl.so.2
	ln -sf libnccl.so.2 $(BUILDDIR)/lib/libnccl.so
MAKE

bash "$script" "$src" "$work/out" >"$work/stdout" 2>&1 || fail "build_nccl.sh failed: $(tail -5 "$work/stdout")"
tarball=$work/out/nccl-2.30.7-sm90.tar.xz
[ -f "$tarball" ] || fail "no $tarball: $(ls "$work/out")"
grep -q 'AllReduce (Sum|PreMulSum|SumPostDiv|MinMax) (f32|f64|f16|bf16|i32|u32)' "$src/build/only_funcs_given" ||
    fail "not the backend's kernels alone: $(cat "$src/build/only_funcs_given")"
grep -qx -- '-gencode=arch=compute_90,code=sm_90' "$src/build/gencode_given" ||
    fail "not sm_90 alone: $(cat "$src/build/gencode_given")"
for line in 'compressed_bytes [0-9]+ ' 'unpacked_bytes [0-9]+ ' 'build_seconds [0-9]+ \(make -j[0-9]+\)'; do
    grep -qE "^$line" "$work/stdout" || fail "no '$line' printed: $(cat "$work/stdout")"
done
mkdir -p "$work/unpacked"
tar -xJf "$tarball" -C "$work/unpacked" || fail "the tarball does not unpack"
pkg=$work/unpacked/nccl-2.30.7-sm90
for file in include/nccl.h lib/libnccl.so.2.30.7 LICENSE.txt; do
    [ -f "$pkg/$file" ] || fail "the tarball has no $file"
done
if [ "$(readlink "$pkg/lib/libnccl.so")" != libnccl.so.2 ] || [ "$(readlink "$pkg/lib/libnccl.so.2")" != libnccl.so.2.30.7 ]
then
    fail "the library's links are not kept: $(ls -l "$pkg/lib")"
fi
readelf -S "$pkg/lib/libnccl.so.2.30.7" | grep -q '\.debug_info' && fail "the library is not stripped"
readelf -S "$src/build/lib/libnccl.so.2.30.7" | grep -q '\.debug_info' || fail "the fake library had nothing to strip"

# the kernels' sources: kept for the same pattern, regenerated for another
touch "$src/build/obj/device/gensrc/kernel.cu"
bash "$script" "$src" "$work/out" >"$work/stdout" 2>&1 || fail "a second build failed: $(tail -5 "$work/stdout")"
[ -f "$src/build/obj/device/gensrc/kernel.cu" ] || fail "the same pattern regenerated the kernels' sources"
NCCL_FUNCS=all bash "$script" "$src" "$work/out" >"$work/stdout" 2>&1 || fail "NCCL_FUNCS=all failed"
[ -f "$src/build/obj/device/gensrc/kernel.cu" ] && fail "another pattern kept the kernels' sources"
[ "$(cat "$src/build/only_funcs_given")" = "" ] || fail "NCCL_FUNCS=all still restricts: $(cat "$src/build/only_funcs_given")"

bash "$script" --help >"$work/help" 2>&1 || fail "--help exits $?"
grep -q 'SRC_DIR \[OUT\]' "$work/help" || fail "--help prints no usage: $(cat "$work/help")"
bash "$script" >/dev/null 2>&1 && fail "no source folder was accepted"

[ "$failures" -eq 0 ] && echo "build_nccl: checks passed"
exit $((failures > 0))
