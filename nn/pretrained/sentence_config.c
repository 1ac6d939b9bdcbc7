/* What sentence-transformers' own files in a model folder say about encoding (beside the
 * pooling and modules that pretrained_folder.c reads): sentence_bert_config.json's
 * max_seq_length, the length its encode() cuts texts at, and config_sentence_transformers.json's
 * default_prompt_name, the prompt its encode() writes before every text when not told. */
#include <stdlib.h>
#include <string.h>

#include "nn/pretrained/pretrained_internal.h"

gc_status gc_pretrained_max_seq_length(const char *dir, int64_t *length) {
    char path[4096];
    gc_json *document;
    *length = 0;
    gc_status status = gc_pretrained_read_optional(dir, "sentence_bert_config.json", path, &document);
    if (status != GC_OK || !document) return status;
    if (document->type != GC_JSON_OBJECT) status = gc_json_file_error(path, "not a JSON object");
    else status = gc_config_size_or(path, document, "max_seq_length", 1, 1 << 24, 0, length);
    gc_json_free(document);
    return status;
}

gc_status gc_pretrained_default_prompt_name(const char *dir, char **name) {
    char path[4096];
    gc_json *document;
    *name = NULL;
    gc_status status = gc_pretrained_read_optional(dir, "config_sentence_transformers.json", path, &document);
    if (status != GC_OK || !document) return status;
    const gc_json *field = gc_json_member(document, "default_prompt_name");
    if (field && field->type != GC_JSON_NULL && field->type != GC_JSON_STRING)
        status = gc_json_file_error(path, "\"default_prompt_name\" is %s, not a string or null",
                                    gc_json_type_name(field->type));
    else if (field && field->type == GC_JSON_STRING && !(*name = malloc(strlen(field->string) + 1))) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
        status = GC_ERR_OUT_OF_MEMORY;
    }
    if (status == GC_OK && *name) strcpy(*name, field->string);
    gc_json_free(document);
    return status;
}
