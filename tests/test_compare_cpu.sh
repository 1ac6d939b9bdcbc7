#!/bin/bash
# The CPU comparison scripts (bench/compare_cpu.sh, compare_torch.py, compare_encode.py, their
# helpers cpu_conditions.py, bench_texts.py, and cpu_table.py) kept from rotting ($1: the bench folder, $2: the
# build folder, $3: a small WordNet dataset folder, $4: the tiny BERT folder):
#   - with python3 alone: the pinning and statistics helpers; each script's --dry-run (the plan,
#     every thread pinned, the engine's commands under taskset, engines alternated by round, on
#     the real texts); a missing dataset is one line naming the command that makes it;
#   - where a python3 has PyTorch: compare_torch.py for real at a tiny size, its JSON (both
#     engines' step times on the same WordNet batch, a load per round, no thread left unpinned)
#     and cpu_table.py's markdown of it;
#   - where one has transformers too: compare_encode.py likewise against PyTorch, and against
#     both ONNX Runtime columns where onnx and onnxruntime import.
# Skipped (77) without python3; the parts whose modules are missing are skipped alone, and
# said so. GC_TEST_PYTHON: a python with them all (a venv's).
set -u
bench=$1
build=$2
wordnet=$3
tiny_bert=$4
. "$(dirname "$0")/find_python.sh"
find_python os
if [ -z "$python" ]; then
    echo "skip: no python3"
    exit 77
fi
plain_python=$python
# shellcheck source=tests/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
dir=$work

# The helpers, without any third-party module.
"$plain_python" - "$bench" >"$dir/helpers" 2>&1 <<'EOF' || fail "cpu_conditions/bench_texts: $(cat "$dir/helpers")"
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import bench_texts, cpu_conditions as cc
assert cc.parse_cores("0,2-3,2") == [0, 2, 3]
first = sorted(os.sched_getaffinity(0))[0]
assert cc.choose_cores(1) == [first]
assert cc.round_order(["a", "b", "c"], 0) == ["a", "b", "c"] and cc.round_order(["a", "b", "c"], 4) == ["b", "c", "a"]
assert cc.summary([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "rounds": [3.0, 1.0, 2.0]}
assert cc.pinned_command(["x", "-y"], [0, 2]) == ["taskset", "-c", "0,2", "x", "-y"]
env = cc.thread_environment(3, {"PATH": "/bin"})
assert all(env[v] == "3" for v in cc.THREAD_VARIABLES) and env["PATH"] == "/bin"
cc.pin_and_verify([first])
assert cc.unpinned_threads([first]) == [] and os.environ["OMP_NUM_THREADS"] == "1"
# the cores to choose from are those allowed before pinning narrowed them
assert len(cc.ALLOWED_CORES) < 2 or cc.choose_cores(2) == cc.ALLOWED_CORES[:2]
with cc.RoundLoad([first]) as load:
    sum(range(10**6))
result = load.result()
assert set(result) >= {"loadavg_1m", "others_cores", "others_on_pinned_cores"} and result["others_cores"] >= 0
# too many threads for the cores given: one line, not a traceback
run = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {sys.argv[1]!r}); import cpu_conditions; "
                      f"cpu_conditions.choose_cores(2, '{first}')"], capture_output=True, text=True)
assert run.returncode != 0 and "2 threads need 2 cores" in run.stderr, run.stderr
assert cc.quiet_verdict([{"others_on_pinned_cores": 0.05}]).startswith("quiet")
assert cc.quiet_verdict([{"others_on_pinned_cores": 0.05}, {"others_on_pinned_cores": 0.5}]).startswith("NOT QUIET")
# lengths 1, 2, 3, 4 in batches of 2: (1, 2) padded to 2, (3, 4) to 4: 2 cells of 12 are padding
assert abs(bench_texts.padding_share([4, 1, 3, 2], 2) - 2 / 12) < 1e-12
# the same texts taken in the order of other keys (their characters): (4, 1) padded to 4, (3, 2) to 3
assert abs(bench_texts.padding_share([4, 1, 3, 2], 2, keys=[1, 2, 3, 4]) - 4 / 14) < 1e-12
print("helpers ok")
EOF

cores=$("$plain_python" -c 'import os; print(len(os.sched_getaffinity(0)))')
first=$("$plain_python" -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')
threads=1
[ "$cores" -ge 2 ] && threads=1,2

# The dry runs: the plan and the pinning, no model, and no third-party module imported (each is
# shadowed by one that fails to import).
mkdir "$dir/shadow"
for module in torch numpy transformers onnx onnxruntime; do
    echo "raise ImportError('a dry run imported $module')" >"$dir/shadow/$module.py"
done
export PYTHONPATH=$dir/shadow${PYTHONPATH:+:$PYTHONPATH}
"$plain_python" "$bench/compare_torch.py" --dry-run --build "$build" --data "$wordnet" --threads "$threads" \
    --presets tiny --batches 16 --chunk 8 --rounds 2 >"$dir/torch_plan" 2>&1 || fail "compare_torch --dry-run: $(cat "$dir/torch_plan")"
check grep -q "threads 1: cores \[$first\], environment OMP_NUM_THREADS=1 .*GC_NUM_THREADS=1; every thread pinned" \
    "$dir/torch_plan" "compare_torch --dry-run: no pinned 1-thread plan: $(cat "$dir/torch_plan")"
check grep -q "tiny batch 16 gc 8: rounds engine,torch | torch,engine; engine: taskset -c $first .*bench_train_step .*--gc-chunk 8 .*--pairs " \
    "$dir/torch_plan" "compare_torch --dry-run: the Gradient Cache case's plan: $(cat "$dir/torch_plan")"
"$plain_python" "$bench/compare_encode.py" --dry-run --build "$build" --model "$tiny_bert" --data "$wordnet" \
    --threads "$threads" --batches 8 --latency-texts 4 --throughput-texts 16 --rounds 3 >"$dir/encode_plan" 2>&1 ||
    fail "compare_encode --dry-run: $(cat "$dir/encode_plan")"
check grep -q "^16 texts of definitions; engines gradcache, torch, onnxruntime, onnxruntime-bert" "$dir/encode_plan" \
    "compare_encode --dry-run: texts and engines: $(cat "$dir/encode_plan")"
check grep -q "latency: rounds gradcache,torch,onnxruntime,onnxruntime-bert | torch,onnxruntime,onnxruntime-bert,gradcache | .*engine: taskset -c $first .*bench_encode .*--count 4 --batch 0" \
    "$dir/encode_plan" "compare_encode --dry-run: the latency plan: $(cat "$dir/encode_plan")"
if [ "$cores" -ge 2 ]; then
    check grep -q "threads 2: cores \[$first, " "$dir/encode_plan" "compare_encode --dry-run: no 2-core plan"
fi
bash "$bench/compare_cpu.sh" --dry-run --python "$plain_python" --build "$build" --model "$tiny_bert" --data "$wordnet" \
    --out "$dir/driver" >"$dir/driver_plan" 2>&1 || fail "compare_cpu.sh --dry-run: $(cat "$dir/driver_plan")"
check grep -q "small batch 512 gc 32: rounds engine,torch | torch,engine | engine,torch" "$dir/driver_plan" \
    "compare_cpu.sh --dry-run: README's training set: $(cat "$dir/driver_plan")"
check grep -q "batch 128: rounds .*--count 512 --batch 128 --max-length 128" "$dir/driver_plan" \
    "compare_cpu.sh --dry-run: README's encode set: $(cat "$dir/driver_plan")"
expect_error "gradcache data wordnet --out" "$plain_python" "$bench/compare_torch.py" --dry-run --build "$build" \
    --data "$dir/no_such_folder"

# For real, where the modules are.
export PYTHONPATH=${PYTHONPATH#"$dir/shadow"}
PYTHONPATH=${PYTHONPATH#:}
find_python torch numpy
if [ -z "$python" ]; then
    echo "skip: compare_torch.py and compare_encode.py runs (no python3 with PyTorch and numpy)"
else
    "$python" "$bench/compare_torch.py" --build "$build" --data "$wordnet" --threads 1 --presets tiny --batches 16 \
        --chunk 8 --rounds 2 --reps 1 --warmup 0 --max-length 16 --json "$dir/torch.json" >"$dir/torch" 2>&1 ||
        fail "compare_torch: $(cat "$dir/torch")"
    "$plain_python" - "$dir/torch.json" >"$dir/torch_check" 2>&1 <<'EOF' || fail "compare_torch's JSON: $(cat "$dir/torch_check")"
import json, sys
run, = json.load(open(sys.argv[1]))["runs"]
assert run["conditions"]["threads"] == 1 and run["conditions"]["unpinned_threads"] == 0, run["conditions"]
assert "quiet" in run["conditions"]["quiet"].lower()
assert [case["step"] for case in run["cases"]] == ["plain", "gc 8"]
for case in run["cases"]:
    assert len(case["engine"]["rounds"]) == 2 and len(case["torch"]["rounds"]) == 2 and len(case["loads"]) == 2
    assert case["ratio"] > 0 and case["engine"]["min"] <= case["engine"]["median"] <= case["engine"]["max"]
    # real texts: definitions (queries) up to 16 bytes, words (passages) shorter, padded
    assert case["shape"][0] == [16, 16] and case["shape"][1][0] == 16 and case["padding"]["passages"] > 0, case
EOF
    "$plain_python" "$bench/cpu_table.py" "$dir/torch.json" >"$dir/torch.md" 2>&1 || fail "cpu_table: $(cat "$dir/torch.md")"
    check grep -q "^| tiny | 16 | gc 8 | [0-9.]* \\[[0-9.]*-[0-9.]*\\] | " "$dir/torch.md" "cpu_table: $(cat "$dir/torch.md")"
    find_python torch numpy transformers
    if [ -z "$python" ]; then
        echo "skip: compare_encode.py run (no python3 with PyTorch and transformers)"
    else
        engines=gradcache,torch
        if "$python" -c "import onnx, onnxruntime.transformers.optimizer" 2>/dev/null; then
            engines=gradcache,torch,onnxruntime,onnxruntime-bert
        else
            echo "skip: the ONNX Runtime columns (no onnx and onnxruntime beside transformers)"
        fi
        "$python" "$bench/compare_encode.py" --build "$build" --model "$tiny_bert" --data "$wordnet" --threads 1 \
            --max-length 16 --batches 8 --latency-texts 4 --throughput-texts 16 --rounds 2 --engines "$engines" \
            --json "$dir/encode.json" >"$dir/encode" 2>&1 || fail "compare_encode: $(cat "$dir/encode")"
        "$plain_python" - "$dir/encode.json" "$engines" >"$dir/encode_check" 2>&1 <<'EOF' ||
import json, sys
document = json.load(open(sys.argv[1]))
engines = sys.argv[2].split(",")
run, = document["runs"]
assert run["conditions"]["unpinned_threads"] == 0 and 0 < document["padding_share"]["8"] < 1, document
assert [case["batch"] for case in run["cases"]] == [0, 8]
for case in run["cases"]:
    assert sorted(case["ratios"]) == sorted(engines[1:]) and len(case["loads"]) == 2, case
    assert all(len(case[name]["rounds"]) == 2 for name in engines), case
EOF
            fail "compare_encode's JSON: $(cat "$dir/encode_check")"
        "$plain_python" "$bench/cpu_table.py" "$dir/encode.json" >"$dir/encode.md" 2>&1 ||
            fail "cpu_table: $(cat "$dir/encode.md")"
        check grep -q "^| latency ms, one text | [0-9.]* \\[" "$dir/encode.md" "cpu_table: $(cat "$dir/encode.md")"
    fi
fi
cli_summary
