#!/usr/bin/python3
"""Writes tests/fixtures/distill_v1.bin: reference values from PyTorch for the distillation
losses (tests/test_distill.c). Run by hand:

    /usr/bin/python3 tests/make_distill_fixture.py   (any python3 with torch)

The fixture is committed; rerun this only when a case below changes (the format is
tests/fixture.h's, which make_bert_fixture.write_fixture writes). The losses are written out as
sentence-transformers' MarginMSELoss and DistillKLDivLoss compute them from the embeddings of
the columns (query, positive, negative_1, ..., negative_k) and the teacher's labels, in f64;
autograd gives the gradients. Per case, entries "<case>.q" [Nq, D], "<case>.p" [Nq (1 + k), D]
(query i's positive, then its negatives: the pair file's order), "<case>.teacher" [Nq, 1 + k],
"<case>.loss" [1], "<case>.grad_q", "<case>.grad_p". The options of each case are in CASES and,
the same, in the C test.
"""
import sys

import torch
import torch.nn.functional as F

from make_bert_fixture import write_fixture  # the format of tests/fixture.h


def pairwise(a, b, cosine):
    """util.pairwise_dot_score, or util.pairwise_cos_sim (F.normalize first)"""
    if cosine:
        a, b = F.normalize(a, dim=-1), F.normalize(b, dim=-1)
    return (a * b).sum(-1)


def columns(q, p, k):
    """the embeddings of the columns: query, positive, negative_1..k"""
    return [q] + [p[j::1 + k] for j in range(1 + k)]


def margin_mse(embeddings, teacher, cosine):
    """MarginMSELoss: MSELoss of the student's margins s(q, p) - s(q, n_j) against the teacher's
    (sentence-transformers takes the teacher's margins as labels: t(q, p) - t(q, n_j) here)"""
    query, positive, negatives = embeddings[0], embeddings[1], embeddings[2:]
    positive_scores = pairwise(query, positive, cosine)
    student = torch.stack([positive_scores - pairwise(query, n, cosine) for n in negatives], dim=1)
    labels = teacher[:, :1] - teacher[:, 1:]
    return F.mse_loss(student, labels)


def kl_div(embeddings, teacher, cosine, student_temperature, teacher_temperature):
    """DistillKLDivLoss with student and teacher temperatures: KLDivLoss(batchmean) of
    log_softmax(s / tau_s) against softmax(t / tau_t), times tau_s^2"""
    query = embeddings[0]
    scores = torch.stack([pairwise(query, other, cosine) for other in embeddings[1:]], dim=1)
    student_log_probs = torch.log_softmax(scores / student_temperature, dim=1)
    teacher_probs = torch.softmax(teacher / teacher_temperature, dim=1)
    return F.kl_div(student_log_probs, teacher_probs, reduction="batchmean") * student_temperature ** 2


def contrastive(q, p, cosine, temperature):
    """the in-batch InfoNCE loss: query i's positive is passage i (1 + k), every passage a candidate"""
    if cosine:
        q, p = F.normalize(q, dim=1), F.normalize(p, dim=1)
    targets = torch.arange(q.shape[0]) * (p.shape[0] // q.shape[0])
    return F.cross_entropy(q @ p.T / temperature, targets)


# name: (Nq, k, D, seed, teacher spread, loss of (q, p, teacher, k))
CASES = {
    # MarginMSE, 2 negatives, dot (sentence-transformers' default)
    "margin_dot": (4, 2, 6, 11, 3.0, lambda q, p, t, k: margin_mse(columns(q, p, k), t, False)),
    # MarginMSE, 1 negative (its single-negative branch), cosine, weight 0.5
    "margin_cosine": (3, 1, 5, 12, 1.0, lambda q, p, t, k: 0.5 * margin_mse(columns(q, p, k), t, True)),
    # KL, 3 negatives, dot, both temperatures 1 (the defaults)
    "kl_dot": (4, 3, 6, 13, 2.0, lambda q, p, t, k: kl_div(columns(q, p, k), t, False, 1.0, 1.0)),
    # KL, 2 negatives, cosine, tau_s 0.05 and tau_t 2; the teacher's spread of 4000 makes some
    # probabilities exactly 0 (exp underflows), which add nothing (KLDivLoss's xlogy)
    "kl_temperatures": (5, 2, 4, 14, 4000.0, lambda q, p, t, k: kl_div(columns(q, p, k), t, True, 0.05, 2.0)),
    # the in-batch contrastive loss (cosine, temperature 0.05) + 0.3 MarginMSE (cosine)
    "margin_plus_contrastive": (4, 1, 6, 15, 1.0, lambda q, p, t, k: (
        contrastive(q, p, True, 0.05) + 0.3 * margin_mse(columns(q, p, k), t, True))),
    # the in-batch contrastive loss (dot, temperature 0.5) + 2 KL (dot, tau_s = tau_t = 1)
    "kl_plus_contrastive": (3, 2, 5, 16, 2.0, lambda q, p, t, k: (
        contrastive(q, p, False, 0.5) + 2.0 * kl_div(columns(q, p, k), t, False, 1.0, 1.0))),
}


def main(path):
    entries = []
    for name, (nq, k, dim, seed, spread, loss_of) in CASES.items():
        generator = torch.Generator().manual_seed(seed)
        q = torch.randn(nq, dim, dtype=torch.float64, generator=generator).requires_grad_()
        p = torch.randn(nq * (1 + k), dim, dtype=torch.float64, generator=generator).requires_grad_()
        teacher = spread * torch.randn(nq, 1 + k, dtype=torch.float64, generator=generator)
        if name == "kl_temperatures":
            probabilities = torch.softmax(teacher / 2.0, dim=1)
            assert (probabilities == 0).any(), "the case must have a teacher probability of exactly 0"
        loss = loss_of(q, p, teacher, k)
        loss.backward()
        entries += [(name + ".q", q.detach()), (name + ".p", p.detach()), (name + ".teacher", teacher),
                    (name + ".loss", loss.detach().reshape(1)), (name + ".grad_q", q.grad), (name + ".grad_p", p.grad)]
    write_fixture(path, entries)
    print(f"{len(entries)} entries, torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/distill_v1.bin")
