/* Which Linears of an encoder get LoRA adapters: PEFT's target_modules matched against each
 * Linear's module name, Hugging Face's where the encoder has a pretrained layout (layout.h),
 * so that "query,value" or "q_proj,v_proj" mean here what they mean to PEFT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/autograd.h"
#include "gradcache/error.h"
#include "nn/pretrained/lora_internal.h"

void gc_lora_module_name(const gc_layout *layout, const char *ours, char name_out[GC_PARAM_NAME_MAX]) {
    char weight[GC_PARAM_NAME_MAX], theirs[GC_PARAM_NAME_MAX];
    snprintf(weight, sizeof weight, "%s.weight", ours);
    if (!layout || !gc_layout_name(layout, weight, theirs)) {
        snprintf(name_out, GC_PARAM_NAME_MAX, "%s", ours);
        return;
    }
    theirs[strlen(theirs) - strlen(".weight")] = '\0';
    snprintf(name_out, GC_PARAM_NAME_MAX, "%s", theirs);
}

/* PEFT's rule: the module name equals the target or ends in "." + target. */
static bool matches(const char *name, const char *target, size_t target_length) {
    size_t length = strlen(name);
    if (length < target_length || strncmp(name + length - target_length, target, target_length)) return false;
    return length == target_length || name[length - target_length - 1] == '.';
}

typedef struct named_linear {
    char name[GC_PARAM_NAME_MAX]; /* gradcache's */
    gc_linear *linear;
} named_linear;

/* Every Linear of the encoder with its gradcache name, into `out` (room for 7 per layer + 1). */
static int list_linears(gc_text_encoder *encoder, named_linear *out) {
    int count = 0;
    for (int i = 0; i < encoder->config.layers; i++) {
        gc_encoder_layer *layer = &encoder->layers[i];
        struct {
            const char *name;
            gc_linear *linear;
        } parts[] = {{"attention.query", &layer->attention.query}, {"attention.key", &layer->attention.key},
                     {"attention.value", &layer->attention.value}, {"attention.output", &layer->attention.output},
                     {"mlp.gate", &layer->mlp.gate},               {"mlp.in", &layer->mlp.in},
                     {"mlp.out", &layer->mlp.out}};
        for (size_t p = 0; p < sizeof parts / sizeof *parts; p++) {
            if (!parts[p].linear->weight) continue; /* a BERT MLP has no gate */
            snprintf(out[count].name, GC_PARAM_NAME_MAX, "layers.%d.%s", i, parts[p].name);
            out[count++].linear = parts[p].linear;
        }
    }
    if (encoder->projection.weight) {
        snprintf(out[count].name, GC_PARAM_NAME_MAX, "projection");
        out[count++].linear = &encoder->projection;
    }
    return count;
}

/* Checks the settings that come from outside, and that every target names some Linear. */
static gc_status check_config(const gc_lora_config *config, const named_linear *linears, int count,
                              const gc_layout *layout) {
    if (config->r <= 0 || !(config->dropout >= 0 && config->dropout < 1)) {
        gc_set_error(GC_ERR_CONFIG, "lora: r %d must be positive and dropout %g in [0, 1)", config->r, config->dropout);
        return GC_ERR_CONFIG;
    }
    const char *targets = config->targets ? config->targets : "";
    if (!*targets) {
        gc_set_error(GC_ERR_CONFIG, "lora: no target modules given");
        return GC_ERR_CONFIG;
    }
    for (const char *target = targets; *target;) {
        size_t length = strcspn(target, ",");
        bool found = false;
        for (int i = 0; i < count && !found && length; i++) {
            char name[GC_PARAM_NAME_MAX];
            gc_lora_module_name(layout, linears[i].name, name);
            found = matches(name, target, length);
        }
        if (!found) {
            gc_set_error(GC_ERR_CONFIG, "lora: target module '%.*s' matches no Linear of the encoder (%s names)",
                         (int)length, target, layout ? "Hugging Face's" : "gradcache's");
            return GC_ERR_CONFIG;
        }
        target += length + (target[length] == ',');
    }
    return GC_OK;
}

static bool targeted(const char *name, const char *targets) {
    for (const char *target = targets; *target;) {
        size_t length = strcspn(target, ",");
        if (matches(name, target, length)) return true;
        target += length + (target[length] == ',');
    }
    return false;
}

gc_status gc_lora_attach_targets(gc_text_encoder *encoder, const gc_lora_config *config, gc_generator *init,
                                 int *attached) {
    named_linear *linears = malloc(((size_t)encoder->config.layers * 7 + 1) * sizeof *linears);
    if (!linears) gc_fatal("lora_attach_targets: out of host memory");
    const gc_layout *layout = gc_layout_of(&encoder->config);
    int count = list_linears(encoder, linears), adapted = 0;
    gc_status status = check_config(config, linears, count, layout);
    if (status == GC_OK) {
        gc_param_list all = {0};
        gc_text_encoder_params(encoder, "", &all);
        for (int i = 0; i < all.count; i++) gc_set_requires_grad(all.items[i].tensor, false);
        gc_param_list_free(&all);
    }
    for (int i = 0; i < count && status == GC_OK; i++) {
        char name[GC_PARAM_NAME_MAX];
        gc_lora_module_name(layout, linears[i].name, name);
        if (!targeted(name, config->targets)) continue;
        status = gc_lora_attach(linears[i].linear, config, init);
        adapted += status == GC_OK;
    }
    free(linears);
    if (attached) *attached = adapted;
    return status;
}

gc_status gc_lora_merge_all(gc_text_encoder *encoder) {
    named_linear *linears = malloc(((size_t)encoder->config.layers * 7 + 1) * sizeof *linears);
    if (!linears) gc_fatal("lora_merge_all: out of host memory");
    int count = list_linears(encoder, linears);
    gc_status status = GC_OK;
    for (int i = 0; i < count && status == GC_OK; i++) status = gc_lora_merge(linears[i].linear);
    free(linears);
    return status;
}
