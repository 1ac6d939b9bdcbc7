/* The --precision flag (see precision.h). */
#include <string.h>

#include "errors.h"
#include "precision.h"

const char *const gc_precision_names[] = {"f32", "f16", "bf16", NULL};

gc_dtype gc_precision_dtype(int precision) {
    static const gc_dtype dtypes[GC_PRECISION_COUNT] = {GC_F32, GC_F16, GC_BF16};
    if (precision < 0 || precision >= GC_PRECISION_COUNT) gc_fatal("precision_dtype: no precision %d", precision);
    return dtypes[precision];
}

int gc_precision_check_device(const char *command, int precision, gc_device device) {
    if (gc_device_check_dtype(device, gc_precision_dtype(precision)) == GC_OK) return 0;
    return gc_cli_fail(command, 2, "--precision %s: %s", gc_precision_names[precision], gc_last_error());
}

int gc_precision_list_parse(const char *command, const char *text, int indices[GC_PRECISION_COUNT]) {
    int count = 0;
    for (const char *at = text;; at++) {
        size_t length = strcspn(at, ",");
        int found = -1;
        for (int p = 0; p < GC_PRECISION_COUNT && found < 0; p++)
            if (strlen(gc_precision_names[p]) == length && strncmp(at, gc_precision_names[p], length) == 0) found = p;
        for (int i = 0; i < count && found >= 0; i++)
            if (indices[i] == found) found = -2;
        if (found < 0) {
            gc_cli_fail(command, 2, "--precision: expected f32, f16 or bf16, each at most once, comma-separated, got '%s'",
                        text);
            return -1;
        }
        indices[count++] = found;
        at += length;
        if (!*at) return count;
    }
}
