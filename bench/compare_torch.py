"""Training-step time of this engine against PyTorch, side by side in one run.

For each preset, batch size and step kind (plain, Gradient Cache), the engine's step
(build/bench/bench_train_step, a subprocess) and PyTorch's (bench/torch_train_step.py, in
this process) run on the same batch, the same number of threads, in alternating rounds
(engine first in odd rounds, PyTorch first in even ones), so that a change in the machine's
load hits both. Prints the median step time of each and the ratios, with the load average
before and after. Run it with Debian's python3-torch, or with PyPI's torch (with numpy) in
a virtual environment:

    /usr/bin/python3 bench/compare_torch.py [--build build] [--threads 2] [--rounds 3]
    venv/bin/python bench/compare_torch.py ...
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the meson build folder (default: build)")
    parser.add_argument("--presets", default="tiny,small", help="comma-separated (default: tiny,small)")
    parser.add_argument("--batches", default="128,512", help="comma-separated (default: 128,512)")
    parser.add_argument("--chunk", type=int, default=32, help="Gradient Cache rows per chunk (default: 32)")
    parser.add_argument("--threads", type=int, default=2, help="threads for both engines (default: 2)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case (default: 3)")
    parser.add_argument("--reps", type=int, default=2, help="measured steps per round and engine (default: 2)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps per round (default: 1)")
    parser.add_argument("--max-length", type=int, default=32, help="tokens per text (default: 32)")
    return parser.parse_args()


ARGS = parse_args()
# Before torch is imported: its OpenMP and BLAS thread pools read these once.
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train_step  # noqa: E402


def engine_steps(preset, batch, chunk, reps, batch_file=None):
    """Step times (ms) of this engine, from a fresh bench_train_step process."""
    command = [os.path.join(ARGS.build, "bench", "bench_train_step"), "--model-size", preset, "--batch", str(batch),
               "--gc-chunk", str(chunk), "--max-length", str(ARGS.max_length), "--warmup", str(ARGS.warmup),
               "--reps", str(reps)]
    if batch_file:
        command += ["--batch-file", batch_file]
    env = dict(os.environ, GC_NUM_THREADS=str(ARGS.threads))
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return [float(line.split()[1]) for line in output.splitlines() if line.startswith("step_ms ")]


def read_batch(path, batch):
    """The engine's batch file: query ids, query mask, passage ids, passage mask, [batch, T] each."""
    cells = batch * ARGS.max_length
    raw = open(path, "rb").read()
    arrays, offset = [], 0
    for dtype in (np.int32, np.float32, np.int32, np.float32):
        arrays.append(np.frombuffer(raw, dtype=dtype, count=cells, offset=offset).reshape(batch, ARGS.max_length))
        offset += cells * 4
    ids = [torch.from_numpy(a.astype(np.int64)) for a in arrays[0::2]]
    masks = [torch.from_numpy(a.copy()) for a in arrays[1::2]]
    return list(zip(ids, masks))


def torch_steps(trainer, inputs, chunk, reps):
    times = []
    for run in range(ARGS.warmup + reps):
        start = time.perf_counter()
        if chunk:
            trainer.gradcache_step(inputs, chunk)
        else:
            trainer.plain_step(inputs)
        if run >= ARGS.warmup:
            times.append(1e3 * (time.perf_counter() - start))
    return times


def compare(preset, batch, chunk):
    """(engine median ms, torch median ms) of one case over the alternating rounds."""
    torch.manual_seed(0)
    trainer = torch_train_step.Trainer(preset, ARGS.max_length)
    with tempfile.TemporaryDirectory() as folder:
        batch_file = os.path.join(folder, "batch.bin")
        engine = engine_steps(preset, batch, chunk, ARGS.reps, batch_file)  # round 1, engine first
        inputs = read_batch(batch_file, batch)
    reference = torch_steps(trainer, inputs, chunk, ARGS.reps)
    for round_index in range(1, ARGS.rounds):
        if round_index % 2:
            reference += torch_steps(trainer, inputs, chunk, ARGS.reps)
            engine += engine_steps(preset, batch, chunk, ARGS.reps)
        else:
            engine += engine_steps(preset, batch, chunk, ARGS.reps)
            reference += torch_steps(trainer, inputs, chunk, ARGS.reps)
    return statistics.median(engine), statistics.median(reference)


def main():
    torch.set_num_threads(ARGS.threads)
    load_before = os.getloadavg()
    print(f"engine: {ARGS.build}/bench/bench_train_step; PyTorch {torch.__version__} "
          f"({torch.get_num_threads()} threads); {ARGS.threads} threads each; median of "
          f"{ARGS.rounds} rounds x {ARGS.reps} steps (after {ARGS.warmup} warm-up per round)")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} "
          f"on {os.cpu_count()} CPUs")
    header = f"{'preset':<7}{'batch':>6}  {'step':<10}{'engine ms':>11}{'torch ms':>11}{'engine/torch':>14}"
    print(header)
    plain = {}
    rows = []
    for preset in ARGS.presets.split(","):
        for batch in (int(b) for b in ARGS.batches.split(",")):
            for chunk in (0, ARGS.chunk):
                engine, reference = compare(preset, batch, chunk)
                kind = f"gc {chunk}" if chunk else "plain"
                print(f"{preset:<7}{batch:>6}  {kind:<10}{engine:>11.1f}{reference:>11.1f}{engine / reference:>14.2f}",
                      flush=True)
                if not chunk:
                    plain[preset, batch] = (engine, reference)
                else:
                    rows.append((preset, batch, engine / plain[preset, batch][0],
                                 reference / plain[preset, batch][1]))
    print(f"\nGradient Cache step / plain step (chunk {ARGS.chunk}):")
    print(f"{'preset':<7}{'batch':>6}{'engine':>9}{'torch':>9}")
    for preset, batch, engine_ratio, torch_ratio in rows:
        print(f"{preset:<7}{batch:>6}{engine_ratio:>9.2f}{torch_ratio:>9.2f}")
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()
