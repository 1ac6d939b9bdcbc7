/* Encoding texts with a trained tower, for evaluation. */
#ifndef GC_CLI_ENCODE_H
#define GC_CLI_ENCODE_H

#include "gradcache/gradcache.h"

/* texts[0..count) (count >= 1) -> representations [count, D] on the tower's device, in f32
 * for a 16-bit tower (gc_working_dtype): eval
 * mode (no dropout), no graph, `batch` texts tokenized and encoded at a time. NULL (error
 * set) when memory runs out. */
gc_tensor *gc_encode_texts(const gc_text_encoder *tower, const char *const *texts, int64_t count, int64_t batch);

#endif
