"""The trainer's model and training step in PyTorch, for bench/compare_torch.py.

The same architecture as train/dual_encoder.c (a BERT-style post-norm text encoder per tower,
nn/layers/text_encoder.c and the layers under it), the same loss (cosine InfoNCE at temperature
0.05, nn/losses/contrastive.c), the same step (the plain step, or Gradient Cache with the last
chunk's graph kept, gradcache/cache.c), then clipping to norm 1 and AdamW with weight decay
0.01 except on biases and LayerNorm parameters (train/trainer.c). PyTorch as a user
would write it: its own modules and optimizer at their defaults.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

# train/dual_encoder.c: (dim, heads, layers, hidden, projection); byte vocabulary
# (include/gradcache/tokenizer.h)
PRESETS = {
    "tiny": (64, 4, 2, 128, 64),
    "small": (128, 4, 4, 512, 128),
    "base": (256, 8, 6, 1024, 256),
}
VOCAB = 258
DROPOUT = 0.1
LAYERNORM_EPS = 1e-12  # nn/layers/layer_util.h
COSINE_EPS = 1e-12  # nn/losses/contrastive.c
TEMPERATURE = 0.05
MAX_GRAD_NORM = 1.0
WEIGHT_DECAY = 0.01
LEARNING_RATE = 1e-4


class Attention(nn.Module):
    """softmax(Q K^T / sqrt(Dh) + (mask - 1) 10000) V per head (nn/layers/attention.c)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value, self.output = (nn.Linear(dim, dim) for _ in range(4))

    def split(self, x):  # [B, T, dim] -> [B, H, T, Dh]
        batch, length, dim = x.shape
        return x.view(batch, length, self.heads, dim // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        batch, length, dim = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) * (1 / math.sqrt(dim // self.heads))
        scores = scores + ((mask - 1) * 10000).view(batch, 1, 1, length)
        probs = F.dropout(scores.softmax(-1), DROPOUT, self.training)
        context = (probs @ v).permute(0, 2, 1, 3).reshape(batch, length, dim)
        return self.output(context)


class EncoderLayer(nn.Module):
    """Post-norm: x = norm(x + dropout(attention(x))); x = norm(x + dropout(mlp(x)))."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.attention = Attention(dim, heads)
        self.attention_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)
        self.mlp_in, self.mlp_out = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.mlp_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)

    def forward(self, x, mask):
        x = self.attention_norm(x + F.dropout(self.attention(x, mask), DROPOUT, self.training))
        update = self.mlp_out(F.gelu(self.mlp_in(x)))  # gelu: the erf form
        return self.mlp_norm(x + F.dropout(update, DROPOUT, self.training))


class TextEncoder(nn.Module):
    """Token + position embeddings, norm, dropout, layers, masked mean pooling, projection."""

    def __init__(self, preset, max_length):
        super().__init__()
        dim, heads, layers, hidden, projection = PRESETS[preset]
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(max_length, dim)
        self.embedding_norm = nn.LayerNorm(dim, eps=LAYERNORM_EPS)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, hidden) for _ in range(layers))
        self.projection = nn.Linear(dim, projection)

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1])
        h = self.tokens(ids) + self.positions(positions)
        h = F.dropout(self.embedding_norm(h), DROPOUT, self.training)
        for layer in self.layers:
            h = layer(h, mask)
        count = mask.sum(-1, keepdim=True).clamp(min=1)  # a row with no token pools to 0
        pooled = (h * mask.unsqueeze(-1)).sum(1) / count
        return self.projection(pooled)


def contrastive_loss(queries, passages):
    """In-batch InfoNCE over cosine similarities, query i's positive is passage i."""

    def unit(x):
        return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + COSINE_EPS**2)

    scores = unit(queries) @ unit(passages).T / TEMPERATURE
    return F.cross_entropy(scores, torch.arange(queries.shape[0]))


class Trainer:
    """Two towers, AdamW, and the two kinds of step, each followed by clipping and the update."""

    def __init__(self, preset, max_length):
        self.towers = [TextEncoder(preset, max_length).train() for _ in range(2)]
        params = [p for tower in self.towers for p in tower.named_parameters()]
        no_decay = [p for name, p in params if name.endswith("bias") or "norm" in name]
        decay = [p for name, p in params if not (name.endswith("bias") or "norm" in name)]
        self.parameters = [p for _, p in params]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
            lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8)

    def update(self):
        torch.nn.utils.clip_grad_norm_(self.parameters, MAX_GRAD_NORM)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def plain_step(self, inputs):
        """inputs: [(ids, mask) of the queries, (ids, mask) of the passages]."""
        loss = contrastive_loss(*(tower(*side) for tower, side in zip(self.towers, inputs)))
        loss.backward()
        self.update()
        return loss.item()

    def gradcache_step(self, inputs, chunk):
        """Gradient Cache (Gao et al. 2021) as gradcache/cache.c runs it for the trainer: per
        tower, graph-less forwards of every chunk but the last (whose graph is kept), each
        after saving the RNG state; the loss on the cached representations and its gradient;
        then per chunk the replayed forward and a backward seeded with the chunk's gradient."""
        reps, saved = [], []
        for tower, (ids, mask) in zip(self.towers, inputs):
            pieces = list(zip(ids.split(chunk), mask.split(chunk)))
            states, outputs = [], []
            for i, piece in enumerate(pieces):
                states.append(torch.get_rng_state())
                if i + 1 < len(pieces):
                    with torch.no_grad():
                        outputs.append(tower(*piece))
                else:
                    outputs.append(tower(*piece))  # the kept graph
            saved.append((pieces, states, outputs[-1]))
            reps.append(torch.cat([o.detach() for o in outputs]).requires_grad_())
        loss = contrastive_loss(*reps)
        loss.backward()
        for tower, rep, (pieces, states, last) in zip(self.towers, reps, saved):
            grads = rep.grad.split(chunk)
            for i, piece in enumerate(pieces):
                if i + 1 < len(pieces):
                    resume = torch.get_rng_state()
                    torch.set_rng_state(states[i])
                    output = tower(*piece)
                    torch.set_rng_state(resume)
                else:
                    output = last
                output.backward(grads[i])
        self.update()
        return loss.item()
