/* The text encoder, its gradients and AdamW against PyTorch. tests/make_torch_fixture.py
 * (run by hand with python3-torch) builds the same model in PyTorch for two
 * configurations — post-norm with CLS pooling and erf GELU, pre-norm with masked-mean
 * pooling and tanh GELU — with padded rows, and writes its parameters, inputs, output, the
 * gradient of sum(output * seed) for every parameter, and the parameters after 3 AdamW
 * steps into tests/fixtures/text_encoder_v1.bin (see tests/fixture.h for the format).
 *
 * Tolerances: both sides compute in f32 but sum in different orders (PyTorch's blocked
 * GEMMs and reductions, ours), through ~2 layers of attention and MLP: a relative error of
 * a few 1e-6 per op compounds to ~1e-5 on the output; gradients pass through the same ops
 * twice more, so 1e-4. The bounds below leave a factor of ~10 over what was observed. */
#include "fixture.h"

static gc_text_encoder_config config_for(const char *prefix) {
    bool post = strcmp(prefix, "post") == 0;
    return (gc_text_encoder_config){.vocab = 50, .max_length = 16, .dim = 16, .heads = post ? 4 : 2, .layers = 2,
                                    .hidden = post ? 32 : 24, .projection = 8, .dropout = 0.1, .pre_norm = !post,
                                    .activation = post ? GC_ACT_GELU_ERF : GC_ACT_GELU_TANH,
                                    .pooling = post ? GC_POOL_CLS : GC_POOL_MEAN, .dtype = GC_F32};
}

static char *entry_name(char *buf, size_t size, const char *prefix, const char *kind, const char *name) {
    snprintf(buf, size, "%s.%s%s%s", prefix, kind, name ? "." : "", name ? name : "");
    return buf;
}

/* Copies the fixture's parameters into the encoder's; every one must match by name and shape. */
static void load_params(const gc_param_list *fixture, const char *prefix, const gc_param_list *params) {
    char name[256];
    int expected = 0;
    for (int i = 0; i < fixture->count; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s.param.", prefix);
        expected += strncmp(fixture->items[i].name, head, strlen(head)) == 0;
    }
    CHECK_MSG(expected == params->count, "%s: the fixture has %d parameters, the encoder %d", prefix, expected,
              params->count);
    for (int i = 0; i < params->count; i++) {
        gc_tensor *source = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "param", params->items[i].name));
        REQUIRE(gc_same_shape(source, params->items[i].tensor));
        REQUIRE(gc_copy_(params->items[i].tensor, source) == GC_OK);
    }
}

static gc_tensor *forward_and_backward(gc_text_encoder *encoder, const gc_param_list *fixture, const char *prefix) {
    char name[128];
    gc_tensor *ids = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "input.ids", NULL));
    gc_tensor *mask = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "input.mask", NULL));
    gc_tensor *seed = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "input.seed_grad", NULL));
    gc_tensor *output = gc_text_encoder_forward(encoder, ids, mask, false);
    REQUIRE(output && gc_backward(&output, &seed, 1) == GC_OK);
    return output;
}

static void check_prefix(const gc_param_list *fixture, const char *prefix) {
    char name[256], what[300];
    gc_text_encoder_config config = config_for(prefix);
    gc_text_encoder encoder;
    gc_generator init = {1, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    load_params(fixture, prefix, &params);

    gc_tensor *output = forward_and_backward(&encoder, fixture, prefix);
    snprintf(what, sizeof what, "%s: output", prefix);
    gc_test_expect_close(gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "expected.output", NULL)), output,
                         1e-5, 1e-4, what);
    gc_tensor_release(output);
    for (int i = 0; i < params.count; i++) {
        snprintf(what, sizeof what, "%s: gradient of %s", prefix, params.items[i].name);
        gc_tensor *want = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "expected.grad", params.items[i].name));
        REQUIRE(gc_grad(params.items[i].tensor));
        gc_test_expect_close(want, gc_grad(params.items[i].tensor), 1e-5, 1e-3, what);
    }

    /* Three AdamW steps from the same start, biases and norms without weight decay. */
    load_params(fixture, prefix, &params);
    gc_adamw optimizer;
    REQUIRE(gc_adamw_init(&optimizer, &params, 1e-2, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    for (int step = 0; step < 3; step++) {
        gc_param_list_zero_grad(&params);
        gc_tensor_release(forward_and_backward(&encoder, fixture, prefix));
        REQUIRE(gc_adamw_step(&optimizer) == GC_OK);
    }
    for (int i = 0; i < params.count; i++) {
        snprintf(what, sizeof what, "%s: %s after 3 AdamW steps", prefix, params.items[i].name);
        gc_tensor *want = gc_fixture_get(fixture, entry_name(name, sizeof name, prefix, "expected.adamw", params.items[i].name));
        /* The key projection's bias adds q . b to every score of a query, which softmax
         * ignores: its gradient is 0 in exact arithmetic and rounding noise (~1e-9) in both
         * implementations. AdamW normalises that noise into steps of about lr each whose signs
         * differ between the two: after 3 steps each side is within ~3 lr of the start, so
         * the two are held within 6 lr of each other; every other parameter must match. */
        bool zero_gradient = strstr(params.items[i].name, "attention.key.bias") != NULL;
        gc_test_expect_close(want, params.items[i].tensor, zero_gradient ? 6 * 1e-2 : 1e-5, zero_gradient ? 0 : 1e-4, what);
    }
    gc_adamw_free(&optimizer);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
}

int main(void) {
    gc_param_list fixture = gc_fixture_load(GC_TEST_FIXTURES "/text_encoder_v1.bin");
    check_prefix(&fixture, "post");
    check_prefix(&fixture, "pre");
    gc_param_list_free(&fixture);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
