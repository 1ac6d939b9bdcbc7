/* Loading a checkpoint into existing tensors (a model's parameters), all or nothing. */
#include "gradcache/ops.h"
#include "nn/safetensors_internal.h"

/* Every tensor of `into` has an entry of its shape, of a gradcache dtype, in the file. */
static gc_status check_all(const gc_safetensors *file, const gc_param_list *into, const char *const *names) {
    for (int i = 0; i < into->count; i++) {
        const gc_param *param = &into->items[i];
        const char *name = names ? names[i] : param->name;
        const gc_safetensors_entry *entry = gc_safetensors_find(file, name);
        if (!entry) return gc_safetensors_format_error(file->name, "no tensor named '%s' to load", name);
        const gc_tensor *tensor = param->tensor;
        if (entry->foreign)
            return gc_safetensors_format_error(file->name, "tensor '%s' is %s in the file, which cannot be loaded "
                                               "into %s", name, entry->dtype_name, gc_dtype_name(tensor->dtype));
        bool same = entry->ndim == tensor->ndim;
        for (int d = 0; same && d < tensor->ndim; d++) same = entry->shape[d] == tensor->shape[d];
        if (!same) {
            char in_file[96], wanted[96];
            return gc_safetensors_format_error(file->name, "tensor '%s' is %s in the file but %s in the tensor to load",
                                               name, gc_shape_str(entry->ndim, entry->shape, in_file, sizeof in_file),
                                               gc_shape_str(tensor->ndim, tensor->shape, wanted, sizeof wanted));
        }
    }
    return GC_OK;
}

static gc_status load_one(const gc_safetensors *file, const gc_param *param, const char *name) {
    gc_tensor *loaded = gc_safetensors_get(file, name, gc_cpu());
    if (loaded && loaded->dtype != param->tensor->dtype) { /* converted on the host, then copied once */
        gc_tensor *converted = gc_cast(loaded, param->tensor->dtype);
        gc_tensor_release(loaded);
        loaded = converted;
    }
    gc_status status = loaded ? gc_copy_(param->tensor, loaded) : gc_last_status();
    gc_tensor_release(loaded);
    return status;
}

gc_status gc_safetensors_load_named(const gc_safetensors *file, const gc_param_list *into,
                                    const char *const *file_names) {
    gc_status status = check_all(file, into, file_names);
    for (int i = 0; status == GC_OK && i < into->count; i++)
        status = load_one(file, &into->items[i], file_names ? file_names[i] : into->items[i].name);
    return status;
}

gc_status gc_safetensors_load_into(const char *path, const gc_param_list *into) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status == GC_OK) status = gc_safetensors_load_named(file, into, NULL);
    gc_safetensors_close(file);
    return status;
}
