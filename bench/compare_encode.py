"""Encoding text side by side: gradcache (bench/bench_encode), PyTorch (transformers' BertModel,
mean pooling, inference mode), and ONNX Runtime twice: on the eager export of the same BertModel
(torch.onnx, dynamic batch and length axes, its default graph optimisations), and on that export
after ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer, model_type bert:
fused attention, skip-layernorm, bias-GELU). The same texts and model folder for all; checks
that they agree, then prints per thread count the latency of one text at a time and the
throughput at each batch size, with the engine's ratios to the others.

Texts (bench/bench_texts.py): the WordNet definitions by default (dev.tsv's distinct ones, in
file order), with their real padding, printed for each batch size; --texts words, a FILE (a
stated corpus, one text per line), or synthetic (the old random-word texts).

Conditions (bench/cpu_conditions.py): N threads means N cores for everyone, every thread of
this process and of the engine's pinned to them: the engine's tokenizer thread (it tokenizes
the next batch while the model runs) shares those N cores. OpenMP/BLAS pools N, PyTorch's
intra-op threads N and inter-op 1, ONNX Runtime's intra-op N, inter-op 1, sequential.

The time rule, the same for all: tokenization (each engine's own: the engine's C tokenizer,
the Hugging Face fast tokenizer for the others), the model, mean pooling and normalisation
are timed, wall clock. Latency: 8 warm-up texts, then each of --latency-texts texts encoded
alone and timed; a round's figure is the median over the texts. Throughput: a warm-up batch,
then --throughput-texts texts in batches of B taken in order of characters (as
sentence-transformers takes them; gradcache orders them by bytes, longest first), timed as a
whole; a round's figure is texts per second. The engines
take turns within a round, the order rotated each round. Printed: the median of --rounds
rounds' figures, their spread [min-max], the engine / other ratios of the medians (latency:
below 1 is faster; throughput: above 1), the load of each round (cpu_conditions.RoundLoad).
--json writes all of it, the conditions included.

    PYTHONPATH=/tmp/pkgs-ort /tmp/venv-st/bin/python bench/compare_encode.py --build build \\
        --model models/minilm --threads 1,2 --json encode.json
    python3 bench/compare_encode.py --dry-run ...   # the plan, the pinning, the texts; imports nothing else

Needs torch, transformers, onnx and onnxruntime in the Python that runs it (onnxruntime ships
the optimizer; it wants coloredlogs, sympy and packaging), e.g. beside an existing torch +
transformers environment: pip install --target /tmp/pkgs-ort onnxruntime onnx coloredlogs
sympy packaging, then PYTHONPATH=/tmp/pkgs-ort. The model: models/minilm
(bench/make_minilm_folder.py); the texts: data/wordnet (`build/cli/gradcache data wordnet
--out data/wordnet`).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_texts  # noqa: E402
import cpu_conditions as cc  # noqa: E402

ENGINES = ["gradcache", "torch", "onnxruntime", "onnxruntime-bert"]
AGREEMENT = 1e-4  # max |difference| of unit embeddings: f32 sums in another order stay far below it


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", default="models/minilm")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default: 1,2)")
    parser.add_argument("--cores", help="the cores to pin to, e.g. 0-1 (default: this process's first N)")
    parser.add_argument("--batches", default="32,128", help="throughput batch sizes (default: 32,128)")
    parser.add_argument("--latency-texts", type=int, default=100)
    parser.add_argument("--throughput-texts", type=int, default=512)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", default="definitions",
                        help="definitions (default), words, synthetic, or a file of one text per line")
    parser.add_argument("--data", default="data/wordnet", help="the WordNet dataset folder (default: data/wordnet)")
    parser.add_argument("--seed", type=int, default=30, help="--texts synthetic's seed")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"a subset of {','.join(ENGINES)}")
    parser.add_argument("--json", help="write the whole result here")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and check the pinning and the texts; import and run no model")
    args = parser.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    args.engines = args.engines.split(",")
    if set(args.engines) - set(ENGINES) or "gradcache" not in args.engines or len(args.engines) < 2:
        parser.error(f"--engines: gradcache and at least one of {ENGINES[1:]}")
    if min(args.threads + args.batches) < 1 or args.rounds < 1 or min(args.latency_texts, args.throughput_texts) < 1:
        parser.error("--threads, --batches, --rounds and the text counts must be positive")
    return args


def mean_pool(hidden, mask):
    import numpy as np
    mask = mask[..., None].astype(np.float32)
    pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class TorchEncoder:
    def __init__(self, model, max_length):
        from transformers import AutoTokenizer, BertModel
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = BertModel.from_pretrained(model).eval()
        self.max_length = max_length

    def encode(self, texts):
        import torch
        with torch.inference_mode():
            batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt")
            hidden = self.model(**batch).last_hidden_state
            return mean_pool(hidden.numpy(), batch["attention_mask"].numpy())


class OrtEncoder:
    def __init__(self, onnx_path, tokenizer, max_length, threads):
        import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        self.session = onnxruntime.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer, self.max_length = tokenizer, max_length

    def encode(self, texts):
        import numpy as np
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        feed = {k: v.astype(np.int64) for k, v in batch.items() if k in self.inputs}
        hidden = self.session.run(None, feed)[0]
        return mean_pool(hidden, batch["attention_mask"])


def export_onnx(torch_encoder, path):
    """The eager export: BertModel's three inputs by name, last_hidden_state out."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    example = torch_encoder.tokenizer(["a short text", "a somewhat longer text of words"], padding=True,
                                      return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "length"} for name in names + ["last_hidden_state"]}
    torch.onnx.export(Hidden(torch_encoder.model), tuple(example[name] for name in names), path, input_names=names,
                      output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
    torch_encoder.model.eval()  # the exporter leaves the module in training mode (dropout on)


def optimize_onnx(path, model, out_path):
    """ONNX Runtime's BERT optimizer on the eager export (its fusions; the session applies its
    graph optimisations on top, as on the plain export)."""
    from onnxruntime.transformers import optimizer
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    optimized = optimizer.optimize_model(path, model_type="bert", num_heads=config["num_attention_heads"],
                                         hidden_size=config["hidden_size"])
    optimized.save_model_to_file(out_path)
    return {op: count for op, count in optimized.get_fused_operator_statistics().items() if count}


def python_run(encoder, texts, batch):
    """(batch 0: the median ms of one text at a time, each timed; else texts per second, embeddings)."""
    import numpy as np
    if batch == 0:
        encoder.encode(texts[:8])  # warm-up, as bench_encode's
        times, rows = [], []
        for text in texts:
            start = time.perf_counter()
            rows.append(encoder.encode([text])[0])
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3, np.stack(rows)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]
    encoder.encode(texts[:batch])  # warm-up, a batch's worth, as bench_encode's
    out = None
    start = time.perf_counter()
    for indices in batches:
        rows = encoder.encode([texts[i] for i in indices])
        if out is None:
            out = np.empty((len(texts), rows.shape[1]), np.float32)
        out[indices] = rows
    return len(texts) / (time.perf_counter() - start), out


def engine_command(args, texts_path, count, batch, out, cores):
    return cc.pinned_command([os.path.join(args.build, "bench", "bench_encode"), "--model", args.model, "--texts",
                              texts_path, "--count", str(count), "--batch", str(batch), "--max-length",
                              str(args.max_length), "--out", out], cores)


def engine_run(command, threads, out):
    import numpy as np
    values = dict(line.split() for line in cc.run_checked(command, cc.thread_environment(threads)).splitlines())
    embeddings = np.loadtxt(out, dtype=np.float32, ndmin=2)
    return float(values["latency_median_ms" if "latency_median_ms" in values else "texts_per_s"]), embeddings


def run_case(args, threads, cores, encoders, texts, texts_path, batch, folder):
    """One case (batch 0: latency) over the rounds: {engine: summary}, ratios, agreement, loads."""
    import numpy as np
    count = args.latency_texts if batch == 0 else args.throughput_texts
    out = os.path.join(folder, "engine.tsv")
    command = engine_command(args, texts_path, count, batch, out, cores)
    figures, outputs, loads = {name: [] for name in args.engines}, {}, []
    for round_index in range(args.rounds):
        with cc.RoundLoad(cores) as load:
            for name in cc.round_order(args.engines, round_index):
                if name == "gradcache":
                    figure, outputs[name] = engine_run(command, threads, out)
                else:
                    figure, outputs[name] = python_run(encoders[name], texts[:count], batch)
                figures[name].append(figure)
        loads.append(load.result())
    reference = "torch" if "torch" in outputs else args.engines[1]
    agreement = {name: float(np.abs(outputs[name] - outputs[reference]).max()) for name in outputs if name != reference}
    result = {name: cc.summary(values) for name, values in figures.items()}
    # engine / other as printed: latency ms over ms, throughput texts/s over texts/s
    ratios = {name: result["gradcache"]["median"] / result[name]["median"] for name in args.engines[1:]}
    return {"threads": threads, "batch": batch, "measure": "latency_ms" if batch == 0 else "texts_per_s",
            "texts": count, **result, "ratios": ratios, "agreement_reference": reference, "max_abs_diff": agreement,
            "loads": loads}


def print_case(row, engines):
    kind = "latency ms, 1 text" if row["batch"] == 0 else f"texts/s, batch {row['batch']}"
    cells = "  ".join(f"{name} {row[name]['median']:.2f} [{row[name]['min']:.2f}-{row[name]['max']:.2f}]"
                      for name in engines)
    ratios = ", ".join(f"gradcache/{name} {ratio:.2f}" for name, ratio in row["ratios"].items())
    print(f"threads {row['threads']}, {kind} ({row['texts']} texts): {cells}\n  {ratios}; max |diff| "
          f"{', '.join(f'{n} {d:.1e}' for n, d in row['max_abs_diff'].items())} (vs {row['agreement_reference']}); "
          f"{'; '.join(cc.load_text(load) for load in row['loads'])}", flush=True)


def token_lengths(args, texts):
    """Each text's token count at --max-length, by the model's Hugging Face tokenizer when it
    imports (the padding figures), else None."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    return [len(ids) for ids in tokenizer(texts, truncation=True, max_length=args.max_length)["input_ids"]]


def dry_run(args, texts_path, folder):
    """The plan and the checks that import nothing: the binary, the texts, the pinning."""
    binary = os.path.join(args.build, "bench", "bench_encode")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_encode: {binary} is missing: build it (ninja -C {args.build})")
    for threads in args.threads:
        cores = cc.choose_cores(threads, args.cores)
        cc.pin_and_verify(cores)
        print(f"threads {threads}: cores {cores}; every thread pinned")
        for batch in [0] + args.batches:
            count = args.latency_texts if batch == 0 else args.throughput_texts
            orders = " | ".join(",".join(cc.round_order(args.engines, r)) for r in range(args.rounds))
            command = engine_command(args, texts_path, count, batch, os.path.join(folder, "engine.tsv"), cores)
            print(f"  {'latency' if batch == 0 else f'batch {batch}'}: rounds {orders}; engine: {' '.join(command)}")
    return 0


def run_threads(args, threads, torch_encoder, folder, texts, texts_path, header):
    """Every case on `threads` threads: {conditions, cases}, printed as it goes."""
    import torch
    cores = cc.choose_cores(threads, args.cores)
    cc.pin_and_verify(cores)
    torch.set_num_threads(threads)
    encoders = {"torch": torch_encoder}
    for name, path in (("onnxruntime", "model.onnx"), ("onnxruntime-bert", "model_bert.onnx")):
        if name in args.engines:
            encoders[name] = OrtEncoder(os.path.join(folder, path), torch_encoder.tokenizer, args.max_length, threads)
    cc.pin_process(cores)  # the sessions' pools, started after the last pinning
    facts = cc.conditions(threads, cores, cc.module_versions(["torch", "transformers", "onnxruntime", "onnx", "numpy"]))
    print(f"{cc.conditions_line(facts)}\n{header}")
    rows = []
    for batch in [0] + args.batches:
        rows.append(run_case(args, threads, cores, encoders, texts, texts_path, batch, folder))
        print_case(rows[-1], args.engines)
        worst = max(rows[-1]["max_abs_diff"].values())
        if worst > AGREEMENT:
            sys.exit(f"compare_encode: the engines disagree by {worst:.2g} > {AGREEMENT}")
    facts["unpinned_threads"] = len(cc.unpinned_threads(cores))
    facts["quiet"] = cc.quiet_verdict([load for row in rows for load in row["loads"]])
    print(facts["quiet"] + "\n")
    return {"conditions": facts, "cases": rows}


def main(argv):
    args = parse_args(argv)
    os.environ.update(cc.thread_environment(args.threads[0], {}))  # before torch and onnxruntime start
    count = max(args.latency_texts, args.throughput_texts)
    texts = bench_texts.encode_texts(args.texts, args.data, args.model, count, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        texts_path = os.path.join(folder, "texts.txt")
        with open(texts_path, "w", encoding="utf-8") as f:
            f.write("".join(text + "\n" for text in texts))
        if args.dry_run:
            print(f"{len(texts)} texts of {args.texts}; engines {', '.join(args.engines)}")
            return dry_run(args, texts_path, folder)
        import torch
        torch.set_num_interop_threads(1)
        torch_encoder = TorchEncoder(args.model, args.max_length)
        fused = None
        if {"onnxruntime", "onnxruntime-bert"} & set(args.engines):
            export_onnx(torch_encoder, os.path.join(folder, "model.onnx"))
        if "onnxruntime-bert" in args.engines:
            fused = optimize_onnx(os.path.join(folder, "model.onnx"), args.model, os.path.join(folder, "model_bert.onnx"))
        lengths = token_lengths(args, texts)
        characters = [len(text) for text in texts[:args.throughput_texts]]  # python_run's order
        pad = {batch: round(bench_texts.padding_share(lengths[:args.throughput_texts], batch, characters), 3)
               for batch in args.batches}
        header = (f"{args.model}, max length {args.max_length}; texts: {args.texts} ({args.latency_texts} for latency, "
                  f"{args.throughput_texts} for throughput; padding in batches taken in order of characters, as "
                  f"the other engines take them: "
                  f"{', '.join(f'batch {b} {p:.1%}' for b, p in pad.items())}); each figure: median [min-max] of "
                  f"{args.rounds} rounds, engines in rotated order"
                  + (f"; onnxruntime-bert fused {fused}" if fused is not None else ""))
        document = {"script": "compare_encode", "argv": sys.argv, "model": args.model, "max_length": args.max_length,
                    "texts": args.texts, "padding_share": pad, "onnxruntime_bert_fusions": fused,
                    "rule": cc.paragraph(__doc__, "The time rule"),
                    "runs": [run_threads(args, threads, torch_encoder, folder, texts, texts_path, header)
                             for threads in args.threads]}
        if args.json:
            cc.write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
