#!/usr/bin/python3
"""Writes tests/fixtures/trec_measures_v1.txt: rankings, graded judgements and the measures
pytrec_eval (trec_eval's own C code) gives them, for tests/test_trec_measures.c. Run by hand:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install pytrec-eval-terrier
    /tmp/venv/bin/python tests/make_trec_fixture.py

The fixture is committed, so that the test needs no Python. The cases: runs whose scores take
a few values (ties, which trec_eval breaks by document id descending), grades 0 to 3, a query
judged with no relevant document, queries with fewer than 10 and more than 100 documents
retrieved, relevant documents never retrieved, and queries only in the run or only in the
qrels (trec_eval ignores both). MRR@10 is trec_eval's recip_rank of the run cut at its first
10 documents in trec_eval's order (the cut made here in Python, independently of the C code).

Lines: `qrel QUERY DOC GRADE`, `run QUERY DOC SCORE`, `query QUERY ndcg@10 recall@10
recall@100 mrr@10 map@100` (pytrec_eval's figures), `all ...` (their mean), numbers in
Python's repr (they read back exactly).
"""
import random
import sys

import pytrec_eval

MEASURES = {"ndcg_cut.10", "recall.10", "recall.100", "map_cut.100"}
COLUMNS = ["ndcg_cut_10", "recall_10", "recall_100", "recip_rank", "map_cut_100"]


def make_cases(rng):
    qrels, run = {}, {}
    docs = ["d%03d" % i for i in range(300)]
    # (documents retrieved, score levels, judged documents, largest grade)
    shapes = [(5, 3, 6, 3), (12, 4, 10, 2), (150, 6, 30, 3), (120, 200, 25, 1), (40, 2, 8, 3),
              (3, 1, 4, 2), (101, 5, 60, 3), (9, 9, 3, 1), (30, 3, 12, 3), (100, 4, 20, 2)]
    for n, (retrieved, levels, judged, top_grade) in enumerate(shapes):
        query = "q%d" % n
        ranked = rng.sample(docs, retrieved)
        run[query] = {d: rng.randrange(levels) / 8.0 - 0.25 for d in ranked}
        pool = rng.sample(ranked, min(judged // 2, retrieved)) + rng.sample(docs, judged - min(judged // 2, retrieved))
        qrels[query] = {d: rng.randint(0, top_grade) for d in pool}
    qrels["q2"]["d299"] = 3  # relevant and never retrieved
    run["q2"].pop("d299", None)
    qrels["q_none"] = {d: 0 for d in rng.sample(docs, 5)}  # judged, nothing relevant
    run["q_none"] = {d: rng.randrange(4) / 4.0 for d in rng.sample(docs, 20)}
    qrels["q_unretrieved"] = {"d001": 1}  # in the qrels only: ignored
    run["q_unjudged"] = {"d001": 1.0, "d002": 0.5}  # in the run only: ignored
    return qrels, run


def trec_order(ranking):
    """trec_eval's order: score descending, a tie broken by document id descending."""
    by_doc = sorted(ranking.items(), key=lambda item: item[0], reverse=True)
    return sorted(by_doc, key=lambda item: item[1], reverse=True)


def main():
    rng = random.Random(37)
    qrels, run = make_cases(rng)
    results = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    cut_run = {q: dict(trec_order(r)[:10]) for q, r in run.items()}
    recip = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut_run)
    out = ["# written by tests/make_trec_fixture.py with pytrec_eval; see there"]
    for query, judged in qrels.items():
        out += ["qrel %s %s %d" % (query, doc, grade) for doc, grade in judged.items()]
    for query, ranking in run.items():
        out += ["run %s %s %r" % (query, doc, score) for doc, score in ranking.items()]
    rows = []
    for query in sorted(results):
        row = [results[query][c] if c != "recip_rank" else recip[query][c] for c in COLUMNS]
        rows.append(row)
        out.append("query %s %s" % (query, " ".join(repr(v) for v in row)))
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(len(COLUMNS))]
    out.append("all %s" % " ".join(repr(v) for v in mean))
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/trec_measures_v1.txt"
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
