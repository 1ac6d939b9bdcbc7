#!/usr/bin/env python3
"""Where a program's GPU time goes, from Nsight Compute's per-kernel summary.

    ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv PROGRAM ... >ncu.csv
    python3 bench/ncu_kernels.py ncu.csv [--top N]

ncu prints one row per kernel and launch shape, with the mean duration and the number of
launches; this adds the launches of a kernel up over its shapes and prints a markdown table,
longest first: the kernel (its name without the argument list), its share of all kernel time,
launches, and mean microseconds. The program's own output may come before the rows: only the
lines from ncu's header on are read. bench/gpu_check.sh's `profile` part runs it.
"""
import argparse
import collections
import csv
import sys


def kernel_rows(path):
    """The summary's rows as dicts, whatever the program printed before its header."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"') and '"Kernel Name"' in line), None)
    if start is None:
        sys.exit(f"ncu_kernels: {path} has no ncu per-kernel summary (a header with \"Kernel Name\")")
    return csv.DictReader(lines[start:])


def short_name(kernel):
    """The name without its argument list: 'void f<float, op>(const float *, ...)' -> 'f<float, op>'."""
    depth = 0
    for i, c in enumerate(kernel):
        if c in "<[":
            depth += 1
        elif c in ">]":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            kernel = kernel[:i]
            break
    return kernel.removeprefix("void ").strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="the output of ncu --print-summary per-kernel --csv")
    parser.add_argument("--top", type=int, default=20, help="kernels to list (default 20); the rest make one row")
    args = parser.parse_args()

    total_ns = collections.Counter()
    launches = collections.Counter()
    for row in kernel_rows(args.csv):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"ns": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(row["Metric Unit"], None)
        if scale is None:
            sys.exit(f"ncu_kernels: unknown unit {row['Metric Unit']!r}")
        count = int(row["Invocations"].replace(",", ""))
        mean = float(row["Average"].replace(",", "")) * scale
        name = short_name(row["Kernel Name"])
        total_ns[name] += count * mean
        launches[name] += count
    everything = sum(total_ns.values())
    if not everything:
        sys.exit("ncu_kernels: no kernel time in the summary")

    print(f"{sum(launches.values())} launches, {everything / 1e6:.2f} ms of kernel time\n")
    print("| kernel | share | launches | mean µs |")
    print("| --- | ---: | ---: | ---: |")
    ranked = total_ns.most_common()
    for name, ns in ranked[: args.top]:
        print(f"| `{name[:100]}` | {100 * ns / everything:.1f}% | {launches[name]} | {ns / launches[name] / 1e3:.1f} |")
    rest = ranked[args.top:]
    if rest:
        ns = sum(n for _, n in rest)
        count = sum(launches[name] for name, _ in rest)
        print(f"| {len(rest)} other kernels | {100 * ns / everything:.1f}% | {count} | {ns / count / 1e3:.1f} |")


if __name__ == "__main__":
    main()
