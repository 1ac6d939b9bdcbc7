/* How a trained dual encoder is stored: its parameters under their names ("query.*" and
 * "passage.*", or "encoder.*" when tied) in a safetensors file whose metadata describes the
 * configuration, so that `gradcache eval` rebuilds the model from the file alone. */
#ifndef GC_CLI_MODEL_FILE_H
#define GC_CLI_MODEL_FILE_H

#include "metadata.h"
#include "model.h"

/* Adds the description of `model` (format, sizes, tied) to metadata. */
void gc_model_describe(const gc_dual_encoder *model, gc_metadata *metadata);
/* Writes the parameters and their description to `path` (atomically). */
gc_status gc_model_file_save(const char *path, const gc_dual_encoder *model);
/* Rebuilds the model `path` describes on `device` and loads its parameters; GC_ERR_IO or
 * GC_ERR_FORMAT naming the file when it cannot be read or is not such a model. */
gc_status gc_model_file_load(const char *path, gc_device device, gc_dual_encoder *model);

#endif
