#!/usr/bin/python3
"""Reference values for tests/test_bert.c from a plain-PyTorch BERT (BertModel's forward as
transformers computes it, then sentence-transformers' mean pooling and Normalize), in float64
from the checkpoints' float32 weights. Run by hand with Debian's python3-torch:

    apt-get install python3-torch
    /usr/bin/python3 tests/make_bert_fixture.py                  # the tiny model (always)
    /usr/bin/python3 tests/make_bert_fixture.py models/minilm    # and all-MiniLM-L6-v2

The plain-PyTorch BERT was checked against transformers 4.30.2 BertModel on the MiniLM
fixture strings: the embeddings agree to 3e-16 in float64.

It writes
  - tests/fixtures/tiny_bert/: a BERT-shaped model folder with random weights in the
    Hugging Face layout (config.json, model.safetensors with the pooler and an I64
    position_ids buffer as BertModel's files have them, tokenizer.json with a small
    WordPiece vocabulary, 1_Pooling/config.json, modules.json with Normalize). It is what the
    loading code is tested on in CI, where the real model is not fetched;
  - tests/fixtures/bert_tiny_v1.bin: for fixed token ids, the normalised embeddings, the
    in-batch contrastive loss of 4 queries against 4 passages (cosine / 0.05, mean
    cross-entropy) and its gradient for every weight (under Hugging Face's names);
  - with a model folder: tests/fixtures/bert_minilm_v1.bin, the same for
    all-MiniLM-L6-v2 on the first 48 strings of tests/fixtures/wordpiece_cases.json (their
    reference ids, padded to the longest) and the gradients of a few weights for the 8
    definitions of its "pairs" against their words.
The fixture format is tests/fixture.h's.
"""
import json
import math
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
VERSION = 1
DTYPES = {torch.float32: ("F32", 0), torch.int32: ("I32", 1), torch.float64: ("F64", 2), torch.int64: ("I64", None)}
TEMPERATURE = 0.05

# --- safetensors, read and written by hand (no package needed) ---------------------------


def read_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    names = {"F32": torch.float32, "I64": torch.int64}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensor = torch.frombuffer(bytearray(data[begin:end]), dtype=names[entry["dtype"]])
        out[name] = tensor.reshape(entry["shape"])
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))

# --- BERT in plain PyTorch ---------------------------------------------------------------


def layer_norm(x, w, prefix, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps)


def linear(x, w, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def bert(w, config, ids, mask):
    """BertModel's last hidden state, mean-pooled over the mask and L2-normalised."""
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
    batch, length = ids.shape
    ids = ids.long()
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
    x = x + w["embeddings.position_embeddings.weight"][:length]
    x = layer_norm(x, w, "embeddings.LayerNorm", eps)
    bias = (1.0 - mask)[:, None, None, :] * torch.finfo(x.dtype).min
    for i in range(config["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        dim = x.shape[-1]

        def split(t):
            return t.view(batch, length, heads, dim // heads).permute(0, 2, 1, 3)

        q, k, v = (split(linear(x, w, p + "attention.self." + n)) for n in ("query", "key", "value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dim // heads) + bias, dim=-1)
        context = (probs @ v).permute(0, 2, 1, 3).reshape(batch, length, dim)
        x = layer_norm(linear(context, w, p + "attention.output.dense") + x, w, p + "attention.output.LayerNorm", eps)
        h = torch.nn.functional.gelu(linear(x, w, p + "intermediate.dense"))
        x = layer_norm(linear(h, w, p + "output.dense") + x, w, p + "output.LayerNorm", eps)
    pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def contrastive_loss(queries, passages):
    """Cosine similarity / temperature, cross-entropy against each query's own passage."""
    q = torch.nn.functional.normalize(queries, dim=1)
    p = torch.nn.functional.normalize(passages, dim=1)
    scores = q @ p.T / TEMPERATURE
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(q)))


def reference(weights, config, ids, mask, queries, passages, grad_names):
    """Embeddings of all rows, and the loss of rows `queries` against rows `passages` with its
    gradient for the weights in grad_names, all in float64."""
    w = {n: t.double().requires_grad_(n in grad_names) for n, t in weights.items() if t.is_floating_point()}
    mask = mask.double()
    with torch.no_grad():
        embeddings = bert(w, config, ids, mask)
    loss = contrastive_loss(bert(w, config, ids[queries], mask[queries]),
                            bert(w, config, ids[passages], mask[passages]))
    if grad_names:
        loss.backward()
    return embeddings, loss.detach(), {n: w[n].grad for n in grad_names}


def write_fixture(path, entries):
    with open(path, "wb") as out:
        out.write(b"GCFIXTR\0" + struct.pack("<II", VERSION, len(entries)))
        for name, tensor in entries:
            encoded = name.encode()
            out.write(struct.pack("<I", len(encoded)) + encoded)
            out.write(struct.pack("<II", DTYPES[tensor.dtype][1], tensor.dim()))
            out.write(struct.pack("<%dq" % tensor.dim(), *tensor.shape))
            out.write(tensor.contiguous().numpy().tobytes())
    print("wrote", path)


def padded(rows, pad=0):
    length = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (length - len(r)) for r in rows], dtype=torch.int32)
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (length - len(r)) for r in rows], dtype=torch.float32)
    return ids, mask

# --- the tiny model ----------------------------------------------------------------------


TINY_CONFIG = {
    "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 64, "hidden_size": 32,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 24,
    "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
    "position_embedding_type": "absolute",
}
TINY_WORDS = ["the", "cat", "dog", "sat", "on", "mat", "an", "of", "##s", "##ing", "run", "big"]


def tiny_tokenizer():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + \
        [".", ",", "!", "?"] + TINY_WORDS + ["##" + c for c in "aeiot"]
    vocab += ["[unused%d]" % i for i in range(TINY_CONFIG["vocab_size"] - len(vocab))]
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for i, t in enumerate(vocab[:5])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                          "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(vocab)}},
    }


def tiny_weights(config):
    g = torch.Generator().manual_seed(14)
    d, h, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]

    def normal(*shape):
        return torch.randn(*shape, generator=g) * 0.2

    w = {
        "embeddings.word_embeddings.weight": normal(config["vocab_size"], d),
        "embeddings.position_embeddings.weight": normal(config["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": normal(config["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": 1 + normal(d), "embeddings.LayerNorm.bias": normal(d),
        "embeddings.position_ids": torch.arange(config["max_position_embeddings"], dtype=torch.int64)[None],
        "pooler.dense.weight": normal(d, d), "pooler.dense.bias": normal(d),
    }
    for i in range(n):
        p = "encoder.layer.%d." % i
        for name, (rows, cols) in {"attention.self.query": (d, d), "attention.self.key": (d, d),
                                   "attention.self.value": (d, d), "attention.output.dense": (d, d),
                                   "intermediate.dense": (h, d), "output.dense": (d, h)}.items():
            w[p + name + ".weight"], w[p + name + ".bias"] = normal(rows, cols), normal(rows)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + name + ".weight"], w[p + name + ".bias"] = 1 + normal(d), normal(d)
    return w


def make_tiny():
    folder = os.path.join(FIXTURES, "tiny_bert")
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(TINY_CONFIG, f, indent=2)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tiny_tokenizer(), f, indent=1)
    with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)
    with open(os.path.join(folder, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f, indent=2)
    weights = tiny_weights(TINY_CONFIG)
    write_safetensors(os.path.join(folder, "model.safetensors"), weights)
    g = torch.Generator().manual_seed(15)
    lengths = [3, 7, 12, 5, 2, 9, 4, 12]  # [CLS] ... [SEP], padded to 12
    rows = [[2] + torch.randint(5, 64, (n - 2,), generator=g).tolist() + [3] for n in lengths]
    ids, mask = padded(rows)
    grads = [n for n, t in weights.items() if t.is_floating_point() and not n.startswith("pooler.")]
    embeddings, loss, grad = reference(weights, TINY_CONFIG, ids, mask, [0, 1, 2, 3], [4, 5, 6, 7], grads)
    entries = [("ids", ids), ("mask", mask), ("embeddings", embeddings), ("loss", loss.reshape(1))]
    entries += [("grad." + n, grad[n]) for n in sorted(grad)]
    write_fixture(os.path.join(FIXTURES, "bert_tiny_v1.bin"), entries)

# --- all-MiniLM-L6-v2 --------------------------------------------------------------------


MINILM_GRADS = ["embeddings.LayerNorm.weight", "encoder.layer.0.attention.self.query.weight",
                "encoder.layer.0.attention.self.query.bias", "encoder.layer.3.intermediate.dense.bias",
                "encoder.layer.5.attention.output.dense.weight", "encoder.layer.5.output.LayerNorm.weight"]


def make_minilm(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(FIXTURES, "wordpiece_cases.json")) as f:
        fixture = json.load(f)
    ids, mask = padded([c["ids"] for c in fixture["cases"][:48]])
    embeddings, _, _ = reference(weights, config, ids, mask, [0], [1], [])
    # 8 definitions and their words, with the reference's ids (tests/make_wordpiece_fixture.py)
    ids_of = {c["text"]: c["ids"] for c in fixture["cases"]}
    p_ids, p_mask = padded([ids_of[text] for pair in fixture["pairs"] for text in pair])
    n = len(fixture["pairs"])
    _, loss, grad = reference(weights, config, p_ids, p_mask, list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2)),
                              MINILM_GRADS)
    entries = [("ids", ids), ("mask", mask), ("embeddings", embeddings), ("pair_ids", p_ids),
               ("pair_mask", p_mask), ("loss", loss.reshape(1))]
    entries += [("grad." + n, grad[n].float()) for n in MINILM_GRADS]
    write_fixture(os.path.join(FIXTURES, "bert_minilm_v1.bin"), entries)


if __name__ == "__main__":
    torch.manual_seed(0)
    make_tiny()
    if len(sys.argv) > 1:
        make_minilm(sys.argv[1])
