/* Mining hard negatives on embeddings (see gradcache/train.h): exact search keeps each query's
 * best range_max + (most positives) corpus rows (gc_top_k), the positives' own scores are
 * computed on the host as their rows go by, and gc_miner_choose filters and picks, as
 * sentence-transformers' mine_hard_negatives does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/random.h"
#include "gradcache/rng.h"
#include "gradcache/train.h"

gc_mine_options gc_mine_options_default(void) {
    return (gc_mine_options){.negatives = 3, .margin = NAN, .relative_margin = NAN, .max_score = NAN,
                             .sampling = GC_MINE_TOP, .batch = 256, .block = 8192};
}

static gc_status config_error(const char *flag, double value, const char *want) {
    gc_set_error(GC_ERR_CONFIG, "%s %g: %s", flag, value, want);
    return GC_ERR_CONFIG;
}

gc_status gc_mine_options_check(const gc_mine_options *o) {
    if (o->negatives < 1) return config_error("--num-negatives", (double)o->negatives, "needs at least 1");
    if (o->range_min < 0) return config_error("--range-min", (double)o->range_min, "needs at least 0");
    if (o->range_max && o->range_max < o->range_min + o->negatives)
        return config_error("--range-max", (double)o->range_max,
                            "leaves fewer ranks than --num-negatives after --range-min");
    if (isinf(o->margin)) return config_error("--margin", o->margin, "needs a finite number");
    if (isinf(o->relative_margin))
        return config_error("--relative-margin", o->relative_margin, "needs a finite number");
    if (isinf(o->max_score)) return config_error("--max-score", o->max_score, "needs a finite number");
    if (o->batch < 1 || o->block < 1) return config_error("--batch-size or --block", 0, "needs at least 1");
    return GC_OK;
}

gc_status gc_miner_init(gc_miner *miner, const gc_tensor *queries, const int64_t *positive_start,
                        const int64_t *positive_rows, const gc_mine_options *options) {
    char tq[128];
    if (queries->dtype != GC_F32 || queries->ndim != 2)
        gc_fatal("miner_init: needs f32 queries [Nq, D], got %s", gc_tensor_str(queries, tq, sizeof tq));
    *miner = (gc_miner){.options = *options, .queries = queries->shape[0], .dim = queries->shape[1],
                        .query_embeddings = queries,
                        .positive_start = positive_start, .positive_rows = positive_rows};
    gc_status status = gc_mine_options_check(options);
    if (status != GC_OK) return status;
    int64_t most_positives = 0, pairs = positive_start[miner->queries];
    for (int64_t q = 0; q < miner->queries; q++)
        if (positive_start[q + 1] - positive_start[q] > most_positives)
            most_positives = positive_start[q + 1] - positive_start[q];
    gc_mine_options *o = &miner->options;
    if (o->range_max == 0) {
        bool filtered = !isnan(o->margin) || !isnan(o->relative_margin) || !isnan(o->max_score);
        o->range_max = o->range_min + o->negatives * (filtered ? 10 : 1) + most_positives;
    }
    miner->query_host = malloc((size_t)(miner->queries * miner->dim + 1) * sizeof *miner->query_host);
    miner->positive_score = malloc((size_t)(pairs + 1) * sizeof *miner->positive_score);
    if (!miner->query_host || !miner->positive_score) {
        gc_miner_free(miner);
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "mining: out of host memory for %lld queries", (long long)miner->queries);
        return GC_ERR_OUT_OF_MEMORY;
    }
    if (miner->queries) gc_copy_to_host(queries, miner->query_host);
    for (int64_t i = 0; i < pairs; i++) miner->positive_score[i] = NAN;
    status = gc_top_k_init(&miner->top, miner->queries, o->range_max + most_positives);
    if (status != GC_OK) gc_miner_free(miner);
    return status;
}

/* cosine(a, b) of two rows of `dim` floats, in double, with gc_l2_normalize's eps: the score
 * sentence-transformers computes for a positive pair apart from the search's. */
static double cosine(const float *a, const float *b, int64_t dim) {
    double dot = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < dim; i++) {
        dot += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return dot / (sqrt(aa + 1e-24) * sqrt(bb + 1e-24));
}

/* Scores the positives whose rows are in block [rows, D] (host) from corpus row `first`. */
static void score_positives(gc_miner *miner, const float *block, int64_t first, int64_t rows) {
    for (int64_t q = 0; q < miner->queries; q++)
        for (int64_t i = miner->positive_start[q]; i < miner->positive_start[q + 1]; i++) {
            int64_t row = miner->positive_rows[i] - first;
            if (row < 0 || row >= rows) continue;
            miner->positive_score[i] = cosine(miner->query_host + q * miner->dim, block + row * miner->dim, miner->dim);
        }
}

gc_status gc_miner_add(gc_miner *miner, const gc_tensor *block) {
    int64_t first = miner->top.seen, rows = block->shape[0];
    gc_status status = gc_top_k_add(&miner->top, miner->query_embeddings, block);
    if (status != GC_OK || rows == 0) return status;
    float *host = malloc((size_t)(rows * miner->dim) * sizeof *host);
    if (!host) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "mining: out of host memory for a block of %lld rows", (long long)rows);
        return GC_ERR_OUT_OF_MEMORY;
    }
    gc_copy_to_host(block, host);
    score_positives(miner, host, first, rows);
    free(host);
    return GC_OK;
}

/* Whether query q's filters refuse score s, given its lowest positive score p. */
static bool refused(const gc_mine_options *o, double s, double p) {
    return (!isnan(o->margin) && s + o->margin > p) ||
           (!isnan(o->relative_margin) && s > p * (1 - o->relative_margin)) ||
           (!isnan(o->max_score) && s > o->max_score);
}

static int ascending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Picks `want` of positions [0, count) uniformly (a partial Fisher-Yates shuffle on the Philox
 * words of `seed`), ascending, into picked[0..want); `scratch` holds count entries. */
static void sample_positions(uint64_t seed, int64_t count, int64_t want, int64_t *scratch, int64_t *picked) {
    for (int64_t i = 0; i < count; i++) scratch[i] = i;
    for (int64_t i = 0; i < want; i++) {
        uint64_t at = 2 * (uint64_t)i;
        uint64_t word = (uint64_t)gc_philox_word(seed, at) << 32 | gc_philox_word(seed, at + 1);
        int64_t j = i + (int64_t)(word % (uint64_t)(count - i));
        int64_t x = scratch[i];
        scratch[i] = scratch[j], scratch[j] = x;
    }
    for (int64_t i = 0; i < want; i++) picked[i] = scratch[i];
    qsort(picked, (size_t)want, sizeof *picked, ascending);
}

int64_t gc_miner_choose(gc_miner *miner, int64_t q, int64_t *chosen) {
    if (q < 0 || q >= miner->queries)
        gc_fatal("miner_choose: query %lld outside [0, %lld)", (long long)q, (long long)miner->queries);
    gc_top_k *top = &miner->top;
    if (!miner->sorted) gc_top_k_finish(top), miner->sorted = true;
    const gc_mine_options *o = &miner->options;
    const int64_t *positives = miner->positive_rows + miner->positive_start[q];
    int64_t n_positives = miner->positive_start[q + 1] - miner->positive_start[q];
    double lowest = INFINITY;
    for (int64_t i = 0; i < n_positives; i++) {
        double p = miner->positive_score[miner->positive_start[q] + i];
        if (isnan(p)) {
            gc_set_error(GC_ERR_FORMAT, "mining: query %lld's positive, corpus row %lld, was never searched",
                         (long long)q, (long long)positives[i]);
            return -1;
        }
        if (p < lowest) lowest = p;
    }
    /* window[0..count): the rows of the survivors in [range_min, range_max), in rank order;
     * window[k..2k): the sampler's scratch */
    int64_t *window = malloc((size_t)(2 * top->k + 1) * sizeof *window), survivors = 0, count = 0;
    if (!window) gc_fatal("miner_choose: out of host memory for %lld candidates", (long long)top->k);
    for (int64_t i = 0; i < top->k && survivors < o->range_max; i++) {
        int64_t row = top->index[q * top->capacity + i];
        bool positive = false;
        for (int64_t j = 0; j < n_positives && !positive; j++) positive = positives[j] == row;
        if (positive || refused(o, top->score[q * top->capacity + i], lowest)) continue;
        if (survivors++ >= o->range_min) window[count++] = row;
    }
    int64_t found = count < o->negatives ? 0 : o->negatives;
    if (found && o->sampling == GC_MINE_RANDOM) {
        sample_positions(gc_derive_seed(o->seed, (uint64_t)q), count, found, window + top->k, chosen);
        for (int64_t i = 0; i < found; i++) chosen[i] = window[chosen[i]];
    } else {
        for (int64_t i = 0; i < found; i++) chosen[i] = window[i];
    }
    free(window);
    return found;
}

void gc_miner_free(gc_miner *miner) {
    free(miner->query_host);
    free(miner->positive_score);
    gc_top_k_free(&miner->top);
    *miner = (gc_miner){0};
}
