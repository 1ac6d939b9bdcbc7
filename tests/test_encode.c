/* Embedding a corpus (gradcache/train.h, gradcache/pretrained.h): gc_encode_texts_with gives
 * each text the same vector, bit for bit, whatever the batch size and the other texts (the
 * texts are taken in order of length and put back; a padded key weighs exactly 0), reports
 * progress, and leaves nothing behind; the line reader and the TSV and safetensors writers.
 *
 * Tolerance: none. Batching must not change a bit (see above), and "%.9g" prints every f32
 * so that it reads back exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* Texts of many lengths, out of length order, one longer than max_length, one empty. */
static const char *const texts[] = {
    "a long text of many words that goes on past the maximum length of the test by far, far, far",
    "short", "", "a text of middling length", "x", "another short one", "the cat sat on the mat", "zz",
    "a text of middling length",
};
enum { COUNT = sizeof texts / sizeof *texts };

typedef struct progress_log {
    int64_t calls, last_done, last_count;
    bool increasing;
} progress_log;

static void log_progress(void *context, int64_t done, int64_t count) {
    progress_log *log = context;
    log->increasing = log->increasing && done > log->last_done;
    log->calls++;
    log->last_done = done;
    log->last_count = count;
}

/* texts (COUNT of them, or fewer) encoded up to max_length tokens, alone and in batches. */
static void check_batch_independent(const char *const *texts, int count, int64_t max_length) {
    gc_text_encoder_config config = gc_model_preset(0, max_length);
    gc_dual_encoder model;
    REQUIRE(gc_dual_encoder_init(&model, &config, true, cpu, 3) == GC_OK);
    const gc_text_encoder *encoder = gc_dual_encoder_tower(&model, 0);
    size_t start = gc_memory_get_stats(cpu).live_bytes;
    gc_tensor *one_by_one[COUNT];
    for (int i = 0; i < count; i++)
        one_by_one[i] = gc_encode_texts(encoder, model.tokenizer, texts + i, 1, max_length, 1);
    int64_t batches[] = {1, 2, 4, count};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        progress_log log = {.increasing = true};
        gc_encode_options options = {.max_length = max_length, .batch = batches[b], .progress = log_progress,
                                     .progress_context = &log};
        gc_tensor *all = gc_encode_texts_with(encoder, model.tokenizer, texts, count, &options); /* [count, D] */
        REQUIRE(all && all->shape[0] == count);
        for (int i = 0; i < count; i++) {
            gc_tensor *row = gc_slice0(all, i, i + 1);
            CHECK_MSG(one_by_one[i] && memcmp(gc_data(row), gc_data(one_by_one[i]), gc_nbytes(row)) == 0,
                      "batches of %lld: text %d is not the vector it has alone", (long long)batches[b], i);
            gc_tensor_release(row);
        }
        int64_t want_calls = (count + batches[b] - 1) / batches[b];
        CHECK_MSG(log.calls == want_calls && log.increasing && log.last_done == count && log.last_count == count,
                  "batches of %lld: %lld progress calls, want %lld, the last %lld/%lld", (long long)batches[b],
                  (long long)log.calls, (long long)want_calls, (long long)log.last_done, (long long)log.last_count);
        gc_tensor_release(all);
    }
    /* the same text twice gets the same vector, wherever it is */
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            if (!strcmp(texts[i], texts[j]))
                CHECK_MSG(memcmp(gc_data(one_by_one[i]), gc_data(one_by_one[j]), gc_nbytes(one_by_one[i])) == 0,
                          "texts %d and %d are the same text with different vectors", i, j);
    for (int i = 0; i < count; i++) gc_tensor_release(one_by_one[i]);
    CHECK(gc_memory_get_stats(cpu).live_bytes == start);
    gc_dual_encoder_free(&model);
}

static void test_batch_independent(void) { check_batch_independent(texts, COUNT, 24); }

/* Texts of 160 to 300 words at max length 256 (and short ones beside them): a head's product
 * of scores is T x T x Dh, past the 2^18 multiply-adds above which the composed attention
 * would give it to the BLAS (whose sums group by shape) if the build has one. Inference
 * attention is gc_attention_packed's, the own GEMM at every length, so still no bit moves. */
static void test_batch_independent_long(void) {
    enum { LONG = 4 };
    static char long_texts[LONG][2048];
    const char *const words[LONG] = {"alpha ", "beta ", "gamma ", "delta "};
    const int counts[LONG] = {300, 160, 3, 200};
    const char *pointers[LONG];
    for (int i = 0; i < LONG; i++) {
        long_texts[i][0] = 0;
        for (int w = 0; w < counts[i]; w++) strcat(long_texts[i], words[(i + w) % LONG]);
        pointers[i] = long_texts[i];
    }
    check_batch_independent(pointers, LONG, 256);
}

/* Writes `bytes` to a new temporary file, whose path goes to path[32]. */
static void temporary_with(char path[32], const char *bytes, size_t size) {
    snprintf(path, 32, "/tmp/gc_test_encode_XXXXXX");
    int fd = mkstemp(path);
    REQUIRE(fd >= 0 && write(fd, bytes, size) == (ssize_t)size);
    close(fd);
}

static void test_lines(void) {
    char path[32];
    static const char text[] = "first\r\n\nthird line\nlast without newline";
    temporary_with(path, text, sizeof text - 1);
    gc_text_lines lines;
    REQUIRE(gc_text_lines_read(path, &lines) == GC_OK);
    CHECK(lines.count == 4 && strcmp(lines.texts[0], "first") == 0 && strcmp(lines.texts[1], "") == 0 &&
          strcmp(lines.texts[2], "third line") == 0 && strcmp(lines.texts[3], "last without newline") == 0);
    gc_text_lines_free(&lines);
    unlink(path);

    static const char nul[] = "fine\nbad\0line\n";
    temporary_with(path, nul, sizeof nul - 1);
    CHECK(gc_text_lines_read(path, &lines) == GC_ERR_FORMAT && strstr(gc_last_error(), "line 2 holds a NUL byte"));
    CHECK(lines.count == 0 && lines.texts == NULL);
    unlink(path);

    size_t long_size = GC_TEXT_LINE_MAX + 2;
    char *too_long = malloc(long_size);
    REQUIRE(too_long);
    memset(too_long, 'a', long_size);
    too_long[0] = '\n';
    temporary_with(path, too_long, long_size);
    CHECK(gc_text_lines_read(path, &lines) == GC_ERR_FORMAT && strstr(gc_last_error(), "line 2 is longer than"));
    free(too_long);
    unlink(path);
    CHECK(gc_text_lines_read("/nonexistent/texts.txt", &lines) == GC_ERR_IO &&
          strstr(gc_last_error(), "/nonexistent/texts.txt"));
}

static void test_save(void) {
    const float values[6] = {1.0f / 3, -2.5e-8f, 3.4028235e38f, 0, -1, 0.1f}; /* [2, 3] */
    gc_tensor *embeddings = gc_from_host(values, GC_SHAPE(2, 3), GC_F32, cpu);
    REQUIRE(embeddings);
    char path[32];
    temporary_with(path, "", 0);
    REQUIRE(gc_embeddings_save(path, embeddings, GC_EMBEDDINGS_TSV) == GC_OK);
    FILE *in = fopen(path, "r");
    REQUIRE(in);
    float back[6];
    char separators[6];
    for (int i = 0; i < 6; i++) CHECK(fscanf(in, "%f%c", &back[i], &separators[i]) == 2);
    fclose(in);
    CHECK(memcmp(back, values, sizeof values) == 0);
    CHECK(separators[0] == '\t' && separators[2] == '\n' && separators[5] == '\n');

    REQUIRE(gc_embeddings_save(path, embeddings, GC_EMBEDDINGS_SAFETENSORS) == GC_OK);
    gc_tensor *loaded = gc_zeros(GC_SHAPE(2, 3), GC_F32, cpu);
    gc_param_list list = {0};
    gc_param_list_add(&list, "", "embeddings", loaded, false);
    CHECK(gc_safetensors_load_into(path, &list) == GC_OK && memcmp(gc_data(loaded), values, sizeof values) == 0);
    gc_param_list_free(&list);
    unlink(path);
    RELEASE(embeddings, loaded);
}

int main(void) {
    test_batch_independent();
    test_batch_independent_long();
    test_lines();
    test_save();
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
