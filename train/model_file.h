/* How a trained dual encoder is stored: its parameters under their names ("query.*" and
 * "passage.*", or "encoder.*" when tied) in a safetensors file whose metadata describes the
 * configuration, so that `gradcache eval` rebuilds the model from the file alone. */
#ifndef GC_TRAIN_MODEL_FILE_H
#define GC_TRAIN_MODEL_FILE_H

#include "gradcache/train.h"
#include "metadata.h"

/* gc_dual_encoder_init without the random draws: every weight 0, for a loader that fills
 * every one of them next (a model file, a pretrained folder). */
gc_status gc_dual_encoder_init_unfilled(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                                        gc_device device);
/* Adds the description of `model` (format, sizes, tied) to metadata. */
void gc_model_describe(const gc_dual_encoder *model, gc_metadata *metadata);
/* Writes the parameters and their description to `path` (atomically). */
gc_status gc_model_file_save(const char *path, const gc_dual_encoder *model);
/* Rebuilds the model `path` describes on `device` and loads its parameters; GC_ERR_IO or
 * GC_ERR_FORMAT naming the file when it cannot be read or is not such a model. The file is
 * trusted only as far as it is checked: every size of the description in range, its tensor
 * data at least as large as the model it describes (before anything is allocated), then
 * every parameter of its name, shape and dtype (f32), and no other tensor. */
gc_status gc_model_file_load(const char *path, gc_device device, gc_dual_encoder *model);
/* The same from an opened file (`path` names it in messages). */
gc_status gc_model_file_load_from(const gc_safetensors *file, const char *path, gc_device device,
                                  gc_dual_encoder *model);

#endif
