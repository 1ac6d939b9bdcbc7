/* --lora-r (gc_trainer_config.lora_*): a run over tests/fixtures/tiny_bert trains the adapters
 * alone -- the base's bytes unchanged, every adapter changed, the checkpoint's parameters and
 * AdamW state the adapters' only -- with GradCache, layer checkpointing, accumulation and the
 * adapters' dropout; stopped and resumed it writes the straight run's adapter folder bit for
 * bit; GradCache logs the plain step's losses; and bad settings are refused in one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint_files.h"
#include "trainer_run.h"

#define TINY_BERT GC_TEST_FIXTURES "/tiny_bert"

static char folder[] = "/tmp/test_trainer_lora_XXXXXX";

/* Four LoRA steps over tiny_bert in folder/name: rank 4 on query and value, dropout on the
 * adapters' inputs, GradCache in chunks of 8, each layer recomputed for backward, two batches
 * of 16 per update. */
static gc_trainer_config lora_run(const char *name, char *out, size_t size) {
    gc_trainer_config config = gc_test_small_run(folder, name, 4, out, size);
    config.init = TINY_BERT;
    config.lora_r = 4;
    config.lora_alpha = 8;
    config.lora_dropout = 0.1;
    config.lora_targets = "query,value";
    config.checkpoint_layers = true;
    config.accumulate = 2;
    return config;
}

static size_t bytes_of(const gc_tensor *t) { return (size_t)gc_numel(t) * gc_dtype_size(t->dtype); }

/* The tensor named `name` in `list`, or NULL. */
static gc_tensor *find(const gc_param_list *list, const char *name) {
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, name) == 0) return list->items[i].tensor;
    return NULL;
}

static void test_only_adapters_learn(void) {
    char out[256];
    gc_trainer_config config = lora_run("straight", out, sizeof out);
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    const gc_dual_encoder *model = gc_trainer_get_info(trainer).model;
    /* 2 layers x {query, value} x {A, B}: the list the optimizer, reducer and checkpoint get */
    CHECK_MSG(model->params.count == 8, "%d parameters train, expected the 8 adapter matrices", model->params.count);
    gc_tensor *start[8] = {0};
    for (int i = 0; i < model->params.count && i < 8; i++) {
        CHECK_MSG(strstr(model->params.items[i].name, ".lora_"), "%s trains", model->params.items[i].name);
        start[i] = gc_clone(model->params.items[i].tensor);
    }
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    for (int i = 0; i < model->params.count && i < 8; i++) {
        gc_tensor *now = model->params.items[i].tensor;
        CHECK_MSG(memcmp(gc_data(now), gc_data(start[i]), bytes_of(now)) != 0, "%s unchanged by 4 steps",
                  model->params.items[i].name);
        gc_tensor_release(start[i]);
    }
    /* the base: every weight the bytes the folder holds */
    gc_dual_encoder base;
    REQUIRE(gc_dual_encoder_from_folder(&base, TINY_BERT, 16, GC_F32, gc_cpu()) == GC_OK);
    gc_param_list trained = {0};
    gc_text_encoder_params(&model->towers[0], "encoder", &trained);
    CHECK(trained.count == base.params.count + 8);
    for (int i = 0; i < base.params.count; i++) {
        gc_tensor *before = base.params.items[i].tensor, *after = find(&trained, base.params.items[i].name);
        CHECK_MSG(after && !gc_requires_grad(after) && memcmp(gc_data(after), gc_data(before), bytes_of(before)) == 0,
                  "the base's %s changed or learns", base.params.items[i].name);
    }
    gc_param_list_free(&trained);
    gc_dual_encoder_free(&base);
    gc_trainer_free(trainer);

    /* the checkpoint: the adapters, AdamW's two moments of each, nothing of the base */
    char path[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", out);
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    int tensors = gc_safetensors_count(file);
    CHECK_MSG(tensors == 3 * 8, "the checkpoint holds %d tensors, expected 24", tensors);
    for (int i = 0; i < tensors; i++)
        CHECK_MSG(strstr(gc_safetensors_name(file, i), ".lora_"), "the checkpoint holds %s", gc_safetensors_name(file, i));
    gc_safetensors_close(file);
}

/* Stopped after step 2 and resumed, the run writes test_only_adapters_learn's adapters; a
 * resumed run with another rank is refused naming both. */
static void test_resume_equals_straight(void) {
    char out[256];
    gc_trainer_config config = lora_run("resumed", out, sizeof out);
    config.stop_after = 2;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    config.stop_after = 0;
    config.lora_r = 8;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "written with --lora-r 4, this run has --lora-r 8"), "%s", gc_last_error());
    gc_clear_error();
    config.lora_r = 4;
    REQUIRE(gc_trainer_resume(&config, &trainer) == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    const char *files[] = {"adapter/adapter_model.safetensors", "adapter/adapter_config.json"};
    for (int f = 0; f < 2; f++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/%s", out, files[f]);
        snprintf(b, sizeof b, "%s/straight/%s", folder, files[f]);
        CHECK_MSG(gc_test_same_file_bytes(a, b), "%s differs between the straight and the resumed run", files[f]);
    }
}

/* One chunk per side: the plain step draws the same dropout masks, and f32 sums the same terms
 * in other orders (gc_test_expect_cached_equals_plain's 1e-5). */
static void test_cached_equals_plain(void) {
    char out[256];
    double cached[2];
    gc_trainer_config config = lora_run("cached", out, sizeof out);
    config.steps = 2;
    config.accumulate = 1;
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16;
    gc_test_expect_cached_equals_plain(folder, config, "plain", cached);
}

static void test_refused(void) {
    char out[256];
    gc_trainer_config config = lora_run("refused", out, sizeof out);
    config.init = NULL;
    gc_test_expect_refused(&config, "--lora-r needs --init");
    config = lora_run("refused", out, sizeof out);
    config.lora_targets = NULL;
    gc_test_expect_refused(&config, "--lora-r needs --lora-targets");
    config.lora_targets = "query";
    config.lora_dropout = 1;
    gc_test_expect_refused(&config, "--lora-dropout 1: expected a probability in [0, 1)");
    config.lora_dropout = 0;
    config.lora_alpha = 0;
    gc_test_expect_refused(&config, "--lora-alpha 0: expected a positive, finite number");
    config.lora_alpha = 8;
    config.lora_r = -1;
    gc_test_expect_refused(&config, "--lora-r -1: expected at least 0");
    config.lora_r = 0;
    gc_test_expect_refused(&config, "--lora-alpha, --lora-dropout and --lora-targets need --lora-r");
    config.lora_r = 4;
    config.lora_targets = "q_proj";
    gc_test_expect_refused(&config, "target module 'q_proj' matches no Linear");
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    GC_TEST_CASE(test_only_adapters_learn);
    GC_TEST_CASE(test_resume_equals_straight);
    GC_TEST_CASE(test_cached_equals_plain);
    GC_TEST_CASE(test_refused);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", folder);
    return gc_test_result();
}
