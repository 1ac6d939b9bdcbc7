/* libFuzzer target for the safetensors reader (and its JSON parser): any input must open
 * with GC_OK or fail with GC_ERR_FORMAT and a message, never crash, hang, leak or read out
 * of bounds; an input that opens must give every tensor it lists and every metadata value.
 * The sanitizers built in with it catch the memory errors. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_safetensors *file = NULL;
    gc_status status = gc_safetensors_open_memory(data, size, "fuzz", &file);
    if (status != GC_OK) {
        if (status != GC_ERR_FORMAT || file || !strstr(gc_last_error(), "safetensors: fuzz: ") ||
            strchr(gc_last_error(), '\n'))
            abort(); /* one line naming the input */
        gc_clear_error();
        return 0;
    }
    for (int i = 0; i < gc_safetensors_count(file); i++) {
        int ndim;
        int64_t shape[GC_MAX_DIMS];
        const char *dtype = gc_safetensors_dtype_of(file, i, &ndim, shape);
        gc_tensor *tensor = gc_safetensors_get(file, gc_safetensors_name(file, i), gc_cpu());
        /* the data was checked to be there (a tensor this size fits in memory); only an entry
         * of a dtype gradcache has no tensors of is refused */
        bool ours = strcmp(dtype, "F32") == 0 || strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0 ||
                    strcmp(dtype, "I32") == 0 || strcmp(dtype, "F64") == 0;
        if (!tensor != !ours || ndim < 0 || ndim > GC_MAX_DIMS) abort();
        gc_clear_error();
        gc_tensor_release(tensor);
    }
    for (int i = 0; i < gc_safetensors_metadata_count(file); i++)
        if (!gc_safetensors_metadata(file, gc_safetensors_metadata_key(file, i))) abort();
    gc_safetensors_close(file);
    return 0;
}
