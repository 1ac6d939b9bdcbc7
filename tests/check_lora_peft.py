#!/tmp/venv-st/bin/python
"""The reverse direction of tests/test_lora_peft.c, run by hand (CI has no peft): what the
engine wrote loads in PEFT and in transformers alone and gives the engine's hidden states.

    GC_LORA_KEEP=/tmp/lora_out build/tests/test_lora_peft
    /tmp/venv-st/bin/python tests/check_lora_peft.py /tmp/lora_out

/tmp/lora_out/adapter is the engine's adapter folder (gc_lora_save of the fixture's adapter
as the engine loaded it) and /tmp/lora_out/merged its merged model folder
(gc_lora_merge_all, gc_pretrained_save). On the ids of tests/fixtures/lora_bert_v1.safetensors
it prints the largest difference, over the real tokens, between the engine's hidden states
(the fixture's, which test_lora_peft matches to 1e-5) and PeftModel's over BertModel with the
engine's adapter, and transformers' BertModel from the merged folder; each must be <= 1e-5
(float32), and the script exits 1 otherwise.
"""
import os
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModel

HERE = os.path.dirname(os.path.abspath(__file__))


def largest_difference(model, reference):
    with torch.no_grad():
        hidden = model(input_ids=reference["ids"].long(), attention_mask=reference["mask"].long()).last_hidden_state
    real = reference["mask"].bool()
    return (hidden[real] - reference["hidden"][real]).abs().max().item()


def main():
    out = sys.argv[1]
    reference = load_file(os.path.join(HERE, "fixtures", "lora_bert_v1.safetensors"))
    base = AutoModel.from_pretrained(os.path.join(HERE, "fixtures", "tiny_bert"))
    adapted = PeftModel.from_pretrained(base, os.path.join(out, "adapter")).eval()
    merged = AutoModel.from_pretrained(os.path.join(out, "merged")).eval()
    failed = False
    for name, model in (("PEFT over the engine's adapter", adapted), ("transformers over the merged folder", merged)):
        difference = largest_difference(model, reference)
        print(f"{name}: largest difference {difference:.3g}")
        failed |= not difference <= 1e-5
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
