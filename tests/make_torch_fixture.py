#!/usr/bin/python3
"""Writes tests/fixtures/text_encoder_v1.bin: reference values from PyTorch for
tests/test_torch_reference.c. Run by hand, with Debian's python3-torch:

    apt-get install python3-torch
    /usr/bin/python3 tests/make_torch_fixture.py

The fixture is committed; rerun this only when the model definition below changes (and
bump the version in tests/fixture.h and here if the format changes).

It builds, in plain PyTorch, the same text encoder as gradcache's gc_text_encoder (see
include/gradcache/nn.h) for two configurations, sets random weights, and records:
  - every parameter, under gradcache's parameter names;
  - the inputs: token ids and a padding mask (some rows padded), and a seed gradient;
  - the encoder's output for those inputs, with dropout off;
  - the gradient of sum(output * seed) with respect to every parameter;
  - every parameter after 3 AdamW steps on that loss (lr 1e-2, betas (0.9, 0.999),
    eps 1e-8, weight decay 0.01 except for biases and norms).
"""
import math
import struct
import sys

import torch

VERSION = 1
DTYPES = {torch.float32: 0, torch.int32: 1, torch.float64: 2}


class Attention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.query = torch.nn.Linear(dim, dim)
        self.key = torch.nn.Linear(dim, dim)
        self.value = torch.nn.Linear(dim, dim)
        self.output = torch.nn.Linear(dim, dim)

    def forward(self, x, mask):
        batch, tokens, dim = x.shape
        head_dim = dim // self.heads

        def split(t):
            return t.view(batch, tokens, self.heads, head_dim).permute(0, 2, 1, 3)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
        scores = scores + (mask - 1.0).view(batch, 1, 1, tokens) * 10000.0
        context = torch.softmax(scores, dim=-1) @ v
        return self.output(context.permute(0, 2, 1, 3).reshape(batch, tokens, dim))


class Mlp(torch.nn.Module):
    def __init__(self, dim, hidden, activation):
        super().__init__()
        setattr(self, "in", torch.nn.Linear(dim, hidden))
        self.out = torch.nn.Linear(hidden, dim)
        self.activation = activation

    def forward(self, x):
        return self.out(self.activation(getattr(self, "in")(x)))


class EncoderLayer(torch.nn.Module):
    def __init__(self, dim, heads, hidden, activation, pre_norm):
        super().__init__()
        self.attention = Attention(dim, heads)
        self.attention_norm = torch.nn.LayerNorm(dim, eps=1e-12)
        self.mlp = Mlp(dim, hidden, activation)
        self.mlp_norm = torch.nn.LayerNorm(dim, eps=1e-12)
        self.pre_norm = pre_norm

    def forward(self, x, mask):
        if self.pre_norm:
            x = x + self.attention(self.attention_norm(x), mask)
            return x + self.mlp(self.mlp_norm(x))
        x = self.attention_norm(x + self.attention(x, mask))
        return self.mlp_norm(x + self.mlp(x))


class TextEncoder(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        dim = config["dim"]
        activation = {"gelu_erf": torch.nn.functional.gelu,
                      "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[config["activation"]]
        self.embeddings = torch.nn.Module()
        self.embeddings.tokens = torch.nn.Embedding(config["vocab"], dim)
        self.embeddings.positions = torch.nn.Embedding(config["max_length"], dim)
        if not config["pre_norm"]:
            self.embeddings.norm = torch.nn.LayerNorm(dim, eps=1e-12)
        self.layers = torch.nn.ModuleList(
            EncoderLayer(dim, config["heads"], config["hidden"], activation, config["pre_norm"])
            for _ in range(config["layers"]))
        if config["pre_norm"]:
            self.final_norm = torch.nn.LayerNorm(dim, eps=1e-12)
        self.projection = torch.nn.Linear(dim, config["projection"])

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1])
        x = self.embeddings.tokens(ids.long()) + self.embeddings.positions(positions)
        if not self.config["pre_norm"]:
            x = self.embeddings.norm(x)
        for layer in self.layers:
            x = layer(x, mask)
        if self.config["pre_norm"]:
            x = self.final_norm(x)
        if self.config["pooling"] == "cls":
            pooled = x[:, 0, :]
        else:
            pooled = (x * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return self.projection(pooled)


def no_decay(name):
    return name.endswith(".bias") or "norm" in name


def write_entry(out, name, tensor):
    tensor = tensor.detach().contiguous()
    encoded = name.encode()
    out.write(struct.pack("<I", len(encoded)) + encoded)
    out.write(struct.pack("<II", DTYPES[tensor.dtype], tensor.dim()))
    out.write(struct.pack("<%dq" % tensor.dim(), *tensor.shape))
    out.write(tensor.numpy().tobytes())


def entries_for(prefix, config, seed):
    torch.manual_seed(seed)
    model = TextEncoder(config)
    with torch.no_grad():  # weights larger than BERT's 0.02, so that every path matters
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(param))
            else:
                param.copy_(0.3 * torch.randn_like(param))
    batch, tokens = 3, 7
    ids = torch.randint(0, config["vocab"], (batch, tokens), dtype=torch.int32)
    mask = torch.ones(batch, tokens)
    mask[1, 5:] = 0.0  # padded rows: their tokens must not matter
    mask[2, 2:] = 0.0
    seed_grad = torch.randn(batch, config["projection"])
    entries = [(f"{prefix}.input.ids", ids), (f"{prefix}.input.mask", mask),
               (f"{prefix}.input.seed_grad", seed_grad)]
    entries += [(f"{prefix}.param.{name}", p.clone()) for name, p in model.named_parameters()]
    output = model(ids, mask)
    entries.append((f"{prefix}.expected.output", output))
    (output * seed_grad).sum().backward()
    entries += [(f"{prefix}.expected.grad.{name}", p.grad.clone()) for name, p in model.named_parameters()]
    groups = [{"params": [p for n, p in model.named_parameters() if not no_decay(n)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if no_decay(n)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(3):
        optimizer.zero_grad()
        (model(ids, mask) * seed_grad).sum().backward()
        optimizer.step()
    entries += [(f"{prefix}.expected.adamw.{name}", p) for name, p in model.named_parameters()]
    return entries


CONFIGS = {
    "post": dict(vocab=50, max_length=16, dim=16, heads=4, layers=2, hidden=32, projection=8,
                 activation="gelu_erf", pre_norm=False, pooling="cls"),
    "pre": dict(vocab=50, max_length=16, dim=16, heads=2, layers=2, hidden=24, projection=8,
                activation="gelu_tanh", pre_norm=True, pooling="mean"),
}


def main(path):
    entries = []
    for index, (prefix, config) in enumerate(CONFIGS.items()):
        entries += entries_for(prefix, config, seed=index + 1)
    with open(path, "wb") as out:
        out.write(b"GCFIXTR\0" + struct.pack("<II", VERSION, len(entries)))
        for name, tensor in entries:
            write_entry(out, name, tensor)
    print(f"wrote {len(entries)} entries to {path} with torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/text_encoder_v1.bin")
