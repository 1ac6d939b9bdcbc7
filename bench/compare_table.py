#!/usr/bin/env python3
"""The GPU comparison's tables (bench/gpu_check.sh's compare and minilm parts): the CSV files of
several runs, the engine's (`gradcache bench memory --csv`) and PyTorch's
(bench/torch_gradcache.py --csv), side by side at each batch size asked for, as markdown.

  python3 bench/compare_table.py --batches 4096 "engine f32=e32.csv" "engine bf16=e16.csv" \\
      "PyTorch SDPA f32=sdpa.csv" "PyTorch autocast+SDPA bf16=amp.csv"

Each argument is LABEL=FILE; the label's last word is the run's precision, and each row's
ratios are to the first run of the same precision (list the engine's first). Two tables per
batch size: the plain step, then Gradient Cache at each chunk size with its time over the plain step's of the
same run. A run's peak is the largest live bytes of a step plus, for the engine, its own
workspace (the CSV's workspace_bytes: the cuBLAS workspace, which PyTorch's caching
allocator holds and so counts in max_memory_allocated). A missing file (a step that failed or
ran out of time) or a run that did not fit is a row that says so. Needs no PyTorch.
"""
import argparse
import csv
import os
import sys

MIB = 2**20


def read_runs(path):
    """The rows of one CSV file, or None when there is none."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as source:
        return list(csv.DictReader(source))


def peak_bytes(row):
    return int(row["peak_bytes"]) + int(row.get("workspace_bytes") or 0) if row["peak_bytes"] else None


def ratio(mine, theirs):
    return f"{mine / theirs:.2f}" if mine is not None and theirs else "-"


class Run:
    """One labelled file: its rows at the batch, by (mode, chunk, loss)."""

    def __init__(self, argument, batch):
        if "=" not in argument:
            raise SystemExit(f"compare_table: '{argument}' is not LABEL=FILE")
        self.label, path = argument.rsplit("=", 1)
        self.precision = self.label.split()[-1]
        rows = read_runs(path)
        self.missing = rows is None
        self.rows = [row for row in rows or [] if int(row["batch"]) == batch]

    def find(self, mode, chunk=None, loss=None):
        """The first row of `mode` (at `chunk`, with `loss`, when given), or None."""
        for row in self.rows:
            if row["mode"] == mode and (chunk is None or int(row["chunk"]) == chunk) and \
                    (loss is None or row["loss"] == loss):
                return row
        return None

    def losses(self, mode):
        return list(dict.fromkeys(row["loss"] for row in self.rows if row["mode"] == mode))


def measured(row):
    """(step ms, peak bytes) of a row that fits, or None."""
    if row is None or row["fits"] != "1":
        return None
    return float(row["step_ms"]), peak_bytes(row)


def cells(result, reference):
    """step ms, peak MiB, time / reference, peak / reference."""
    if result is None:
        return ["does not fit", "-", "-", "-"]
    ms, peak = result
    ref_ms, ref_peak = reference or (None, None)
    return [f"{ms:.1f}", f"{peak / MIB:.0f}" if peak is not None else "-", ratio(ms, ref_ms), ratio(peak, ref_peak)]


PLAIN_COLUMNS = ["run", "loss", "step ms", "peak MiB", "time / ref", "peak / ref"]
GRADCACHE_COLUMNS = ["run", "loss", "chunk", "step ms", "GC / plain", "peak MiB", "time / ref", "peak / ref"]


def header(columns):
    """A markdown table's header: the first two columns text, the others numbers."""
    print("| " + " | ".join(columns) + " |")
    print("| " + " | ".join(["---"] * 2 + ["---:"] * (len(columns) - 2)) + " |")


def without_rows(run, mode, columns):
    """Whether the run has no `mode` row (no file, or not measured), after printing a row
    that says which."""
    if not run.missing and run.find(mode):
        return False
    cells = ["-"] * (len(columns) - 1)
    cells[columns.index("step ms") - 1] = "no result" if run.missing else "not measured"
    print(f"| {run.label} | " + " | ".join(cells) + " |")
    return True


def plain_table(runs, references, batch):
    print(f"Plain step (the whole batch in one graph), batch {batch}; ratios to the first run of the same precision:\n")
    header(PLAIN_COLUMNS)
    for run in runs:
        if without_rows(run, "plain", PLAIN_COLUMNS):
            continue
        reference = measured(references[run.precision].find("plain"))
        for loss in run.losses("plain"):
            print(f"| {run.label} | {loss} | " + " | ".join(cells(measured(run.find("plain", loss=loss)), reference)) + " |")


def gradcache_table(runs, references, batch):
    print(f"\nGradient Cache, batch {batch}: time over the same run's plain step (GC / plain), and ratios to the "
          "first run of the same precision at the same chunk:\n")
    header(GRADCACHE_COLUMNS)
    for run in runs:
        if without_rows(run, "gc", GRADCACHE_COLUMNS):
            continue
        reference_run = references[run.precision]
        for loss in run.losses("gc"):
            # the plain step of the same loss, else the run's first (the engine's is always full)
            plain = measured(run.find("plain", loss=loss) or run.find("plain"))
            for row in (r for r in run.rows if r["mode"] == "gc" and r["loss"] == loss):
                chunk = int(row["chunk"])
                result = measured(row)
                ms, peak, by_time, by_peak = cells(result, measured(reference_run.find("gc", chunk)))
                over_plain = ratio(result[0], plain[0]) if result and plain else "-"
                print(f"| {run.label} | {loss} | {chunk} | {ms} | {over_plain} | {peak} | {by_time} | {by_peak} |")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--batches", required=True, help="the batch sizes of the tables, comma-separated")
    parser.add_argument("--title", help="a heading above the tables")
    parser.add_argument("runs", nargs="+", metavar="LABEL=FILE")
    args = parser.parse_args(argv)
    for batch in (int(text) for text in args.batches.split(",")):
        runs = [Run(argument, batch) for argument in args.runs]
        references = {}
        for run in runs:
            references.setdefault(run.precision, run)
        if args.title:
            print(f"### {args.title}, batch {batch}\n")
        plain_table(runs, references, batch)
        gradcache_table(runs, references, batch)
        print()
    print("\nPeaks: a step's largest live bytes (parameters, data and gradients included); the engine's with its "
          "workspace added (cuBLAS's; PyTorch's is inside max_memory_allocated). bf16: the engine's parameters and "
          "activations in bf16; PyTorch's, autocast over f32 parameters.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
