#!/tmp/venv-st/bin/python
"""PEFT LoRA adapters over tests/fixtures/tiny_bert and tests/fixtures/tiny_qwen2 and the
hidden states PEFT computes with them, for tests/test_lora_peft.c. Run by hand with peft
0.10.0 and transformers 4.40.2 (CI has no peft):

    /tmp/venv-st/bin/python tests/make_lora_fixture.py          # both
    /tmp/venv-st/bin/python tests/make_lora_fixture.py qwen2    # tiny_qwen2_lora/ alone

It writes
  - tests/fixtures/tiny_bert_lora/: adapter_config.json and adapter_model.safetensors as
    PeftModel.save_pretrained writes them: r 4, lora_alpha 8, lora_dropout 0.1 on
    query, key, value and dense (dense also matches BertModel's pooler, which PEFT adapts and
    gradcache's encoder has not), every lora_B drawn from normal(0, 0.1) so that the adapters
    change the output (PEFT starts B at 0);
  - tests/fixtures/lora_bert_v1.safetensors: "ids" (I32 [3, 7]), "mask" (F32 [3, 7], the
    last row with 3 padding tokens) and "hidden" (F32 [3, 7, 32]): PeftModel's
    last_hidden_state in evaluation mode, in float32;
  - tests/fixtures/tiny_qwen2_lora/ and lora_qwen2_v1.safetensors: the same over the Qwen2Model
    of tiny_qwen2 (PEFT's names "base_model.model.layers.0.self_attn.q_proj.lora_A.weight"),
    r 4, lora_alpha 16, lora_dropout 0.05 on all seven projections (q, k, v, o, gate, up,
    down), lora_B from normal(0, 0.2) (the decoder's outputs are smaller), right padding.
    tiny_qwen2/config.json was written by a newer transformers, which keeps rope_theta under
    "rope_parameters"; 4.40 reads "rope_theta" alone, so it is set from there.
"""
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModel

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


def make(base, adapter, reference, seed, lora, b_std, vocab):
    torch.manual_seed(seed)
    path = os.path.join(FIXTURES, base)
    config = AutoConfig.from_pretrained(path)
    rope = getattr(config, "rope_parameters", None)
    if rope:
        config.rope_theta = rope["rope_theta"]
    model = AutoModel.from_pretrained(path, config=config)
    peft_model = get_peft_model(model, lora)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, b_std)
    peft_model.eval()
    # the path as a test would name it, not this machine's
    peft_model.peft_config["default"].base_model_name_or_path = "tests/fixtures/" + base
    peft_model.save_pretrained(os.path.join(FIXTURES, adapter))
    os.remove(os.path.join(FIXTURES, adapter, "README.md"))  # PEFT's model card template: nothing a test reads
    ids = torch.randint(1, vocab, (3, 7), dtype=torch.int32)
    mask = torch.ones(3, 7)
    mask[2, 4:] = 0
    ids[2, 4:] = 0
    with torch.no_grad():
        hidden = peft_model(input_ids=ids.long(), attention_mask=mask.long()).last_hidden_state
    save_file({"ids": ids, "mask": mask, "hidden": hidden.contiguous()}, os.path.join(FIXTURES, reference))


def main():
    which = sys.argv[1:] or ["bert", "qwen2"]
    if "bert" in which:
        make("tiny_bert", "tiny_bert_lora", "lora_bert_v1.safetensors", 38,
             LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1, target_modules=["query", "key", "value", "dense"]),
             0.1, 64)
    if "qwen2" in which:
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        make("tiny_qwen2", "tiny_qwen2_lora", "lora_qwen2_v1.safetensors", 39,
             LoraConfig(r=4, lora_alpha=16, lora_dropout=0.05, target_modules=targets), 0.2, 423)


if __name__ == "__main__":
    main()
