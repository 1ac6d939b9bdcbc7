/* libFuzzer target for the model-file reader (train/model_file.c), what `gradcache eval
 * --model` trusts of a file: its description (format, sizes), then its tensors. Any input
 * must be refused with GC_ERR_FORMAT and a message naming it, or load as a model whose
 * parameters are exactly the file's tensors. It must never allocate more than the file's
 * own size allows: the device's memory is limited to 64 MiB (far above what an input of a
 * fuzzer's size can hold) and reaching the limit is a failure -- a small file describing a
 * huge model is refused from the header's sizes, before the model is built. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/memory.h"
#include "train/model_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_memory_set_limit(gc_cpu(), (size_t)64 << 20);
    gc_safetensors *file = NULL;
    if (gc_safetensors_open_memory(data, size, "fuzz", &file) != GC_OK) { /* fuzz_safetensors' concern */
        gc_clear_error();
        return 0;
    }
    gc_dual_encoder model;
    gc_status status = gc_model_file_load_from(file, "fuzz", gc_cpu(), &model);
    if (status == GC_OK) {
        if (model.params.count != gc_safetensors_count(file)) abort(); /* a tensor left unread */
        for (int i = 0; i < model.params.count; i++)
            if (model.params.items[i].tensor->dtype != GC_F32) abort();
        gc_dual_encoder_free(&model);
    } else {
        if (status != GC_ERR_FORMAT || !strstr(gc_last_error(), "fuzz")) abort();
        gc_clear_error();
    }
    gc_safetensors_close(file);
    return 0;
}
