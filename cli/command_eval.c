/* gradcache eval: definition -> word retrieval with a trained model. Every query of the split
 * is encoded with the query tower, every distinct positive with the passage tower, and each
 * query's positive is ranked among all of them by cosine similarity (gc_retrieval_evaluate_pairs,
 * gradcache/train.h). With --beir, a BEIR-format folder instead: the split's judged queries
 * against the whole corpus by exact search, trec_eval's measures (gc_beir_evaluate), and the
 * ranking as a TREC run file (gc_beir_run_save). */
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/train.h"
#include "int_list.h"

#define SUMMARY                                                                                            \
    "Ranks each query's positive among every distinct positive of the split by cosine similarity and prints\n" \
    "Recall@1, Recall@10 and MRR (with --json, one JSON object on stdout instead); with --matryoshka, one\n" \
    "line (or object) per prefix of the embedding, the largest first.\n"                                   \
    "With --beir DIR (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; docs/DATA.md), ranks the whole corpus for\n" \
    "each judged query of the split (default test) by exact search and prints trec_eval's nDCG@10,\n"        \
    "Recall@10, Recall@100, MRR@10 and MAP@100 (docs/TRAIN.md); --run FILE writes the ranking as a TREC\n"    \
    "run file, which trec_eval -m ndcg_cut.10 -m recall.10,100 -m map_cut.100 recomputes them from."

typedef struct eval_flags {
    const char *model, *adapter, *data, *split, *matryoshka, *beir, *run;
    int64_t batch_size, max_length, limit, top_k, block, corpus_limit;
    int device, weight_packing;
    bool json;
} eval_flags;

/* One line "gradcache eval: ..." on stderr; returns exit_status. */
#define fail(...) cli_fail("eval", __VA_ARGS__)

static int parse_flags(int argc, char **argv, eval_flags *f) {
    *f = (eval_flags){.batch_size = 256, .top_k = 100, .block = 8192};
    cli_flag table[] = {
        {"model", CLI_FLAG_STRING, &f->model, 0, 0, NULL,
         "a run folder, a model folder of the BERT family or a decoder-style embedder (config.json, model.safetensors "
         "or its shards, tokenizer.json; its query prompt before each query), a model file, or a train --lora-r run "
         "folder (its adapter/ over the base folder the adapter names) (required)"},
        CLI_ADAPTER_FLAG(f->adapter),
        {"data", CLI_FLAG_STRING, &f->data, 0, 0, NULL, "a pair file, or a folder holding SPLIT.tsv (required)"},
        {"split", CLI_FLAG_STRING, &f->split, 0, 0, NULL,
         "the file of a --data folder to evaluate on (default dev), or the qrels of --beir (default test)"},
        {"beir", CLI_FLAG_STRING, &f->beir, 0, 0, NULL,
         "a BEIR-format folder to evaluate on instead of --data: trec_eval's measures over its whole corpus"},
        {"run", CLI_FLAG_STRING, &f->run, 0, 0, NULL, "with --beir: write the ranking to this TREC run file"},
        {"top-k", CLI_FLAG_INT, &f->top_k, 100, 1 << 20, NULL,
         "with --beir: documents retrieved per query (at least 100, for Recall@100 and MAP@100)"},
        {"corpus-limit", CLI_FLAG_INT, &f->corpus_limit, 0, 1e12, NULL,
         "with --beir: search a fixed subset, the first N documents and those judged for the queries (0: all)"},
        {"block", CLI_FLAG_INT, &f->block, 1, 1 << 24, NULL,
         "with --beir: corpus texts encoded and scored at a time (bounds the memory of the search)"},
        {"batch-size", CLI_FLAG_INT, &f->batch_size, 1, 1 << 24, NULL, "texts encoded at a time"},
        {"max-length", CLI_FLAG_INT, &f->max_length, 0, 1 << 20, NULL,
         "tokens per text for a model folder (0: its sentence_bert_config.json max_seq_length, else 128; at most its "
         "positions); a from-scratch model uses its own"},
        {"device", CLI_FLAG_CHOICE, &f->device, 0, 0, cli_device_choices, "where to encode (cuda: the first GPU)"},
        {"limit", CLI_FLAG_INT, &f->limit, 0, 1e12, NULL,
         "evaluate on the first N pairs (with --beir: judged queries) of the split only, a fixed subset (0: all)"},
        {"json", CLI_FLAG_BOOL, &f->json, 0, 0, NULL, "print the metrics as one JSON object"},
        CLI_WEIGHT_PACKING_FLAG(f->weight_packing),
        {"matryoshka", CLI_FLAG_STRING, &f->matryoshka, 0, 0, NULL,
         "evaluate at each of these prefixes of the embedding, e.g. 384,128,64 (encoded once)"},
    };
    int status = cli_flags_parse("eval", SUMMARY, table, (int)(sizeof table / sizeof *table), argc, argv, 2);
    if (status) return status;
    if (!f->model) return fail(2, "--model is required (a run folder or a model.safetensors file)");
    if (f->beir && f->data) return fail(2, "--beir and --data: one dataset at a time");
    if (f->beir && f->matryoshka) return fail(2, "--matryoshka works with --data only");
    if (!f->beir && f->run) return fail(2, "--run needs --beir");
    if (!f->split) f->split = f->beir ? "test" : "dev";
    if (!f->data && !f->beir)
        return fail(2, "--data is required (a pair file, or a folder holding %s.tsv), or --beir", f->split);
    return 0;
}

/* `subset`: the pairs were the first ones of a larger split, which the output says; `dim`: the
 * prefix's length (0: the whole embedding, not named). */
static void print_metrics(const gc_retrieval_metrics *m, int64_t dim, bool subset, const char *path, bool json) {
    if (dim && json) printf("{\"dim\":%lld,", (long long)dim);
    else if (dim) printf("dim %lld: ", (long long)dim);
    if (json)
        printf("%s\"recall_at_1\":%.6f,\"recall_at_10\":%.6f,\"mrr\":%.6f,\"queries\":%lld,\"candidates\":%lld,"
               "\"subset\":%s}\n", dim ? "" : "{", m->recall_at_1, m->recall_at_10, m->mrr, (long long)m->queries,
               (long long)m->candidates, subset ? "true" : "false");
    else
        printf("Recall@1 %.4f  Recall@10 %.4f  MRR %.4f  (%lld queries, %lld candidates%s%s)\n", m->recall_at_1,
               m->recall_at_10, m->mrr, (long long)m->queries, (long long)m->candidates,
               subset ? ": a fixed subset, the first pairs of " : "", subset ? path : "");
}

/* One line on stderr per corpus block. */
static void print_progress(void *user, int64_t done, int64_t total) {
    (void)user;
    fprintf(stderr, "gradcache eval: corpus %lld/%lld encoded and searched\n", (long long)done, (long long)total);
}

static void print_beir(const gc_beir_result *r, const gc_beir *data, const eval_flags *f) {
    const gc_trec_measures *m = &r->mean;
    bool subset = f->limit && r->queries == f->limit;
    if (f->json)
        printf("{\"ndcg_at_10\":%.17g,\"recall_at_10\":%.17g,\"recall_at_100\":%.17g,\"mrr_at_10\":%.17g,"
               "\"map_at_100\":%.17g,\"queries\":%lld,\"documents\":%lld,\"subset\":%s}\n",
               m->ndcg_at_10, m->recall_at_10, m->recall_at_100, m->mrr_at_10, m->map_at_100, (long long)r->queries,
               (long long)r->documents, subset ? "true" : "false");
    else
        printf("nDCG@10 %.4f  Recall@10 %.4f  Recall@100 %.4f  MRR@10 %.4f  MAP@100 %.4f  (%lld %s queries%s, "
               "%lld documents%s)\n", m->ndcg_at_10, m->recall_at_10, m->recall_at_100, m->mrr_at_10, m->map_at_100,
               (long long)r->queries, f->split, subset ? ": the first judged ones" : "", (long long)r->documents,
               r->documents < data->corpus.count ? ": the first ones and the judged ones" : "");
}

/* eval --beir: read, evaluate, print, write the run file. */
static int eval_beir(const eval_flags *f, gc_dual_encoder *model) {
    gc_beir data;
    gc_beir_result result = {0};
    int status = 0;
    gc_beir_eval_options options = {.k = f->top_k, .batch = f->batch_size, .block = f->block, .limit = f->limit,
                                    .corpus_limit = f->corpus_limit, .progress = print_progress};
    if (gc_beir_read(f->beir, f->split, &data) != GC_OK) return fail(1, "--beir: %s", gc_last_error());
    if (gc_beir_evaluate(model, &data, &options, &result) != GC_OK) status = fail(1, "%s", gc_last_error());
    else if (f->run && gc_beir_run_save(f->run, &data, &result, "gradcache") != GC_OK)
        status = fail(1, "--run: %s", gc_last_error());
    if (status == 0) print_beir(&result, &data, f);
    gc_beir_result_free(&result);
    gc_beir_free(&data);
    return status;
}

int cli_command_eval(int argc, char **argv) {
    eval_flags f;
    int status = parse_flags(argc, argv, &f);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    gc_device device;
    status = cli_device_from_flag("eval", f.device, &device);
    if (status) return status;
    gc_set_weight_packing(f.weight_packing == CLI_PACKING_ON);
    if (f.beir) {
        gc_dual_encoder model = {0};
        if (gc_dual_encoder_load(f.model, f.max_length, device, &model) != GC_OK)
            status = fail(1, "--model: %s", gc_last_error());
        else if (f.adapter && gc_dual_encoder_add_adapter(&model, f.adapter) != GC_OK)
            status = fail(1, "--adapter: %s", gc_last_error());
        else
            status = eval_beir(&f, &model);
        gc_dual_encoder_free(&model);
        return status;
    }
    char *data_path = gc_data_path(f.data, f.split);
    gc_dual_encoder model = {0};
    gc_pairs pairs = {0};
    cli_int_list dims = {.count = 1}; /* {0}: the whole embedding */
    if (f.matryoshka && cli_int_list_parse("eval", "matryoshka", f.matryoshka, 1, 1 << 20, &dims)) return 2;
    gc_retrieval_metrics metrics[CLI_INT_LIST_MAX];
    if (gc_dual_encoder_load(f.model, f.max_length, device, &model) != GC_OK) {
        status = cli_fail_model("eval");
    } else if (f.adapter && gc_dual_encoder_add_adapter(&model, f.adapter) != GC_OK) {
        status = fail(1, "--adapter: %s", gc_last_error());
    } else if (gc_pairs_read(data_path, &pairs) != GC_OK) {
        status = fail(1, "--data: %s", gc_last_error());
    } else {
        bool subset = f.limit && f.limit < pairs.count;
        int64_t count = subset ? f.limit : pairs.count;
        if (gc_retrieval_evaluate_pairs_at(&model, &pairs, count, f.batch_size, dims.values, dims.count, metrics) !=
            GC_OK)
            status = fail(1, "%s", gc_last_error());
        for (int j = dims.count - 1; j >= 0 && status == 0; j--) /* the largest prefix first */
            print_metrics(&metrics[j], dims.values[j], subset, data_path, f.json);
    }
    gc_pairs_free(&pairs);
    gc_dual_encoder_free(&model);
    free(data_path);
    return status;
}
