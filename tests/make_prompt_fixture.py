#!/usr/bin/env python3
"""sentence-transformers' embeddings of a few queries under tests/fixtures/tiny_qwen3's "query"
prompt, for tests/test_encode_prompt.c. Run by hand (seconds) with sentence-transformers 3.0.1
and a transformers that has Qwen3 (4.51.3 was used):

    pip install --target /tmp/pkgs-st transformers==4.51.3
    PYTHONPATH=/tmp/pkgs-st python3 tests/make_prompt_fixture.py   # python3 with sentence-transformers 3.0.1

It writes tests/fixtures/prompt_qwen3_v1.bin (tests/fixture.h's format): "query", the f32
embeddings [5, 32] of SentenceTransformer(folder).encode(QUERIES, prompt_name="query"),
right-padded in one batch (its default), last-token pooled and normalised. The folder is read
from a copy whose config.json also says rope_theta at the top level, where transformers 4
reads it (the committed file has transformers 5's rope_parameters only); that the copy is the
same model is checked here: sentence-transformers' embeddings must equal, to 1e-5, those of
make_decoder_fixture.py's plain decoder on the committed weights for the prompted texts.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer

from make_bert_fixture import write_fixture
from make_decoder_fixture import plain_decoder, pad

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "fixtures", "tiny_qwen3")
QUERIES = ["what is it?", "Hello world", "a", "the cat sat, naïve café", "東京 123 😀!"]


def main():
    copy = tempfile.mkdtemp()
    try:
        shutil.copytree(FOLDER, copy, dirs_exist_ok=True)
        with open(os.path.join(copy, "config.json")) as f:
            config = json.load(f)
        config["rope_theta"] = config["rope_parameters"]["rope_theta"]
        with open(os.path.join(copy, "config.json"), "w") as f:
            json.dump(config, f)
        model = SentenceTransformer(copy, device="cpu")
        got = model.encode(QUERIES, prompt_name="query", convert_to_tensor=True, batch_size=len(QUERIES)).float()
        # the plain decoder on the committed weights, the prompt written before each text
        prompt = model.prompts["query"]
        tokenizer = Tokenizer.from_file(os.path.join(FOLDER, "tokenizer.json"))
        ids, mask = pad([e.ids for e in tokenizer.encode_batch([prompt + q for q in QUERIES])], left=False)
        weights = {n: t.float() for n, t in model[0].auto_model.state_dict().items()}
        hidden = plain_decoder(weights, model[0].auto_model.config, ids, mask, "")
        last = hidden[torch.arange(len(QUERIES)), mask.sum(1).long() - 1]
        want = torch.nn.functional.normalize(last, dim=-1)
        difference = (want - got).abs().max().item()
        assert difference < 1e-5, "sentence-transformers is not the plain decoder (%g)" % difference
        print("sentence-transformers against the plain decoder: %.3g" % difference)
    finally:
        shutil.rmtree(copy)
    write_fixture(os.path.join(HERE, "fixtures", "prompt_qwen3_v1.bin"), [("query", got.contiguous())])


if __name__ == "__main__":
    sys.exit(main())
