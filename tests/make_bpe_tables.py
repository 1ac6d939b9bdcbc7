#!/usr/bin/env python3
"""Writes nn/tokenize/unicode_bpe_tables.c: the character classes of the byte-level BPE
pre-tokenizers' regular expressions (nn/tokenize/bpe_split.c) and the tables of the NFC
normaliser (nn/tokenize/nfc.c), taken from the reference implementation (Hugging Face
`tokenizers`) so that gradcache splits and normalises exactly as it does:

  - \\p{L}, \\p{N} and \\s as the reference's regular expressions (Oniguruma) see them: each
    asked of the Split pre-tokenizer for every code point at once (one string of all of
    them, the matches removed);
  - canonical combining classes (Python's unicodedata: the reference's NFC is checked
    against the tables below for every code point and for pairs, so a class that differed
    would show);
  - the canonical compositions: every code point whose single-level canonical
    decomposition is a pair that the reference's NFC composes back into it (composition
    exclusions and singletons fall out by themselves).

The decompositions NFC starts from are nn/tokenize/unicode_tables.c's (make_unicode_tables.py).
Run by hand (seconds) when moving to another tokenizers version:

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install tokenizers
    /tmp/ref/bin/python tests/make_bpe_tables.py > nn/tokenize/unicode_bpe_tables.c
"""
import sys
import unicodedata

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

from make_unicode_tables import code_points, ranges

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def matching(pattern):
    """The code points the reference's regex `pattern` (one character) matches."""
    points = list(code_points())
    text = "".join(chr(cp) for cp in points)
    kept = pre_tokenizers.Split(Regex(pattern), behavior="removed").pre_tokenize_str(text)
    unmatched = set()
    for _, (start, end) in kept:
        unmatched.update(range(start, end))
    return {points[i] for i in range(len(points)) if i not in unmatched}


def class_ranges(classes):
    out = []
    for cp in sorted(classes):
        if out and out[-1][1] == cp - 1 and out[-1][2] == classes[cp]:
            out[-1][1] = cp
        else:
            out.append([cp, cp, classes[cp]])
    return out


def main():
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    letters, numbers, spaces = matching(r"\p{L}"), matching(r"\p{N}"), matching(r"\s")
    classes = {cp: unicodedata.combining(chr(cp)) for cp in code_points() if unicodedata.combining(chr(cp))}
    compositions = {}
    for cp in code_points():
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) != 2 or parts[0].startswith("<"):
            continue
        pair = (int(parts[0], 16), int(parts[1], 16))
        if nfc.normalize_str(chr(pair[0]) + chr(pair[1])) == chr(cp):
            compositions[pair] = cp

    def decompose(cp):
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            s = cp - HANGUL_FIRST
            return [0x1100 + s // 588, 0x1161 + s % 588 // 28] + ([0x11A7 + s % 28] if s % 28 else [])
        d = nfd.normalize_str(chr(cp))
        return [ord(c) for c in d]

    def compose(first, second):
        if 0x1100 <= first <= 0x1112 and 0x1161 <= second <= 0x1175:
            return HANGUL_FIRST + ((first - 0x1100) * 21 + second - 0x1161) * 28
        if HANGUL_FIRST <= first <= HANGUL_LAST and (first - HANGUL_FIRST) % 28 == 0 and 0x11A8 <= second <= 0x11C2:
            return first + second - 0x11A7
        return compositions.get((first, second))

    def my_nfc(text):  # the algorithm of nn/tokenize/nfc.c over these tables
        codes = [p for c in text for p in decompose(ord(c))]
        for i in range(1, len(codes)):  # canonical order: stable, within runs of non-zero classes
            j = i
            while j > 0 and classes.get(codes[j], 0) and classes.get(codes[j - 1], 0) > classes.get(codes[j], 0):
                codes[j - 1], codes[j] = codes[j], codes[j - 1]
                j -= 1
        if not codes:
            return ""
        out, starter = [codes[0]], 0
        last = 256 if classes.get(codes[0], 0) else 0
        for c in codes[1:]:
            cc = classes.get(c, 0)
            composite = compose(out[starter], c) if starter is not None else None
            if composite is not None and (last < cc or last == 0):
                out[starter] = composite
                continue
            if cc == 0:
                starter = len(out)
            last = cc
            out.append(c)
        return "".join(chr(c) for c in out)

    samples = [chr(cp) for cp in code_points()]
    samples += ["a\u0301", "e\u0301\u0301", "a\u0323\u0302", "\u1100\u1161\u11a8", "\u0301a", "A\u030a\u0301",
                "\u0b47\u0b3e", "\u1e0b\u0323", "q\u0307\u0323", "\u00c5\u0301"]
    for s in samples:
        assert my_nfc(s) == nfc.normalize_str(s), (s.encode("unicode_escape"), my_nfc(s), nfc.normalize_str(s))
    write(sys.stdout, letters, numbers, spaces, classes, compositions)


def write(out, letters, numbers, spaces, classes, compositions):
    out.write("/* Generated by tests/make_bpe_tables.py from Hugging Face tokenizers %s: do not edit.\n"
              " * The character classes of the byte-level BPE pre-tokenizers and the tables of NFC\n"
              " * (nn/tokenize/unicode_tables.h). */\n" % tokenizers.__version__)
    out.write('#include "nn/tokenize/unicode_tables.h"\n\n')
    for name, members in [("letter", letters), ("number", numbers), ("regex_space", spaces)]:
        rs = ranges(members)
        out.write("static const gc_unicode_range %s_ranges[] = {\n" % name)
        for i in range(0, len(rs), 4):
            out.write("    " + " ".join("{0x%04X, 0x%04X}," % tuple(r) for r in rs[i:i + 4]) + "\n")
        out.write("};\nconst gc_unicode_ranges gc_unicode_%s = {%s_ranges, %d};\n\n" % (name, name, len(rs)))
    rs = class_ranges(classes)
    out.write("static const gc_unicode_class_range combining_ranges[] = {\n")
    for i in range(0, len(rs), 3):
        out.write("    " + " ".join("{0x%04X, 0x%04X, %d}," % tuple(r) for r in rs[i:i + 3]) + "\n")
    out.write("};\nconst gc_unicode_classes gc_unicode_combining = {combining_ranges, %d};\n\n" % len(rs))
    out.write("static const gc_unicode_composition composition_entries[] = {\n")
    pairs = sorted(compositions)
    for i in range(0, len(pairs), 3):
        out.write("    " + " ".join("{0x%04X, 0x%04X, 0x%04X}," % (a, b, compositions[(a, b)])
                                    for a, b in pairs[i:i + 3]) + "\n")
    out.write("};\nconst gc_unicode_compositions gc_unicode_canonical_compositions = {composition_entries, %d};\n" % len(pairs))


if __name__ == "__main__":
    main()
