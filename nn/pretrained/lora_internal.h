/* What the LoRA target matching (lora_targets.c) and PEFT's adapter files (lora_files.c)
 * share: the module names PEFT knows the encoder's Linears by. */
#ifndef GC_NN_LORA_INTERNAL_H
#define GC_NN_LORA_INTERNAL_H

#include "nn/pretrained/layout.h"

/* The module name of the Linear called `ours` ("layers.0.attention.query"): Hugging Face's
 * under `layout` ("encoder.layer.0.attention.self.query", without a task model's prefix), or
 * `ours` itself for a NULL layout or a Linear the layout has no name for. */
void gc_lora_module_name(const gc_layout *layout, const char *ours, char name_out[GC_PARAM_NAME_MAX]);

#endif
