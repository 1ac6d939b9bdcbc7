/* What the pretrained loader's files share: each family's reader of config.json and the
 * folder's reading around it (pretrained_folder.c). */
#ifndef GC_NN_PRETRAINED_INTERNAL_H
#define GC_NN_PRETRAINED_INTERNAL_H

#include "base/json_file.h"
#include "nn/pretrained/config_fields.h"
#include "nn/pretrained/layout.h"

/* config.json (parsed, `path` naming it in messages) into *c, which starts with the defaults
 * of gc_pretrained_parse_config: GC_ERR_FORMAT naming the field and its value when it is not
 * a configuration of the family this library implements. */
gc_status gc_bert_config_read(const char *path, const gc_json *config, gc_text_encoder_config *c);
gc_status gc_decoder_config_read(const char *path, const gc_json *config, gc_text_encoder_config *c);

/* The folder's configuration: config.json (of the family of `only`, or NULL: either, by its
 * model_type), sentence-transformers' pooling and normalisation, checked against the headers
 * of the folder's weights. */
gc_status gc_pretrained_folder_config(const char *dir, const gc_layout *only, gc_text_encoder_config *config);

/* The folder's optional JSON file `name` into *document, NULL when the folder has none;
 * `path` gets its path. */
gc_status gc_pretrained_read_optional(const char *dir, const char *name, char path[4096], gc_json **document);

#endif
