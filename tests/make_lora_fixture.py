#!/tmp/venv-st/bin/python
"""A PEFT LoRA adapter over tests/fixtures/tiny_bert and the hidden states PEFT computes with
it, for tests/test_lora_peft.c. Run by hand with peft 0.10.0 and transformers 4.40.2 (CI has
no peft):

    /tmp/venv-st/bin/python tests/make_lora_fixture.py

It writes
  - tests/fixtures/tiny_bert_lora/: adapter_config.json and adapter_model.safetensors as
    PeftModel.save_pretrained writes them: r 4, lora_alpha 8, lora_dropout 0.1 on
    query, key, value and dense (dense also matches BertModel's pooler, which PEFT adapts and
    gradcache's encoder has not), every lora_B drawn from normal(0, 0.1) so that the adapters
    change the output (PEFT starts B at 0);
  - tests/fixtures/lora_bert_v1.safetensors: "ids" (I32 [3, 7]), "mask" (F32 [3, 7], the
    last row with 3 padding tokens) and "hidden" (F32 [3, 7, 32]): PeftModel's
    last_hidden_state in evaluation mode, in float32.
"""
import os

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModel

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "fixtures", "tiny_bert")
ADAPTER = os.path.join(HERE, "fixtures", "tiny_bert_lora")


def main():
    torch.manual_seed(38)
    model = AutoModel.from_pretrained(BASE)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1, target_modules=["query", "key", "value", "dense"])
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.1)
    peft_model.eval()
    # the path as a test would name it, not this machine's
    peft_model.peft_config["default"].base_model_name_or_path = "tests/fixtures/tiny_bert"
    peft_model.save_pretrained(ADAPTER)
    os.remove(os.path.join(ADAPTER, "README.md"))  # PEFT's model card template: nothing a test reads
    ids = torch.randint(1, 64, (3, 7), dtype=torch.int32)
    mask = torch.ones(3, 7)
    mask[2, 4:] = 0
    ids[2, 4:] = 0
    with torch.no_grad():
        hidden = peft_model(input_ids=ids.long(), attention_mask=mask.long()).last_hidden_state
    save_file({"ids": ids, "mask": mask, "hidden": hidden.contiguous()},
              os.path.join(HERE, "fixtures", "lora_bert_v1.safetensors"))


if __name__ == "__main__":
    main()
