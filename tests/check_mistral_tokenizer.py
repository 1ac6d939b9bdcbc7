#!/usr/bin/env python3
"""The engine's SentencePiece-style BPE against Mistral's real tokenizers (issue 38 item 2): a
check run by hand, since it downloads. tests/test_spm.c pins the styles on fixtures the
tokenizers library made; this one takes the real vocabularies.

mistral-common's wheel (PyPI) carries Mistral's SentencePiece models (tokenizer.model.v1 is
Mistral-7B-v0.1's, 32,000 pieces; the v2 instruct model has 32,768). transformers' converter
turns each into a tokenizer.json in the two layouts the Hub's folders use: Llama-2's legacy
normalizers (Prepend "▁", Replace " " by "▁", no pre-tokenizer) and the Metaspace
pre-tokenizer (prepend_scheme "first"). For each, the engine's ids (gc_tokenizer_encode, through
a ten-line C program compiled against the build) must equal the tokenizers library's, specials
included, on: tests/fixtures/bpe_cases.json, the hostile strings of tests/make_spm_fixture.py,
every 97th WordNet definition and every manual-page description of the BEIR sets under data/
(when present), and 2,000 random strings over Latin, Greek, Cyrillic, kana, CJK and emoji.

    /tmp/venv-st/bin/pip install --target /tmp/pkgs-spm sentencepiece protobuf transformers==4.51.3
    PYTHONPATH=/tmp/pkgs-spm /tmp/venv-st/bin/python tests/check_mistral_tokenizer.py build

Prints a line per tokenizer (texts, tokens, mismatches) and exits 1 on any mismatch.
2026-11-28 (transformers 4.51.3, tokenizers 0.21): 4 tokenizers, 4,330 texts, 345,343 (Metaspace) and
345,345 (legacy) tokens, 0 mismatches.
"""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import zipfile

from tokenizers import Tokenizer
from transformers import LlamaTokenizer
from transformers.convert_slow_tokenizer import convert_slow_tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {"v1": "mistral_common/data/tokenizer.model.v1",
          "v2": "mistral_common/data/mistral_instruct_tokenizer_240216.model.v2"}
ENGINE_IDS = r"""
#include <gradcache/tokenizer.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {  /* ids of each NUL-terminated text of argv[2], a line each */
    gc_tokenizer *t; static char text[1 << 22]; static int32_t ids[1 << 16];
    if (argc != 3 || gc_tokenizer_load(argv[1], &t) != GC_OK) return 1;
    FILE *f = fopen(argv[2], "rb"); size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    for (char *p = text; p < text + n; p += strlen(p) + 1) {
        int64_t count = gc_tokenizer_encode(t, p, 1 << 16, ids);
        for (int64_t i = 0; i < count; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    gc_tokenizer_free(t);
    return 0;
}
"""


def texts():
    found = json.load(open(os.path.join(HERE, "fixtures", "bpe_cases.json")))
    out = [c["text"] if isinstance(c, dict) else c for c in found]
    source = open(os.path.join(HERE, "make_spm_fixture.py")).read()
    start = source.index("EXTRA = ") + len("EXTRA = ")
    out += eval(source[start:source.index("]\n", start) + 1])  # a list literal of strings
    for path, every, key in (("data/wordnet-beir/queries.jsonl", 97, "text"), ("data/manpages-beir/corpus.jsonl", 1, "text")):
        if os.path.exists(os.path.join(ROOT, path)):
            out += [json.loads(line)[key] for line in open(os.path.join(ROOT, path)).readlines()[::every]]
    rng = random.Random(5)
    alphabet = [chr(c) for c in [*range(32, 127), *range(0xA0, 0x2000), *range(0x3040, 0x30FF), *range(0x4E00, 0x4E80),
                                 0x1F600, 0x1F44D, 0x200D, 0xFE0F]]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(2000)]
    return [t for t in out if "\0" not in t]


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
    work = tempfile.mkdtemp()
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", work, "mistral-common"], check=True)
    with zipfile.ZipFile(glob.glob(os.path.join(work, "mistral_common-*.whl"))[0]) as wheel:
        wheel.extractall(work, members=list(MODELS.values()))
    with open(os.path.join(work, "ids.c"), "w") as f:
        f.write(ENGINE_IDS)
    subprocess.run(["cc", "-std=c11", "-I", os.path.join(ROOT, "include"), "-I", os.path.join(build, "include"),
                    os.path.join(work, "ids.c"), "-L", build, "-lgradcache", "-Wl,-rpath," + build,
                    "-o", os.path.join(work, "ids")], check=True)
    cases = texts()
    with open(os.path.join(work, "texts.bin"), "wb") as f:
        f.write(b"".join(t.encode() + b"\0" for t in cases))
    mismatches = 0
    for version, model in MODELS.items():
        for legacy in (True, False):
            name = os.path.join(work, f"mistral_{version}_{'legacy' if legacy else 'metaspace'}.json")
            convert_slow_tokenizer(LlamaTokenizer(vocab_file=os.path.join(work, model), legacy=legacy, from_slow=True)).save(name)
            want = [" ".join(map(str, ids)) for ids in (e.ids for e in Tokenizer.from_file(name).encode_batch(cases))]
            got = subprocess.run([os.path.join(work, "ids"), name, os.path.join(work, "texts.bin")], capture_output=True,
                                 text=True, check=True).stdout.split("\n")[:-1]
            bad = [(t, w, g) for t, w, g in zip(cases, want, got) if w != g] + ([("(count)", len(want), len(got))] if len(got) != len(want) else [])
            print(f"{os.path.basename(name)}: {len(cases)} texts, {sum(len(w.split()) for w in want)} tokens, {len(bad)} mismatches")
            for text, w, g in bad[:3]:
                print(f"  {text!r}: want {w}, got {g}")
            mismatches += len(bad)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
