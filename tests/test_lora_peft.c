/* LoRA adapters in PEFT's folder format (nn/pretrained/lora_files.c): the adapters PEFT 0.10 made
 * over tests/fixtures/tiny_bert and tiny_qwen2 (tests/make_lora_fixture.py; Qwen2's on all
 * seven projections) load over their bases and give PeftModel's hidden states, to 1e-5 in f32
 * (a dozen matmuls of 32 terms and two LayerNorms in another summation order: rounding of a few
 * 1e-7 per value, far from the 1e-2 a missing adapter or a wrong scale makes); what the engine
 * saves loads back bitwise; adapters saved in bf16 or f16 widen exactly into f32 ones, an f64
 * file is refused; settings PEFT would compute otherwise (rsLoRA, DoRA, a bias, patterns) are
 * refused naming the field. */
#include <string.h>
#include <sys/stat.h>

#include "check.h"

#define BASE GC_TEST_FIXTURES "/tiny_bert"
#define ADAPTER GC_TEST_FIXTURES "/tiny_bert_lora"

/* GC_LORA_KEEP=DIR keeps what the engine writes, DIR/adapter and DIR/merged, for
 * tests/check_lora_peft.py to load in PEFT and transformers; else a temporary folder. */
static void output_folder(char *dir, size_t size) {
    const char *keep = getenv("GC_LORA_KEEP");
    if (keep) {
        snprintf(dir, size, "%s", keep);
        mkdir(dir, 0777);
        return;
    }
    snprintf(dir, size, "/tmp/gc_lora_XXXXXX");
    REQUIRE(mkdtemp(dir));
}

static void remove_output(const char *dir) {
    if (!getenv("GC_LORA_KEEP")) gc_folder_remove(dir);
}

/* A PEFT adapter fixture: the base, the adapter, PeftModel's states, what the adapter holds */
typedef struct peft_fixture {
    const char *base, *adapter, *reference;
    int r;
    double alpha, dropout;
    int tensors;                    /* in adapter_model.safetensors, as the engine saves it */
    const char *first_name, *last_name; /* two of them */
} peft_fixture;

static const peft_fixture bert_fixture = {
    BASE, ADAPTER, GC_TEST_FIXTURES "/lora_bert_v1.safetensors", 4, 8, 0.1,
    2 * 2 * 6, /* A, B of query, key, value and 3 dense in 2 layers */
    "base_model.model.encoder.layer.0.attention.self.query.lora_A.weight",
    "base_model.model.encoder.layer.1.output.dense.lora_B.weight"};
static const peft_fixture qwen2_fixture = {
    GC_TEST_FIXTURES "/tiny_qwen2", GC_TEST_FIXTURES "/tiny_qwen2_lora",
    GC_TEST_FIXTURES "/lora_qwen2_v1.safetensors", 4, 16, 0.05,
    2 * 7 * 2, /* A, B of 7 projections in 2 layers */
    "base_model.model.layers.0.self_attn.q_proj.lora_A.weight",
    "base_model.model.layers.1.mlp.down_proj.lora_B.weight"};

static gc_text_encoder load_folder(const char *dir) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer = NULL;
    REQUIRE(gc_pretrained_load(dir, gc_cpu(), &encoder, &tokenizer, NULL) == GC_OK);
    gc_tokenizer_free(tokenizer);
    return encoder;
}

static gc_text_encoder load_base(void) { return load_folder(BASE); }

/* The largest |ours - theirs| over the real tokens (padding rows differ: the engine leaves them 0). */
static double hidden_error(const gc_text_encoder *encoder, const gc_safetensors *reference) {
    gc_tensor *ids = gc_safetensors_get(reference, "ids", gc_cpu());
    gc_tensor *mask = gc_safetensors_get(reference, "mask", gc_cpu());
    gc_tensor *want = gc_safetensors_get(reference, "hidden", gc_cpu());
    REQUIRE(ids && mask && want);
    gc_tensor *got = gc_text_encoder_hidden(encoder, ids, mask, false);
    REQUIRE(got && got->ndim == 3 && gc_numel(got) == gc_numel(want));
    const float *g = gc_data(got), *w = gc_data(want), *m = gc_data(mask);
    int64_t tokens = gc_numel(mask), dim = got->shape[2];
    double worst = 0;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t d = 0; m[t] != 0 && d < dim; d++) worst = fmax(worst, fabs((double)g[t * dim + d] - w[t * dim + d]));
    RELEASE(ids, mask, want, got);
    return worst;
}

static bool has_entry(const gc_safetensors *file, const char *name) {
    for (int i = 0; i < gc_safetensors_count(file); i++)
        if (!strcmp(gc_safetensors_name(file, i), name)) return true;
    return false;
}

static void check_peft_parity(const peft_fixture *f) {
    gc_safetensors *reference = NULL;
    REQUIRE(gc_safetensors_open(f->reference, &reference) == GC_OK);
    gc_text_encoder plain = load_folder(f->base);
    double without = hidden_error(&plain, reference);
    CHECK_MSG(without > 1e-2, "%s: the fixture's adapters change the base's states by %g only", f->adapter, without);
    gc_text_encoder_free(&plain);

    gc_text_encoder encoder = load_folder(f->base);
    gc_lora_config config;
    char targets[256];
    REQUIRE(gc_lora_load(f->adapter, &encoder, &config, targets, sizeof targets) == GC_OK);
    CHECK(config.r == f->r && config.alpha == f->alpha && config.dropout == f->dropout);
    CHECK(encoder.layers[1].attention.key.lora && encoder.layers[1].mlp.out.lora && encoder.layers[0].mlp.in.lora);
    double error = hidden_error(&encoder, reference);
    CHECK_MSG(error <= 1e-5, "%s: PEFT's hidden states differ by %g", f->adapter, error);

    /* what the engine saves, loaded back, is the same adapter */
    char parent[256], dir[300];
    output_folder(parent, sizeof parent);
    snprintf(dir, sizeof dir, "%s/adapter", parent);
    mkdir(dir, 0777);
    REQUIRE(gc_lora_save(dir, &encoder, &config, f->base) == GC_OK);
    gc_text_encoder again = load_folder(f->base);
    gc_lora_config config_again;
    char targets_again[256];
    REQUIRE(gc_lora_load(dir, &again, &config_again, targets_again, sizeof targets_again) == GC_OK);
    CHECK(config_again.r == f->r && config_again.alpha == f->alpha && config_again.dropout == f->dropout &&
          !strcmp(targets_again, targets));
    CHECK_MSG(hidden_error(&again, reference) == error, "%s: the saved adapter computes another function", f->adapter);
    gc_safetensors *saved = NULL;
    char path[400];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    REQUIRE(gc_safetensors_open(path, &saved) == GC_OK);
    CHECK(gc_safetensors_count(saved) == f->tensors);
    CHECK(has_entry(saved, f->first_name) && has_entry(saved, f->last_name));
    gc_safetensors_close(saved);
    gc_text_encoder_free(&again);
    remove_output(parent);
    gc_text_encoder_free(&encoder);
    gc_safetensors_close(reference);
}

/* An adapter_config.json of `targets` with `field` set to `value`, and no weights. */
static gc_status load_edited(const char *targets, const char *field, const char *value) {
    char dir[] = "/tmp/gc_lora_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *file = fopen(path, "w");
    REQUIRE(file);
    fprintf(file, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": %s, \"%s\": %s}",
            targets, field, value);
    fclose(file);
    gc_text_encoder encoder = load_base();
    gc_lora_config config;
    char joined[64];
    gc_status status = gc_lora_load(dir, &encoder, &config, joined, sizeof joined);
    gc_text_encoder_free(&encoder);
    gc_folder_remove(dir);
    return status;
}

static void test_refused(void) {
    const char *cases[][3] = {{"use_rslora", "true", "use_rslora"},  {"use_dora", "true", "use_dora"},
                              {"bias", "\"all\"", "bias"},           {"fan_in_fan_out", "true", "fan_in_fan_out"},
                              {"rank_pattern", "{\"query\": 8}", "rank_pattern"},
                              {"peft_type", "\"IA3\"", "peft_type"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gc_status status = load_edited("[\"query\"]", cases[i][0], cases[i][1]);
        CHECK_MSG(status == GC_ERR_FORMAT && strstr(gc_last_error(), cases[i][2]),
                  "%s = %s: status %d, \"%s\"", cases[i][0], cases[i][1], (int)status, gc_last_error());
    }
    /* PEFT reads a string as a regular expression */
    CHECK(load_edited("\".*query\"", "lora_dropout", "0") == GC_ERR_FORMAT && strstr(gc_last_error(), "target_modules"));
    /* a target this encoder lacks */
    CHECK(load_edited("[\"q_proj\"]", "lora_dropout", "0") == GC_ERR_CONFIG && strstr(gc_last_error(), "q_proj"));
    /* a good configuration, and no adapter_model.safetensors */
    CHECK(load_edited("[\"query\"]", "lora_dropout", "0") == GC_ERR_IO);
}

/* The merged encoder (W + (alpha / r) B A, adapters gone) computes what the adapted one did,
 * and saved as a plain model folder it loads without the adapter folder and gives PEFT's
 * states again (f32: the merge rounds each weight once more, 1e-5 still holds). */
static void test_merge(void) {
    gc_safetensors *reference = NULL;
    REQUIRE(gc_safetensors_open(GC_TEST_FIXTURES "/lora_bert_v1.safetensors", &reference) == GC_OK);
    gc_text_encoder encoder = load_base();
    gc_lora_config config;
    char targets[256];
    REQUIRE(gc_lora_load(ADAPTER, &encoder, &config, targets, sizeof targets) == GC_OK);
    REQUIRE(gc_lora_merge_all(&encoder) == GC_OK);
    CHECK(!encoder.layers[0].attention.query.lora && !encoder.layers[1].mlp.out.lora);
    double error = hidden_error(&encoder, reference);
    CHECK_MSG(error <= 1e-5, "merged: PEFT's hidden states differ by %g", error);
    char parent[256], dir[300];
    output_folder(parent, sizeof parent);
    snprintf(dir, sizeof dir, "%s/merged", parent);
    gc_folder_remove(dir); /* a kept folder of an earlier run */
    REQUIRE(gc_pretrained_save(dir, &encoder, NULL, BASE) == GC_OK);
    gc_text_encoder merged;
    gc_tokenizer *tokenizer = NULL;
    REQUIRE(gc_pretrained_load(dir, gc_cpu(), &merged, &tokenizer, NULL) == GC_OK);
    CHECK_MSG(hidden_error(&merged, reference) == error, "the merged folder computes another function");
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&merged);
    remove_output(parent);
    gc_text_encoder_free(&encoder);
    gc_safetensors_close(reference);
}

/* ADAPTER's folder again in `dir`, its tensors saved as `dtype` (PEFT saves adapters in the
 * dtype they trained in: a 16-bit base's, say). */
static void write_adapter_as(const char *dir, gc_dtype dtype) {
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/adapter_config.json", ADAPTER);
    snprintf(to, sizeof to, "%s/adapter_config.json", dir);
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    REQUIRE(in && out);
    char bytes[4096];
    size_t n = fread(bytes, 1, sizeof bytes, in);
    REQUIRE(n > 0 && n < sizeof bytes && fwrite(bytes, 1, n, out) == n);
    fclose(in);
    fclose(out);
    gc_safetensors *file = NULL;
    snprintf(from, sizeof from, "%s/adapter_model.safetensors", ADAPTER);
    REQUIRE(gc_safetensors_open(from, &file) == GC_OK);
    gc_param_list cast = {0};
    for (int i = 0; i < gc_safetensors_count(file); i++) {
        gc_tensor *original = gc_safetensors_get(file, gc_safetensors_name(file, i), gc_cpu());
        gc_tensor *converted = gc_cast(original, dtype);
        REQUIRE(original && converted);
        gc_param_list_add(&cast, "", gc_safetensors_name(file, i), converted, false);
        RELEASE(original, converted); /* the list holds its own reference */
    }
    snprintf(to, sizeof to, "%s/adapter_model.safetensors", dir);
    REQUIRE(gc_safetensors_save_plain(to, &cast, NULL) == GC_OK);
    gc_param_list_free(&cast);
    gc_safetensors_close(file);
}

/* Adapters saved in bf16 or f16 load into the engine's f32 adapters exactly (each value the
 * 16-bit one, widened); an f64 file, which f32 adapters would round, is refused naming the
 * tensor and both dtypes. */
static void test_sixteen_bit_files(void) {
    const gc_dtype narrow[] = {GC_BF16, GC_F16};
    for (size_t k = 0; k < 2; k++) {
        char dir[] = "/tmp/gc_lora_XXXXXX";
        REQUIRE(mkdtemp(dir));
        write_adapter_as(dir, narrow[k]);
        gc_text_encoder reference = load_base(), encoder = load_base();
        gc_lora_config config;
        char targets[256];
        REQUIRE(gc_lora_load(ADAPTER, &reference, &config, targets, sizeof targets) == GC_OK);
        gc_status status = gc_lora_load(dir, &encoder, &config, targets, sizeof targets);
        CHECK_MSG(status == GC_OK, "%s adapters: %s", gc_dtype_name(narrow[k]), gc_last_error());
        gc_param_list want = {0}, got = {0}, want_trainable = {0}, got_trainable = {0};
        gc_text_encoder_params(&reference, "", &want);
        gc_text_encoder_params(&encoder, "", &got);
        gc_param_list_trainable(&want, &want_trainable);
        gc_param_list_trainable(&got, &got_trainable);
        REQUIRE(got_trainable.count == want_trainable.count && got_trainable.count > 0);
        for (int i = 0; status == GC_OK && i < got_trainable.count; i++) {
            gc_tensor *adapter = got_trainable.items[i].tensor;
            gc_tensor *rounded = gc_cast(want_trainable.items[i].tensor, narrow[k]);
            gc_tensor *widened = gc_cast(rounded, GC_F32);
            REQUIRE(rounded && widened);
            CHECK_MSG(adapter->dtype == GC_F32 && !memcmp(gc_data(adapter), gc_data(widened),
                                                          (size_t)gc_numel(adapter) * sizeof(float)),
                      "%s: %s is not the 16-bit value widened", gc_dtype_name(narrow[k]), got_trainable.items[i].name);
            RELEASE(rounded, widened);
        }
        gc_param_list_free(&want), gc_param_list_free(&got);
        gc_param_list_free(&want_trainable), gc_param_list_free(&got_trainable);
        gc_text_encoder_free(&reference);
        gc_text_encoder_free(&encoder);
        gc_folder_remove(dir);
    }
    char dir[] = "/tmp/gc_lora_XXXXXX";
    REQUIRE(mkdtemp(dir));
    write_adapter_as(dir, GC_F64);
    gc_text_encoder encoder = load_base();
    gc_lora_config config;
    char targets[256];
    gc_status status = gc_lora_load(dir, &encoder, &config, targets, sizeof targets);
    CHECK_MSG(status == GC_ERR_FORMAT && strstr(gc_last_error(), "is F64 in the file but F32") &&
                  strstr(gc_last_error(), "loses nothing"),
              "an f64 adapter into f32: status %d, \"%s\"", (int)status, gc_last_error());
    gc_text_encoder_free(&encoder);
    gc_folder_remove(dir);
}

int main(void) {
    check_peft_parity(&qwen2_fixture);
    check_peft_parity(&bert_fixture); /* last: GC_LORA_KEEP's DIR/adapter is tiny_bert's */
    test_merge();
    test_refused();
    test_sixteen_bit_files();
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
