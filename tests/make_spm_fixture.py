#!/usr/bin/env python3
"""SentencePiece-style BPE tokenizers (Llama-2's and Mistral's kind) made by the tokenizers
library, with its ids for a hostile multilingual case set, for tests/test_spm.c. Run by hand
(seconds) with the tokenizers library (0.19) in a venv:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install tokenizers==0.19.1
    /tmp/venv/bin/python tests/make_spm_fixture.py

One vocabulary is trained here by the library's BPE trainer on the case strings (a small
vocabulary and a limited alphabet, so that rare characters have no token and fall back to
bytes), laid out as Llama-2's is (<unk> <s> </s>, then <0x00> .. <0xFF>, then the trained
tokens), and written under tests/fixtures/ in three styles:
  - spm_llama2.json: Llama-2's legacy pipeline: normalizer Sequence [Prepend "▁", Replace " "
    by "▁"], no pre-tokenizer, BPE with byte_fallback and fuse_unk, <s> before the text;
  - spm_mistral.json: the Metaspace pre-tokenizer (prepend_scheme "first", no split) that
    transformers writes for Llama/Mistral tokenizers converted without legacy, <s> before;
  - spm_metaspace.json: Metaspace with prepend_scheme "always" and split, no byte fallback
    (unknown characters fuse into one <unk>), </s> after the text, its merges written as
    [a, b] pairs (the library's newer form; the ids are the library's before rewriting);
  - spm_cases.json: the strings of bpe_cases.json and some of this file's own (byte tokens and
    special tokens written in the text, ▁ in the text, characters outside the alphabet), and
    each tokenizer's ids for the whole list.
"""
import json
import os

from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
SPECIALS = ["<unk>", "<s>", "</s>"]

EXTRA = ["<s>", "</s>", "<unk>", "<s>hello", "a</s>b", "x <s> y", "<s><s>", "<0x41>", "<0xZZ>", "▁", "▁▁x", "x▁",
         "▁ ▁", "  two leading", "two trailing  ", "\t\tTabs\tand\nlines\r\n", "日本語の文章です。", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
         "ꙮ᚛ᚁ᚜", "\u200d\u200c\ufeff", "👩\u200d🔬👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "a\u0301\u0302\u0303",
         "𐍈𐌰𐌽𐍃", "ﷺ", "Ｆｕｌｌｗｉｄｔｈ", "\u00a0nbsp\u00a0", "\u2028sep\u2029", "zzzzzzzzzzzzzzzzzzzz",
         "the cat sat on the mat the cat sat on the mat", "Instruct: Given a query\nQuery: 東京 ou Москва?"]


def cases():
    with open(os.path.join(FIXTURES, "bpe_cases.json"), encoding="utf-8") as f:
        return json.load(f)["strings"] + EXTRA


def legacy_normalizer():
    return normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])


def trained_vocabulary(texts):
    """The trainer's tokens and merges, laid out as Llama-2's vocabulary is."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = legacy_normalizer()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIALS, limit_alphabet=120, show_progress=False)
    tok.train_from_iterator(texts * 3, trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return vocab, merges


def build(style, vocab, merges):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=style != "metaspace"))
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS])
    if style == "llama2":
        tok.normalizer = legacy_normalizer()
    elif style == "mistral":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    if style == "metaspace":
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", vocab["</s>"])])
    else:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return tok


def save(style, tok):
    document = json.loads(tok.to_str())
    if style == "metaspace":
        document["model"]["merges"] = [m.split(" ") for m in document["model"]["merges"]]
    with open(os.path.join(FIXTURES, "spm_%s.json" % style), "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False, separators=(",", ":"))


def main():
    texts = cases()
    vocab, merges = trained_vocabulary(texts)
    ids = {}
    for style in ["llama2", "mistral", "metaspace"]:
        tok = build(style, vocab, merges)
        save(style, tok)
        ids[style] = [tok.encode(s).ids for s in texts]
    fallbacks = sum(1 for row in ids["llama2"] for i in row if 3 <= i < 259)
    unknowns = sum(1 for row in ids["metaspace"] for i in row if i == 0)
    print("%d strings, %d byte-fallback ids (llama2), %d <unk> (metaspace)" % (len(texts), fallbacks, unknowns))
    with open(os.path.join(FIXTURES, "spm_cases.json"), "w", encoding="utf-8") as f:
        json.dump({"extra_strings": EXTRA, "ids": ids}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
