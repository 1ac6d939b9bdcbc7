#!/usr/bin/env bash
# The two commands of the README's quick start:
#   bash quickstart.sh          set up, build, and run the main job
#   bash quickstart.sh test     set up, build, and run the test suites (cpu, dist, and cuda where
#                               a GPU is present; without one the cuda tests are skipped)
# Set-up installs what a fresh Debian/Ubuntu machine lacks (meson, ninja, pkg-config, a C
# compiler, WordNet) with apt-get, as root or through sudo. Extra meson options can be passed in
# GC_MESON_ARGS (for example "-Dcuda=disabled" or "-Dwerror=true"); the build directory is
# GC_BUILD_DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")"

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
}

install_missing_tools() {
    local missing=()
    command -v meson >/dev/null || missing+=(meson)
    command -v ninja >/dev/null || missing+=(ninja-build)
    command -v pkg-config >/dev/null || missing+=(pkg-config)
    command -v cc >/dev/null || missing+=(gcc libc6-dev)
    [ -d /usr/share/wordnet ] || missing+=(wordnet-base) # for gradcache data wordnet
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "quickstart: installing ${missing[*]}" >&2
    local sudo=()
    [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() {
    # CUDA's compiler lives here when the toolkit is installed but not on PATH.
    [ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
    local build_dir=${GC_BUILD_DIR:-build}
    # shellcheck disable=SC2086 # GC_MESON_ARGS is a list of words on purpose
    if [ -f "$build_dir/build.ninja" ]; then
        meson configure "$build_dir" ${GC_MESON_ARGS:-} >/dev/null
    else
        meson setup "$build_dir" ${GC_MESON_ARGS:-} >/dev/null
    fi
    ninja -C "$build_dir" >/dev/null
}

run_tests() {
    local build_dir=${GC_BUILD_DIR:-build}
    local status=0
    meson test -C "$build_dir" --suite cpu --suite dist --suite cuda --print-errorlogs --num-processes 2 || status=$?
    python3 tests/summarize.py "$build_dir/meson-logs/testlog.json" || true
    return $status
}

main_job() {
    local build_dir=${GC_BUILD_DIR:-build}
    local gradcache="$build_dir/cli/gradcache" data=data/wordnet out=runs/quickstart
    # A short real training run on WordNet (definition -> word) with Gradient Cache: batches
    # of 128 in chunks of 32, a tiny encoder, a few minutes on two CPU cores; then its
    # retrieval quality on the held-out synsets and the memory-versus-batch chart.
    "$gradcache" data wordnet --out "$data"
    "$gradcache" train --data "$data" --model-size tiny --batch-size 128 --gc --gc-chunk-size 32 \
        --steps 300 --lr 1e-3 --out "$out" "$@"
    "$gradcache" eval --model "$out" --data "$data"
    "$gradcache" bench memory --csv "$out/memory.csv" --svg "$out/memory.svg"
    echo
    echo "log:        $out/log.jsonl (one JSON object per step)"
    echo "checkpoint: $out/checkpoint.safetensors (resume with the same flags and --resume)"
    echo "model:      $out/model.safetensors"
    echo "chart:      $out/memory.svg (table: $out/memory.csv)"
}

case "${1:-run}" in
    run) install_missing_tools; build; shift || true; main_job "$@" ;;
    test) install_missing_tools; build; run_tests ;;
    -h|--help|help) usage ;;
    *) echo "quickstart: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac
