/* WordNet's pairs as a BEIR-format folder (see gradcache/train.h): the pair texts of both
 * sides read back with the pair parser, definitions and words made distinct
 * (gc_distinct_texts), each distinct (definition, word) judged once, the split by the
 * definition's unit (gc_wordnet_split_unit). */
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "nn/io/json.h"
#include "write_together.h"

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

/* The five files' texts from the pairs' definitions and words [n] (and each pair's split). */
static gc_status build_texts(const char **definitions, const char **words, int64_t n, double held_out, uint64_t seed,
                             gc_json_text texts[2 + SPLITS], gc_wordnet_beir_counts *counts) {
    int64_t *query = malloc((size_t)n * sizeof *query), *doc = malloc((size_t)n * sizeof *doc);
    judgement *judged = malloc((size_t)n * sizeof *judged);
    if (!query || !doc || !judged) gc_fatal("wordnet_beir: out of host memory for %lld pairs", (long long)n);
    const char **distinct_definitions, **distinct_words;
    counts->queries = gc_distinct_texts(definitions, n, &distinct_definitions, query);
    counts->documents = gc_distinct_texts(words, n, &distinct_words, doc);
    for (int64_t i = 0; i < counts->documents; i++) append_entry(&texts[0], 'd', i, distinct_words[i], true);
    for (int64_t i = 0; i < counts->queries; i++) append_entry(&texts[1], 'q', i, distinct_definitions[i], false);
    for (int64_t i = 0; i < n; i++) judged[i] = (judgement){query[i], doc[i]};
    qsort(judged, (size_t)n, sizeof *judged, compare_judgements);
    for (int s = 0; s < SPLITS; s++) gc_json_append(&texts[2 + s], "query-id\tcorpus-id\tscore\n", 25);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 && compare_judgements(&judged[i], &judged[i - 1]) == 0) continue; /* two synsets, one definition */
        double unit = gc_wordnet_split_unit(distinct_definitions[judged[i].query], seed);
        int split = unit < held_out ? TEST : unit < 2 * held_out ? DEV : TRAIN;
        append_qrel(&texts[2 + split], &judged[i]);
        counts->qrels[split]++;
    }
    free(query);
    free(doc);
    free(judged);
    free(distinct_definitions);
    free(distinct_words);
    for (int f = 0; f < 2 + SPLITS; f++)
        if (texts[f].failed) gc_fatal("wordnet_beir: out of host memory for the files");
    for (int s = 0; s < SPLITS; s++)
        if (counts->qrels[s] == 0) {
            gc_set_error(GC_ERR_FORMAT, "%s would have no judgement; try another --held-out", qrels_names[s]);
            return GC_ERR_FORMAT;
        }
    return GC_OK;
}

gc_status gc_wordnet_beir_save(const char *folder, const gc_wordnet_split *split, double held_out, uint64_t seed,
                               gc_wordnet_beir_counts *counts) {
    *counts = (gc_wordnet_beir_counts){0};
    gc_pairs sides[2] = {{0}, {0}};
    const gc_wordnet_side *from[2] = {&split->train, &split->dev};
    gc_status status = GC_OK;
    for (int s = 0; s < 2 && status == GC_OK; s++)
        if (from[s]->size) status = gc_pairs_parse(from[s]->text, from[s]->size, "wordnet", &sides[s]);
    int64_t n = sides[0].count + sides[1].count;
    const char **definitions = malloc((size_t)(n + 1) * sizeof *definitions);
    const char **words = malloc((size_t)(n + 1) * sizeof *words);
    if (!definitions || !words) gc_fatal("wordnet_beir: out of host memory for %lld pairs", (long long)n);
    int64_t i = 0;
    for (int s = 0; s < 2; s++)
        for (int64_t e = 0; e < sides[s].count; e++, i++) {
            definitions[i] = gc_pairs_text(&sides[s], e, 0);
            words[i] = gc_pairs_text(&sides[s], e, 1);
        }
    gc_json_text texts[2 + SPLITS] = {{0}};
    if (status == GC_OK) status = build_texts(definitions, words, n, held_out, seed, texts, counts);
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
    free(definitions);
    free(words);
    gc_pairs_free(&sides[0]);
    gc_pairs_free(&sides[1]);
    return status;
}
