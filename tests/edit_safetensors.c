/* edit_safetensors IN OUT EDIT...: a safetensors file rewritten with edits, for the tests of
 * what the gradcache program refuses (test_cli_checks.sh). Each edit is one argument:
 *   set KEY=VALUE      sets a metadata entry        unset KEY        removes one
 *   drop NAME          removes a tensor             copy FROM=TO     adds a copy of a tensor
 *   fill NAME=NUMBER   every element of a tensor to NUMBER ("nan" and "inf" too)
 *   retype NAME=DTYPE  the tensor's bytes relabelled as another dtype of the same width
 *   plain              writes the file without the checksum (as another writer would)
 * The result is written with the library's writer, so it is a well-formed file with a
 * correct checksum: what is tested is the program's checks of the content. Exit 0, or 99
 * after a line on stderr (a setup error for the test that runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/gradcache.h"

static void die(const char *what, const char *detail) {
    fprintf(stderr, "edit_safetensors: %s: %s\n", what, detail);
    exit(99);
}

/* {key, value, ...} pairs with room for one more, as gc_safetensors_save takes them. */
typedef struct metadata {
    char *entries[2 * 256 + 1];
    int pairs;
} metadata;

static int find_key(const metadata *m, const char *key) {
    for (int i = 0; i < m->pairs; i++)
        if (strcmp(m->entries[2 * i], key) == 0) return i;
    return -1;
}

static void set_key(metadata *m, const char *key, const char *value) {
    int i = find_key(m, key);
    if (i < 0) {
        if (m->pairs == 256) die(key, "too many metadata entries");
        i = m->pairs++;
        m->entries[2 * i] = strdup(key);
    } else {
        free(m->entries[2 * i + 1]);
    }
    m->entries[2 * i + 1] = strdup(value);
    m->entries[2 * m->pairs] = NULL;
}

static void unset_key(metadata *m, const char *key) {
    int i = find_key(m, key);
    if (i < 0) die(key, "no such metadata entry");
    free(m->entries[2 * i]);
    free(m->entries[2 * i + 1]);
    memmove(&m->entries[2 * i], &m->entries[2 * i + 2], (size_t)(2 * (m->pairs - i - 1) + 1) * sizeof *m->entries);
    m->pairs--;
}

/* The tensors of `list` but `name` (a new list). */
static gc_param_list without(const gc_param_list *list, const char *name) {
    gc_param_list kept = {0};
    bool found = false;
    for (int i = 0; i < list->count; i++) {
        if (strcmp(list->items[i].name, name) == 0) found = true;
        else gc_param_list_add(&kept, "", list->items[i].name, list->items[i].tensor, false);
    }
    if (!found) die(name, "no such tensor");
    return kept;
}

static gc_tensor *tensor_named(const gc_param_list *list, const char *name) {
    gc_tensor *tensor = gc_param_list_find(list, name);
    if (!tensor) die(name, "no such tensor");
    return tensor;
}

/* Replaces `name` in *list by `tensor` (a new reference, handed over). */
static void replace(gc_param_list *list, const char *name, gc_tensor *tensor) {
    if (!tensor) die(name, gc_last_error());
    gc_param_list rest = without(list, name);
    gc_param_list_add(&rest, "", name, tensor, false);
    gc_tensor_release(tensor);
    gc_param_list_free(list);
    *list = rest;
}

static gc_tensor *retyped(const gc_tensor *tensor, const char *dtype_name) {
    for (int d = 0; d < GC_DTYPE_COUNT; d++)
        if (strcmp(gc_dtype_name((gc_dtype)d), dtype_name) == 0) {
            if (gc_dtype_size((gc_dtype)d) != gc_dtype_size(tensor->dtype)) die(dtype_name, "not the tensor's width");
            return gc_from_host(gc_data(tensor), tensor->ndim, tensor->shape, (gc_dtype)d, gc_cpu());
        }
    die(dtype_name, "unknown dtype (f32, f16, bf16, i32, f64)");
    return NULL;
}

/* "A=B" split at its first '='. */
static char *split(char *argument, const char *edit) {
    char *equals = strchr(argument, '=');
    if (!equals) die(edit, "needs A=B");
    *equals = '\0';
    return equals + 1;
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage", "edit_safetensors IN OUT EDIT...");
    gc_safetensors *file;
    if (gc_safetensors_open(argv[1], &file) != GC_OK) die(argv[1], gc_last_error());
    gc_param_list tensors = {0};
    for (int i = 0; i < gc_safetensors_count(file); i++) {
        gc_tensor *tensor = gc_safetensors_get(file, gc_safetensors_name(file, i), gc_cpu());
        if (!tensor) die(argv[1], gc_last_error());
        gc_param_list_add(&tensors, "", gc_safetensors_name(file, i), tensor, false);
        gc_tensor_release(tensor);
    }
    metadata m = {.pairs = 0};
    for (int i = 0; i < gc_safetensors_metadata_count(file); i++) {
        const char *key = gc_safetensors_metadata_key(file, i);
        set_key(&m, key, gc_safetensors_metadata(file, key));
    }
    gc_safetensors_close(file);
    bool plain = false;
    for (int a = 3; a < argc; a++) {
        const char *edit = argv[a];
        if (strcmp(edit, "plain") == 0) {
            plain = true;
            continue;
        }
        if (a + 1 == argc) die(edit, "needs an argument");
        char *target = argv[++a];
        if (strcmp(edit, "set") == 0) {
            char *value = split(target, edit);
            set_key(&m, target, value);
        } else if (strcmp(edit, "unset") == 0) {
            unset_key(&m, target);
        } else if (strcmp(edit, "drop") == 0) {
            gc_param_list rest = without(&tensors, target);
            gc_param_list_free(&tensors);
            tensors = rest;
        } else if (strcmp(edit, "copy") == 0) {
            char *to = split(target, edit);
            gc_param_list_add(&tensors, "", to, tensor_named(&tensors, target), false);
        } else if (strcmp(edit, "fill") == 0) {
            double value = strtod(split(target, edit), NULL);
            const gc_tensor *tensor = tensor_named(&tensors, target);
            replace(&tensors, target, gc_full(tensor->ndim, tensor->shape, tensor->dtype, gc_cpu(), value));
        } else if (strcmp(edit, "retype") == 0) {
            char *dtype = split(target, edit);
            replace(&tensors, target, retyped(tensor_named(&tensors, target), dtype));
        } else {
            die(edit, "unknown edit (set, unset, drop, copy, fill, retype, plain)");
        }
    }
    const char *const *entries = (const char *const *)m.entries;
    gc_status status = plain ? gc_safetensors_save_plain(argv[2], &tensors, entries)
                             : gc_safetensors_save(argv[2], &tensors, entries);
    if (status != GC_OK) die(argv[2], gc_last_error());
    gc_param_list_free(&tensors);
    for (int i = 0; i < 2 * m.pairs; i++) free(m.entries[i]);
    return 0;
}
