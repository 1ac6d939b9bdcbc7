"""The texts the CPU comparisons feed every engine: real ones by default.

The corpus is the WordNet definition -> word dataset (`build/cli/gradcache data wordnet --out
data/wordnet`, docs/DATA.md): train.tsv for training pairs, dev.tsv for texts to encode.
  - pairs: a seeded sample of train.tsv's lines (query = the definition, passage = a word),
    each side padded to its own longest text as the trainer pads it;
  - "definitions": dev.tsv's distinct definitions in file order, "words" its distinct words;
  - any other value: a text file, one text per line (a stated corpus);
  - "synthetic": random words of the model's vocabulary (the old default, kept only to compare
    with earlier figures: 56.7% of it is padding at batch 128, the definitions' 36.1%).
Needs only the standard library.
"""
import json
import os
import random
import sys


def read_tsv_columns(path):
    if not os.path.exists(path):
        sys.exit(f"bench_texts: {path} is missing: make it with `build/cli/gradcache data wordnet --out "
                 f"{os.path.dirname(path) or '.'}` (docs/DATA.md), or pass another corpus")
    with open(path, encoding="utf-8") as source:
        return [line.rstrip("\n").split("\t") for line in source if line.strip()]


def sample_pairs(data, count, seed):
    """`count` (query, passage) lines of DATA/train.tsv drawn without replacement by `seed`."""
    rows = read_tsv_columns(os.path.join(data, "train.tsv"))
    if len(rows) < count:
        sys.exit(f"bench_texts: {data}/train.tsv has {len(rows)} pairs, {count} are asked for")
    return [rows[i][:2] for i in sorted(random.Random(seed).sample(range(len(rows)), count))]


def write_pairs(path, pairs):
    with open(path, "w", encoding="utf-8") as out:
        for query, passage in pairs:
            out.write(f"{query}\t{passage}\n")


def distinct(values):
    return list(dict.fromkeys(values))


def synthetic_texts(model, count, seed):
    """Sentences of random words of the model's vocabulary, lengths log-normal (median 12 words,
    a few past 128 tokens)."""
    rng = random.Random(seed)
    with open(os.path.join(model, "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2)
    return [" ".join(rng.choice(words) for _ in range(max(2, min(150, int(rng.lognormvariate(2.5, 0.6))))))
            .capitalize() + "." for _ in range(count)]


def encode_texts(kind, data, model, count, seed):
    """`count` texts of the corpus `kind` (see the module's docstring)."""
    if kind == "synthetic":
        return synthetic_texts(model, count, seed)
    if kind in ("definitions", "words"):
        rows = read_tsv_columns(os.path.join(data, "dev.tsv"))
        texts = distinct(row[0 if kind == "definitions" else 1] for row in rows)
    else:
        with open(kind, encoding="utf-8") as source:
            texts = [line.rstrip("\n") for line in source if line.strip()]
    if len(texts) < count:
        sys.exit(f"bench_texts: {kind} has {len(texts)} texts, {count} are asked for")
    return texts[:count]


def padding_share(lengths, batch, keys=None):
    """The share of padding in batches of `batch` texts, each padded to its longest (what an
    engine that computes padding computes in vain), the texts taken in order of `keys` (the
    Python engines sort by characters, as sentence-transformers does: a text's token count
    follows its characters only roughly) or, without keys, of their token counts."""
    order = sorted(range(len(lengths)), key=lambda i: keys[i] if keys is not None else lengths[i])
    ordered = [lengths[i] for i in order]
    cells = sum(max(ordered[i:i + batch]) * len(ordered[i:i + batch]) for i in range(0, len(ordered), batch))
    return 1 - sum(ordered) / cells
