/* How an encoder's parameters lie in a Hugging Face model's files, one table per family
 * (bert_layout.c, decoder_layout.c), and what the loaders do with a table: the names of its
 * weights, their shapes as config.json's sizes give them, and the check of the files' headers
 * against a configuration before an encoder is built from it (layout.c). */
#ifndef GC_NN_LAYOUT_H
#define GC_NN_LAYOUT_H

#include "gradcache/pretrained.h"
#include "nn/io/safetensors_internal.h"

/* config.json's sizes, of which a weight's dimensions are made. */
typedef enum gc_layout_size {
    GC_SIZE_NONE,
    GC_SIZE_VOCAB,        /* vocab_size */
    GC_SIZE_POSITIONS,    /* max_position_embeddings (learned positions) */
    GC_SIZE_TYPES,        /* type_vocab_size: 0 leaves the part out */
    GC_SIZE_HIDDEN,       /* hidden_size */
    GC_SIZE_INTERMEDIATE, /* intermediate_size */
    GC_SIZE_QUERIES,      /* num_attention_heads x head_dim */
    GC_SIZE_KEYS,         /* num_key_value_heads x head_dim */
    GC_SIZE_HEAD_NORM     /* head_dim for q/k norms, 0 (the part left out) without them */
} gc_layout_size;

/* Whether a part has a "bias" beside its "weight": never, always, or as the configuration
 * says of its kind of projection. */
typedef enum gc_layout_bias { GC_BIAS_NONE, GC_BIAS_ALWAYS, GC_BIAS_QKV, GC_BIAS_OUTPUT, GC_BIAS_MLP } gc_layout_bias;

/* A part of the encoder: gradcache's name -> Hugging Face's, as prefixes of "weight" (shape
 * [rows], or [rows, cols] for a Linear's [out, in]) and "bias" ([rows]). */
typedef struct gc_layout_part {
    const char *ours, *theirs;
    gc_layout_size rows, cols;
    gc_layout_bias bias;
} gc_layout_part;

typedef struct gc_layout {
    const char *prefix;                  /* of a task model's names ("bert.", "model."), or none */
    const char *probe;                   /* a weight every file has: whether its names are prefixed */
    const char *layer_stem;              /* the file's "N." of layer N follows it */
    const gc_layout_part *outer, *layer; /* the parts outside the layers, and those of one layer */
    size_t outer_count, layer_count;
    const char *const *encoder_stems;    /* the file's encoder weights start with one of these */
    const char *const *buffers;          /* names (or name endings, after a '*') that are buffers, not weights */
    /* "num_hidden_layers 2, ...": the fields a weight's presence depends on, for messages */
    void (*describe)(const gc_text_encoder_config *config, char *text, size_t size);
} gc_layout;

extern const gc_layout gc_bert_layout, gc_decoder_layout;

/* The table a configuration is laid out by: BERT's (post-norm LayerNorms, learned positions,
 * no projection) or the decoder family's (pre-norm RMSNorms, rotary positions, gated MLPs);
 * NULL for any other configuration (the from-scratch presets), which has no Hugging Face
 * layout. */
const gc_layout *gc_layout_of(const gc_text_encoder_config *config);

/* The weights of a model: one model.safetensors or the shards a model.safetensors.index.json
 * names (weight_files.c). */
typedef struct gc_weight_files {
    gc_safetensors **files; /* [count], header only when opened by gc_weight_files_open */
    char **paths;           /* [count], NULL for a file opened by the caller */
    int count;
} gc_weight_files;

/* The headers of the weights of the folder `dir`: model.safetensors, or else the shards its
 * model.safetensors.index.json names. GC_ERR_IO when there is neither (or a file cannot be
 * read), GC_ERR_FORMAT naming the index, the weight or the shard that does not fit. */
gc_status gc_weight_files_open(const char *dir, gc_weight_files *files);
void gc_weight_files_close(gc_weight_files *files);

/* The entry named `name` in any of the files (*file_index: which), or NULL. */
const gc_safetensors_entry *gc_weight_files_find(const gc_weight_files *files, const char *name, int *file_index);

/* The prefix of the encoder's weights in `files`: "" or layout->prefix. */
const char *gc_layout_file_prefix(const gc_layout *layout, const gc_weight_files *files);
/* gradcache's parameter name -> Hugging Face's (without a prefix); false for none. */
bool gc_layout_name(const gc_layout *layout, const char *name, char name_out[GC_PARAM_NAME_MAX]);
/* Whether `name` (the file's, without its prefix) is a buffer of the family. */
bool gc_layout_is_buffer(const gc_layout *layout, const char *name);
/* The check of include/gradcache/pretrained.h's gc_bert_check_weights, for any family. */
gc_status gc_layout_check(const gc_layout *layout, const gc_weight_files *files, const gc_text_encoder_config *config,
                          const char *config_name);

/* Whether a dtype of the format (its spelling) is floating point: what a weight may be. */
bool gc_layout_floating(const char *dtype);
/* Appends `name` to `list` (`size` bytes), a ", "-separated list of `count` names so far, or
 * ", ..." once when it would not fit: a message names the first few of many. */
void gc_layout_list_name(char *list, size_t size, int count, const char *name);

#endif
