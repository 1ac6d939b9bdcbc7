/* The prompt of an encoding of texts alone (gc_dual_encoder_choose_prompt, gradcache/train.h):
 * sentence-transformers' rule for encode(prompt=, prompt_name=), a literal text first, then a
 * prompt named, then the folder's default_prompt_name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

/* A copy of `text` into *copy. */
static gc_status copy_text(const char *text, char **copy) {
    if (!(*copy = malloc(strlen(text) + 1))) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "prompt: out of host memory for %zu bytes", strlen(text) + 1);
        return GC_ERR_OUT_OF_MEMORY;
    }
    strcpy(*copy, text);
    return GC_OK;
}

/* The folder's prompt `name` into *prompt: GC_ERR_CONFIG when the caller named it (`asked`)
 * and the folder has none, GC_ERR_FORMAT when the folder's default_prompt_name did. */
static gc_status named_prompt(const gc_dual_encoder *model, const char *name, bool asked, char **prompt) {
    if (!model->pretrained) {
        gc_set_error(GC_ERR_CONFIG, "prompt \"%s\": only a model folder has named prompts (its "
                     "config_sentence_transformers.json), and this model is a model file", name);
        return GC_ERR_CONFIG;
    }
    gc_status status = gc_pretrained_prompt(model->pretrained, name, prompt);
    if (status != GC_OK || *prompt) return status;
    gc_set_error(asked ? GC_ERR_CONFIG : GC_ERR_FORMAT, "%s/config_sentence_transformers.json: %s\"%s\" is not one "
                 "of its \"prompts\"", model->pretrained, asked ? "the prompt " : "default_prompt_name ", name);
    return asked ? GC_ERR_CONFIG : GC_ERR_FORMAT;
}

gc_status gc_dual_encoder_choose_prompt(const gc_dual_encoder *model, const char *name, const char *text,
                                        char **prompt) {
    if (name && text) gc_fatal("dual_encoder_choose_prompt: both a prompt name (\"%s\") and a prompt text", name);
    *prompt = NULL;
    char *default_name = NULL;
    gc_status status = GC_OK;
    if (text) status = copy_text(text, prompt);
    else if (name) status = named_prompt(model, name, true, prompt);
    else if (model->pretrained && (status = gc_pretrained_default_prompt_name(model->pretrained, &default_name)) ==
                                      GC_OK && default_name)
        status = named_prompt(model, default_name, false, prompt);
    if (status == GC_OK && *prompt) {
        char what[4400];
        if (text) snprintf(what, sizeof what, "the prompt given");
        else snprintf(what, sizeof what, "%s/config_sentence_transformers.json: the \"%.200s\" prompt",
                      model->pretrained, name ? name : default_name);
        status = gc_dual_encoder_check_prompt(model, *prompt, what);
    }
    free(default_name);
    if (status != GC_OK) {
        free(*prompt);
        *prompt = NULL;
    }
    return status;
}
