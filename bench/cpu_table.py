#!/usr/bin/env python3
"""The CPU comparisons' JSON (bench/compare_torch.py --json, bench/compare_encode.py --json, as
bench/compare_cpu.sh writes them) as markdown tables, for bench/RESULTS.md and README: each
figure as its median and [min-max] over the rounds, the engine / other ratios of the medians,
the worst load of the case's rounds, and the conditions above each table. Needs no PyTorch.

  python3 bench/cpu_table.py cpu-compare/torch.json cpu-compare/encode.json
"""
import argparse
import json
import sys


def figure(summary, digits):
    return f"{summary['median']:.{digits}f} [{summary['min']:.{digits}f}-{summary['max']:.{digits}f}]"


def worst_load(loads):
    """The busiest round's load: the 1-minute average, and the others' CPU on our cores."""
    return (f"{max(load['loadavg_1m'] for load in loads):.2f} / "
            f"{max(load['others_on_pinned_cores'] for load in loads):.2f}")


def conditions(run):
    facts = run["conditions"]
    versions = ", ".join(f"{name} {version}" for name, version in facts["versions"].items())
    return (f"{facts['cpu']}, {facts['threads']} thread(s) on core(s) {','.join(map(str, facts['cores']))} for "
            f"every engine ({facts['time_utc']}; {versions}); {facts['quiet']}")


def row(cells):
    return "| " + " | ".join(cells) + " |"


def header(columns, text_columns):
    return row(columns) + "\n" + row(["---"] * text_columns + ["---:"] * (len(columns) - text_columns))


LOAD_COLUMN = "worst load: 1 min / others on our cores"


def train_tables(document):
    print(f"Training step, ms (texts: {document['texts']}). {document['rule']}\n")
    for run in document["runs"]:
        print(f"{conditions(run)}:\n")
        print(header(["preset", "batch", "step", "engine ms", "PyTorch ms", "engine / PyTorch", LOAD_COLUMN], 3))
        for case in run["cases"]:
            print(row([case["preset"], str(case["batch"]), case["step"], figure(case["engine"], 1),
                       figure(case["torch"], 1), f"{case['ratio']:.2f}", worst_load(case["loads"])]))
        print()


def encode_tables(document):
    padding = ", ".join(f"batch {batch} {share:.1%}" for batch, share in document["padding_share"].items())
    print(f"Encoding with {document['model']} at max length {document['max_length']} (texts: {document['texts']}; "
          f"padding computed by the other engines, whose batches are taken in order of characters: {padding}). "
          f"{document['rule']}\n")
    for run in document["runs"]:
        engines = [name for name in run["cases"][0] if isinstance(run["cases"][0][name], dict) and "median" in
                   run["cases"][0][name]]
        print(f"{conditions(run)}:\n")
        print(header(["case"] + engines + [f"gradcache / {name}" for name in engines[1:]] + [LOAD_COLUMN], 1))
        for case in run["cases"]:
            name = "latency ms, one text" if case["batch"] == 0 else f"texts/s, batch {case['batch']}"
            print(row([name] + [figure(case[engine], 2) for engine in engines] +
                      [f"{case['ratios'][engine]:.2f}" for engine in engines[1:]] + [worst_load(case["loads"])]))
        print()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("files", nargs="+", metavar="JSON")
    args = parser.parse_args(argv)
    for path in args.files:
        with open(path) as source:
            document = json.load(source)
        tables = {"compare_torch": train_tables, "compare_encode": encode_tables}.get(document.get("script"))
        if tables is None:
            sys.exit(f"cpu_table: {path} is not compare_torch.py's or compare_encode.py's --json")
        tables(document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
