/* Pretrained models in the Hugging Face folder layout (gradcache/pretrained.h) as the
 * trainer's dual encoder: one tied encoder (a sentence-transformers model encodes queries and
 * passages alike), its WordPiece tokenizer, and a run folder that is itself such a folder,
 * so that sentence-transformers loads a fine-tuned model straight from it. Also where a
 * --model argument is told apart: a folder with config.json, or a gradcache model file. */
#ifndef GC_CLI_MODEL_FOLDER_H
#define GC_CLI_MODEL_FOLDER_H

#include <stdbool.h>

#include "model.h"

/* The files of a model folder besides the weights, copied into a run folder as they are:
 * what transformers and sentence-transformers read (NULL-terminated). */
extern const char *const gc_model_folder_files[];

/* True when `path` is a folder holding config.json. */
bool gc_is_model_folder(const char *path);

/* The pretrained model of folder `dir` on `device`, its parameters in `dtype` (f32, f16 or
 * bf16: the file's weights are converted as they load), tokenizing to max_length tokens (at
 * most its positions: GC_ERR_FORMAT otherwise; 0 for 128 or its positions if fewer). GC_ERR_IO
 * or GC_ERR_FORMAT naming the file and the problem; nothing left allocated on failure. */
gc_status gc_dual_encoder_from_folder(gc_dual_encoder *model, const char *dir, int64_t max_length, gc_dtype dtype,
                                      gc_device device);

/* Writes a pretrained model into folder `dir` (created if missing): model.safetensors under
 * Hugging Face's names, and the files of gc_model_folder_files from the folder it came from. */
gc_status gc_model_folder_save(const char *dir, const gc_dual_encoder *model);

/* eval's --model: a model folder (tokenizing to max_length tokens, 0 as above), or a run
 * folder or file of a from-scratch model (its own length). */
gc_status gc_model_load(const char *path, int64_t max_length, gc_device device, gc_dual_encoder *model);

#endif
