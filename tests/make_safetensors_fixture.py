#!/usr/bin/env python3
"""Interoperability with the official safetensors library, in both directions.

1. Writes tests/fixtures/pytorch.safetensors with the official library (from PyTorch
   tensors of every dtype gradcache reads, a 0-dim and an empty one, and metadata);
   tests/test_checkpoint.c reads it and checks every value, and checks that what gradcache
   writes for the same content is byte-identical to it.
2. Given the path of a file written by test_checkpoint (GC_CHECKPOINT_EXPORT=<path>), reads
   it with the official library and checks every tensor and metadata value against what
   the test wrote.

Run by hand (the fixture is committed, so the tests need no Python); torch must be
importable, and safetensors comes from PyPI, e.g. in a throwaway virtual environment:

    python3 -m venv --system-site-packages /tmp/st-venv
    /tmp/st-venv/bin/pip install safetensors
    /tmp/st-venv/bin/python tests/make_safetensors_fixture.py            # rewrites the fixture
    GC_CHECKPOINT_EXPORT=/tmp/ours.safetensors build/tests/test_checkpoint
    /tmp/st-venv/bin/python tests/make_safetensors_fixture.py /tmp/ours.safetensors

The values are written out by hand in test_checkpoint.c as well: change both together.
"""
import math
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pytorch.safetensors")

# One metadata key only: the official writer orders several keys at random.
FIXTURE_METADATA = {"source": 'make_safetensors_fixture.py "h\u00e9llo" \u2713\n'}


def fixture_tensors():
    # The names sort in the reverse of the writer's layout order (F64, F32, I32, BF16, F16),
    # so that byte-identical output proves the layout rule, not just name order.
    return {
        "y.weight": torch.tensor([[1.5, -2.0, 0.25], [1024.0, -0.0, 0.1]], dtype=torch.float32),
        "v.half": torch.tensor([1.0, -0.5, 65504.0, 2.0**-24], dtype=torch.float16),
        "w.brain": torch.tensor([[1.0, -3.0], [2.0**-7, 255.0 * 2.0**120]], dtype=torch.bfloat16),
        "x.ids": torch.tensor([-(2**31), 0, 2**31 - 1], dtype=torch.int32),
        "z.scale": torch.tensor(math.pi, dtype=torch.float64),
        "y.empty": torch.zeros((0, 3), dtype=torch.float32),
    }


# What test_checkpoint writes to $GC_CHECKPOINT_EXPORT.
EXPORT_METADATA = {"format": "pt", "note": 'tab\there "quoted" \u2713', "z": "last"}


def export_tensors():
    return {
        "a.f64": torch.tensor([0.5, -1e300], dtype=torch.float64),
        "b.f32": torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float32),
        "c.bf16": torch.tensor([1.0, -2.0, 0.5], dtype=torch.bfloat16),
        "d.f16": torch.tensor([[[[0.25, -8.0]]]], dtype=torch.float16),
        "e.i32": torch.tensor([-7, 123456789], dtype=torch.int32),
        "scalar": torch.tensor(42.0, dtype=torch.float32),
        "empty": torch.zeros((0,), dtype=torch.float16),
        'na\u00efve "quoted" name': torch.tensor([7.0], dtype=torch.float32),
    }


def same(want, got):
    return want.dtype == got.dtype and want.shape == got.shape and torch.equal(want, got)


def check_export(path):
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
    got = load_file(path)
    want = export_tensors()
    bad = [name for name in want if name not in got or not same(want[name], got[name])]
    bad += [name for name in got if name not in want]
    if metadata != EXPORT_METADATA:
        bad.append("__metadata__ %r" % (metadata,))
    for name in sorted(got):
        print("  %-22r %-14s %s" % (name, got[name].dtype, list(got[name].shape)))
    print("metadata:", metadata)
    if bad:
        print("MISMATCH:", bad)
        return 1
    print("OK: the official library reads all %d tensors and %d metadata entries of %s exactly"
          % (len(got), len(metadata), path))
    return 0


def main():
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    save_file(fixture_tensors(), FIXTURE, metadata=FIXTURE_METADATA)
    print("wrote %s (%d bytes)" % (FIXTURE, os.path.getsize(FIXTURE)))
    return check_export(sys.argv[1]) if len(sys.argv) > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
