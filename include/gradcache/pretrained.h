/* Pretrained encoders in the Hugging Face layout, and encoding texts. Two families:
 *  - BERT (below);
 *  - decoder-style transformers used as embedders (Qwen3-Embedding, gte-Qwen2, E5-Mistral,
 *    GritLM): config.json's model_type "llama", "mistral", "qwen2" or "qwen3"; RMSNorm,
 *    rotary positions (rope_theta, and rope_scaling "default" or "linear"; rope_parameters in
 *    transformers 5's files), grouped-query attention, SwiGLU MLPs, Qwen2's q/k/v biases and
 *    Qwen3's q/k norms; causal attention unless config.json says "is_causal": false;
 *    last-token pooling unless 1_Pooling/config.json says otherwise. The weights under
 *    LlamaModel's names (a "model." prefix, as the ...ForCausalLM classes write, accepted),
 *    in model.safetensors or in the shards model.safetensors.index.json names; an lm_head
 *    (untied embeddings) is outside the encoder, reported and kept like BERT's pooler. Their
 *    tokenizer.json is a BPE, byte-level or SentencePiece-style (gradcache/tokenizer.h).
 * gc_pretrained_load reads a folder of either family by its model_type; the gc_bert_
 * functions read BERT's only.
 *
 * A BERT folder holds
 *   config.json        BertModel's configuration (model_type "bert": sizes, hidden_act,
 *                      layer_norm_eps, absolute positions);
 *   model.safetensors  the weights under Hugging Face's names ("embeddings.word_embeddings.weight",
 *                      "encoder.layer.0.attention.self.query.weight", ...; a "bert." prefix,
 *                      as BertForMaskedLM writes, is accepted);
 *   tokenizer.json     a WordPiece tokenizer (gradcache/tokenizer.h);
 * and, from sentence-transformers, optionally 1_Pooling/config.json (mean or CLS pooling;
 * mean when absent) and modules.json (a Normalize module: L2-normalised outputs).
 * sentence-transformers/all-MiniLM-L6-v2 is such a folder, as are BERT, DPR's encoders and
 * Contriever once in safetensors.
 *
 * The model is a gc_text_encoder (post-norm layers, token types, no projection) whose
 * parameters map one to one onto the file's names. The configuration is checked against the
 * header of model.safetensors before anything is built from it: every weight it implies must
 * be there with its shape (a config.json claiming 1000 layers is refused at once, not after
 * building them), and no weight of the file's encoder may be left out (a config.json of
 * fewer layers would silently run another model). Loading names every missing weight and
 * reports the file's entries outside the encoder (BertModel's pooler, the position_ids
 * buffer), keeping those gradcache can hold so that a save writes them back: the saved
 * folder loads in sentence-transformers and transformers unchanged. */
#ifndef GRADCACHE_PRETRAINED_H
#define GRADCACHE_PRETRAINED_H

#include "gradcache/checkpoint.h"
#include "gradcache/nn.h"
#include "gradcache/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest config.json (and sentence-transformers file) read: they are a few hundred bytes. */
#define GC_BERT_MAX_CONFIG (1u << 20)

/* The encoder configuration of the folder `dir` (f32, dropout as config.json says), checked
 * against the header of the folder's model.safetensors (gc_bert_check_weights; its tensor
 * data is not read). GC_ERR_IO when config.json or model.safetensors cannot be read;
 * GC_ERR_FORMAT naming the file, the field and its value when it is not a BERT configuration
 * this library implements (another model_type, relative positions, an unknown activation or
 * pooling, a size out of range: no layer, no token type, a hidden_size that does not split
 * into the heads), or naming the weight and the fields when the file does not fit it. */
gc_status gc_bert_read_config(const char *dir, gc_text_encoder_config *config);
/* The same from the `length` bytes of a config.json (`name` stands for the file in messages);
 * pooling and normalisation keep their defaults (mean, none); no weights are checked. */
gc_status gc_bert_parse_config(const char *text, size_t length, const char *name, gc_text_encoder_config *config);

/* Checks an opened model.safetensors (only its header is read: gc_safetensors_get is never
 * called) against `config`, a BERT-shaped configuration (post-norm, no projection), before an
 * encoder is built from it: every weight the configuration implies is in the file, of a
 * floating-point dtype and of the shape its sizes give, and every weight of the file's
 * encoder ("embeddings.*" and "encoder.*", under the file's "bert." prefix if it has one;
 * not the position_ids buffer) is one of them. GC_ERR_FORMAT naming the file, the weight and
 * the fields of `config_name` (the configuration's file, in messages) with their values. */
gc_status gc_bert_check_weights(const gc_safetensors *file, const gc_text_encoder_config *config,
                                const char *config_name);

/* The file's entries that a loaded encoder does not use: those outside the encoder (the
 * encoder's own are all used, gc_bert_check_weights): BERT's pooler, a decoder's lm_head. For
 * either family. */
typedef struct gc_bert_unused {
    gc_param_list kept; /* those of a gradcache dtype (BERT's pooler), on the host: saved back */
    int count;          /* all of them, kept or not (an I64 position_ids buffer is not kept) */
    char names[512];    /* their names, ", "-separated, cut with "..." when longer */
} gc_bert_unused;
void gc_bert_unused_free(gc_bert_unused *unused);

/* The Hugging Face name of a parameter of a BERT-shaped gc_text_encoder ("layers.3.mlp.in.weight"
 * -> "encoder.layer.3.intermediate.dense.weight") into name_out; false for a name with no
 * counterpart (a projection, a pre-norm encoder's final norm). */
bool gc_bert_weight_name(const char *name, char name_out[GC_PARAM_NAME_MAX]);

/* Loads the safetensors file at `path` (a model.safetensors) into `encoder` (built from the
 * folder's configuration), checked as gc_bert_check_weights checks it against the encoder's
 * configuration: GC_ERR_FORMAT naming the file and every missing weight, or the first weight
 * of another shape or of a non-floating dtype, or the encoder's weights left unused, with
 * nothing loaded; floating weights of another precision are converted. `unused` (or NULL)
 * receives what the file holds beyond the encoder's weights. */
gc_status gc_bert_load_weights(const char *path, const gc_text_encoder *encoder, gc_bert_unused *unused);

/* Writes the encoder's weights under their Hugging Face names, and the `kept` tensors of
 * `unused` (or NULL), to `path` (atomically), with the metadata transformers expects. */
gc_status gc_bert_save_weights(const char *path, const gc_text_encoder *encoder, const gc_bert_unused *unused);

/* The whole folder: the configuration, the encoder on `device` with its weights, and the
 * tokenizer (*tokenizer, free it with gc_tokenizer_free). On failure nothing is left
 * allocated. */
gc_status gc_bert_load(const char *dir, gc_device device, gc_text_encoder *encoder, gc_tokenizer **tokenizer,
                       gc_bert_unused *unused);

/* --- either family, by config.json's model_type --- */

/* gc_bert_read_config for a folder of either family: the configuration (f32) checked against
 * the headers of its weights (model.safetensors, or the shards of
 * model.safetensors.index.json, each shard's name a file of the folder). GC_ERR_FORMAT naming
 * the file, the field and its value (an unknown model_type, a rope_scaling other than default
 * and linear, heads that do not split, ...), or the weight and the fields. */
gc_status gc_pretrained_read_config(const char *dir, gc_text_encoder_config *config);
/* The same from the `length` bytes of a config.json (`name` in messages); no weights checked. */
gc_status gc_pretrained_parse_config(const char *text, size_t length, const char *name,
                                     gc_text_encoder_config *config);
/* gc_bert_check_weights for a configuration of either family. */
gc_status gc_pretrained_check_weights(const gc_safetensors *file, const gc_text_encoder_config *config,
                                      const char *config_name);
/* The weights of the folder `dir` (one file or its shards, one shard in host memory at a time)
 * into `encoder`, checked as gc_pretrained_read_config checks them against the encoder's
 * configuration; `unused` (or NULL) as for gc_bert_load_weights. */
gc_status gc_pretrained_load_weights(const char *dir, const gc_text_encoder *encoder, gc_bert_unused *unused);
/* The encoder's weights under its family's Hugging Face names (bare: BertModel's, LlamaModel's)
 * and the kept `unused` tensors, to `path` (atomically). */
gc_status gc_pretrained_save_weights(const char *path, const gc_text_encoder *encoder, const gc_bert_unused *unused);
/* Copies into the folder `dir` (which exists) the files of the folder `source` that describe
 * the model and its tokenizer, those it has of config.json, generation_config.json,
 * tokenizer.json and tokenizer_config.json, special_tokens_map.json, vocab.txt, vocab.json,
 * merges.txt and sentence-transformers' modules.json, sentence_bert_config.json,
 * config_sentence_transformers.json and 1_Pooling/config.json, each atomically: not the
 * weights, nor the shards' index, which would name shards that a saved folder does not have. */
gc_status gc_pretrained_copy_files(const char *source, const char *dir);
/* A whole folder written at `dir`, which must not exist or be empty, all or nothing: the files
 * of the folder `source` (NULL: none) copied (gc_pretrained_copy_files), and the weights as one
 * model.safetensors. What transformers, sentence-transformers and gc_pretrained_load load. */
gc_status gc_pretrained_save(const char *dir, const gc_text_encoder *encoder, const gc_bert_unused *unused,
                             const char *source);
/* The folder's tokenizer.json into *tokenizer (free it with gc_tokenizer_free; NULL on
 * failure): GC_ERR_FORMAT naming the file when it has more tokens than the configuration's
 * vocabulary, whose embeddings its ids index. */
gc_status gc_pretrained_load_tokenizer(const char *dir, const gc_text_encoder_config *config, gc_tokenizer **tokenizer);
/* gc_bert_load for a folder of either family. */
gc_status gc_pretrained_load(const char *dir, gc_device device, gc_text_encoder *encoder, gc_tokenizer **tokenizer,
                             gc_bert_unused *unused);

/* --- LoRA adapters in PEFT's folder format (nn/pretrained/lora_files.c) ---
 * adapter_config.json and adapter_model.safetensors, named as PeftModel.save_pretrained names
 * them over an AutoModel ("base_model.model.encoder.layer.0.attention.self.query.lora_A.weight"
 * for BERT, "base_model.model.layers.0.self_attn.q_proj.lora_A.weight" for the decoders). */

/* Writes the adapters of `encoder` (attached with `config`) into the folder `dir`, which must
 * exist; base_model goes to base_model_name_or_path. GC_ERR_IO naming the file on failure. */
gc_status gc_lora_save(const char *dir, const gc_text_encoder *encoder, const gc_lora_config *config,
                       const char *base_model);
/* Reads the adapter folder `dir`: its configuration into *config (config->targets pointing into
 * `targets`, targets_size bytes), adapters attached to `encoder` as gc_lora_attach_targets does,
 * and their weights loaded (the file must hold exactly them, of their dtype, but for BertModel's
 * pooler's). What the files say is outside input: GC_ERR_IO, GC_ERR_FORMAT (naming the file and
 * the field or tensor: a peft_type other than "LORA", use_rslora, use_dora, fan_in_fan_out,
 * a bias, rank or alpha patterns, modules_to_save, a regular-expression target are refused) or
 * GC_ERR_CONFIG (a target that matches no Linear); the encoder, adapters and all, is then the
 * caller's to free. */
gc_status gc_lora_load(const char *dir, gc_text_encoder *encoder, gc_lora_config *config, char *targets,
                       size_t targets_size);
/* The base_model_name_or_path of the adapter folder `dir`'s adapter_config.json into `base`
 * (size bytes): the model folder the adapters apply over (a train --lora-r run writes --init's
 * path there). GC_ERR_IO or GC_ERR_FORMAT (absent, empty, not a string, too long). */
gc_status gc_lora_base_model(const char *dir, char *base, size_t size);
/* The adapter folder `adapter` folded into the model folder `base` (W += (alpha / r) B A, in
 * the base's dtype: PEFT's merge_and_unload) and written as a whole model folder at `out`
 * (gc_pretrained_save: `out` must not exist or be empty; base's files copied), which
 * transformers loads with no adapter. The errors of gc_pretrained_load, gc_lora_load and
 * gc_pretrained_save; nothing is left at `out` on failure. */
gc_status gc_lora_merge_folder(const char *base, const char *adapter, const char *out);


/* How gc_encode_texts_with encodes. */
typedef struct gc_encode_options {
    int64_t max_length; /* tokens per text, at most the encoder's positions */
    int64_t batch;      /* texts per forward, at least 1 */
    const char *prompt; /* before every text (gc_tokenize_prompted), or NULL */
    /* Called after every batch with the texts encoded so far and the count (or NULL): a
     * program's progress line. */
    void (*progress)(void *context, int64_t done, int64_t count);
    void *progress_context;
} gc_encode_options;

/* texts[0..count) (1 <= count < 2^31) -> representations [count, D] on the encoder's device,
 * in the caller's order, in f32 for a 16-bit encoder (gc_working_dtype): eval mode (no
 * dropout), no graph, `batch` texts at a time, each tokenized to at most max_length tokens.
 * The texts are taken in order of length, longest first (a batch pads little, and the later
 * batches reuse the first ones' memory), and the next batch is tokenized by a thread of its
 * own while the encoder runs; a text's vector is the same bits whatever the batch size or the
 * other texts. NULL (error set) when memory runs out. */
gc_tensor *gc_encode_texts_with(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer,
                                const char *const *texts, int64_t count, const gc_encode_options *options);
/* gc_encode_texts_with without a prompt or progress. */
gc_tensor *gc_encode_texts(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *const *texts,
                           int64_t count, int64_t max_length, int64_t batch);
/* The same with `prompt` (or NULL) before every text (gc_tokenize_prompted): a decoder
 * embedder's instruction for queries; its documents are encoded without one. */
gc_tensor *gc_encode_texts_prompted(const gc_text_encoder *encoder, const gc_tokenizer *tokenizer, const char *prompt,
                                    const char *const *texts, int64_t count, int64_t max_length, int64_t batch);
/* The prompt `name` ("query", "document", ...) of the folder's sentence-transformers
 * configuration (config_sentence_transformers.json's "prompts") into *prompt, a new string
 * to free(); NULL when the folder has none of that name. GC_ERR_FORMAT naming the file when
 * it is not such a configuration. */
gc_status gc_pretrained_prompt(const char *dir, const char *name, char **prompt);
/* config_sentence_transformers.json's "default_prompt_name" (the prompt sentence-transformers
 * writes before every text it is not told otherwise about) into *name, a new string to free();
 * NULL when the folder has none (no file, no field, or null). GC_ERR_FORMAT naming the file
 * when the field is neither a string nor null. */
gc_status gc_pretrained_default_prompt_name(const char *dir, char **name);
/* sentence_bert_config.json's "max_seq_length" (the tokens per text, special tokens included,
 * that sentence-transformers cuts texts at) into *length; 0 when the folder has no such file
 * or field. GC_ERR_FORMAT naming the file when it is not an integer in [1, 2^24]. */
gc_status gc_pretrained_max_seq_length(const char *dir, int64_t *length);

#ifdef __cplusplus
}
#endif
#endif
