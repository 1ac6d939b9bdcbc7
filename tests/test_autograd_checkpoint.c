/* gc_checkpoint itself (gradcache/autograd.h): central differences through checkpointed
 * encoder layers with dropout on; an input returned as is; no node without a graph to build;
 * a recompute that changes its output, and bad arguments, stop the program. */
#include "check.h"

enum { VOCAB = 20, LENGTH = 5, BATCH = 2 };

typedef struct encoder_call {
    gc_text_encoder *encoder;
    gc_tensor *ids, *mask; /* i32 [BATCH, LENGTH], f64 [BATCH, LENGTH] */
} encoder_call;

/* The same dropout masks at every call: the check differentiates one function. */
static gc_tensor *encode(void *context) {
    encoder_call *call = context;
    gc_manual_seed(3);
    return gc_text_encoder_forward(call->encoder, call->ids, call->mask, true);
}

/* Every parameter, the token table's gradient coming through every layer's input. */
static void test_gradcheck_through_layers(void) {
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 8, .heads = 2, .layers = 2,
                                     .hidden = 12, .dropout = 0.2, .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN, .dtype = GC_F64};
    gc_generator init = {8, 0};
    gc_text_encoder encoder;
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    encoder.checkpoint_layers = true;
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    gc_tensor *ids = gc_test_random_in(GC_SHAPE(BATCH, LENGTH), GC_I32, 0, VOCAB, 4);
    double mask_host[BATCH * LENGTH] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    gc_tensor *mask = gc_from_host(mask_host, GC_SHAPE(BATCH, LENGTH), GC_F64, gc_cpu());
    encoder_call call = {&encoder, ids, mask};
    gc_gradcheck_options options = {.stride = 3, .seed = 17};
    for (int i = 0; i < params.count; i++) {
        gc_gradcheck_report r;
        REQUIRE(gc_gradcheck(encode, &call, &params.items[i].tensor, 1, &options, &r) == GC_OK);
        CHECK_MSG(r.failed == 0 && r.checked > 0, "%s: %lld of %lld elements differ, the worst %lld: analytic %.12g, "
                  "numeric %.12g", params.items[i].name, (long long)r.failed, (long long)r.checked,
                  (long long)r.worst_index, r.worst_analytic, r.worst_numeric);
    }
    RELEASE(ids, mask);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
}

static gc_tensor *identity(gc_tensor *const *inputs, int count, const void *state, bool recompute) {
    (void)count, (void)state, (void)recompute;
    return gc_tensor_retain(inputs[0]);
}

/* The node goes on a new view, so the input stays a leaf and gets the seed itself. */
static void test_input_returned(void) {
    gc_tensor *x = gc_test_random(GC_SHAPE(3, 4), GC_F64, 1), *seed = gc_test_random(GC_SHAPE(3, 4), GC_F64, 2);
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_checkpoint(identity, NULL, 0, &x, 1);
    CHECK(y != x && gc_is_leaf(x) && gc_requires_grad(y) && !gc_is_leaf(y));
    REQUIRE(gc_backward(&y, &seed, 1) == GC_OK);
    REQUIRE(gc_grad(x));
    gc_test_expect_close(seed, gc_grad(x), 0, 0, "the gradient of an input returned as is");
    RELEASE(x, seed, y);
}

static gc_tensor *doubled(gc_tensor *const *inputs, int count, const void *state, bool recompute) {
    (void)count, (void)state, (void)recompute;
    return gc_mul_scalar(inputs[0], 2);
}

/* Under no-grad, or with no input needing a gradient, fn runs once and leaves no node. */
static void test_no_graph_to_build(void) {
    gc_tensor *x = gc_test_random(GC_SHAPE(3, 4), GC_F64, 1), *constant = gc_test_random(GC_SHAPE(3, 4), GC_F64, 2);
    gc_set_requires_grad(x, true);
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *y = gc_checkpoint(doubled, NULL, 0, &x, 1);
    gc_set_grad_enabled(previous);
    gc_tensor *z = gc_checkpoint(doubled, NULL, 0, &constant, 1);
    CHECK(!gc_requires_grad(y) && !gc_requires_grad(z));
    RELEASE(x, constant, y, z);
}

static gc_tensor *shrinking(gc_tensor *const *inputs, int count, const void *state, bool recompute) {
    (void)count, (void)state;
    return recompute ? gc_slice0(inputs[0], 0, 1) : gc_mul_scalar(inputs[0], 2);
}

static void backward_through_shrinking(void *arg) {
    (void)arg;
    gc_tensor *x = gc_test_random(GC_SHAPE(3, 4), GC_F64, 1);
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_checkpoint(shrinking, NULL, 0, &x, 1);
    gc_tensor *loss = gc_sum_all(y);
    gc_backward(&loss, NULL, 1);
}

static void checkpoint_of_nothing(void *arg) {
    (void)arg;
    gc_tensor *x = NULL;
    gc_checkpoint(doubled, NULL, 0, &x, 0);
}

static void test_programmer_errors(void) {
    gc_test_expect_fatal(backward_through_shrinking, NULL, "the recompute gave [1, 4] f64");
    gc_test_expect_fatal(checkpoint_of_nothing, NULL, "checkpoint: needs a function, 1 to 8 inputs");
}

int main(void) {
    GC_TEST_CASE(test_gradcheck_through_layers);
    GC_TEST_CASE(test_input_returned);
    GC_TEST_CASE(test_no_graph_to_build);
    GC_TEST_CASE(test_programmer_errors);
    gc_shutdown();
    return gc_test_result();
}
