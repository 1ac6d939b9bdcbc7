"""Encoding text side by side: gradcache (bench/bench_encode), PyTorch (transformers' BertModel,
mean pooling, inference mode) and ONNX Runtime (the same BertModel exported by torch.onnx with
dynamic batch and length axes, default graph optimisations, intra-op threads set), on the same
texts and model folder, tokenization included for all three (the Hugging Face fast tokenizer
for PyTorch and ONNX Runtime). Batches are taken in order of length, as sentence-transformers
and gradcache do. Checks that the three agree, then prints, per thread count: the latency of
one text at a time over --latency-texts texts and the throughput at each batch size, the
median of --rounds alternating rounds, and gradcache's ratios to the others.

    /tmp/venv/bin/python bench/compare_encode.py --build build --model models/minilm --threads 1,2

Needs torch, transformers, onnx and onnxruntime in the Python that runs it."""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime
import torch
from transformers import AutoTokenizer, BertModel


def make_texts(path, model, count, seed):
    """Sentences of random words of the model's vocabulary, lengths log-normal (median 12 words,
    a few past 128 tokens): queries and passages alike."""
    rng = random.Random(seed)
    with open(os.path.join(model, "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2)
    with open(path, "w") as f:
        for _ in range(count):
            n = max(2, min(150, int(rng.lognormvariate(2.5, 0.6))))
            f.write(" ".join(rng.choice(words) for _ in range(n)).capitalize() + ".\n")


def in_length_order(texts, batch):
    """Batches of texts in order of length, and the permutation that restores the input's order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[i:i + batch] for i in range(0, len(order), batch)], order


def mean_pool(hidden, mask):
    mask = mask[..., None].astype(np.float32)
    pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class TorchEncoder:
    def __init__(self, model, max_length):
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = BertModel.from_pretrained(model).eval()
        self.max_length = max_length

    def encode(self, texts):
        with torch.inference_mode():
            batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt")
            hidden = self.model(**batch).last_hidden_state
            return mean_pool(hidden.numpy(), batch["attention_mask"].numpy())


class OrtEncoder:
    def __init__(self, onnx_path, tokenizer, max_length, threads):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer, self.max_length = tokenizer, max_length

    def encode(self, texts):
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        feed = {k: v.astype(np.int64) for k, v in batch.items() if k in self.inputs}
        hidden = self.session.run(["last_hidden_state"], feed)[0]
        return mean_pool(hidden, batch["attention_mask"])


class Hidden(torch.nn.Module):
    """BertModel with its three inputs by name and last_hidden_state out: what is exported."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state


def export_onnx(torch_encoder, path):
    example = torch_encoder.tokenizer(["a short text", "a somewhat longer text of words"], padding=True,
                                      return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "length"} for name in names}
    axes["last_hidden_state"] = {0: "batch", 1: "length"}
    torch.onnx.export(Hidden(torch_encoder.model), (example["input_ids"], example["attention_mask"], example["token_type_ids"]),
                      path, input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                      opset_version=17, dynamo=False)
    torch_encoder.model.eval()  # the exporter leaves the module in training mode (dropout on)


def python_run(encoder, texts, batch):
    """(seconds per text for batch 0: one at a time, each timed; else texts per second, embeddings)."""
    if batch == 0:
        encoder.encode(texts[:8])  # warm-up, as bench_encode's
        times, rows = [], []
        for text in texts:
            start = time.perf_counter()
            rows.append(encoder.encode([text])[0])
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3, np.stack(rows)
    batches, order = in_length_order(texts, batch)
    encoder.encode(texts[:batch])  # warm-up, a batch's worth, as bench_encode's
    out = np.empty((len(texts), 384), np.float32)
    start = time.perf_counter()
    for indices in batches:
        out[indices] = encoder.encode([texts[i] for i in indices])
    return len(texts) / (time.perf_counter() - start), out


def engine_run(build, model, texts_path, count, batch, threads, max_length):
    out = tempfile.NamedTemporaryFile(suffix=".tsv", delete=False).name
    env = dict(os.environ, GC_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    text = subprocess.run([os.path.join(build, "bench", "bench_encode"), "--model", model, "--texts", texts_path,
                           "--count", str(count), "--batch", str(batch), "--max-length", str(max_length), "--out", out],
                          env=env, check=True, capture_output=True, text=True).stdout
    values = dict(line.split() for line in text.splitlines())
    embeddings = np.loadtxt(out, dtype=np.float32, ndmin=2)
    os.unlink(out)
    return float(values["latency_median_ms" if batch == 0 else "texts_per_s"]), embeddings


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", default="models/minilm")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--latency-texts", type=int, default=100)
    parser.add_argument("--throughput-texts", type=int, default=512)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    texts_path = os.path.join(work, "texts.txt")
    make_texts(texts_path, args.model, max(args.latency_texts, args.throughput_texts), args.seed)
    with open(texts_path) as f:
        texts = f.read().splitlines()
    torch_encoder = TorchEncoder(args.model, args.max_length)
    onnx_path = os.path.join(work, "model.onnx")
    export_onnx(torch_encoder, onnx_path)
    cases = [0] + [int(b) for b in args.batches.split(",")]
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, load {os.getloadavg()}")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        ort_encoder = OrtEncoder(onnx_path, torch_encoder.tokenizer, args.max_length, threads)
        contenders = {"gradcache": None, "torch": torch_encoder, "onnxruntime": ort_encoder}
        for batch in cases:
            count = args.latency_texts if batch == 0 else args.throughput_texts
            figures = {name: [] for name in contenders}
            outputs = {}
            for _ in range(args.rounds):
                for name, encoder in contenders.items():
                    if encoder is None:
                        figure, out = engine_run(args.build, args.model, texts_path, count, batch, threads,
                                                 args.max_length)
                    else:
                        figure, out = python_run(encoder, texts[:count], batch)
                    figures[name].append(figure)
                    outputs[name] = out
            diff_torch = float(np.abs(outputs["gradcache"] - outputs["torch"]).max())
            diff_ort = float(np.abs(outputs["onnxruntime"] - outputs["torch"]).max())
            if max(diff_torch, diff_ort) > 1e-4:
                sys.exit(f"outputs disagree: gradcache-torch {diff_torch:.2g}, onnxruntime-torch {diff_ort:.2g}")
            med = {name: statistics.median(values) for name, values in figures.items()}
            if batch == 0:
                print(f"threads {threads}, batch 1 latency over {count} texts (median ms): gradcache "
                      f"{med['gradcache']:.2f}, torch {med['torch']:.2f}, onnxruntime {med['onnxruntime']:.2f}; "
                      f"gradcache/onnxruntime {med['gradcache'] / med['onnxruntime']:.2f}, gradcache/torch "
                      f"{med['gradcache'] / med['torch']:.2f} (max |diff| vs torch {diff_torch:.1e}, ort {diff_ort:.1e})")
            else:
                print(f"threads {threads}, batch {batch} throughput over {count} texts (texts/s): gradcache "
                      f"{med['gradcache']:.1f}, torch {med['torch']:.1f}, onnxruntime {med['onnxruntime']:.1f}; "
                      f"gradcache/onnxruntime {med['gradcache'] / med['onnxruntime']:.2f}, gradcache/torch "
                      f"{med['gradcache'] / med['torch']:.2f} (max |diff| vs torch {diff_torch:.1e}, ort {diff_ort:.1e})")
            sys.stdout.flush()
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
