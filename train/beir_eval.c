/* BEIR evaluation (see gradcache/train.h): the judged queries encoded once, the corpus (or its
 * subset) a block at a time into a running top-k (gc_top_k), then each query's ranking put in trec_eval's
 * order and measured (gc_trec_query_measures), and the run file written from it. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/files.h"
#include "gradcache/train.h"

static gc_status out_of_memory(const char *what) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "BEIR evaluation: out of host memory for %s", what);
    return GC_ERR_OUT_OF_MEMORY;
}

/* The distinct queries of the qrels (sorted by query: in the file's order), at most `limit`
 * (0: all), into result->query_index; *first_qrel[i] receives where query i's judgements
 * start in data->qrels (first_qrel[queries]: their end). */
static gc_status judged_queries(const gc_beir *data, int64_t limit, gc_beir_result *result, int64_t **first_qrel) {
    int64_t count = 0;
    for (int64_t i = 0; i < data->qrel_count; i++) count += i == 0 || data->qrels[i].query != data->qrels[i - 1].query;
    if (limit && limit < count) count = limit;
    result->query_index = malloc((size_t)count * sizeof *result->query_index + 1);
    *first_qrel = malloc((size_t)(count + 1) * sizeof **first_qrel);
    if (!result->query_index || !*first_qrel) return out_of_memory("the queries");
    int64_t q = 0, i = 0;
    for (; i < data->qrel_count; i++) {
        if (i > 0 && data->qrels[i].query == data->qrels[i - 1].query) continue;
        if (q == count) break;
        result->query_index[q] = data->qrels[i].query;
        (*first_qrel)[q++] = i;
    }
    (*first_qrel)[count] = i;
    result->queries = count;
    return GC_OK;
}

/* The documents searched, ascending: every one, or (corpus_limit) the first corpus_limit and
 * those judged for the evaluated queries, whose judgements are data->qrels[0..end_qrel). */
static gc_status searched_documents(const gc_beir *data, int64_t corpus_limit, int64_t end_qrel, int64_t **docs,
                                    int64_t *count) {
    int64_t n = data->corpus.count;
    bool *searched = calloc((size_t)n, sizeof *searched);
    *docs = malloc((size_t)n * sizeof **docs);
    if (!searched || !*docs) {
        free(searched);
        return out_of_memory("the documents");
    }
    for (int64_t d = 0; d < n; d++) searched[d] = corpus_limit == 0 || d < corpus_limit;
    for (int64_t i = 0; i < end_qrel; i++) searched[data->qrels[i].doc] = true;
    *count = 0;
    for (int64_t d = 0; d < n; d++)
        if (searched[d]) (*docs)[(*count)++] = d;
    free(searched);
    return GC_OK;
}

/* Encodes documents docs[0..count) `block` at a time, each block scored against queries
 * [Nq, D]; the lists then hold corpus indices. */
static gc_status search_corpus(gc_dual_encoder *model, const gc_beir *data, const int64_t *docs, int64_t count,
                               const gc_tensor *queries, const gc_beir_eval_options *options, gc_top_k *top) {
    int64_t most = count < options->block ? count : options->block;
    const char **texts = malloc((size_t)(most + 1) * sizeof *texts);
    if (!texts) return out_of_memory("a block");
    gc_status status = GC_OK;
    for (int64_t start = 0; start < count && status == GC_OK; start += options->block) {
        int64_t rows = count - start < options->block ? count - start : options->block;
        for (int64_t i = 0; i < rows; i++) texts[i] = data->corpus.texts[docs[start + i]];
        gc_tensor *block = gc_dual_encoder_encode(model, 1, texts, rows, options->batch); /* [rows, D] */
        status = block ? gc_top_k_add(top, queries, block) : gc_last_status();
        gc_tensor_release(block);
        if (status == GC_OK && options->progress) options->progress(options->user, start + rows, count);
    }
    free(texts);
    if (status != GC_OK) return status;
    gc_top_k_finish(top);
    for (int64_t q = 0; q < top->queries; q++) /* positions among docs -> corpus indices */
        for (int64_t i = 0; i < top->k; i++) top->index[q * top->capacity + i] = docs[top->index[q * top->capacity + i]];
    return GC_OK;
}

/* The grade of `doc` among a query's judgements qrels[0..n) (sorted by doc), or -1. */
static int64_t grade_of(const gc_beir_qrel *qrels, int64_t n, int64_t doc) {
    int64_t low = 0, high = n;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (qrels[middle].doc == doc) return qrels[middle].grade;
        if (qrels[middle].doc < doc) low = middle + 1;
        else high = middle;
    }
    return -1;
}

/* Measures query q's ranking and rewrites it in trec_eval's order. `hits` [k] and `grades`
 * [judgements] are scratch space. */
static gc_trec_measures measure(const gc_beir *data, gc_top_k *top, int64_t q, const gc_beir_qrel *qrels,
                                int64_t judged, gc_trec_hit *hits, int64_t *grades) {
    int64_t *index = top->index + q * top->capacity;
    float *score = top->score + q * top->capacity;
    for (int64_t i = 0; i < top->k; i++)
        hits[i] = (gc_trec_hit){data->corpus.ids[index[i]], score[i], grade_of(qrels, judged, index[i])};
    for (int64_t j = 0; j < judged; j++) grades[j] = qrels[j].grade;
    gc_trec_measures m = gc_trec_query_measures(hits, top->k, grades, judged); /* sorts hits */
    for (int64_t i = 0; i < top->k; i++) {
        index[i] = gc_beir_find(&data->corpus, hits[i].doc);
        score[i] = (float)hits[i].score; /* a float's value, exactly */
    }
    return m;
}

/* Every query's measures, into result->mean. */
static gc_status measure_all(const gc_beir *data, const int64_t *first_qrel, gc_beir_result *result) {
    int64_t most_judged = 0;
    for (int64_t q = 0; q < result->queries; q++)
        if (first_qrel[q + 1] - first_qrel[q] > most_judged) most_judged = first_qrel[q + 1] - first_qrel[q];
    gc_trec_hit *hits = malloc((size_t)(result->top.k + 1) * sizeof *hits);
    int64_t *grades = malloc((size_t)(most_judged + 1) * sizeof *grades);
    gc_trec_measures *per_query = malloc((size_t)(result->queries + 1) * sizeof *per_query);
    gc_status status = hits && grades && per_query ? GC_OK : out_of_memory("the measures");
    for (int64_t q = 0; q < result->queries && status == GC_OK; q++)
        per_query[q] = measure(data, &result->top, q, data->qrels + first_qrel[q], first_qrel[q + 1] - first_qrel[q],
                               hits, grades);
    if (status == GC_OK) result->mean = gc_trec_mean(per_query, result->queries);
    free(hits);
    free(grades);
    free(per_query);
    return status;
}

gc_status gc_beir_evaluate(gc_dual_encoder *model, const gc_beir *data, const gc_beir_eval_options *options,
                           gc_beir_result *result) {
    if (options->k < 1 || options->batch < 1 || options->block < 1 || options->limit < 0 || options->corpus_limit < 0)
        gc_fatal("beir_evaluate: needs k, batch and block >= 1 and limits >= 0, got %lld, %lld, %lld, %lld and %lld",
                 (long long)options->k, (long long)options->batch, (long long)options->block, (long long)options->limit,
                 (long long)options->corpus_limit);
    *result = (gc_beir_result){0};
    int64_t *first_qrel = NULL, *docs = NULL;
    const char **texts = NULL;
    gc_tensor *queries = NULL;
    gc_status status = judged_queries(data, options->limit, result, &first_qrel);
    if (status == GC_OK) {
        texts = malloc((size_t)result->queries * sizeof *texts + 1);
        status = texts ? GC_OK : out_of_memory("the queries");
    }
    if (status == GC_OK) {
        for (int64_t q = 0; q < result->queries; q++) texts[q] = data->queries.texts[result->query_index[q]];
        queries = gc_dual_encoder_encode(model, 0, texts, result->queries, options->batch); /* [Nq, D] */
        status = queries ? GC_OK : gc_last_status();
    }
    if (status == GC_OK)
        status = searched_documents(data, options->corpus_limit, first_qrel[result->queries], &docs, &result->documents);
    if (status == GC_OK) status = gc_top_k_init(&result->top, result->queries, options->k);
    if (status == GC_OK) status = search_corpus(model, data, docs, result->documents, queries, options, &result->top);
    if (status == GC_OK) status = measure_all(data, first_qrel, result);
    gc_tensor_release(queries);
    free(texts);
    free(first_qrel);
    free(docs);
    if (status != GC_OK) gc_beir_result_free(result);
    return status;
}

void gc_beir_result_free(gc_beir_result *result) {
    free(result->query_index);
    gc_top_k_free(&result->top);
    *result = (gc_beir_result){0};
}

gc_status gc_beir_run_save(const char *path, const gc_beir *data, const gc_beir_result *result, const char *tag) {
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    const gc_top_k *top = &result->top;
    for (int64_t q = 0; q < result->queries; q++)
        for (int64_t i = 0; i < top->k; i++)
            fprintf(writer.file, "%s Q0 %s %lld %.9g %s\n", data->queries.ids[result->query_index[q]],
                    data->corpus.ids[top->index[q * top->capacity + i]], (long long)(i + 1),
                    (double)top->score[q * top->capacity + i], tag);
    return gc_file_commit(&writer);
}
