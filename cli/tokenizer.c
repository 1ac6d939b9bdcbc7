/* Byte-level tokenisation (see tokenizer.h). */
#include <stdlib.h>
#include <string.h>

#include "gradcache/ops.h"
#include "tokenizer.h"

gc_status gc_tokenize(const char *const *texts, int64_t count, int64_t max_length, gc_dtype mask_dtype,
                      gc_device device, gc_tensor **ids, gc_tensor **mask) {
    *ids = *mask = NULL;
    if (max_length < 1) gc_fatal("tokenize: max length %lld must be at least 1", (long long)max_length);
    size_t cells = (size_t)(count * max_length);
    int32_t *id_values = calloc(cells ? cells : 1, sizeof *id_values);
    float *mask_values = calloc(cells ? cells : 1, sizeof *mask_values);
    if (!id_values || !mask_values) gc_fatal("tokenize: out of host memory for %zu tokens", cells);
    for (int64_t row = 0; row < count; row++) {
        int32_t *row_ids = id_values + row * max_length;
        float *row_mask = mask_values + row * max_length;
        const unsigned char *text = (const unsigned char *)texts[row];
        row_ids[0] = GC_TOKEN_CLS;
        row_mask[0] = 1;
        for (int64_t t = 1; t < max_length && *text; t++, text++) {
            row_ids[t] = GC_TOKEN_FIRST_BYTE + *text;
            row_mask[t] = 1;
        }
    }
    gc_tensor *host_mask = gc_from_host(mask_values, GC_SHAPE(count, max_length), GC_F32, gc_cpu());
    gc_tensor *host_ids = gc_from_host(id_values, GC_SHAPE(count, max_length), GC_I32, gc_cpu());
    free(id_values);
    free(mask_values);
    gc_tensor *typed_mask = gc_cast(host_mask, mask_dtype);
    *ids = gc_to_device(host_ids, device);
    *mask = gc_to_device(typed_mask, device);
    gc_tensor_release(host_mask);
    gc_tensor_release(host_ids);
    gc_tensor_release(typed_mask);
    if (*ids && *mask) return GC_OK;
    gc_tensor_release(*ids);
    gc_tensor_release(*mask);
    *ids = *mask = NULL;
    return gc_last_status();
}
