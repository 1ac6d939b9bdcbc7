/* A PEFT adapter folded into its base, written as a plain model folder (gc_lora_merge_folder):
 * what `train --lora-r --merge` leaves beside the adapter, for tools that know no adapters. */
#include "gradcache/files.h"
#include "gradcache/pretrained.h"

gc_status gc_lora_merge_folder(const char *base, const char *adapter, const char *out) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer = NULL;
    gc_bert_unused unused = {0};
    gc_status status = gc_pretrained_load(base, gc_cpu(), &encoder, &tokenizer, &unused);
    if (status != GC_OK) return status;
    gc_tokenizer_free(tokenizer);
    gc_lora_config config;
    char targets[4096];
    status = gc_lora_load(adapter, &encoder, &config, targets, sizeof targets);
    if (status == GC_OK) status = gc_lora_merge_all(&encoder);
    if (status == GC_OK) status = gc_pretrained_save(out, &encoder, &unused, base);
    gc_text_encoder_free(&encoder);
    gc_bert_unused_free(&unused);
    return status;
}
