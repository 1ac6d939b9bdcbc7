/* What the two contrastive losses share (contrastive_internal.h). */
#include <math.h>
#include <stdlib.h>

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "tensor/op_util.h"

void gc_contrastive_check_options(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options) {
    char tq[128], tp[128];
    if (!options) gc_fatal("contrastive_loss: options is NULL");
    gc_tensor_str(queries, tq, sizeof tq);
    gc_tensor_str(passages, tp, sizeof tp);
    if (queries->ndim != 2 || passages->ndim != 2 || queries->shape[1] != passages->shape[1])
        gc_fatal("contrastive_loss: needs queries [Nq, D] and passages [Np, D], got %s and %s", tq, tp);
    gc_check_float("contrastive_loss", queries);
    gc_check_same_dtype("contrastive_loss", queries, passages);
    gc_check_same_device("contrastive_loss", queries, passages);
    if (options->similarity != GC_SIMILARITY_DOT && options->similarity != GC_SIMILARITY_COSINE)
        gc_fatal("contrastive_loss: unknown similarity %d", (int)options->similarity);
    if (!(options->temperature > 0) || isinf(options->temperature))
        gc_fatal("contrastive_loss: temperature %g is not positive and finite", options->temperature);
    if (options->reduction != GC_LOSS_MEAN && options->reduction != GC_LOSS_SUM)
        gc_fatal("contrastive_loss: unknown reduction %d", (int)options->reduction);
    if (options->method != GC_CONTRASTIVE_AUTO && options->method != GC_CONTRASTIVE_TILED &&
        options->method != GC_CONTRASTIVE_FULL)
        gc_fatal("contrastive_loss: unknown method %d", (int)options->method);
    if (options->tile_size < 0)
        gc_fatal("contrastive_loss: tile size %lld is not positive (0 picks the device's default)",
                 (long long)options->tile_size);
    if (options->positives < 0)
        gc_fatal("contrastive_loss: %lld positives per query (0 or 1: one)", (long long)options->positives);
}

void gc_contrastive_check_targets(const char *op, const gc_tensor *queries, int64_t n_queries,
                                  const gc_tensor *targets) {
    char tq[128], tt[128];
    if (targets->dtype != GC_I32 || targets->ndim != 1 || targets->shape[0] != n_queries)
        gc_fatal("%s: needs i32 targets [%lld] for queries %s, got %s", op, (long long)n_queries,
                 gc_tensor_str(queries, tq, sizeof tq), gc_tensor_str(targets, tt, sizeof tt));
    gc_check_same_device(op, queries, targets);
}

void gc_contrastive_check_arguments(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_contrastive_options *options) {
    char tq[128], tp[128], tt[128];
    gc_contrastive_check_options(queries, passages, options);
    int64_t n_queries = queries->shape[0], n_passages = passages->shape[0];
    int64_t positives = gc_contrastive_positive_count(options);
    const gc_tensor *targets = options->targets;
    gc_tensor_str(queries, tq, sizeof tq);
    gc_tensor_str(passages, tp, sizeof tp);
    if (targets && positives == 1) {
        gc_contrastive_check_targets("contrastive_loss", queries, n_queries, targets);
    } else if (targets) {
        if (targets->dtype != GC_I32 || targets->ndim != 2 || targets->shape[0] != n_queries ||
            targets->shape[1] != positives)
            gc_fatal("contrastive_loss: needs i32 targets [%lld, %lld] for queries %s with %lld positives each, got %s",
                     (long long)n_queries, (long long)positives, tq, (long long)positives,
                     gc_tensor_str(targets, tt, sizeof tt));
        gc_check_same_device("contrastive_loss", queries, targets);
    } else if (n_queries > 0 && positives == 1 && n_passages % n_queries != 0) {
        gc_fatal("contrastive_loss: %lld passages %s are not a multiple of %lld queries %s (give targets)",
                 (long long)n_passages, tp, (long long)n_queries, tq);
    } else if (n_queries > 0 && (n_passages % n_queries != 0 || n_passages / n_queries < positives)) {
        gc_fatal("contrastive_loss: %lld passages %s are not a multiple of %lld queries %s with %lld positives each "
                 "(give targets)", (long long)n_passages, tp, (long long)n_queries, tq, (long long)positives);
    }
}

int64_t gc_contrastive_positive_count(const gc_contrastive_options *options) {
    return options->positives > 1 ? options->positives : 1;
}

gc_tensor *gc_contrastive_targets(const gc_tensor *queries, const gc_tensor *passages,
                                  const gc_contrastive_options *options) {
    int64_t n_queries = queries->shape[0], n_passages = passages->shape[0];
    if (options->targets) {
        /* on the device: no host wait */
        gc_check_index_range("contrastive_loss", "target", options->targets, n_passages);
        return gc_tensor_retain((gc_tensor *)options->targets);
    }
    /* Each query is followed by its hard negatives: query i's positive is passage i (Np / Nq). */
    double step = n_queries ? (double)(n_passages / n_queries) : 0;
    return gc_arange(n_queries, 0, step, GC_I32, queries->device);
}

/* The first row of x [N, D] holding an inf or a nan (in *row, -1 when none): x * 0 is 0 for
 * every finite x and nan for an inf or a nan, so a row's sum of x * 0 is 0 exactly when the
 * row is finite (a sum of x itself could overflow). `chunk` rows at a time, so that the
 * temporary stays small. */
static gc_status first_non_finite_row(const gc_tensor *x, int64_t chunk, int64_t *row) {
    int64_t rows = x->shape[0];
    double *flags = malloc(sizeof *flags * (size_t)(chunk > 0 ? chunk : 1));
    if (!flags) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "contrastive_loss: no host memory for %lld flags", (long long)chunk);
        return GC_ERR_OUT_OF_MEMORY;
    }
    gc_status status = GC_OK;
    *row = -1;
    for (int64_t start = 0; start < rows && *row < 0 && status == GC_OK; start += chunk) {
        int64_t end = start + chunk < rows ? start + chunk : rows;
        gc_tensor *part = gc_slice0(x, start, end);
        gc_tensor *zeros = gc_mul_scalar(part, 0.0);
        gc_tensor *sums = gc_sum_last(zeros, false); /* [end - start] */
        if (sums) {
            gc_to_host_f64(sums, flags);
            for (int64_t i = 0; i < end - start && *row < 0; i++)
                if (flags[i] != 0) *row = start + i;
        } else {
            status = gc_last_status();
        }
        gc_tensor_release(part);
        gc_tensor_release(zeros);
        gc_tensor_release(sums);
    }
    free(flags);
    return status;
}

gc_status gc_contrastive_find_non_finite(const char *who, const gc_tensor *queries, const gc_tensor *passages,
                                         int64_t chunk) {
    const gc_tensor *sides[2] = {queries, passages};
    const char *names[2] = {"query", "passage"};
    bool previous = gc_set_grad_enabled(false);
    gc_status status = GC_OK;
    char text[128];
    for (int s = 0; s < 2 && status == GC_OK; s++) {
        int64_t row;
        status = first_non_finite_row(sides[s], chunk, &row);
        if (status == GC_OK && row >= 0) {
            status = GC_ERR_NON_FINITE;
            gc_set_error(status, "%s %s row %lld of %s holds an inf or a nan", who, names[s], (long long)row,
                         gc_tensor_str(sides[s], text, sizeof text));
        }
    }
    gc_set_grad_enabled(previous);
    return status;
}

gc_status gc_contrastive_explain_non_finite(const gc_tensor *queries, const gc_tensor *passages,
                                            const gc_contrastive_options *options, double value, int64_t chunk) {
    gc_status status = gc_contrastive_find_non_finite("contrastive_loss:", queries, passages, chunk);
    if (status != GC_OK) return status;
    char text[128];
    gc_set_error(GC_ERR_NON_FINITE,
                 "contrastive_loss: the loss is %g with finite representations %s: the scores overflow at temperature "
                 "%g", value, gc_tensor_str(queries, text, sizeof text), options->temperature);
    return GC_ERR_NON_FINITE;
}

double gc_contrastive_weight(const gc_contrastive_options *options, int64_t n_queries) {
    double mean = n_queries ? 1.0 / (double)n_queries : NAN;
    return (options->reduction == GC_LOSS_MEAN ? mean : 1.0) * (options->symmetric ? 0.5 : 1.0);
}

int64_t gc_contrastive_rows(const gc_tensor *queries, const gc_tensor *passages) {
    return queries->shape[0] > passages->shape[0] ? queries->shape[0] : passages->shape[0];
}

int64_t gc_contrastive_largest_tile(const gc_contrastive_options *options, gc_device device) {
    if (options->tile_size > 0) return options->tile_size;
    return device.type == GC_DEVICE_CUDA ? GC_CONTRASTIVE_TILE_CUDA : GC_CONTRASTIVE_TILE_CPU;
}

int64_t gc_contrastive_tile_size(const gc_contrastive_options *options, gc_device device, int64_t rows) {
    int64_t largest = gc_contrastive_largest_tile(options, device);
    if (options->tile_size > 0) return largest;
    int64_t smallest = largest < 512 ? largest : 512, tile = rows / 32;
    return tile < smallest ? smallest : tile > largest ? largest : tile;
}
