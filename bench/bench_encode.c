/* Encoding speed of a pretrained model folder, for bench/compare_encode.py: the latency of
 * encoding one text at a time, or the throughput of encoding texts in batches, tokenization
 * included (gc_encode_texts_with, as `gradcache encode` runs it). GC_NUM_THREADS sets the
 * threads. Prints "key value" lines; --out writes the embeddings (TSV) for the agreement check.
 *   bench_encode --model DIR --texts FILE [--batch B] [--count N] [--max-length T] [--out FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

typedef struct options {
    const char *model, *texts, *out;
    int64_t batch, count, max_length;
} options;

static int usage(const char *program) {
    fprintf(stderr, "usage: %s --model DIR --texts FILE [--batch B (0: one text at a time, timed each)] [--count N] "
                    "[--max-length T] [--out FILE]\n", program);
    return 2;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){.batch = 0, .count = 100, .max_length = 128};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--model") == 0) o->model = value;
        else if (strcmp(flag, "--texts") == 0) o->texts = value;
        else if (strcmp(flag, "--out") == 0) o->out = value;
        else if (strcmp(flag, "--batch") == 0) o->batch = atoll(value);
        else if (strcmp(flag, "--count") == 0) o->count = atoll(value);
        else if (strcmp(flag, "--max-length") == 0) o->max_length = atoll(value);
        else return usage(argv[0]);
    }
    if (argc % 2 == 0 || !o->model || !o->texts || o->batch < 0 || o->count < 1 || o->max_length < 2)
        return usage(argv[0]);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    if (parse(argc, argv, &o)) return 2;
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_text_lines lines;
    if (gc_pretrained_load(o.model, gc_cpu(), &encoder, &tokenizer, NULL) != GC_OK ||
        gc_text_lines_read(o.texts, &lines) != GC_OK) {
        fprintf(stderr, "bench_encode: %s\n", gc_last_error());
        return 1;
    }
    int64_t count = o.count < lines.count ? o.count : lines.count;
    const char *const *texts = (const char *const *)lines.texts;
    gc_encode_options options = {.max_length = o.max_length, .batch = o.batch ? o.batch : 1};
    /* warm-up, a batch's worth (8 texts at least): the thread pool, the block cache, the
     * weights' packed panels */
    int64_t warm = o.batch > 8 ? o.batch : 8;
    gc_tensor *embeddings = gc_encode_texts_with(&encoder, tokenizer, texts, count < warm ? count : warm, &options);
    gc_tensor_release(embeddings);
    double *seconds = malloc((size_t)count * sizeof *seconds), start = gc_seconds();
    if (o.batch) {
        embeddings = gc_encode_texts_with(&encoder, tokenizer, texts, count, &options);
        double total = gc_seconds() - start;
        printf("texts %lld\nbatch %lld\ntexts_per_s %.2f\n", (long long)count, (long long)o.batch, count / total);
    } else { /* one text at a time, each timed: a program embedding queries as they come */
        embeddings = gc_empty(GC_SHAPE(count, encoder.config.dim), GC_F32, gc_cpu());
        for (int64_t i = 0; i < count && embeddings; i++) {
            double begin = gc_seconds();
            gc_tensor *one = gc_encode_texts_with(&encoder, tokenizer, texts + i, 1, &options);
            seconds[i] = gc_seconds() - begin;
            gc_tensor *row = gc_slice0(embeddings, i, i + 1);
            bool copied = one && gc_copy_(row, one) == GC_OK;
            gc_tensor_release(row);
            gc_tensor_release(one);
            if (!copied) { /* the error is reported below */
                gc_tensor_release(embeddings);
                embeddings = NULL;
            }
        }
        double mean = (gc_seconds() - start) / count;
        printf("texts %lld\nbatch 1\nlatency_median_ms %.3f\nlatency_mean_ms %.3f\n", (long long)count,
               gc_median(seconds, (int)count) * 1e3, mean * 1e3);
    }
    if (!embeddings || (o.out && gc_embeddings_save(o.out, embeddings, GC_EMBEDDINGS_TSV) != GC_OK)) {
        fprintf(stderr, "bench_encode: %s\n", gc_last_error());
        return 1;
    }
    gc_tensor_release(embeddings);
    free(seconds);
    gc_text_lines_free(&lines);
    gc_text_encoder_free(&encoder);
    gc_tokenizer_free(tokenizer);
    gc_shutdown();
    return 0;
}
