#!/usr/bin/env python3
"""The engine's benchmark model in PyTorch, trained with Gradient Cache and without it, for a
side-by-side comparison with `gradcache bench memory` on the same device.

The model is the one `gradcache bench` builds (cli/bench_model.c, nn/layers/text_encoder.c): a dual
encoder over the byte vocabulary of include/gradcache/tokenizer.h (gc_tokenizer_bytes), each tower
token + position embeddings, LayerNorm (eps 1e-12) and dropout, then post-norm BERT layers
(self-attention with the padding bias (mask - 1) * 10000 and dropout on the probabilities, an MLP
with GELU (erf) and no inner dropout, dropout on each block's output before the residual add), mean
pooling over the mask, and an optional projection. The loss is in-batch InfoNCE with cosine
similarity at temperature 0.05 (nn/losses/contrastive.c), query i's positive passage i. Parameters
are drawn from normal(0, 0.02), biases 0, as the engine draws them.

Gradient Cache is written here from the paper's algorithm (Gao et al. 2021, as luyug/GradCache
implements it; no code of it is copied): (1) each chunk runs forward without a graph, its RNG
state captured first; (2) the loss runs on the cached representations, and its gradient with
respect to them is kept; (3) each chunk runs forward again under its captured RNG state (so
dropout draws the same masks) and back-propagates its slice of that gradient.

The variants the comparison needs: --attention manual (the engine's ops) or sdpa
(F.scaled_dot_product_attention); --precision f32 (TF32 off, as the engine computes) or bf16
(autocast over f32 parameters, as torch.amp trains); --loss full (the B x B scores kept for the
backward) or chunked (blocks of query rows under activation checkpointing: one block of scores
alive at a time). --sentence-transformers FOLDER measures, instead of this model,
sentence-transformers' CachedMultipleNegativesRankingLoss (its own Gradient Cache) on a BERT
folder (bench/st_cached_mnrl.py).

A step is zero_grad(set_to_none) + loss + gradients (no optimizer update), as the engine
measures it; its time is the median of --reps steps after --warmup (torch.cuda.synchronize
around each), its peak the largest torch.cuda.max_memory_allocated of a step (parameters, data,
gradients and PyTorch's cuBLAS workspace included, which its caching allocator holds; the
engine's CSV gives its own workspace apart). Each run is a row of --csv, written as it ends
(bench/compare_table.py puts the files of several runs side by side).

  python3 bench/torch_gradcache.py --check          # GradCache gradients = plain ones (CPU, f64)
  python3 bench/torch_gradcache.py --device cuda --batches 4096 --chunks 128,512 --csv torch.csv
  python3 bench/torch_gradcache.py --device cuda --attention sdpa --precision bf16 --loss both ...
"""
import argparse
import csv
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.checkpoint import checkpoint
except ImportError:  # --help and --compare need no PyTorch; the rest exits 77 (the CPU test skips)
    torch = None

    class nn:  # noqa: N801 -- lets the model classes below be defined, never instantiated
        Module = object

VOCAB = 258  # include/gradcache/tokenizer.h: [PAD] 0, [CLS] 1, byte b as b + 2
PAD, CLS = 0, 1
LAYERNORM_EPS = 1e-12  # BERT's, nn/layers/layer_util.h
COSINE_EPS = 1e-12  # nn/losses/contrastive.c
TEMPERATURE = 0.05  # train/bench_step.c
LOSS_BLOCK = 512  # --loss chunked: query rows per block of the loss's scores


def normal_parameters(module):
    """normal(0, 0.02) weights and embeddings, zero biases, LayerNorm 1 and 0."""
    for sub in module.modules():
        if isinstance(sub, (nn.Linear, nn.Embedding)):
            nn.init.normal_(sub.weight, 0.0, 0.02)
        if isinstance(sub, nn.Linear) and sub.bias is not None:
            nn.init.zeros_(sub.bias)


class SelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(Dh) + (mask - 1) 10000) V per head (nn/layers/attention.c)."""

    def __init__(self, dim, heads, dropout, use_sdpa):
        super().__init__()
        self.heads, self.dropout, self.use_sdpa = heads, dropout, use_sdpa
        self.query, self.key, self.value, self.output = (nn.Linear(dim, dim) for _ in range(4))

    def split_heads(self, x):  # [B, T, D] -> [B, H, T, Dh]
        batch, length, dim = x.shape
        return x.view(batch, length, self.heads, dim // self.heads).transpose(1, 2)

    def forward(self, x, mask):  # x [B, T, D], mask [B, T]
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        bias = ((mask - 1) * 10000)[:, None, None, :]  # [B, 1, 1, T]
        if self.use_sdpa:  # PyTorch's fused kernel: the same function, another memory profile
            # the fused kernels take a float mask only in the queries' dtype (bf16 under autocast)
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype),
                                                     dropout_p=self.dropout if self.training else 0.0)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
            probs = F.dropout(torch.softmax(scores, dim=-1), self.dropout, self.training)
            context = probs @ v
        batch, heads, length, head_dim = context.shape
        return self.output(context.transpose(1, 2).reshape(batch, length, heads * head_dim))


class EncoderLayer(nn.Module):
    """Post-norm: norm(x + dropout(attention(x))), then norm(h + dropout(mlp(h)))."""

    def __init__(self, dim, heads, hidden, dropout, use_sdpa):
        super().__init__()
        self.attention = SelfAttention(dim, heads, dropout, use_sdpa)
        self.attention_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)
        self.mlp_in, self.mlp_out = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.mlp_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)
        self.dropout = dropout

    def forward(self, x, mask):
        x = self.attention_norm(x + F.dropout(self.attention(x, mask), self.dropout, self.training))
        mlp = self.mlp_out(F.gelu(self.mlp_in(x)))  # erf GELU; BERT drops nothing inside
        return self.mlp_norm(x + F.dropout(mlp, self.dropout, self.training))


class TextEncoder(nn.Module):
    """ids [B, T], mask [B, T] -> [B, D] (or [B, projection])."""

    def __init__(self, dim, heads, layers, hidden, max_length, dropout, projection=0, use_sdpa=False):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, dim), nn.Embedding(max_length, dim)
        self.embedding_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, hidden, dropout, use_sdpa) for _ in range(layers))
        self.projection = nn.Linear(dim, projection) if projection else None
        self.dropout = dropout
        normal_parameters(self)

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1], device=ids.device)
        h = F.dropout(self.embedding_norm(self.tokens(ids) + self.positions(positions)), self.dropout, self.training)
        for layer in self.layers:
            h = layer(h, mask)
        count = mask.sum(dim=1, keepdim=True).clamp(min=1)  # a row with no token pools to 0
        pooled = (h * mask[:, :, None]).sum(dim=1) / count
        return self.projection(pooled) if self.projection is not None else pooled


def unit(x):
    return x * torch.rsqrt((x * x).sum(dim=1, keepdim=True) + COSINE_EPS * COSINE_EPS)


def block_loss(queries, passages, targets, temperature):
    """The summed cross-entropy of a block of (unit) query rows against every passage."""
    return F.cross_entropy(queries @ passages.t() / temperature, targets, reduction="sum")


def contrastive_loss(queries, passages, block=0, temperature=TEMPERATURE):
    """Cosine InfoNCE, query i's positive passage i * (Np / Nq) (nn/losses/contrastive.c).
    block 0: the whole [Nq, Np] score matrix at once, kept for the backward; block > 0:
    `block` query rows at a time under activation checkpointing, so that one [block, Np]
    block of scores lives at a time, in the backward too (how one tiles the loss in PyTorch;
    the engine's tiled loss, nn/losses/contrastive_tiled.c, also tiles the passages)."""
    q, p = unit(queries), unit(passages)
    group = passages.shape[0] // queries.shape[0]
    targets = torch.arange(queries.shape[0], device=queries.device) * group
    if not block:
        return F.cross_entropy(q @ p.t() / temperature, targets)
    total = sum(checkpoint(block_loss, q[a:b], p, targets[a:b], temperature, use_reentrant=False)
                for a, b in chunks_of(q.shape[0], block))
    return total / q.shape[0]


def synthetic_batch(rows, max_length, generator, device, dtype):
    """[CLS] then random bytes, 0 to max_length - 1 of them, padded: ids [rows, T], mask."""
    lengths = torch.randint(0, max_length, (rows,), generator=generator)
    ids = torch.randint(2, VOCAB, (rows, max_length), generator=generator)
    positions = torch.arange(max_length)[None, :]
    mask = (positions <= lengths[:, None]).to(dtype)  # [CLS] and the bytes
    ids = torch.where(positions == 0, torch.full_like(ids, CLS), torch.where(mask > 0, ids, torch.full_like(ids, PAD)))
    return ids.to(device), mask.to(device)


class RngSnapshot:
    """The RNG state of the CPU and of the device, captured now and replayable later, so that
    a chunk's second forward draws the dropout masks of its first."""

    def __init__(self, device):
        self.device = device
        self.cpu_state = torch.get_rng_state()
        self.device_state = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def replay(self):
        """A context that runs under the captured state and restores the current one after."""
        devices = []
        if self.device.type == "cuda":
            devices = [self.device.index if self.device.index is not None else torch.cuda.current_device()]
        snapshot = self

        class Replay:
            def __enter__(self):
                self.fork = torch.random.fork_rng(devices=devices)
                self.fork.__enter__()
                torch.set_rng_state(snapshot.cpu_state)
                if snapshot.device_state is not None:
                    torch.cuda.set_rng_state(snapshot.device_state, snapshot.device)

            def __exit__(self, *exc):
                return self.fork.__exit__(*exc)

        return Replay()


def chunks_of(rows, chunk):
    return [(start, min(start + chunk, rows)) for start in range(0, rows, chunk)]


def plain_step(towers, batches, chunk=None, loss_block=0):
    """One graph over the whole batch; with `chunk`, its forwards run chunk by chunk (the same
    RNG draws as GradCache's first pass, for the gradient check)."""
    reps = []
    for tower, (ids, mask) in zip(towers, batches):
        spans = chunks_of(ids.shape[0], chunk or ids.shape[0])
        reps.append(torch.cat([tower(ids[a:b], mask[a:b]) for a, b in spans]))
    loss = contrastive_loss(*reps, block=loss_block)
    loss.backward()
    return loss.detach()


def gradcache_step(towers, batches, chunk, loss_block=0):
    """Gradient Cache: graph-less forwards, the loss's gradient on the cached
    representations, then per chunk a replayed forward and its backward."""
    device = batches[0][0].device
    cached, snapshots = [], []
    for tower, (ids, mask) in zip(towers, batches):
        outputs, tower_snapshots = [], []
        with torch.no_grad():
            for a, b in chunks_of(ids.shape[0], chunk):
                tower_snapshots.append(RngSnapshot(device))
                outputs.append(tower(ids[a:b], mask[a:b]))
        cached.append(torch.cat(outputs).requires_grad_())
        snapshots.append(tower_snapshots)
    loss = contrastive_loss(*cached, block=loss_block)
    loss.backward()
    for tower, (ids, mask), tower_snapshots, reps in zip(towers, batches, snapshots, cached):
        for (a, b), snapshot in zip(chunks_of(ids.shape[0], chunk), tower_snapshots):
            with snapshot.replay():
                output = tower(ids[a:b], mask[a:b])
            output.backward(reps.grad[a:b])  # the vector-Jacobian product of the chunk
    return loss.detach()


def is_out_of_memory(error):
    return isinstance(error, RuntimeError) and "out of memory" in str(error)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(step, zero_grad, device, warmup, reps):
    """(median ms of step(), peak bytes or None on the CPU, which PyTorch does not count), or
    None when a step runs out of device memory. zero_grad() runs before every step (each one
    allocates its gradients, as a training step does) and after the last."""
    times, peak = [], None
    try:
        for run in range(warmup + reps):
            zero_grad()
            synchronize(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            start = time.perf_counter()
            step()
            synchronize(device)
            if run >= warmup:
                times.append(time.perf_counter() - start)
            if device.type == "cuda":
                peak = max(peak or 0, torch.cuda.max_memory_allocated(device))
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        times = None
    zero_grad()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return None if times is None else (1e3 * statistics.median(times), peak)


def make_towers(args, device):
    torch.manual_seed(args.seed)
    towers = [TextEncoder(args.dim, args.heads, args.layers, args.hidden, args.max_length, args.dropout,
                          args.projection, args.attention == "sdpa").to(device=device)
              for _ in range(2)]
    for tower in towers:
        tower.train()
    return towers


class EngineModel:
    """The engine's benchmark model (two towers), its synthetic batches and its two steps."""

    def __init__(self, args, device):
        self.towers, self.device = make_towers(args, device), device
        self.generator = torch.Generator().manual_seed(args.seed + 1)
        self.max_length = args.max_length
        self.description = (f"dual encoder (dim {args.dim}, {args.layers} layers, {args.heads} heads, hidden "
                            f"{args.hidden}, max length {args.max_length}, dropout {args.dropout}, "
                            f"{args.attention} attention)")

    def batch(self, rows):
        return [synthetic_batch(rows, self.max_length, self.generator, self.device, torch.float32) for _ in range(2)]

    def step(self, batches, chunk, loss):
        block = LOSS_BLOCK if loss == "chunked" else 0
        return lambda: gradcache_step(self.towers, batches, chunk, block) if chunk else \
            plain_step(self.towers, batches, loss_block=block)

    def zero_grad(self):
        for tower in self.towers:
            tower.zero_grad(set_to_none=True)


def cublas_workspace_bytes(device):
    """What PyTorch's first matmul leaves in torch.cuda.memory_allocated: the cuBLAS workspace,
    which its caching allocator holds and so counts in max_memory_allocated. Before any other
    matmul of the process."""
    a = torch.ones(8, 8, device=device)
    before = torch.cuda.memory_allocated(device)
    product = a @ a
    del product
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device) - before


CSV_FIELDS = ["mode", "batch", "chunk", "loss", "peak_bytes", "step_ms", "fits"]


def benchmark(args):
    device = torch.device(args.device)
    workspace = ""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # full f32, as the engine computes
        workspace = f"; cuBLAS workspace in its peaks: {cublas_workspace_bytes(device) / 2**20:.1f} MiB"
    if args.sentence_transformers:
        import st_cached_mnrl  # bench/st_cached_mnrl.py: sentence-transformers, imported only here
        model = st_cached_mnrl.CachedMnrlModel(args.sentence_transformers, args.max_length, TEMPERATURE, args.seed,
                                               device)
    else:
        model = EngineModel(args, device)
    losses = ["full", "chunked"] if args.loss == "both" else [args.loss]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    precision = "bf16 autocast (f32 parameters)" if args.precision == "bf16" else "f32"
    print(f"torch_gradcache: PyTorch {torch.__version__} on {name}; {model.description}, {precision}, median of "
          f"{args.reps} steps after {args.warmup}{workspace}")
    print(f"  {'mode':6} {'batch':>7} {'chunk':>7} {'loss':8} {'peak bytes':>14} {'step ms':>10} {'time/plain':>11}")
    out = open(args.csv, "w", newline="") if args.csv else None
    writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n") if out else None
    if writer:
        writer.writeheader()
    for batch in args.batches:
        batches = model.batch(batch)
        for loss in losses:
            plain = None
            for chunk in [0] + [c for c in args.chunks if c <= batch]:
                step = model.step(batches, chunk, loss)

                def under_autocast(step=step):  # bf16: autocast over f32 parameters, as torch.amp trains
                    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                        step()

                result = measure(under_autocast, model.zero_grad, device, args.warmup, args.reps)
                mode = "gc" if chunk else "plain"
                peak = result[1] if result and result[1] is not None else ""
                row = {"mode": mode, "batch": batch, "chunk": chunk or batch, "loss": loss, "peak_bytes": peak,
                       "step_ms": f"{result[0]:.3f}" if result else "", "fits": 1 if result else 0}
                if writer:  # row by row, so that a run cut short keeps what it measured
                    writer.writerow(row)
                    out.flush()
                if not chunk:
                    plain = result
                if result:
                    ratio = f"{result[0] / plain[0]:11.2f}" if plain else ""
                    print(f"  {mode:6} {batch:7} {chunk or batch:7} {loss:8} {peak if peak != '' else '-':>14} "
                          f"{result[0]:10.1f} {ratio}", flush=True)
                else:
                    print(f"  {mode:6} {batch:7} {chunk or batch:7} {loss:8}   does not fit (out of memory)", flush=True)
        del batches
    if out:
        out.close()
    return 0


def check(args):
    """GradCache's gradients equal the plain step's, in f64 on the CPU: without dropout against
    the one-graph step, with dropout against the step whose forwards run chunk by chunk (the
    same masks), for an even and an uneven chunk size; and the chunked loss's equal the full
    one's (blocks of 3 and of 4 rows over 10). Exits 1 on a mismatch."""
    torch.manual_seed(0)
    device = torch.device("cpu")
    failures = 0
    cases = [(0.0, 3, "gc", 0), (0.1, 3, "gc", 0), (0.1, 4, "gc", 0), (0.0, 0, "chunked loss", 3),
             (0.1, 4, "gc, chunked loss", 4)]
    for dropout, chunk, name, block in cases:
        torch.manual_seed(1)
        towers = [TextEncoder(16, 2, 2, 32, 8, dropout).double() for _ in range(2)]
        generator = torch.Generator().manual_seed(2)
        batches = [synthetic_batch(10, 8, generator, device, torch.float64) for _ in range(2)]
        results = []
        for tested in (True, False):
            for tower in towers:
                tower.zero_grad(set_to_none=True)
            torch.manual_seed(3)
            if not tested:  # the reference: the plain step, the full loss
                loss = plain_step(towers, batches, chunk if dropout else None)
            elif chunk:
                loss = gradcache_step(towers, batches, chunk, block)
            else:
                loss = plain_step(towers, batches, loss_block=block)
            results.append((loss.item(), [p.grad.clone() for tower in towers for p in tower.parameters()]))
        (tested_loss, tested_grads), (plain_loss, plain_grads) = results
        # Relative to each gradient's norm, but at least a millionth of all of them: some are 0
        # in exact arithmetic and rounding noise here (attention's key bias: softmax ignores a
        # constant added to a whole row of scores).
        total = torch.sqrt(sum((p * p).sum() for p in plain_grads))
        worst = max(((g - p).norm() / torch.maximum(p.norm(), 1e-6 * total)).item()
                    for g, p in zip(tested_grads, plain_grads))
        ok = abs(tested_loss - plain_loss) <= 1e-12 * abs(plain_loss) and worst <= 1e-10
        failures += not ok
        print(f"check: {name}, dropout {dropout}, chunks of {chunk}, loss blocks of {block}: loss {tested_loss:.12g} "
              f"vs {plain_loss:.12g}, worst gradient relative error {worst:.3g} (tolerance 1e-10: f64 rounding) "
              f"{'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


def int_list(text):
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of positive integers")
    return values


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--check", action="store_true", help="GradCache vs plain gradients (CPU, f64); exit 1 if off")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--batches", type=int_list, default=[64], help="batch sizes, comma-separated")
    parser.add_argument("--chunks", type=int_list, default=[16, 32], help="GradCache chunk sizes, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="measured steps per run (median)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps before them")
    parser.add_argument("--csv", help="write " + ",".join(CSV_FIELDS) + " here, a row per run (as the engine does)")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--projection", type=int, default=0, help="output projection width (0: none, as bench)")
    parser.add_argument("--attention", choices=["manual", "sdpa"], default="manual",
                        help="the engine's attention ops, or F.scaled_dot_product_attention (PyTorch 2)")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                        help="f32 (TF32 off), or bf16 autocast over f32 parameters (torch.amp)")
    parser.add_argument("--loss", choices=["full", "chunked", "both"], default="full",
                        help=f"the loss: the whole B x B scores, or {LOSS_BLOCK} query rows at a time, checkpointed")
    parser.add_argument("--sentence-transformers", metavar="FOLDER",
                        help="instead of the engine's model: sentence-transformers' CachedMultipleNegativesRanking"
                             "Loss (--chunks: its mini_batch_size; the plain step: MultipleNegativesRankingLoss) on "
                             "the BERT folder (bench/make_minilm_folder.py), mean pooling, --max-length tokens")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if torch is None:
        print("torch_gradcache: PyTorch is not installed for this python", file=sys.stderr)
        return 77
    if args.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        print(f"torch_gradcache: PyTorch {torch.__version__} has no scaled_dot_product_attention (2.0 and later)",
              file=sys.stderr)
        return 77
    if args.sentence_transformers and args.loss != "full":
        parser.error("--sentence-transformers: the library computes its own loss (--loss full)")
    if args.dim % args.heads:
        parser.error(f"--heads {args.heads} does not divide --dim {args.dim}")
    return check(args) if args.check else benchmark(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
