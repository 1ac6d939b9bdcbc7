/* Distillation from a teacher's scores (loss.h): MarginMSE and the listwise KL divergence over
 * each query's positive and hard negatives, built from recorded ops so that autograd
 * differentiates them (they hold [Nq, 1 + k] scores: nothing to tile), optionally added to the
 * in-batch contrastive loss; across processes without gathering (the contrastive term around the
 * ring); and the gc_loss_fn. The teacher's side is constant: it is turned
 * into margins or probabilities on the host, in f64. */
#include <math.h>
#include <stdlib.h>

#include "contrastive_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/dist.h"
#include "gradcache/ops.h"
#include "tensor/op_util.h"

static void check_temperature(const char *name, double temperature) {
    if (!(temperature > 0) || isinf(temperature))
        gc_fatal("distill_loss: %s temperature %g is not positive and finite", name, temperature);
}

/* Stops the program (one line) on arguments no call could make sense of. */
static void check_options(const gc_tensor *queries, const gc_tensor *passages, const gc_distill_options *options) {
    char tq[128], tp[128], tt[128];
    if (!options || !options->teacher_scores) gc_fatal("distill_loss: options or their teacher scores are NULL");
    const gc_tensor *teacher = options->teacher_scores;
    gc_tensor_str(queries, tq, sizeof tq);
    gc_tensor_str(passages, tp, sizeof tp);
    gc_tensor_str(teacher, tt, sizeof tt);
    if (queries->ndim != 2 || passages->ndim != 2 || teacher->ndim != 2 || queries->shape[1] != passages->shape[1] ||
        teacher->shape[0] != queries->shape[0] || teacher->shape[1] < 2 ||
        passages->shape[0] != queries->shape[0] * teacher->shape[1])
        gc_fatal("distill_loss: needs queries [Nq, D], passages [Nq (1 + k), D] and teacher scores [Nq, 1 + k] "
                 "with k >= 1, got %s, %s and %s", tq, tp, tt);
    gc_check_float("distill_loss", queries);
    gc_check_float("distill_loss", teacher);
    gc_check_same_dtype("distill_loss", queries, passages);
    gc_check_same_device("distill_loss", queries, passages);
    if (options->kind != GC_DISTILL_MARGIN_MSE && options->kind != GC_DISTILL_KL_DIV)
        gc_fatal("distill_loss: unknown kind %d", (int)options->kind);
    if (options->similarity != GC_SIMILARITY_DOT && options->similarity != GC_SIMILARITY_COSINE)
        gc_fatal("distill_loss: unknown similarity %d", (int)options->similarity);
    if (options->kind == GC_DISTILL_KL_DIV) {
        check_temperature("student", options->student_temperature);
        check_temperature("teacher", options->teacher_temperature);
    }
    if (!isfinite(options->weight)) gc_fatal("distill_loss: weight %g is not finite", options->weight);
    if (options->contrastive) {
        gc_contrastive_check_arguments(queries, passages, options->contrastive);
        if (gc_contrastive_positive_count(options->contrastive) > 1)
            gc_fatal("distill_loss: the contrastive term has %lld positives per query (the teacher scores one)",
                     (long long)options->contrastive->positives);
    }
}

/* The teacher's scores [Nq, 1 + k] read to the host in f64 (a new array, or NULL with the error
 * set: out of memory, or a score that is not finite, named by its row and column). */
static double *teacher_on_host(const gc_tensor *teacher) {
    int64_t rows = teacher->shape[0], columns = teacher->shape[1];
    double *scores = malloc(sizeof *scores * (size_t)(rows * columns > 0 ? rows * columns : 1));
    if (!scores) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "distill_loss: no host memory for %lld teacher scores",
                     (long long)(rows * columns));
        return NULL;
    }
    gc_to_host_f64(teacher, scores);
    for (int64_t i = 0; i < rows * columns; i++)
        if (!isfinite(scores[i])) {
            gc_set_error(GC_ERR_NON_FINITE, "distill_loss: teacher score [%lld, %lld] is %g", (long long)(i / columns),
                         (long long)(i % columns), scores[i]);
            free(scores);
            return NULL;
        }
    return scores;
}

/* host [rows, columns] f64 as a tensor of `dtype` on `device` (NULL on an allocation error). */
static gc_tensor *upload(const double *host, int64_t rows, int64_t columns, gc_dtype dtype, gc_device device) {
    gc_tensor *exact = gc_from_host(host, GC_SHAPE(rows, columns), GC_F64, device);
    gc_tensor *cast = dtype == GC_F64 ? gc_tensor_retain(exact) : gc_cast(exact, dtype);
    gc_tensor_release(exact);
    return cast;
}

/* s_ij = sim(q_i, c_ij) [Nq, 1 + k] in working precision (recorded): each query's row times its
 * own candidates' rows, broadcast over them. */
static gc_tensor *student_scores(const gc_tensor *queries, const gc_tensor *passages, gc_similarity similarity,
                                 int64_t columns) {
    int64_t n_queries = queries->shape[0], dim = queries->shape[1];
    gc_tensor *q = gc_contrastive_prepare(queries, similarity);  /* [Nq, D] */
    gc_tensor *p = gc_contrastive_prepare(passages, similarity); /* [Nq (1 + k), D] */
    gc_tensor *q_rows = gc_reshape(q, GC_SHAPE(n_queries, 1, dim));
    gc_tensor *candidates = gc_reshape(p, GC_SHAPE(n_queries, columns, dim));
    gc_tensor *products = gc_mul(q_rows, candidates); /* [Nq, 1 + k, D] */
    gc_tensor *scores = gc_sum_last(products, false);
    GC_RELEASE_ALL(q, p, q_rows, candidates, products);
    return scores;
}

/* mean over i, j >= 1 of ((s_i0 - s_ij) - (t_i0 - t_ij))^2, the margins laid out [k, Nq] */
static gc_tensor *margin_mse(const gc_tensor *scores, const double *teacher) {
    int64_t n_queries = scores->shape[0], columns = scores->shape[1], k = columns - 1;
    double *margins = malloc(sizeof *margins * (size_t)(k * n_queries > 0 ? k * n_queries : 1));
    if (!margins) gc_fatal("distill_loss: out of host memory for %lld margins", (long long)(k * n_queries));
    for (int64_t j = 1; j < columns; j++)
        for (int64_t i = 0; i < n_queries; i++)
            margins[(j - 1) * n_queries + i] = teacher[i * columns] - teacher[i * columns + j];
    gc_tensor *target = upload(margins, k, n_queries, scores->dtype, scores->device); /* [k, Nq] */
    free(margins);
    gc_tensor *by_column = gc_transpose(scores, 0, 1);          /* [1 + k, Nq] */
    gc_tensor *positive = gc_slice0(by_column, 0, 1);           /* [1, Nq] */
    gc_tensor *negatives = gc_slice0(by_column, 1, columns);    /* [k, Nq] */
    gc_tensor *student = gc_sub(positive, negatives);           /* [k, Nq] */
    gc_tensor *difference = gc_sub(student, target);
    gc_tensor *squares = gc_mul(difference, difference);
    gc_tensor *loss = gc_mean_all(squares);
    GC_RELEASE_ALL(target, by_column, positive, negatives, student, difference, squares);
    return loss;
}

/* tau_s^2 / Nq sum_i KL(p_i || softmax(s_i / tau_s)), p_i = softmax(t_i / tau_t) in f64 on the
 * host, and with it the constant sum p log p (a zero p_j adds nothing, as KLDivLoss's xlogy). */
static gc_tensor *listwise_kl(const gc_tensor *scores, const double *teacher, double student_temperature,
                              double teacher_temperature) {
    int64_t n_queries = scores->shape[0], columns = scores->shape[1];
    double *probabilities = malloc(sizeof *probabilities * (size_t)(n_queries * columns > 0 ? n_queries * columns : 1));
    if (!probabilities)
        gc_fatal("distill_loss: out of host memory for %lld probabilities", (long long)(n_queries * columns));
    double p_log_p = 0;
    for (int64_t i = 0; i < n_queries; i++) {
        const double *t = teacher + i * columns;
        double *p = probabilities + i * columns, largest = t[0], sum = 0;
        for (int64_t j = 1; j < columns; j++) largest = t[j] > largest ? t[j] : largest;
        for (int64_t j = 0; j < columns; j++) sum += exp((t[j] - largest) / teacher_temperature);
        for (int64_t j = 0; j < columns; j++) {
            double log_p = (t[j] - largest) / teacher_temperature - log(sum);
            p[j] = exp(log_p);
            if (p[j] > 0) p_log_p += p[j] * log_p;
        }
    }
    gc_tensor *target = upload(probabilities, n_queries, columns, scores->dtype, scores->device);
    free(probabilities);
    gc_tensor *scaled = gc_div_scalar(scores, student_temperature);
    gc_tensor *log_q = gc_log_softmax(scaled);        /* [Nq, 1 + k] */
    gc_tensor *weighted = gc_mul(target, log_q);
    gc_tensor *cross = gc_sum_all(weighted);          /* sum p log q */
    gc_tensor *divergence = gc_rsub_scalar(cross, p_log_p);
    gc_tensor *loss = gc_mul_scalar(divergence, student_temperature * student_temperature / (double)n_queries);
    GC_RELEASE_ALL(target, scaled, log_q, weighted, cross, divergence);
    return loss;
}

/* weight times the distillation term alone (recorded), or NULL with the error set */
static gc_tensor *distillation_term(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_distill_options *options) {
    int64_t columns = options->teacher_scores->shape[1];
    double *teacher = teacher_on_host(options->teacher_scores);
    if (!teacher) return NULL;
    gc_tensor *scores = student_scores(queries, passages, options->similarity, columns);
    gc_tensor *term = NULL;
    if (scores && options->kind == GC_DISTILL_MARGIN_MSE) term = margin_mse(scores, teacher);
    else if (scores) term = listwise_kl(scores, teacher, options->student_temperature, options->teacher_temperature);
    free(teacher);
    gc_tensor *weighted = gc_mul_scalar(term, options->weight);
    GC_RELEASE_ALL(scores, term);
    return weighted;
}

gc_tensor *gc_distill_loss(const gc_tensor *queries, const gc_tensor *passages, const gc_distill_options *options) {
    if (!queries || !passages) return NULL;
    check_options(queries, passages, options);
    gc_tensor *distillation = distillation_term(queries, passages, options);
    if (!options->contrastive || !distillation) return distillation;
    gc_tensor *contrastive = gc_contrastive_loss(queries, passages, options->contrastive);
    gc_tensor *loss = gc_add(contrastive, distillation);
    GC_RELEASE_ALL(contrastive, distillation);
    return loss;
}

static gc_tensor *distillation_pair(const gc_tensor *queries, const gc_tensor *passages, const void *options) {
    return distillation_term(queries, passages, options);
}

/* The distillation term's value and gradients by autograd; a non-finite value is explained as
 * the contrastive loss explains its own (the row of a representation, else the scores). */
static gc_status distillation_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                             const gc_distill_options *options, double seed, double *value,
                                             gc_tensor **grads) {
    double temperature = options->kind == GC_DISTILL_KL_DIV ? options->student_temperature : 1;
    gc_contrastive_options explain = {.similarity = options->similarity, .temperature = temperature};
    return gc_contrastive_autograd(distillation_pair, options, queries, passages, &explain, seed, value, grads);
}

/* x (a few numbers, f64 on `device`) summed over the ranks, in place on the host array. */
static gc_status sum_over_ranks(gc_process_group *group, double *x, int64_t count, gc_device device) {
    gc_tensor *t = gc_from_host(x, GC_SHAPE(count), GC_F64, device);
    gc_status status = t ? gc_dist_all_reduce(group, t, GC_DIST_SUM) : gc_last_status();
    if (status == GC_OK) gc_to_host_f64(t, x);
    gc_tensor_release(t);
    return status;
}

/* The distillation term is a mean of per-query terms with no term across ranks: each rank's own
 * rows give its term, weighted by its share nq / Nq of the global queries (seeded so), and the
 * ranks' weighted values are summed: two all-reduces of one number, nothing else travels. A rank
 * without rows adds 0 and gets empty gradients. A loss that is not finite, or a rank's failure,
 * is GC_ERR_NON_FINITE (or that rank's own error) on every rank. */
static gc_status distillation_over_ranks(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                         const gc_distill_options *options, double seed, double *value,
                                         gc_tensor **grads) {
    double rows = (double)queries->shape[0], local = 0;
    gc_status status = sum_over_ranks(group, &rows, 1, queries->device); /* now the global Nq */
    double share = rows > 0 ? (double)queries->shape[0] / rows : 0;
    if (status == GC_OK && queries->shape[0] > 0) {
        gc_distill_options alone = *options;
        alone.contrastive = NULL;
        status = distillation_value_and_grad(queries, passages, &alone, seed * share, &local, grads);
    } else if (status == GC_OK) {
        grads[0] = gc_zeros_like(queries);
        grads[1] = gc_zeros_like(passages);
        if (!grads[0] || !grads[1]) status = gc_last_status();
    }
    /* every rank takes part in the sum, a failed one too (with nan), so that none waits; the others
     * then see a loss that is not finite and stop too, before the ring would wait for that rank */
    *value = status == GC_OK ? local * share : NAN;
    gc_status summed = sum_over_ranks(group, value, 1, queries->device);
    if (status != GC_OK) return status;
    if (summed == GC_OK && !isfinite(*value)) {
        gc_set_error(GC_ERR_NON_FINITE, "distill_loss: the loss over the ranks is %g (this rank's rows gave %g: "
                     "another rank's are not finite, or it failed)", *value, local * share);
        return GC_ERR_NON_FINITE;
    }
    return summed;
}

/* The loss's value and gradients in one process (group NULL: the contrastive term tiled or not,
 * as its method says) or over a group (the distillation term per rank, the contrastive term around
 * the ring). */
static gc_status value_and_grad_over(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                     const gc_distill_options *options, double seed, double *value,
                                     gc_tensor **grad_queries, gc_tensor **grad_passages) {
    *grad_queries = *grad_passages = NULL;
    if (!queries || !passages) return gc_last_status();
    check_options(queries, passages, options);
    gc_tensor *grads[2] = {NULL, NULL}, *contrastive[2] = {NULL, NULL};
    double contrastive_value = 0;
    const gc_contrastive_options *in_batch = options->contrastive;
    gc_status status = group ? distillation_over_ranks(group, queries, passages, options, seed, value, grads)
                             : distillation_value_and_grad(queries, passages, options, seed, value, grads);
    if (status == GC_OK && in_batch)
        status = group ? gc_contrastive_loss_ring(group, queries, passages, in_batch, seed, &contrastive_value,
                                                  &contrastive[0], &contrastive[1])
                       : gc_contrastive_value_and_grad(queries, passages, in_batch, seed, &contrastive_value,
                                                       &contrastive[0], &contrastive[1]);
    for (int s = 0; s < 2 && status == GC_OK && in_batch; s++) status = gc_add_inplace(grads[s], contrastive[s]);
    GC_RELEASE_ALL(contrastive[0], contrastive[1]);
    if (status != GC_OK) {
        GC_RELEASE_ALL(grads[0], grads[1]);
        return status;
    }
    *value += contrastive_value;
    *grad_queries = grads[0];
    *grad_passages = grads[1];
    return GC_OK;
}

gc_status gc_distill_loss_group(gc_process_group *group, const gc_tensor *queries, const gc_tensor *passages,
                                const gc_distill_options *options, double seed, double *value,
                                gc_tensor **grad_queries, gc_tensor **grad_passages) {
    return value_and_grad_over(group, queries, passages, options, seed, value, grad_queries, grad_passages);
}

gc_status gc_distill_value_and_grad(const gc_tensor *queries, const gc_tensor *passages,
                                    const gc_distill_options *options, double seed, double *value,
                                    gc_tensor **grad_queries, gc_tensor **grad_passages) {
    return value_and_grad_over(NULL, queries, passages, options, seed, value, grad_queries, grad_passages);
}

/* gc_loss_fn over reps = (queries, passages), args the options. */
static void check_count(int count) {
    if (count != 2) gc_fatal("distill_loss_fn: needs 2 representations (queries, passages), got %d", count);
}

static gc_tensor *distill_forward(gc_tensor *const *reps, int count, void *args) {
    check_count(count);
    return gc_distill_loss(reps[0], reps[1], args);
}

static gc_status distill_value_and_grad(gc_tensor *const *reps, int count, void *args, double seed, double *value,
                                        gc_tensor **grads) {
    check_count(count);
    return gc_distill_value_and_grad(reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

static gc_status distill_group_value_and_grad(gc_process_group *group, gc_tensor *const *reps, int count, void *args,
                                              double seed, double *value, gc_tensor **grads) {
    check_count(count);
    return gc_distill_loss_group(group, reps[0], reps[1], args, seed, value, &grads[0], &grads[1]);
}

gc_loss_fn gc_distill_loss_fn(const gc_distill_options *options) {
    if (!options) gc_fatal("distill_loss_fn: options is NULL");
    return (gc_loss_fn){.forward = distill_forward, .value_and_grad = distill_value_and_grad,
                        .group_value_and_grad = distill_group_value_and_grad, .args = (void *)options};
}
