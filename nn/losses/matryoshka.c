/* Matryoshka: a base loss summed with weights over nested prefixes of the representations
 * (loss.h). The forward composes recorded ops; value_and_grad calls the base's on each prefix
 * and adds each prefix's gradient into the leading columns of the whole one. */
#include <math.h>

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

static void check_options(gc_tensor *const *reps, int count, const gc_matryoshka_options *o) {
    char text[128];
    if (!o || !o->base.forward) gc_fatal("matryoshka_loss: no options, or a base loss without a forward");
    if (o->count < 1 || o->count > GC_MATRYOSHKA_MAX_DIMS)
        gc_fatal("matryoshka_loss: %d prefixes (1 to %d)", o->count, GC_MATRYOSHKA_MAX_DIMS);
    if (count < 1 || count > GC_LOSS_MAX_REPS)
        gc_fatal("matryoshka_loss: %d representations (1 to %d)", count, GC_LOSS_MAX_REPS);
    for (int m = 0; m < count; m++) {
        if (reps[m]->ndim != 2) gc_fatal("matryoshka_loss: representation %d is %s, not [N, D]", m,
                                         gc_tensor_str(reps[m], text, sizeof text));
        for (int j = 0; j < o->count; j++)
            if (o->dims[j] < 1 || o->dims[j] > reps[m]->shape[1] || !isfinite(o->weights[j]))
                gc_fatal("matryoshka_loss: prefix %d of length %lld, weight %g, for representation %d %s", j,
                         (long long)o->dims[j], o->weights[j], m, gc_tensor_str(reps[m], text, sizeof text));
    }
}

gc_tensor *gc_matryoshka_prefix(const gc_tensor *x, int64_t d) {
    if (!x) return NULL;
    gc_tensor *by_column = gc_transpose(x, 0, 1); /* [D, N]: a prefix of columns is a slice of rows */
    gc_tensor *rows = by_column ? gc_slice0(by_column, 0, d) : NULL;
    gc_tensor *prefix = rows ? gc_transpose(rows, 0, 1) : NULL; /* [N, d] */
    gc_tensor_release(by_column);
    gc_tensor_release(rows);
    return prefix;
}

/* prefixes[m] = reps[m][:, :d]; false (all released) on an allocation error */
static bool prefixes_of(gc_tensor *const *reps, int count, int64_t d, gc_tensor **prefixes) {
    bool ok = true;
    for (int m = 0; m < count; m++) ok = (prefixes[m] = gc_matryoshka_prefix(reps[m], d)) != NULL && ok;
    for (int m = 0; m < count && !ok; m++) gc_tensor_release(prefixes[m]);
    return ok;
}

gc_tensor *gc_matryoshka_loss(gc_tensor *const *reps, int count, const gc_matryoshka_options *options) {
    for (int m = 0; m < count; m++)
        if (!reps[m]) return NULL;
    check_options(reps, count, options);
    gc_tensor *total = NULL;
    for (int j = 0; j < options->count; j++) {
        gc_tensor *prefixes[GC_LOSS_MAX_REPS];
        if (!prefixes_of(reps, count, options->dims[j], prefixes)) break;
        gc_tensor *term = options->base.forward(prefixes, count, options->base.args);
        gc_tensor *weighted = gc_mul_scalar(term, options->weights[j]);
        gc_tensor *sum = j == 0 ? gc_tensor_retain(weighted) : gc_add(total, weighted);
        for (int m = 0; m < count; m++) gc_tensor_release(prefixes[m]);
        GC_RELEASE_ALL(term, weighted, total);
        total = sum;
        if (!total) return NULL;
    }
    return total;
}

/* The base's value and gradients at one prefix: its value_and_grad, or with a group its
 * group_value_and_grad (this rank's rows of the prefix; the ranks take the same prefixes). */
static gc_status base_value_and_grad(gc_process_group *group, const gc_loss_fn *base, gc_tensor *const *prefixes,
                                     int count, double seed, double *value, gc_tensor **grads) {
    if (group) return base->group_value_and_grad(group, prefixes, count, base->args, seed, value, grads);
    return base->value_and_grad(prefixes, count, base->args, seed, value, grads);
}

/* gc_loss_fn.value_and_grad (group NULL) and group_value_and_grad: each prefix's gradient,
 * computed by the base, is added into the first d_j rows of the transposed gradient [D, N] (a
 * prefix of columns is a slice of rows). */
static gc_status prefixes_value_and_grad(gc_process_group *group, gc_tensor *const *reps, int count,
                                         const gc_matryoshka_options *o, double seed, double *value,
                                         gc_tensor **grads) {
    check_options(reps, count, o);
    gc_tensor *by_column[GC_LOSS_MAX_REPS] = {0}; /* [D, N_m] */
    gc_status status = GC_OK;
    bool previous = gc_set_grad_enabled(false);
    for (int m = 0; m < count && status == GC_OK; m++) {
        by_column[m] = gc_zeros(GC_SHAPE(reps[m]->shape[1], reps[m]->shape[0]), reps[m]->dtype, reps[m]->device);
        if (!by_column[m]) status = gc_last_status();
    }
    double total = 0;
    for (int j = 0; j < o->count && status == GC_OK; j++) {
        gc_tensor *prefixes[GC_LOSS_MAX_REPS], *parts[GC_LOSS_MAX_REPS] = {0};
        if (!prefixes_of(reps, count, o->dims[j], prefixes)) {
            status = gc_last_status();
            break;
        }
        double term = 0;
        status = base_value_and_grad(group, &o->base, prefixes, count, seed * o->weights[j], &term, parts);
        total += o->weights[j] * term;
        for (int m = 0; m < count; m++) {
            gc_tensor *part = status == GC_OK ? gc_transpose(parts[m], 0, 1) : NULL; /* [d_j, N_m] */
            gc_tensor *rows = part ? gc_slice0(by_column[m], 0, o->dims[j]) : NULL;
            if (status == GC_OK) status = rows ? gc_add_inplace(rows, part) : gc_last_status();
            GC_RELEASE_ALL(prefixes[m], parts[m], part, rows);
        }
    }
    for (int m = 0; m < count; m++) {
        grads[m] = status == GC_OK ? gc_transpose(by_column[m], 0, 1) : NULL;
        if (status == GC_OK && !grads[m]) status = gc_last_status();
        gc_tensor_release(by_column[m]);
    }
    gc_set_grad_enabled(previous);
    for (int m = 0; m < count && status != GC_OK; m++) {
        gc_tensor_release(grads[m]);
        grads[m] = NULL;
    }
    *value = total;
    return status;
}

static gc_tensor *matryoshka_forward(gc_tensor *const *reps, int count, void *args) {
    return gc_matryoshka_loss(reps, count, args);
}

static gc_status matryoshka_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                           gc_tensor **grads) {
    return prefixes_value_and_grad(NULL, reps, count, args, seed, value, grads);
}

static gc_status matryoshka_group_value_and_grad(gc_process_group *group, gc_tensor *const *reps, int count,
                                                 void *args, double seed, double *value, gc_tensor **grads) {
    return prefixes_value_and_grad(group, reps, count, args, seed, value, grads);
}

gc_loss_fn gc_matryoshka_loss_fn(const gc_matryoshka_options *options) {
    if (!options || !options->base.forward) gc_fatal("matryoshka_loss_fn: no options, or a base loss without a forward");
    return (gc_loss_fn){.forward = matryoshka_forward,
                        .value_and_grad = options->base.value_and_grad ? matryoshka_value_and_grad : NULL,
                        .group_value_and_grad =
                            options->base.group_value_and_grad ? matryoshka_group_value_and_grad : NULL,
                        .args = (void *)options};
}
