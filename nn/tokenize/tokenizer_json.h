/* What the readers of a tokenizer.json share: tokenizer_json.c (the file, WordPiece's parts,
 * templates, added tokens), bpe_json.c (BPE's model and pre-tokeniser) and spm_json.c (BPE's
 * normaliser and Metaspace). Each checks every part it reads and refuses one of another kind
 * by name. */
#ifndef GC_NN_TOKENIZER_JSON_H
#define GC_NN_TOKENIZER_JSON_H

#include "base/json_file.h"
#include "nn/tokenize/tokenizer_internal.h"

/* Reading context: the file's name for messages, and the tokenizer being filled. */
typedef struct gc_tokenizer_reader {
    const char *name;
    gc_tokenizer *tokenizer;
} gc_tokenizer_reader;

/* A new copy of `text`, or NULL. */
char *gc_tokenizer_copy_string(const char *text);
/* GC_ERR_OUT_OF_MEMORY naming the file. */
gc_status gc_tokenizer_no_memory(const gc_tokenizer_reader *r);
/* The member `key` of `object` (named `where` in messages) if it has type `type`; NULL when
 * it is absent (or null and optional), GC_ERR_FORMAT in *status when it has another type. */
const gc_json *gc_tokenizer_member(const gc_tokenizer_reader *r, const gc_json *object, const char *where,
                                   const char *key, gc_json_type type, gc_status *status);
/* A boolean member, `otherwise` when absent. */
bool gc_tokenizer_flag(const gc_tokenizer_reader *r, const gc_json *object, const char *where, const char *key,
                       bool otherwise, gc_status *status);
/* model.vocab: token -> id, the ids exactly 0 .. n-1, into the tokenizer's vocabulary. */
gc_status gc_tokenizer_read_vocabulary(const gc_tokenizer_reader *r, const gc_json *vocab);
/* GC_ERR_FORMAT unless the "type" of `part` (its name, e.g. "normalizer") is `supported`. */
gc_status gc_tokenizer_require_type(const gc_tokenizer_reader *r, const gc_json *object, const char *part,
                                    const char *supported);
/* TemplateProcessing's "single": special tokens around exactly one sequence "A". */
gc_status gc_tokenizer_read_template(const gc_tokenizer_reader *r, const gc_json *processor);

/* bpe_json.c: a BPE model (vocab and merges), and the pre-tokeniser (NULL: none) and
 * post-processor of a BPE tokenizer. */
gc_status gc_bpe_read_model(const gc_tokenizer_reader *r, const gc_json *model);
gc_status gc_bpe_read_pre_tokenizer(const gc_tokenizer_reader *r, const gc_json *pre_tokenizer);
gc_status gc_bpe_read_post_processor(const gc_tokenizer_reader *r, const gc_json *processor);
/* spm_json.c: a BPE tokenizer's normaliser, and the Metaspace pre-tokeniser. */
gc_status gc_bpe_read_normalizer(const gc_tokenizer_reader *r, const gc_json *normalizer);
gc_status gc_bpe_read_metaspace(const gc_tokenizer_reader *r, const gc_json *pre_tokenizer);

#endif
