/* Mining hard negatives for a pair file (see gradcache/train.h): the distinct queries and the
 * distinct candidate texts (the positives and an extra corpus) found by sorting
 * (gc_distinct_texts), the queries encoded once, the candidates a block at a time into a
 * gc_miner, and the kept lines written as a pair file with negative columns. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/files.h"
#include "gradcache/train.h"

static gc_status out_of_memory(const char *what) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "mining: out of host memory for %s", what);
    return GC_ERR_OUT_OF_MEMORY;
}

/* The candidates: the positives, then the extra texts but empty ones, made distinct into mined->texts;
 * positive_row[i] receives line i's positive's row. */
static gc_status distinct_candidates(const gc_pairs *pairs, const char *const *extra, int64_t extra_count,
                                     gc_mined *mined, int64_t *positive_row) {
    int64_t total = pairs->count + extra_count;
    const char **all = malloc((size_t)(total + 1) * sizeof *all);
    int64_t *row = malloc((size_t)(total + 1) * sizeof *row);
    if (!all || !row) {
        free(all);
        free(row);
        return out_of_memory("the corpus");
    }
    for (int64_t i = 0; i < pairs->count; i++) all[i] = gc_pairs_text(pairs, i, 1);
    total = pairs->count;
    for (int64_t i = 0; i < extra_count; i++)
        if (extra[i][0]) all[total++] = extra[i]; /* an empty text is no pair file's field */
    mined->corpus = gc_distinct_texts(all, total, &mined->texts, row);
    memcpy(positive_row, row, (size_t)pairs->count * sizeof *row);
    free(all);
    free(row);
    return GC_OK;
}

/* Each distinct query's positives (corpus rows), grouped: start [queries + 1], rows [lines]. */
static void group_positives(const gc_mined *mined, const int64_t *positive_row, int64_t *start, int64_t *rows) {
    memset(start, 0, (size_t)(mined->queries + 1) * sizeof *start);
    for (int64_t i = 0; i < mined->lines; i++) start[mined->query_of[i] + 1]++;
    for (int64_t q = 0; q < mined->queries; q++) start[q + 1] += start[q];
    int64_t *next = malloc((size_t)(mined->queries + 1) * sizeof *next);
    if (!next) gc_fatal("mine_pairs: out of host memory for %lld queries", (long long)mined->queries);
    memcpy(next, start, (size_t)(mined->queries + 1) * sizeof *next);
    for (int64_t i = 0; i < mined->lines; i++) rows[next[mined->query_of[i]]++] = positive_row[i];
    free(next);
}

/* Encodes the candidates `block` at a time into the miner. */
static gc_status search(gc_dual_encoder *model, const gc_mined *mined, const gc_mine_options *options,
                        gc_miner *miner) {
    gc_status status = GC_OK;
    for (int64_t start = 0; start < mined->corpus && status == GC_OK; start += options->block) {
        int64_t rows = mined->corpus - start < options->block ? mined->corpus - start : options->block;
        gc_tensor *block = gc_dual_encoder_encode(model, 1, mined->texts + start, rows, options->batch); /* [rows, D] */
        status = block ? gc_miner_add(miner, block) : gc_last_status();
        gc_tensor_release(block);
        if (status == GC_OK && options->progress) options->progress(options->user, start + rows, mined->corpus);
    }
    return status;
}

/* Every query's choice into mined->chosen, and the lines kept counted. */
static gc_status choose_all(gc_miner *miner, gc_mined *mined) {
    int64_t n = mined->negatives;
    for (int64_t q = 0; q < mined->queries; q++) {
        int64_t found = gc_miner_choose(miner, q, mined->chosen + q * n);
        if (found < 0) return gc_last_status();
        if (found == 0) mined->chosen[q * n] = -1;
    }
    for (int64_t i = 0; i < mined->lines; i++) mined->kept += mined->chosen[mined->query_of[i] * n] >= 0;
    return GC_OK;
}

gc_status gc_mine_pairs(gc_dual_encoder *model, const gc_pairs *pairs, const char *const *extra,
                        int64_t extra_count, const gc_mine_options *options, gc_mined *mined) {
    *mined = (gc_mined){.negatives = options->negatives, .lines = pairs->count};
    int64_t lines = pairs->count;
    const char **query_texts = malloc((size_t)(lines + 1) * sizeof *query_texts);
    int64_t *positive_row = malloc((size_t)(lines + 1) * sizeof *positive_row);
    int64_t *rows = malloc((size_t)(lines + 1) * sizeof *rows);
    int64_t *start = malloc((size_t)(lines + 2) * sizeof *start);
    const char **distinct_queries = NULL;
    mined->query_of = malloc((size_t)(lines + 1) * sizeof *mined->query_of);
    gc_status status = gc_mine_options_check(options);
    if (status == GC_OK && !(query_texts && positive_row && rows && start && mined->query_of))
        status = out_of_memory("the pairs");
    if (status == GC_OK) {
        for (int64_t i = 0; i < lines; i++) query_texts[i] = gc_pairs_text(pairs, i, 0);
        mined->queries = gc_distinct_texts(query_texts, lines, &distinct_queries, mined->query_of);
        status = distinct_candidates(pairs, extra, extra_count, mined, positive_row);
    }
    if (status == GC_OK) {
        mined->chosen = malloc((size_t)(mined->queries * mined->negatives + 1) * sizeof *mined->chosen);
        status = mined->chosen ? GC_OK : out_of_memory("the negatives");
    }
    gc_tensor *queries = NULL;
    if (status == GC_OK) {
        group_positives(mined, positive_row, start, rows);
        queries = gc_dual_encoder_encode(model, 0, distinct_queries, mined->queries, options->batch); /* [Nq, D] */
        status = queries ? GC_OK : gc_last_status();
    }
    gc_miner miner = {0};
    if (status == GC_OK) status = gc_miner_init(&miner, queries, start, rows, options);
    if (status == GC_OK) status = search(model, mined, options, &miner);
    if (status == GC_OK) status = choose_all(&miner, mined);
    gc_miner_free(&miner);
    gc_tensor_release(queries);
    free(query_texts);
    free(distinct_queries);
    free(positive_row);
    free(rows);
    free(start);
    if (status != GC_OK) gc_mined_free(mined);
    return status;
}

void gc_mined_free(gc_mined *mined) {
    free(mined->texts);
    free(mined->query_of);
    free(mined->chosen);
    *mined = (gc_mined){0};
}

/* A text as a pair field: tabs and line breaks made spaces. */
static void write_field(FILE *out, const char *text) {
    for (; *text; text++) fputc(*text == '\t' || *text == '\n' || *text == '\r' ? ' ' : *text, out);
}

gc_status gc_mined_save(const char *path, const gc_pairs *pairs, const gc_mined *mined, int64_t *too_long) {
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    *too_long = 0;
    int64_t n = mined->negatives;
    for (int64_t i = 0; i < mined->lines; i++) {
        const int64_t *chosen = mined->chosen + mined->query_of[i] * n;
        if (chosen[0] < 0) continue;
        size_t length = strlen(gc_pairs_text(pairs, i, 0)) + 1 + strlen(gc_pairs_text(pairs, i, 1));
        for (int64_t j = 0; j < n; j++) length += 1 + strlen(mined->texts[chosen[j]]);
        if (length > GC_PAIRS_MAX_LINE) {
            ++*too_long;
            continue;
        }
        write_field(writer.file, gc_pairs_text(pairs, i, 0));
        fputc('\t', writer.file);
        write_field(writer.file, gc_pairs_text(pairs, i, 1));
        for (int64_t j = 0; j < n; j++) {
            fputc('\t', writer.file);
            write_field(writer.file, mined->texts[chosen[j]]);
        }
        fputc('\n', writer.file);
    }
    return gc_file_commit(&writer);
}
