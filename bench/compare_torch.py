"""Training-step time of this engine against PyTorch, side by side in one run.

For each thread count, preset, batch size and step kind (plain, Gradient Cache), the engine's
step (build/bench/bench_train_step, a subprocess) and PyTorch's (bench/torch_train_step.py, in
this process) run on the very same batch: --batch pairs of real texts (a seeded sample of the
WordNet definition -> word pairs, data/wordnet/train.tsv), byte-tokenized by the engine and
each side padded to its longest text as the trainer pads it, written to a file PyTorch reads
(--texts synthetic: max-length random rows instead, the old figures' input).

Conditions (bench/cpu_conditions.py): N threads means N cores for both, every thread of both
processes pinned to them, the OpenMP/BLAS pools and PyTorch's intra-op threads N, its inter-op 1.

The step-time rule, the same for both: a step is the forward, the loss, the backward, gradient
clipping to norm 1 and the AdamW update (the batch is tokenized before, untimed), wall clock
around it. A round runs --warmup untimed steps then --reps timed ones for each engine, the
engine in a fresh process, PyTorch in this one, whoever went first last round going second
this round; a round's figure is the median of its --reps steps. Printed: the median of the
rounds' figures, their spread [min-max], the ratio engine / PyTorch of the medians (below 1:
the engine is faster), and the load of each round (the 1-minute load average before it; the
CPU the machine's other processes took during it, in cores, in all and on the pinned cores).
--json writes all of it, the conditions included.

    PYTHONPATH=... /tmp/venv-st/bin/python bench/compare_torch.py --threads 1,2 --json torch.json
    /usr/bin/python3 bench/compare_torch.py --presets tiny --batches 128 --threads 1 --rounds 3
    python3 bench/compare_torch.py --dry-run ...    # the plan and the pinning, without PyTorch

Needs PyTorch (with numpy) in the Python that runs it, Debian's python3-torch or PyPI's; the
build's bench/bench_train_step; and data/wordnet (`build/cli/gradcache data wordnet --out
data/wordnet`). bench/compare_cpu.sh runs the whole set README quotes.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_texts  # noqa: E402
import cpu_conditions as cc  # noqa: E402

ENGINES = ["engine", "torch"]


def int_list(text):
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of positive integers")
    return values


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--build", default="build", help="the meson build folder (default: build)")
    parser.add_argument("--presets", default="tiny,small", help="comma-separated (default: tiny,small)")
    parser.add_argument("--batches", type=int_list, default=[128, 512], help="comma-separated (default: 128,512)")
    parser.add_argument("--chunk", type=int, default=32,
                        help="Gradient Cache rows per chunk, 0: plain steps only (default: 32)")
    parser.add_argument("--threads", type=int_list, default=[2], help="thread counts, comma-separated (default: 2)")
    parser.add_argument("--cores", help="the cores to pin to, e.g. 0-1 (default: this process's first N)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case (default: 3)")
    parser.add_argument("--reps", type=int, default=2, help="timed steps per round and engine (default: 2)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before them (default: 1)")
    parser.add_argument("--max-length", type=int, default=32, help="at most this many tokens per text (default: 32)")
    parser.add_argument("--texts", choices=["pairs", "synthetic"], default="pairs",
                        help="WordNet pairs from --data (default), or synthetic max-length rows")
    parser.add_argument("--data", default="data/wordnet", help="the WordNet dataset folder (default: data/wordnet)")
    parser.add_argument("--seed", type=int, default=40, help="which pairs are sampled (default: 40)")
    parser.add_argument("--json", help="write the whole result here")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and check the pinning and the inputs; run no step, import no PyTorch")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.reps < 1 or args.warmup < 0 or args.chunk < 0 or args.max_length < 2:
        parser.error("--rounds, --reps must be positive, --warmup, --chunk >= 0, --max-length >= 2")
    return args


def cases(args):
    """(preset, batch, chunk) in the order they run; chunk 0 is the plain step."""
    chunks = [0] + ([args.chunk] if args.chunk else [])
    return [(preset, batch, chunk) for preset in args.presets.split(",") for batch in args.batches for chunk in chunks]


def engine_command(args, preset, batch, chunk, pairs_path, batch_file, cores):
    command = [os.path.join(args.build, "bench", "bench_train_step"), "--model-size", preset, "--batch", str(batch),
               "--gc-chunk", str(chunk), "--max-length", str(args.max_length), "--warmup", str(args.warmup),
               "--reps", str(args.reps), "--batch-file", batch_file]
    if pairs_path:
        command += ["--pairs", pairs_path]
    return cc.pinned_command(command, cores)


def engine_round(command, threads):
    """The step times (ms) of one round of the engine."""
    output = cc.run_checked(command, cc.thread_environment(threads))
    return [float(line.split()[1]) for line in output.splitlines() if line.startswith("step_ms ")]


def read_batch(path):
    """The engine's batch file: [(query ids, mask), (passage ids, mask)] as torch tensors."""
    import numpy as np
    import torch
    raw = open(path, "rb").read()
    rows, query_length, passage_length = np.frombuffer(raw, np.int64, 3)
    arrays, offset = [], 24
    for length in (query_length, passage_length):
        for dtype in (np.int32, np.float32):
            cells = int(rows * length)
            arrays.append(np.frombuffer(raw, dtype, cells, offset).reshape(int(rows), int(length)))
            offset += cells * 4
    ids = [torch.from_numpy(a.astype(np.int64)) for a in arrays[0::2]]
    masks = [torch.from_numpy(a.copy()) for a in arrays[1::2]]
    return list(zip(ids, masks))


def torch_round(args, trainer, inputs, chunk):
    """The step times (ms) of one round of PyTorch."""
    times = []
    for run in range(args.warmup + args.reps):
        start = time.perf_counter()
        if chunk:
            trainer.gradcache_step(inputs, chunk)
        else:
            trainer.plain_step(inputs)
        if run >= args.warmup:
            times.append(1e3 * (time.perf_counter() - start))
    return times


def padding(inputs):
    """The share of padding in each side's [B, T] mask."""
    return {side: round(1 - float(mask.mean()), 3) for side, (_, mask) in zip(("queries", "passages"), inputs)}


def run_case(args, threads, cores, preset, batch, chunk, pairs_path, folder):
    """One case's rounds: {engine, torch: summaries, ratio, loads, padding}."""
    import statistics

    import torch
    import torch_train_step
    torch.manual_seed(0)
    trainer = torch_train_step.Trainer(preset, args.max_length)
    batch_file = os.path.join(folder, f"batch_{preset}_{batch}.bin")
    command = engine_command(args, preset, batch, chunk, pairs_path, batch_file, cores)
    figures, loads, inputs = {name: [] for name in ENGINES}, [], None
    for round_index in range(args.rounds):
        with cc.RoundLoad(cores) as load:
            for name in cc.round_order(ENGINES, round_index):  # round 0: the engine first, it writes the batch
                if name == "engine":
                    times = engine_round(command, threads)
                else:
                    inputs = inputs or read_batch(batch_file)
                    times = torch_round(args, trainer, inputs, chunk)
                figures[name].append(statistics.median(times))
        loads.append(load.result())
    result = {name: cc.summary(values) for name, values in figures.items()}
    return {"preset": preset, "batch": batch, "step": f"gc {chunk}" if chunk else "plain", "chunk": chunk,
            "threads": threads, **result, "ratio": result["engine"]["median"] / result["torch"]["median"],
            "loads": loads, "padding": padding(inputs), "shape": [list(ids.shape) for ids, _ in inputs]}


def spread(summary):
    return f"{summary['median']:9.1f} [{summary['min']:.1f}-{summary['max']:.1f}]"


def print_case(row):
    loads = "; ".join(cc.load_text(load) for load in row["loads"])
    print(f"{row['preset']:<7}{row['batch']:>6}  {row['step']:<8}{spread(row['engine']):>24}{spread(row['torch']):>24}"
          f"{row['ratio']:>14.2f}   {loads}", flush=True)


def print_gradcache_ratios(rows):
    plain = {(r["preset"], r["batch"]): r for r in rows if not r["chunk"]}
    gradcache = [r for r in rows if r["chunk"]]
    if not gradcache:
        return
    print(f"\nGradient Cache step / plain step, medians:\n{'preset':<7}{'batch':>6}{'engine':>9}{'torch':>9}")
    for row in gradcache:
        base = plain[row["preset"], row["batch"]]
        print(f"{row['preset']:<7}{row['batch']:>6}{row['engine']['median'] / base['engine']['median']:>9.2f}"
              f"{row['torch']['median'] / base['torch']['median']:>9.2f}")


def dry_run(args, pairs_path, folder):
    """The plan, the commands, and the checks that need no PyTorch: the binary, the pairs, and
    that pinning reaches every thread, one started after it included."""
    binary = os.path.join(args.build, "bench", "bench_train_step")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_torch: {binary} is missing: build it (ninja -C {args.build})")
    for threads in args.threads:
        cores = cc.choose_cores(threads, args.cores)
        cc.pin_and_verify(cores)
        print(f"threads {threads}: cores {cores}, environment "
              f"{' '.join(f'{v}={threads}' for v in cc.THREAD_VARIABLES)}; every thread pinned")
        for preset, batch, chunk in cases(args):
            command = engine_command(args, preset, batch, chunk, pairs_path, os.path.join(folder, "batch.bin"), cores)
            orders = " | ".join(",".join(cc.round_order(ENGINES, r)) for r in range(args.rounds))
            print(f"  {preset} batch {batch} {'gc ' + str(chunk) if chunk else 'plain'}: rounds {orders}; "
                  f"engine: {' '.join(command)}")
    return 0


def run_threads(args, threads, versions, texts, pairs_path, folder):
    """Every case on `threads` threads: {conditions, cases}, printed as it goes."""
    import torch
    cores = cc.choose_cores(threads, args.cores)
    cc.pin_and_verify(cores)
    torch.set_num_threads(threads)
    facts = cc.conditions(threads, cores, versions)
    print(f"{cc.conditions_line(facts)}\ntexts: {texts}, at most {args.max_length} tokens; each figure: the median "
          f"[min-max] over {args.rounds} alternated rounds of each round's median of {args.reps} steps (after "
          f"{args.warmup} warm-up); engine: {args.build}/bench/bench_train_step")
    print(f"{'preset':<7}{'batch':>6}  {'step':<8}{'engine ms':>24}{'torch ms':>24}{'engine/torch':>14}   load per round")
    rows = []
    for preset, batch, chunk in cases(args):
        rows.append(run_case(args, threads, cores, preset, batch, chunk, pairs_path, folder))
        print_case(rows[-1])
    facts["unpinned_threads"] = len(cc.unpinned_threads(cores))  # 0: PyTorch's pools stayed on the cores
    print_gradcache_ratios(rows)
    print("padding (share of the [B, T] masks): " + "; ".join(
        f"{r['preset']} {r['batch']}: queries {r['padding']['queries']:.1%}, passages {r['padding']['passages']:.1%}"
        for r in rows if not r["chunk"]))
    facts["quiet"] = cc.quiet_verdict([load for row in rows for load in row["loads"]])
    print(facts["quiet"] + "\n")
    return {"conditions": facts, "cases": rows}


def main(argv):
    args = parse_args(argv)
    # Before torch is imported: its OpenMP and BLAS pools read these once.
    os.environ.update(cc.thread_environment(args.threads[0], {}))
    with tempfile.TemporaryDirectory() as folder:
        pairs_path = None
        if args.texts == "pairs":
            pairs_path = os.path.join(folder, "pairs.tsv")
            bench_texts.write_pairs(pairs_path, bench_texts.sample_pairs(args.data, max(args.batches), args.seed))
        if args.dry_run:
            return dry_run(args, pairs_path, folder)
        import torch
        torch.set_num_interop_threads(1)
        versions = {"torch": torch.__version__, **cc.module_versions(["numpy"])}
        texts = (f"{max(args.batches)} pairs sampled from {args.data}/train.tsv (seed {args.seed}), the first B of "
                 "them at batch B" if pairs_path else "synthetic rows of max length")
        document = {"script": "compare_torch", "argv": sys.argv, "texts": texts,
                    "rule": cc.paragraph(__doc__, "The step-time rule"),
                    "runs": [run_threads(args, threads, versions, texts, pairs_path, folder) for threads in args.threads]}
        if args.json:
            cc.write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
