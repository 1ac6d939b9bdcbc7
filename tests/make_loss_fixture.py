#!/usr/bin/python3
"""Writes tests/fixtures/losses_v1.bin: reference values from PyTorch for the contrastive
losses beyond one positive (tests/test_loss_multi.c, tests/test_matryoshka.c, tests/test_gist.c).
Run by hand:

    /usr/bin/python3 tests/make_loss_fixture.py   (any python3 with torch)

The fixture is committed; rerun this only when a case below changes (the format is
tests/fixture.h's, which make_bert_fixture.write_fixture writes). Each loss is written out from its
formula in f64, independently of gradcache's code; autograd gives the gradients. Per case,
entries "<case>.q" [Nq, D], "<case>.p" [Np, D], "<case>.loss" [1], "<case>.grad_q",
"<case>.grad_p" (d loss / d inputs), "<case>.targets" i32 [Nq, k] when the case has them, and
"<case>.gq" [Nq, Dg], "<case>.gp" [Np, Dg] (the guide's representations) for the GIST cases.
The options of each case (similarity, temperature, reduction, ...) are in CASES and, the same,
in the C tests.
"""
import sys

import torch
import torch.nn.functional as F

from make_bert_fixture import write_fixture  # the format of tests/fixture.h

def scores_of(q, p, cosine, temperature):
    if cosine:
        q, p = F.normalize(q, dim=1), F.normalize(p, dim=1)
    return q @ p.T / temperature


def reduce(per_query, mean):
    return per_query.mean() if mean else per_query.sum()


def multi_positive(q, p, targets, cosine, temperature, mean, symmetric):
    """SupCon's L_out: -1/k sum_c log softmax(scores_i)[t_ic], every passage a candidate; when
    symmetric, each positive t_ic also scored against every query with query i as its target."""
    scores = scores_of(q, p, cosine, temperature)                # [Nq, Np]
    k = targets.shape[1]
    rows = torch.arange(q.shape[0])
    forward = -torch.stack([scores.log_softmax(1)[rows, targets[:, c]] for c in range(k)]).mean(0)
    loss = reduce(forward, mean)
    if symmetric:
        backward = torch.stack([-scores[:, targets[:, c]].T.log_softmax(1)[rows, rows] for c in range(k)]).mean(0)
        loss = 0.5 * (loss + reduce(backward, mean))
    return loss


def matryoshka(q, p, dims, weights, cosine, temperature):
    """sum_j w_j InfoNCE(q[:, :d_j], p[:, :d_j]) with one positive, query i's passage i."""
    rows = torch.arange(q.shape[0])
    return sum(w * F.cross_entropy(scores_of(q[:, :d], p[:, :d], cosine, temperature), rows)
               for d, w in zip(dims, weights))


def gist(q, p, gq, gp, cosine, temperature, relative, margin, mean):
    """GISTEmbedLoss over the blocks (q, p), (q, q), (positives, positives), one positive per
    query (query i's passage i (Np / Nq)): each candidate whose guide cosine exceeds the guide's
    cosine of the query's positive, less the margin, is masked to -inf (the positive never)."""
    nq = q.shape[0]
    rows, targets = torch.arange(nq), layout_targets(nq, p.shape[0], 1)[:, 0]
    guide = [F.normalize(a, dim=1) @ F.normalize(b, dim=1).T for a, b in ((gq, gp), (gq, gq), (gp[targets], gp[targets]))]
    positive = guide[0][rows, targets].unsqueeze(1)
    threshold = positive * (1 - margin) if relative else positive - margin
    blocks = []
    for b, (x, y) in enumerate(((q, p), (q, q), (p[targets], p[targets]))):
        mask = guide[b] > threshold
        if b == 0:
            mask[rows, targets] = False
        assert 0 < mask.sum() < mask.numel(), "a GIST case must mask some candidates, not all"
        blocks.append(scores_of(x, y, cosine, 1.0).masked_fill(mask, float("-inf")))
    return F.cross_entropy(torch.cat(blocks, 1) / temperature, targets, reduction="mean" if mean else "sum")


def layout_targets(nq, np_, k):
    stride = np_ // nq
    return torch.stack([torch.arange(nq) * stride + c for c in range(k)], 1)


# name: (Nq, Np, D, seed, loss of (q, p) -> (scalar, targets or None))
CASES = {
    # 2 positives and 1 hard negative per query, cosine at 0.1, mean
    "multi_cosine": (4, 12, 6, 1, lambda q, p: (
        multi_positive(q, p, layout_targets(4, 12, 2), True, 0.1, True, False), None)),
    # 3 positives per query, dot at 0.5, sum, symmetric
    "multi_symmetric": (3, 9, 5, 2, lambda q, p: (
        multi_positive(q, p, layout_targets(3, 9, 3), False, 0.5, False, True), None)),
    # explicit targets [Nq, 2] (shared positives too), cosine at 0.2, mean
    "multi_targets": (5, 7, 4, 3, None),
    # prefixes 8, 4, 2 weighted 1, 0.5, 0.25; cosine at 0.05, mean
    "matryoshka": (6, 6, 8, 4, lambda q, p: (
        matryoshka(q, p, (8, 4, 2), (1.0, 0.5, 0.25), True, 0.05), None)),
}
# the GIST cases: (Nq, Np, D, Dg, seed, cosine, temperature, relative, margin, mean)
GIST = {
    # 1 hard negative per query; cosine at 0.05, absolute margin 0.1, mean
    "gist_absolute": (4, 8, 6, 5, 5, True, 0.05, False, 0.1, True),
    # one positive each; dot at 0.5, relative margin 0.2, sum
    "gist_relative": (5, 5, 4, 3, 6, False, 0.5, True, 0.2, False),
}
EXPLICIT = torch.tensor([[2, 0], [6, 1], [3, 3], [0, 5], [4, 2]], dtype=torch.int64)
CASES["multi_targets"] = (5, 7, 4, 3, lambda q, p: (
    multi_positive(q, p, EXPLICIT, True, 0.2, True, False), EXPLICIT))


def main(path):
    entries = []
    for name, (nq, np_, dim, seed, loss_of) in CASES.items():
        generator = torch.Generator().manual_seed(seed)
        q = torch.randn(nq, dim, dtype=torch.float64, generator=generator).requires_grad_()
        p = torch.randn(np_, dim, dtype=torch.float64, generator=generator).requires_grad_()
        loss, targets = loss_of(q, p)
        loss.backward()
        entries += [(name + ".q", q.detach()), (name + ".p", p.detach()), (name + ".loss", loss.detach().reshape(1)),
                    (name + ".grad_q", q.grad), (name + ".grad_p", p.grad)]
        if targets is not None:
            entries.append((name + ".targets", targets.to(torch.int32)))
    for name, (nq, np_, dim, guide_dim, seed, cosine, temperature, relative, margin, mean) in GIST.items():
        generator = torch.Generator().manual_seed(seed)
        q = torch.randn(nq, dim, dtype=torch.float64, generator=generator).requires_grad_()
        p = torch.randn(np_, dim, dtype=torch.float64, generator=generator).requires_grad_()
        gq = torch.randn(nq, guide_dim, dtype=torch.float64, generator=generator)
        gp = torch.randn(np_, guide_dim, dtype=torch.float64, generator=generator)
        loss = gist(q, p, gq, gp, cosine, temperature, relative, margin, mean)
        loss.backward()
        entries += [(name + ".q", q.detach()), (name + ".p", p.detach()), (name + ".gq", gq), (name + ".gp", gp),
                    (name + ".loss", loss.detach().reshape(1)), (name + ".grad_q", q.grad), (name + ".grad_p", p.grad)]
    write_fixture(path, entries)
    print(f"{len(entries)} entries, torch {torch.__version__}")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/losses_v1.bin")
