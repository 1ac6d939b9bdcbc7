/* Gradient checking (gradcache/autograd.h): backward's vector-Jacobian product against
 * central differences of L = sum(f() * w). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "gradcache/random.h"

/* L = sum(f() * w) without a graph; *status set when an op ran out of memory. */
static double weighted_sum(gc_gradcheck_fn f, void *context, const gc_tensor *weight, gc_status *status) {
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *out = f(context), *product = gc_mul(out, weight), *total = gc_sum_all(product);
    double value = total ? gc_item(total) : NAN;
    if (!total) *status = gc_last_status();
    gc_tensor_release(out);
    gc_tensor_release(product);
    gc_tensor_release(total);
    gc_set_grad_enabled(previous);
    return value;
}

static void check_leaf(const gc_tensor *leaf, int index) {
    char text[128];
    if (!leaf || leaf->dtype != GC_F64 || leaf->device.type != GC_DEVICE_CPU || !gc_is_leaf(leaf) ||
        !gc_requires_grad(leaf))
        gc_fatal("gradcheck: leaf %d is %s; it must be an f64 CPU leaf that requires a gradient", index,
                 leaf ? gc_tensor_str(leaf, text, sizeof text) : "NULL");
}

/* How far past its tolerance an element is (<= 0: within it). */
static double excess(double analytic, double numeric, const gc_gradcheck_options *o) {
    return fabs(analytic - numeric) - (o->atol + o->rtol * fabs(analytic));
}

/* Backward of f seeded with w: every leaf's analytic gradient as f64 values (zeros where no
 * gradient reached it), into analytic[i][numel]. */
static gc_status analytic_gradients(gc_gradcheck_fn f, void *context, gc_tensor *const *leaves, int count,
                                    uint64_t seed, gc_tensor **weight, double **analytic) {
    for (int i = 0; i < count; i++) gc_zero_grad(leaves[i]);
    gc_tensor *out = f(context);
    if (!out) {
        if (gc_last_status() == GC_OK) gc_fatal("gradcheck: f returned NULL without an error");
        return gc_last_status();
    }
    *weight = gc_uniform(out->ndim, out->shape, out->dtype, out->device, -1, 1, seed, 0);
    gc_status status = *weight ? gc_backward(&out, weight, 1) : gc_last_status();
    gc_tensor_release(out);
    for (int i = 0; i < count && status == GC_OK; i++) {
        analytic[i] = calloc((size_t)gc_numel(leaves[i]) + 1, sizeof **analytic);
        if (!analytic[i]) gc_fatal("gradcheck: out of host memory");
        if (gc_grad(leaves[i])) gc_to_host_f64(gc_grad(leaves[i]), analytic[i]);
    }
    return status;
}

gc_status gc_gradcheck(gc_gradcheck_fn f, void *context, gc_tensor *const *leaves, int count,
                       const gc_gradcheck_options *options, gc_gradcheck_report *report) {
    gc_gradcheck_options o = options ? *options : (gc_gradcheck_options){0};
    if (o.step == 0) o.step = 1e-6;
    if (o.atol == 0 && o.rtol == 0) o.atol = 1e-7, o.rtol = 1e-6;
    if (o.stride < 1) o.stride = 1;
    if (!(o.step > 0) || o.atol < 0 || o.rtol < 0)
        gc_fatal("gradcheck: step %g must be > 0, atol %g and rtol %g >= 0", o.step, o.atol, o.rtol);
    for (int i = 0; i < count; i++) check_leaf(leaves[i], i);
    *report = (gc_gradcheck_report){.worst_leaf = -1, .worst_index = -1};
    double **analytic = calloc((size_t)count + 1, sizeof *analytic), worst = -INFINITY;
    if (!analytic) gc_fatal("gradcheck: out of host memory");
    gc_tensor *weight = NULL;
    gc_status status = analytic_gradients(f, context, leaves, count, o.seed, &weight, analytic);
    for (int i = 0; i < count && status == GC_OK; i++) {
        double *x = gc_data(leaves[i]);
        for (int64_t k = 0; k < gc_numel(leaves[i]) && status == GC_OK; k += o.stride) {
            double saved = x[k];
            x[k] = saved + o.step;
            gc_tensor_mark_written(leaves[i]); /* a weight's packed panels must not see the old value */
            double plus = weighted_sum(f, context, weight, &status);
            x[k] = saved - o.step;
            gc_tensor_mark_written(leaves[i]);
            double minus = weighted_sum(f, context, weight, &status);
            x[k] = saved;
            gc_tensor_mark_written(leaves[i]);
            double numeric = (plus - minus) / (2 * o.step), off = excess(analytic[i][k], numeric, &o);
            report->checked++;
            report->failed += !(off <= 0); /* a nan fails */
            if (off > worst || (isnan(off) && !isnan(worst))) {
                worst = off;
                *report = (gc_gradcheck_report){report->checked, report->failed, i, k, analytic[i][k], numeric};
            }
        }
    }
    for (int i = 0; i < count; i++) free(analytic[i]);
    free(analytic);
    gc_tensor_release(weight);
    return status;
}
