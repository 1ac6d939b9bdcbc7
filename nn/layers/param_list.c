/* Named parameter lists: how optimizers, checkpoints and the gradient bucketer find a
 * model's parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/autograd.h"
#include "gradcache/nn.h"

void gc_param_list_add(gc_param_list *list, const char *prefix, const char *name, gc_tensor *tensor, bool no_decay) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? list->capacity * 2 : 16;
        list->items = realloc(list->items, (size_t)list->capacity * sizeof *list->items);
        if (!list->items) gc_fatal("param_list: out of host memory for %d entries", list->capacity);
    }
    gc_param *param = &list->items[list->count++];
    int length = snprintf(param->name, sizeof param->name, "%s%s%s", prefix ? prefix : "",
                          prefix && *prefix ? "." : "", name);
    if (length >= (int)sizeof param->name)
        gc_fatal("param_list: name '%s.%s' is longer than %d characters", prefix, name, GC_PARAM_NAME_MAX - 1);
    param->tensor = gc_tensor_retain(tensor);
    param->no_decay = no_decay;
}

gc_tensor *gc_param_list_find(const gc_param_list *list, const char *name) {
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, name) == 0) return list->items[i].tensor;
    return NULL;
}

int64_t gc_param_list_numel(const gc_param_list *list) {
    int64_t numel = 0;
    for (int i = 0; i < list->count; i++) numel += gc_numel(list->items[i].tensor);
    return numel;
}

void gc_param_list_free(gc_param_list *list) {
    for (int i = 0; i < list->count; i++) gc_tensor_release(list->items[i].tensor);
    free(list->items);
    *list = (gc_param_list){0};
}

void gc_param_list_zero_grad(const gc_param_list *list) {
    for (int i = 0; i < list->count; i++) gc_zero_grad(list->items[i].tensor);
}

void gc_param_list_trainable(const gc_param_list *all, gc_param_list *trainable) {
    for (int i = 0; i < all->count; i++)
        if (gc_requires_grad(all->items[i].tensor))
            gc_param_list_add(trainable, "", all->items[i].name, all->items[i].tensor, all->items[i].no_decay);
}
