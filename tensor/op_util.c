#include <stdio.h>

#include "backend.h"
#include "op_util.h"

void gc_check_same_device(const char *op, const gc_tensor *a, const gc_tensor *b) {
    char ta[128], tb[128];
    if (!gc_device_equal(a->device, b->device))
        gc_fatal("%s: inputs on different devices: %s and %s (copy with gc_to_device)", op,
                 gc_tensor_str(a, ta, sizeof ta), gc_tensor_str(b, tb, sizeof tb));
}

void gc_check_same_dtype(const char *op, const gc_tensor *a, const gc_tensor *b) {
    char ta[128], tb[128];
    if (a->dtype != b->dtype)
        gc_fatal("%s: inputs of different dtypes: %s and %s (convert with gc_cast)", op,
                 gc_tensor_str(a, ta, sizeof ta), gc_tensor_str(b, tb, sizeof tb));
}

void gc_check_float(const char *op, const gc_tensor *x) {
    char text[128];
    if (!gc_dtype_is_float(x->dtype))
        gc_fatal("%s: needs a floating-point tensor, got %s", op, gc_tensor_str(x, text, sizeof text));
}

void gc_check_min_ndim(const char *op, const gc_tensor *x, int ndim) {
    char text[128];
    if (x->ndim < ndim)
        gc_fatal("%s: needs at least %d dim(s), got %s", op, ndim, gc_tensor_str(x, text, sizeof text));
}

int64_t gc_last_dim(const gc_tensor *x) { return x->ndim ? x->shape[x->ndim - 1] : 1; }

int64_t gc_leading_rows(const gc_tensor *x) {
    int64_t rows = 1; /* the product of the leading dims, also when the last one is 0 */
    for (int d = 0; d + 1 < x->ndim; d++) rows *= x->shape[d];
    return rows;
}

void gc_check_index_range(const char *op, const char *what, const gc_tensor *index, int64_t bound) {
    gc_index_site site = {.op = op, .what = what, .bound = bound, .ndim = index->ndim, .device = index->device};
    for (int d = 0; d < index->ndim; d++) site.shape[d] = index->shape[d];
    gc_backend_for(index->device)->check_index(gc_data(index), (size_t)gc_numel(index), &site);
}

void gc_index_site_fail(const gc_index_site *site, int64_t position, bool at_least, int32_t value, const char *note) {
    char shape[96], device[16];
    gc_fatal("%s: %s %d at position %s%lld of %ss %s i32 %s is outside [0, %lld)%s%s%s", site->op, site->what,
             (int)value, at_least ? "at least " : "", (long long)position, site->what,
             gc_shape_str(site->ndim, site->shape, shape, sizeof shape),
             gc_device_str(site->device, device, sizeof device), (long long)site->bound, note ? " (" : "",
             note ? note : "", note ? ")" : "");
}
