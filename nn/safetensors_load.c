/* Loading a checkpoint into existing tensors (a model's parameters), all or nothing. */
#include "gradcache/ops.h"
#include "nn/safetensors_internal.h"

/* Every tensor of `into` has an entry of its shape in the file. */
static gc_status check_all(const gc_safetensors *file, const gc_param_list *into) {
    for (int i = 0; i < into->count; i++) {
        const gc_param *param = &into->items[i];
        const gc_safetensors_entry *entry = gc_safetensors_find(file, param->name);
        if (!entry) return gc_safetensors_format_error(file->name, "no tensor named '%s' to load", param->name);
        const gc_tensor *tensor = param->tensor;
        bool same = entry->ndim == tensor->ndim;
        for (int d = 0; same && d < tensor->ndim; d++) same = entry->shape[d] == tensor->shape[d];
        if (!same) {
            char in_file[96], wanted[96];
            return gc_safetensors_format_error(file->name, "tensor '%s' is %s in the file but %s in the tensor to load",
                                               param->name, gc_shape_str(entry->ndim, entry->shape, in_file, sizeof in_file),
                                               gc_shape_str(tensor->ndim, tensor->shape, wanted, sizeof wanted));
        }
    }
    return GC_OK;
}

static gc_status load_one(const gc_safetensors *file, const gc_param *param) {
    gc_tensor *loaded = gc_safetensors_get(file, param->name, gc_cpu());
    if (loaded && loaded->dtype != param->tensor->dtype) { /* converted on the host, then copied once */
        gc_tensor *converted = gc_cast(loaded, param->tensor->dtype);
        gc_tensor_release(loaded);
        loaded = converted;
    }
    gc_status status = loaded ? gc_copy_(param->tensor, loaded) : gc_last_status();
    gc_tensor_release(loaded);
    return status;
}

gc_status gc_safetensors_load_into(const char *path, const gc_param_list *into) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status == GC_OK) status = check_all(file, into);
    for (int i = 0; status == GC_OK && i < into->count; i++) status = load_one(file, &into->items[i]);
    gc_safetensors_close(file);
    return status;
}
