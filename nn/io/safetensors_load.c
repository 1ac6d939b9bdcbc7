/* Loading a checkpoint into existing tensors (a model's parameters), all or nothing: every
 * tensor is checked before the first is copied. */
#include "gradcache/ops.h"
#include "nn/io/safetensors_internal.h"

/* True when `name` starts with one of `prefixes` (NULL-terminated, or NULL for none). */
static bool claimed_by_caller(const char *name, const char *const *prefixes) {
    for (int i = 0; prefixes && prefixes[i]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

/* How a load matches the file: tensor i of `into` from the entry names[i] (NULL: its own
 * name); with `exact`, of its dtype too (or, with `widen`, of a dtype whose every value the
 * tensor's holds), and every entry of the file one of `into` or claimed by `others`. */
typedef struct load_rule {
    const char *const *names;
    bool exact, widen;
    const char *const *others;
} load_rule;

/* Whether every value of `from` is a value of `to`: a conversion that loses nothing. */
static bool widens(gc_dtype from, gc_dtype to) {
    if (from == to) return true;
    if (to == GC_F64) return from == GC_F32 || from == GC_F16 || from == GC_BF16;
    return to == GC_F32 && (from == GC_F16 || from == GC_BF16);
}

/* Every tensor of `into` has an entry of its shape, of a gradcache dtype, in the file (and
 * what rule->exact adds). */
static gc_status check_all(const gc_safetensors *file, const gc_param_list *into, const load_rule *rule) {
    for (int i = 0; i < into->count; i++) {
        const gc_param *param = &into->items[i];
        const char *name = rule->names ? rule->names[i] : param->name;
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
        if (rule->exact && !(rule->widen ? widens(entry->dtype, tensor->dtype) : entry->dtype == tensor->dtype))
            return gc_safetensors_format_error(file->name, "tensor '%s' is %s in the file but %s in the tensor to load "
                                               "(%s)", name, gc_safetensors_dtype_name(entry->dtype),
                                               gc_safetensors_dtype_name(tensor->dtype),
                                               rule->widen ? "only a conversion that loses nothing is made here"
                                                           : "a dtype is never converted here");
    }
    for (int i = 0; rule->exact && i < file->count; i++) {
        const char *name = file->entries[i].name;
        if (!gc_param_list_find(into, name) && !claimed_by_caller(name, rule->others))
            return gc_safetensors_format_error(file->name, "unexpected tensor '%.80s' (the file holds more than it "
                                               "describes)", name);
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

static gc_status load_checked(const gc_safetensors *file, const gc_param_list *into, const load_rule *rule) {
    gc_status status = check_all(file, into, rule);
    for (int i = 0; status == GC_OK && i < into->count; i++)
        status = load_one(file, &into->items[i], rule->names ? rule->names[i] : into->items[i].name);
    return status;
}

gc_status gc_safetensors_load_named(const gc_safetensors *file, const gc_param_list *into,
                                    const char *const *file_names) {
    return load_checked(file, into, &(load_rule){.names = file_names});
}

gc_status gc_safetensors_load_into(const char *path, const gc_param_list *into) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status == GC_OK) status = gc_safetensors_load_named(file, into, NULL);
    gc_safetensors_close(file);
    return status;
}

gc_status gc_safetensors_load_exact(const gc_safetensors *file, const gc_param_list *into, const char *const *others) {
    return load_checked(file, into, &(load_rule){.exact = true, .others = others});
}

gc_status gc_safetensors_load_widening(const gc_safetensors *file, const gc_param_list *into,
                                       const char *const *others) {
    return load_checked(file, into, &(load_rule){.exact = true, .widen = true, .others = others});
}
