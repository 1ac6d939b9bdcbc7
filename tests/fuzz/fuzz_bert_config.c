/* libFuzzer target for what the pretrained loader reads before it builds anything: a
 * config.json of either family (BERT's, or a decoder's: Llama, Mistral, Qwen2, Qwen3), then
 * (after a NUL byte, when the input has one) a model.safetensors checked against it
 * (gc_pretrained_check_weights). Any config.json must give a configuration a text encoder
 * accepts, or GC_ERR_FORMAT with a message naming the file; the check must pass or refuse
 * with one line naming the weights file; never a crash, a hang, a leak or an out-of-bounds
 * read. (corpus_bert_config/smallest_folder.bin is such a pair that passes.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/pretrained.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The error recorded is `status`, one line beginning with `name`. */
static void expect_error(gc_status status, gc_status want, const char *name) {
    const char *message = gc_last_error();
    if (status != want || strncmp(message, name, strlen(name)) != 0 || strchr(message, '\n')) abort();
    gc_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, '\0', size);
    size_t config_size = nul ? (size_t)(nul - data) : size;
    gc_text_encoder_config c;
    gc_status status = gc_pretrained_parse_config((const char *)data, config_size, "config.json", &c);
    if (status != GC_OK) {
        expect_error(status, GC_ERR_FORMAT, "config.json: ");
        return 0;
    }
    /* what gc_text_encoder_init would otherwise stop the program for, and what the family cannot be */
    const gc_attention_options *a = &c.attention;
    bool decoder = c.rms_norm;
    if (c.vocab < 1 || c.max_length < 1 || c.dim < 1 || c.heads < 1 || c.layers < 1 || c.hidden < 1 ||
        !(c.dropout >= 0 && c.dropout < 1) || !(c.layernorm_eps > 0))
        abort();
    if (!decoder && (c.dim % c.heads || c.type_vocab < 1)) abort();
    if (decoder && (a->kv_heads < 1 || c.heads % a->kv_heads || a->head_dim < 2 || a->head_dim % 2 ||
                    !(a->rope_theta > 1) || a->rope_scale < 0 || c.type_vocab || c.dropout != 0))
        abort();
    if (!nul) return 0;
    gc_safetensors *file;
    status = gc_safetensors_open_memory(nul + 1, size - config_size - 1, "model.safetensors", &file);
    if (status != GC_OK) {
        expect_error(status, GC_ERR_FORMAT, "safetensors: model.safetensors: ");
        return 0;
    }
    status = gc_pretrained_check_weights(file, &c, "config.json");
    if (status != GC_OK) expect_error(status, GC_ERR_FORMAT, "model.safetensors: ");
    gc_safetensors_close(file);
    return 0;
}
