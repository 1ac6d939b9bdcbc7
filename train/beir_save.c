/* Judged query/document pairs as a BEIR-format folder (gc_beir_save_judged, gradcache/train.h):
 * queries and documents made distinct (gc_distinct_texts), each distinct (query, document)
 * judged once with grade 1, the split by a hash of the query's text (gc_wordnet_split_unit),
 * so a query is in one split only. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "base/json.h"
#include "base/write_together.h"

enum { TRAIN, DEV, TEST, SPLITS };
static const char *const qrels_names[SPLITS] = {"qrels/train.tsv", "qrels/dev.tsv", "qrels/test.tsv"};

typedef struct judgement {
    int64_t query, doc;
} judgement;

static int compare_judgements(const void *a, const void *b) {
    const judgement *x = a, *y = b;
    if (x->query != y->query) return x->query < y->query ? -1 : 1;
    return (x->doc > y->doc) - (x->doc < y->doc);
}

/* One jsonl line {"_id": "<prefix><i>", ["title": "",] "text": text}. */
static void append_entry(gc_json_text *out, char prefix, int64_t i, const char *text, bool title) {
    char id[32];
    snprintf(id, sizeof id, "%c%lld", prefix, (long long)i);
    gc_json_append(out, "{\"_id\":", 7);
    gc_json_append_string(out, id);
    if (title) gc_json_append(out, ",\"title\":\"\"", 11);
    gc_json_append(out, ",\"text\":", 8);
    gc_json_append_string(out, text);
    gc_json_append(out, "}\n", 2);
}

static void append_qrel(gc_json_text *out, const judgement *j) {
    char line[64];
    int length = snprintf(line, sizeof line, "q%lld\td%lld\t1\n", (long long)j->query, (long long)j->doc);
    gc_json_append(out, line, (size_t)length);
}

/* The five files' texts from the judged pairs' queries and documents [n] (and each pair's split). */
static gc_status build_texts(const char *const *queries, const char *const *documents, int64_t n, double held_out,
                             uint64_t seed, gc_json_text texts[2 + SPLITS], gc_beir_counts *counts) {
    int64_t *query = malloc((size_t)n * sizeof *query), *doc = malloc((size_t)n * sizeof *doc);
    judgement *judged = malloc((size_t)n * sizeof *judged);
    if (!query || !doc || !judged) gc_fatal("beir_save: out of host memory for %lld pairs", (long long)n);
    const char **distinct_queries, **distinct_documents;
    counts->queries = gc_distinct_texts(queries, n, &distinct_queries, query);
    counts->documents = gc_distinct_texts(documents, n, &distinct_documents, doc);
    for (int64_t i = 0; i < counts->documents; i++) append_entry(&texts[0], 'd', i, distinct_documents[i], true);
    for (int64_t i = 0; i < counts->queries; i++) append_entry(&texts[1], 'q', i, distinct_queries[i], false);
    for (int64_t i = 0; i < n; i++) judged[i] = (judgement){query[i], doc[i]};
    qsort(judged, (size_t)n, sizeof *judged, compare_judgements);
    for (int s = 0; s < SPLITS; s++) gc_json_append(&texts[2 + s], "query-id\tcorpus-id\tscore\n", 25);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 && compare_judgements(&judged[i], &judged[i - 1]) == 0) continue; /* judged twice */
        double unit = gc_wordnet_split_unit(distinct_queries[judged[i].query], seed);
        int split = unit < held_out ? TEST : unit < 2 * held_out ? DEV : TRAIN;
        append_qrel(&texts[2 + split], &judged[i]);
        counts->qrels[split]++;
    }
    free(query);
    free(doc);
    free(judged);
    free(distinct_queries);
    free(distinct_documents);
    for (int f = 0; f < 2 + SPLITS; f++)
        if (texts[f].failed) gc_fatal("beir_save: out of host memory for the files");
    for (int s = 0; s < SPLITS; s++)
        if (counts->qrels[s] == 0) {
            gc_set_error(GC_ERR_FORMAT, "%s would have no judgement; try another --held-out", qrels_names[s]);
            return GC_ERR_FORMAT;
        }
    return GC_OK;
}

gc_status gc_beir_save_judged(const char *folder, const char *const *queries, const char *const *documents, int64_t n,
                              double held_out, uint64_t seed, gc_beir_counts *counts) {
    *counts = (gc_beir_counts){0};
    gc_json_text texts[2 + SPLITS] = {{0}};
    gc_status status = build_texts(queries, documents, n, held_out, seed, texts, counts);
    char *qrels_folder = gc_path_join(folder, "qrels");
    if (status == GC_OK) status = gc_make_directories(qrels_folder);
    if (status == GC_OK) {
        char *paths[2 + SPLITS] = {gc_path_join(folder, "corpus.jsonl"), gc_path_join(folder, "queries.jsonl")};
        const char *bytes[2 + SPLITS];
        size_t sizes[2 + SPLITS];
        for (int s = 0; s < SPLITS; s++) paths[2 + s] = gc_path_join(folder, qrels_names[s]);
        for (int f = 0; f < 2 + SPLITS; f++) bytes[f] = texts[f].bytes, sizes[f] = texts[f].length;
        status = gc_write_together(2 + SPLITS, paths, bytes, sizes);
        for (int f = 0; f < 2 + SPLITS; f++) free(paths[f]);
    }
    free(qrels_folder);
    for (int f = 0; f < 2 + SPLITS; f++) gc_json_text_free(&texts[f]);
    return status;
}
