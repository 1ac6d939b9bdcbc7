/* libFuzzer target for the config.json reader of pretrained models: any input must give a
 * configuration a text encoder accepts, or GC_ERR_FORMAT with a message naming the file;
 * never a crash, a hang, a leak or an out-of-bounds read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/pretrained.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_text_encoder_config c;
    gc_status status = gc_bert_parse_config((const char *)data, size, "config.json", &c);
    if (status != GC_OK) {
        if (status != GC_ERR_FORMAT || strncmp(gc_last_error(), "config.json: ", 13) != 0) abort();
        gc_clear_error();
        return 0;
    }
    /* what gc_text_encoder_init would otherwise stop the program for */
    if (c.vocab < 1 || c.max_length < 1 || c.dim < 1 || c.heads < 1 || c.dim % c.heads || c.layers < 0 ||
        c.hidden < 1 || c.type_vocab < 0 || !(c.dropout >= 0 && c.dropout < 1) || !(c.layernorm_eps > 0))
        abort();
    return 0;
}
