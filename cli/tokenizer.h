/* The built-in tokenisation: bytes. A text becomes [CLS] followed by its UTF-8 bytes, each
 * byte b as id b + GC_TOKEN_FIRST_BYTE, truncated to the model's max length; shorter texts
 * are padded with GC_TOKEN_PAD and masked out. No vocabulary file is needed, every text is
 * representable, and the vocabulary is GC_TOKEN_VOCAB ids. */
#ifndef GC_CLI_TOKENIZER_H
#define GC_CLI_TOKENIZER_H

#include "gradcache/tensor.h"

enum { GC_TOKEN_PAD = 0, GC_TOKEN_CLS = 1, GC_TOKEN_FIRST_BYTE = 2, GC_TOKEN_VOCAB = 258 };

/* texts[0..count) -> ids i32 [count, max_length] and mask [count, max_length] (mask_dtype:
 * 1 for a token, 0 for padding), on `device`. NULL (error set) when allocation fails. */
gc_status gc_tokenize(const char *const *texts, int64_t count, int64_t max_length, gc_dtype mask_dtype,
                      gc_device device, gc_tensor **ids, gc_tensor **mask);

#endif
