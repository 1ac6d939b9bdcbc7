#!/bin/bash
# A decoder-family model trained by gradcache and saved back as a folder loads in transformers
# (AutoModel) and computes the engine's last hidden states for the same ids
# (tests/decoder_hidden.c), within test_decoder_parity.c's f32 bound. Usage:
#   test_decoder_transformers.sh DECODER_HIDDEN COMMAND...
# COMMAND, given the folder to write as one more argument, trains and saves: test_decoder_train
# (the library's step, gc_pretrained_save) or `gradcache train --init ... --out` (the trainer's
# run folder). A folder trained in f16 or bf16 holds 16-bit weights: both sides widen the same
# stored values and compute in f32, so the f32 bound holds for it too. Skipped (77) where no
# python3 has PyTorch and transformers (GC_TEST_PYTHON names one, e.g. a venv's).
set -u
hidden_program=$1
shift
. "$(dirname "$0")/find_python.sh"
find_python torch transformers safetensors
if [ -z "$python" ]; then
    echo "skip: no python3 with PyTorch and transformers (set GC_TEST_PYTHON)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$@" "$work/saved" || { echo "FAIL: $* $work/saved"; exit 1; }
"$hidden_program" "$work/saved" "$work/outputs.safetensors" || { echo "FAIL: $hidden_program"; exit 1; }
"$python" - "$work" <<'PY'
import sys

import torch
import transformers
from safetensors.torch import load_file

work = sys.argv[1]
model = transformers.AutoModel.from_pretrained(work + "/saved", attn_implementation="eager").float().eval()
out = load_file(work + "/outputs.safetensors")
ids, mask, hidden = out["ids"].long(), out["mask"], out["hidden"]
with torch.no_grad():
    want = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state
c = model.config
head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
# test_decoder_parity.c's bound: 4 x 2 N u max|h|, N the roundings along the longest chain
chain = c.num_hidden_layers * (4 * c.hidden_size + head_dim + 2 * ids.shape[1] + c.num_attention_heads * head_dim
                               + c.intermediate_size) + c.hidden_size
bound = 8 * chain * 2.0 ** -24 * want.abs().max().item()
difference = ((hidden - want).abs() * mask[..., None]).max().item()
print("transformers against the engine: %.3g (bound %.3g)" % (difference, bound))
sys.exit(0 if difference <= bound else 1)
PY
