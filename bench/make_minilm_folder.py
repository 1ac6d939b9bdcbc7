#!/usr/bin/env python3
"""A model folder shaped as sentence-transformers/all-MiniLM-L6-v2, with random weights, for
the GPU comparison of bench/gpu_check.sh (the GPU machine has no network to fetch the model):
both sides, `gradcache bench memory --init FOLDER` and bench/torch_gradcache.py
--sentence-transformers FOLDER, load the same files. Speed and memory do not depend on the
weights' values.

  python3 bench/make_minilm_folder.py FOLDER

It writes what transformers' BertModel.save_pretrained writes (config.json,
model.safetensors: normal(0, 0.02) weights, drawn from seed 0) and the model's tokenizer.json
(tests/fixtures/minilm_tokenizer.json, all-MiniLM-L6-v2's own). BERT pools by the mean over
the mask without a 1_Pooling folder (the engine's default, and the --sentence-transformers
model's Pooling), as the model does.
"""
import os
import shutil
import sys

# all-MiniLM-L6-v2's config.json (Hugging Face, sentence-transformers/all-MiniLM-L6-v2)
MINILM_CONFIG = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}
TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                         "minilm_tokenizer.json")


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import torch
        from transformers import BertConfig, BertModel
    except ImportError as error:
        print(f"make_minilm_folder: {error} (pip install transformers)", file=sys.stderr)
        return 77
    folder = argv[0]
    torch.manual_seed(0)
    BertModel(BertConfig(**MINILM_CONFIG)).save_pretrained(folder)  # safetensors: the default
    shutil.copyfile(TOKENIZER, os.path.join(folder, "tokenizer.json"))
    print(f"make_minilm_folder: {folder}: {sorted(os.listdir(folder))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
