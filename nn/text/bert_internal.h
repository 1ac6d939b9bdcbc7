/* What the BERT loader's files share (nn/text/bert_layout.c, nn/text/bert_weights.c). */
#ifndef GC_NN_BERT_INTERNAL_H
#define GC_NN_BERT_INTERNAL_H

#include "gradcache/pretrained.h"
#include "nn/io/safetensors_internal.h"

/* The prefix of the encoder's weights in `file`: "" (BertModel's bare names) or "bert." (the
 * task models', BertForMaskedLM and the like). */
const char *gc_bert_file_prefix(const gc_safetensors *file);

/* Whether a dtype of the format (its spelling) is floating point: what a weight may be. */
bool gc_bert_floating(const char *dtype);

/* Appends `name` to `list` (`size` bytes), a ", "-separated list of `count` names so far, or
 * ", ..." once when it would not fit: a message names the first few of many. */
void gc_bert_list_name(char *list, size_t size, int count, const char *name);

#endif
