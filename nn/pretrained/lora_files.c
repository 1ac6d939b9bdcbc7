/* LoRA adapters in PEFT's folder format: adapter_config.json (LoraConfig's fields) and
 * adapter_model.safetensors, whose names are "base_model.model." + the module's Hugging Face
 * name + ".lora_A.weight" / ".lora_B.weight", as PeftModel.save_pretrained writes them for
 * an AutoModel (BertModel, Qwen2Model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/checkpoint.h"
#include "gradcache/files.h"
#include "base/json_file.h"
#include "nn/pretrained/config_fields.h"
#include "nn/pretrained/lora_internal.h"

#define PEFT_PREFIX "base_model.model."
/* adapter_config.json is a page of settings; anything longer is not one */
#define CONFIG_MAX_BYTES (1 << 20)

/* The encoder's adapters under PEFT's names. */
static void peft_params(const gc_text_encoder *encoder, gc_param_list *peft) {
    const gc_layout *layout = gc_layout_of(&encoder->config);
    gc_param_list all = {0};
    gc_text_encoder_params(encoder, "", &all);
    for (int i = 0; i < all.count; i++) {
        const char *name = all.items[i].name, *suffix = strstr(name, ".lora_");
        if (!suffix) continue;
        char ours[GC_PARAM_NAME_MAX], module[GC_PARAM_NAME_MAX], theirs[GC_PARAM_NAME_MAX];
        snprintf(ours, sizeof ours, "%.*s", (int)(suffix - name), name);
        gc_lora_module_name(layout, ours, module);
        if (snprintf(theirs, sizeof theirs, PEFT_PREFIX "%s%s", module, suffix) >= (int)sizeof theirs)
            gc_fatal("lora_save: the name of %s is longer than %d characters", name, GC_PARAM_NAME_MAX - 1);
        gc_param_list_add(peft, "", theirs, all.items[i].tensor, false);
    }
    gc_param_list_free(&all);
}

/* A number as JSON, in the fewest digits that read back as the same double. */
static void append_number(gc_json_text *text, double value) {
    char digits[32];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(digits, sizeof digits, "%.*g", precision, value);
        if (strtod(digits, NULL) == value) break;
    }
    gc_json_append(text, digits, strlen(digits));
}

static void append_raw(gc_json_text *text, const char *raw) { gc_json_append(text, raw, strlen(raw)); }

static gc_status write_config(const char *path, const gc_lora_config *config, const char *base_model) {
    gc_json_text text = {0};
    append_raw(&text, "{\n  \"base_model_name_or_path\": ");
    gc_json_append_string(&text, base_model ? base_model : "");
    append_raw(&text, ",\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"inference_mode\": true,\n"
                      "  \"init_lora_weights\": true,\n  \"lora_alpha\": ");
    append_number(&text, config->alpha);
    append_raw(&text, ",\n  \"lora_dropout\": ");
    append_number(&text, config->dropout);
    append_raw(&text, ",\n  \"modules_to_save\": null,\n  \"peft_type\": \"LORA\",\n  \"r\": ");
    gc_json_append_integer(&text, config->r);
    append_raw(&text, ",\n  \"target_modules\": [");
    for (const char *target = config->targets; *target;) {
        size_t length = strcspn(target, ",");
        char name[GC_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)length, target);
        if (target != config->targets) append_raw(&text, ", ");
        gc_json_append_string(&text, name);
        target += length + (target[length] == ',');
    }
    append_raw(&text, "],\n  \"task_type\": null,\n  \"use_dora\": false,\n  \"use_rslora\": false\n}\n");
    if (text.failed) gc_fatal("lora_save: out of host memory for %s", path);
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status == GC_OK) {
        fwrite(text.bytes, 1, text.length, writer.file);
        status = gc_file_commit(&writer);
    }
    gc_json_text_free(&text);
    return status;
}

gc_status gc_lora_save(const char *dir, const gc_text_encoder *encoder, const gc_lora_config *config,
                       const char *base_model) {
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    gc_status status = write_config(path, config, base_model);
    if (status != GC_OK) return status;
    gc_param_list peft = {0};
    peft_params(encoder, &peft);
    if (peft.count == 0) gc_fatal("lora_save: the encoder has no adapters");
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    status = gc_safetensors_save_plain(path, &peft, (const char *const[]){"format", "pt", NULL});
    gc_param_list_free(&peft);
    return status;
}

/* The settings of PEFT's that gradcache does not compute must have their plain values:
 * anything else would load and then compute another function. */
static gc_status check_plain(const char *path, const gc_json *config) {
    static const char *const peft_types[] = {"LORA", NULL}, *const biases[] = {"none", NULL};
    int choice = 0;
    bool flag = false;
    gc_status status = gc_config_choice(path, config, "peft_type", peft_types, -1, &choice);
    if (status == GC_OK && choice < 0) status = gc_json_file_error(path, "no \"peft_type\"");
    if (status == GC_OK) status = gc_config_choice(path, config, "bias", biases, 0, &choice);
    const char *flags[] = {"fan_in_fan_out", "use_rslora", "use_dora"};
    for (int i = 0; i < 3 && status == GC_OK; i++) {
        status = gc_config_flag(path, config, flags[i], false, &flag);
        if (status == GC_OK && flag) status = gc_json_file_error(path, "\"%s\" true is not supported", flags[i]);
    }
    const char *absent[] = {"layers_to_transform", "modules_to_save", "rank_pattern", "alpha_pattern"};
    for (int i = 0; i < 4 && status == GC_OK; i++) {
        const gc_json *value = gc_json_member(config, absent[i]);
        bool empty = !value || value->type == GC_JSON_NULL || (value->type == GC_JSON_OBJECT && value->count == 0);
        if (!empty) status = gc_json_file_error(path, "\"%s\" is not supported (only null or {})", absent[i]);
    }
    return status;
}

/* target_modules, a list of names, joined with commas into targets (size bytes). */
static gc_status read_targets(const char *path, const gc_json *config, char *targets, size_t size) {
    const gc_json *list = gc_json_member(config, "target_modules");
    if (!list || list->type != GC_JSON_ARRAY || list->count == 0)
        return gc_json_file_error(path, "\"target_modules\" is not a list of module names (a regular expression "
                                        "is not supported)");
    targets[0] = '\0';
    for (const gc_json *item = list->first; item; item = item->next) {
        size_t used = strlen(targets);
        if (item->type != GC_JSON_STRING || !item->string[0] || strchr(item->string, ','))
            return gc_json_file_error(path, "\"target_modules\" holds something other than a module name");
        if (snprintf(targets + used, size - used, "%s%s", used ? "," : "", item->string) >= (int)(size - used))
            return gc_json_file_error(path, "\"target_modules\" is longer than %zu characters", size - 1);
    }
    return GC_OK;
}

static gc_status read_config(const char *path, gc_lora_config *lora, char *targets, size_t size) {
    gc_json *config = NULL;
    gc_status status = gc_json_file_read(path, CONFIG_MAX_BYTES, &config);
    if (status != GC_OK) return status;
    int64_t r = 0;
    if (config->type != GC_JSON_OBJECT) status = gc_json_file_error(path, "not a JSON object");
    if (status == GC_OK) status = check_plain(path, config);
    if (status == GC_OK) status = gc_config_size(path, config, "r", 1, GC_CONFIG_MAX_SIZE, &r);
    if (status == GC_OK) status = gc_config_number(path, config, "lora_alpha", -1e30, 1e30, 8, &lora->alpha);
    if (status == GC_OK) status = gc_config_number(path, config, "lora_dropout", 0, 1, 0, &lora->dropout);
    if (status == GC_OK) status = read_targets(path, config, targets, size);
    gc_json_free(config);
    lora->r = (int)r;
    lora->targets = targets;
    return status;
}

gc_status gc_lora_load(const char *dir, gc_text_encoder *encoder, gc_lora_config *config, char *targets,
                       size_t targets_size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    gc_status status = read_config(path, config, targets, targets_size);
    if (status == GC_OK) status = gc_lora_attach_targets(encoder, config, NULL, NULL);
    if (status != GC_OK) return status;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    gc_safetensors *file = NULL;
    status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    gc_param_list peft = {0};
    peft_params(encoder, &peft);
    /* BertModel's pooler is a Linear PEFT adapts when "dense" is a target; the encoder has none.
     * PEFT saves adapters in the dtype they trained in, a 16-bit base's too: they widen
     * exactly into the engine's f32 adapters. */
    status = gc_safetensors_load_widening(file, &peft, (const char *const[]){PEFT_PREFIX "pooler.", NULL});
    gc_param_list_free(&peft);
    gc_safetensors_close(file);
    return status;
}

gc_status gc_lora_base_model(const char *dir, char *base, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    gc_json *config = NULL;
    gc_status status = gc_json_file_read(path, CONFIG_MAX_BYTES, &config);
    if (status != GC_OK) return status;
    const gc_json *name = config->type == GC_JSON_OBJECT ? gc_json_member(config, "base_model_name_or_path") : NULL;
    if (!name || name->type != GC_JSON_STRING || !name->string[0])
        status = gc_json_file_error(path, "no \"base_model_name_or_path\": the base model the adapters apply over "
                                          "is not named");
    else if (snprintf(base, size, "%s", name->string) >= (int)size)
        status = gc_json_file_error(path, "\"base_model_name_or_path\" is longer than %zu characters", size - 1);
    gc_json_free(config);
    return status;
}
