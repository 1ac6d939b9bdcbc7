/* The autograd engine's behaviour: graph shapes (diamonds, reuse, long chains, several
 * outputs), accumulation, grad mode, detach, hooks, the errors of misuse, and what stays
 * alive in memory. Values are checked against gradients worked out by hand. */
#include "check.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

static gc_tensor *leaf(const double *values, int ndim, const int64_t *shape) {
    gc_tensor *t = gc_from_host(values, ndim, shape, GC_F64, cpu);
    REQUIRE(t);
    gc_set_requires_grad(t, true);
    return t;
}

static double grad_at(const gc_tensor *t, int64_t i) {
    gc_tensor *grad = gc_grad(t);
    if (!grad) return NAN;
    double *values = malloc(sizeof(double) * (size_t)gc_numel(grad));
    REQUIRE(values);
    gc_to_host_f64(grad, values);
    double value = values[i];
    free(values);
    return value;
}

static void backward_scalar(gc_tensor *loss) { REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK); }

/* y = 2x; z = sum((y + 1) * (3y)) = sum(3y^2 + 3y) -> dz/dx = 2 (6y + 3) = 24x + 6 */
static void test_diamond(void) {
    gc_tensor *x = leaf((const double[]){1, -2}, GC_SHAPE(2));
    gc_tensor *y = gc_mul_scalar(x, 2);
    gc_tensor *a = gc_add_scalar(y, 1);
    gc_tensor *b = gc_mul_scalar(y, 3);
    gc_tensor *ab = gc_mul(a, b);
    gc_tensor *z = gc_sum_all(ab);
    backward_scalar(z);
    CHECK(grad_at(x, 0) == 30 && grad_at(x, 1) == -42);
    gc_tensor *all[] = {x, y, a, b, ab, z};
    for (int i = 0; i < 6; i++) gc_tensor_release(all[i]);
}

/* The same tensor twice in one op: d sum(x*x)/dx = 2x. Then a second forward and
 * backward add into the same .grad: 4x. */
static void test_reuse_and_accumulation(void) {
    gc_tensor *x = leaf((const double[]){3, -1, 0.5}, GC_SHAPE(3));
    for (int pass = 1; pass <= 2; pass++) {
        gc_tensor *square = gc_mul(x, x);
        gc_tensor *z = gc_sum_all(square);
        backward_scalar(z);
        CHECK(grad_at(x, 0) == 6 * pass && grad_at(x, 1) == -2 * pass && grad_at(x, 2) == 1 * pass);
        gc_tensor_release(square);
        gc_tensor_release(z);
    }
    gc_zero_grad(x);
    CHECK(gc_grad(x) == NULL);
    gc_tensor_release(x);
}

static void test_grad_mode(void) {
    gc_tensor *x = leaf((const double[]){1, 2}, GC_SHAPE(2));
    CHECK(gc_grad_enabled());
    bool outer = gc_set_grad_enabled(false);
    CHECK(outer && !gc_grad_enabled());
    gc_tensor *untracked = gc_mul(x, x);
    bool inner = gc_set_grad_enabled(true); /* grad scope inside a no-grad scope, and back */
    gc_tensor *tracked = gc_mul(x, x);
    gc_set_grad_enabled(inner);
    CHECK(!gc_grad_enabled());
    gc_set_grad_enabled(outer);
    CHECK(gc_grad_enabled());
    CHECK(!gc_requires_grad(untracked) && gc_is_leaf(untracked));
    CHECK(gc_requires_grad(tracked) && !gc_is_leaf(tracked));
    gc_tensor *detached = gc_detach(tracked);
    CHECK(!gc_requires_grad(detached) && gc_data(detached) == gc_data(tracked));
    gc_tensor *all[] = {x, untracked, tracked, detached};
    for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
}

/* A tensor that does not require a gradient never gets one, even next to one that does. */
static void test_no_grad_leaf(void) {
    gc_tensor *data = gc_from_host((const double[]){2, 3}, GC_SHAPE(2), GC_F64, cpu);
    gc_tensor *w = leaf((const double[]){5, 7}, GC_SHAPE(2));
    gc_tensor *product = gc_mul(data, w);
    gc_tensor *z = gc_sum_all(product);
    backward_scalar(z);
    CHECK(gc_grad(data) == NULL && !gc_requires_grad(data));
    CHECK(grad_at(w, 0) == 2 && grad_at(w, 1) == 3);
    gc_tensor *all[] = {data, w, product, z};
    for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
}

/* 10,000 ops in a chain: backward and freeing are iterative, so no stack overflow. */
static void test_long_chain(void) {
    gc_tensor *x = leaf((const double[]){1}, GC_SHAPE(1));
    gc_tensor *h = gc_tensor_retain(x);
    for (int i = 0; i < 10000; i++) {
        gc_tensor *next = gc_mul_scalar(h, 1.0001);
        gc_tensor_release(h);
        h = next;
    }
    backward_scalar(h);
    CHECK_NEAR(grad_at(x, 0), pow(1.0001, 10000), 0, 1e-12); /* f64 product of 10^4 factors */
    gc_tensor_release(h);
    /* A chain released without a backward is freed the same way. */
    h = gc_tensor_retain(x);
    for (int i = 0; i < 10000; i++) {
        gc_tensor *next = gc_add_scalar(h, 1);
        gc_tensor_release(h);
        h = next;
    }
    gc_tensor_release(h);
    gc_tensor_release(x);
}

/* backward(outputs, seeds): y1 = 2x, y2 = x^2 with seeds s1, s2 -> 2 s1 + 2x s2. */
static void test_several_outputs(void) {
    gc_tensor *x = leaf((const double[]){1, 2, 3}, GC_SHAPE(3));
    gc_tensor *y1 = gc_mul_scalar(x, 2);
    gc_tensor *y2 = gc_mul(x, x);
    gc_tensor *s1 = gc_from_host((const double[]){1, 0, -1}, GC_SHAPE(3), GC_F64, cpu);
    gc_tensor *s2 = gc_from_host((const double[]){0.5, 1, 2}, GC_SHAPE(3), GC_F64, cpu);
    REQUIRE(gc_backward((gc_tensor *[]){y1, y2}, (gc_tensor *[]){s1, s2}, 2) == GC_OK);
    CHECK(grad_at(x, 0) == 3 && grad_at(x, 1) == 4 && grad_at(x, 2) == 10);
    /* A leaf is an output of its own: its seed goes straight into .grad. */
    gc_zero_grad(x);
    REQUIRE(gc_backward(&x, &s2, 1) == GC_OK);
    CHECK(grad_at(x, 2) == 2);
    gc_tensor *all[] = {x, y1, y2, s1, s2};
    for (int i = 0; i < 5; i++) gc_tensor_release(all[i]);
}

/* --- hooks: once per backward per leaf, when that leaf's gradient is complete --- */
typedef struct hook_log {
    int calls[2];
    int order[8];
    int n;
    double grad_seen[2];
} hook_log;
static hook_log log_book;

static void record_hook(gc_tensor *leaf, void *which) {
    int id = *(int *)which;
    log_book.calls[id]++;
    log_book.order[log_book.n++] = id;
    if (gc_numel(leaf) == 1) log_book.grad_seen[id] = gc_item(gc_grad(leaf)); /* complete: all contributions in */
}

static void test_hooks(void) {
    static int ids[2] = {0, 1};
    /* z = w1 * (w1 + w2) * w2 as scalars: w1 reached along two paths. */
    gc_tensor *w1 = leaf((const double[]){2}, GC_SHAPE(1));
    gc_tensor *w2 = leaf((const double[]){3}, GC_SHAPE(1));
    gc_add_post_accumulate_hook(w1, record_hook, &ids[0]);
    gc_add_post_accumulate_hook(w2, record_hook, &ids[1]);
    for (int pass = 1; pass <= 2; pass++) {
        gc_tensor *sum = gc_add(w1, w2);
        gc_tensor *left = gc_mul(w1, sum);
        gc_tensor *z = gc_mul(left, w2);
        backward_scalar(z);
        /* dz/dw1 = (w1 + w2) w2 + w1 w2 = 21; dz/dw2 = w1 (w1 + w2) + w1 w2 = 16 */
        CHECK(log_book.calls[0] == pass && log_book.calls[1] == pass);
        CHECK(log_book.grad_seen[0] == 21 * pass && log_book.grad_seen[1] == 16 * pass);
        gc_tensor_release(sum);
        gc_tensor_release(left);
        gc_tensor_release(z);
    }
    /* A leaf no gradient reaches gets no call. */
    gc_tensor *only = gc_mul_scalar(w2, 2);
    gc_tensor *z = gc_sum_all(only);
    backward_scalar(z);
    CHECK(log_book.calls[0] == 2 && log_book.calls[1] == 3);
    gc_tensor *all[] = {w1, w2, only, z};
    for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
}

/* Order: in y = relu(x @ w1) @ w2, the backward reaches w2 before w1. */
static void test_hook_order(void) {
    static int ids[2] = {0, 1};
    log_book = (hook_log){0};
    gc_tensor *x = gc_uniform(GC_SHAPE(4, 3), GC_F64, cpu, -1, 1, 1, 0);
    gc_tensor *w1 = gc_uniform(GC_SHAPE(3, 5), GC_F64, cpu, -1, 1, 2, 0);
    gc_tensor *w2 = gc_uniform(GC_SHAPE(5, 2), GC_F64, cpu, -1, 1, 3, 0);
    gc_set_requires_grad(w1, true);
    gc_set_requires_grad(w2, true);
    gc_add_post_accumulate_hook(w1, record_hook, &ids[0]);
    gc_add_post_accumulate_hook(w2, record_hook, &ids[1]);
    gc_tensor *h = gc_matmul(x, w1, false, false);
    gc_tensor *r = gc_relu(h);
    gc_tensor *y = gc_matmul(r, w2, false, false);
    gc_tensor *z = gc_sum_all(y);
    backward_scalar(z);
    CHECK(log_book.n == 2 && log_book.order[0] == 1 && log_book.order[1] == 0);
    gc_tensor *all[] = {x, w1, w2, h, r, y, z};
    for (int i = 0; i < 7; i++) gc_tensor_release(all[i]);
}

/* --- misuse: one line naming the problem --- */
static void backward_twice(void *unused) {
    (void)unused;
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F64, gc_cpu());
    gc_set_requires_grad(x, true);
    gc_tensor *z = gc_sum_all(gc_mul(x, x));
    gc_backward(&z, NULL, 1);
    gc_backward(&z, NULL, 1);
}
static void backward_vector_without_seed(void *unused) {
    (void)unused;
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F64, gc_cpu());
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_mul_scalar(x, 2);
    gc_backward(&y, NULL, 1);
}
static void backward_without_graph(void *unused) {
    (void)unused;
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F64, gc_cpu());
    gc_backward(&x, NULL, 1);
}
static void requires_grad_on_result(void *unused) {
    (void)unused;
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F64, gc_cpu());
    gc_set_requires_grad(x, true);
    gc_set_requires_grad(gc_mul(x, x), true);
}
static void requires_grad_on_ints(void *unused) {
    (void)unused;
    gc_set_requires_grad(gc_zeros(GC_SHAPE(2), GC_I32, gc_cpu()), true);
}
static void seed_of_wrong_shape(void *unused) {
    (void)unused;
    gc_tensor *x = gc_ones(GC_SHAPE(2), GC_F64, gc_cpu());
    gc_set_requires_grad(x, true);
    gc_tensor *y = gc_mul_scalar(x, 2);
    gc_tensor *seed = gc_ones(GC_SHAPE(3), GC_F64, gc_cpu());
    gc_backward(&y, &seed, 1);
}

/* --- memory --- */

/* A [batch, width] MLP of `depth` layers, forward only under no-grad, freeing each
 * activation as soon as the next exists. Returns the peak bytes above what was live. */
static size_t no_grad_forward_peak(int depth, int64_t batch, int64_t width) {
    gc_tensor *weights[16];
    for (int i = 0; i < depth; i++) {
        weights[i] = gc_uniform(GC_SHAPE(width, width), GC_F32, cpu, -0.1, 0.1, 100 + (uint64_t)i, 0);
        gc_set_requires_grad(weights[i], true);
    }
    gc_tensor *h = gc_uniform(GC_SHAPE(batch, width), GC_F32, cpu, -1, 1, 7, 0);
    bool previous = gc_set_grad_enabled(false);
    gc_memory_reset_peak(cpu);
    size_t base = gc_memory_get_stats(cpu).live_bytes;
    for (int i = 0; i < depth; i++) {
        gc_tensor *linear = gc_matmul(h, weights[i], false, false);
        gc_tensor_release(h);
        h = gc_relu(linear);
        gc_tensor_release(linear);
    }
    size_t peak = gc_memory_get_stats(cpu).peak_bytes - base;
    gc_set_grad_enabled(previous);
    gc_tensor_release(h);
    for (int i = 0; i < depth; i++) gc_tensor_release(weights[i]);
    return peak;
}

static void test_no_grad_memory_is_flat(void) {
    const int64_t batch = 64, width = 128;
    size_t activation = (size_t)(batch * width) * sizeof(float);
    size_t shallow = no_grad_forward_peak(2, batch, width), deep = no_grad_forward_peak(10, batch, width);
    /* The input, a matmul result and its relu: two activations above the input at most. */
    CHECK_MSG(deep == shallow, "peak above base: depth 2 %zu, depth 10 %zu", shallow, deep);
    CHECK_MSG(deep <= 2 * activation, "peak %zu > 2 activations (%zu)", deep, 2 * activation);
}

/* After backward (and releasing the loss), live bytes are the parameters, the input and
 * the gradients: nothing of the graph remains. */
static void test_nothing_remains_after_backward(void) {
    const int64_t batch = 32, width = 64;
    size_t before = gc_memory_get_stats(cpu).live_bytes;
    gc_tensor *x = gc_uniform(GC_SHAPE(batch, width), GC_F32, cpu, -1, 1, 8, 0);
    gc_tensor *w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = gc_uniform(GC_SHAPE(width, width), GC_F32, cpu, -0.1, 0.1, 200 + (uint64_t)i, 0);
        gc_set_requires_grad(w[i], true);
    }
    gc_tensor *h = gc_tensor_retain(x);
    for (int i = 0; i < 3; i++) {
        gc_tensor *linear = gc_matmul(h, w[i], false, false);
        gc_tensor_release(h);
        h = gc_tanh(linear);
        gc_tensor_release(linear);
    }
    gc_tensor *loss = gc_mean_all(h);
    gc_tensor_release(h);
    backward_scalar(loss);
    gc_tensor_release(loss);
    size_t params = 3 * (size_t)(width * width) * sizeof(float), input = (size_t)(batch * width) * sizeof(float);
    size_t live = gc_memory_get_stats(cpu).live_bytes - before;
    CHECK_MSG(live == input + 2 * params, "live %zu, expected input %zu + params %zu + grads %zu", live, input, params,
              params);
    gc_tensor_release(x);
    for (int i = 0; i < 3; i++) gc_tensor_release(w[i]);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before);
}

/* The graph as DOT: loss = sum(relu(x @ w) * sum_last(x)) over leaves x [2, 3] and w [3, 4],
 * x used twice (one leaf, two arrows). Before backward every op shows what it saved; after, the
 * graph is gone but its output's op, which shows that it released what it saved, and the
 * leaves (drawn on their own) show their gradients. The text is the same every time. */
static char *dot_of(gc_tensor *const *outputs, int count) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    REQUIRE(out && gc_autograd_write_dot(out, outputs, count) == GC_OK);
    fclose(out);
    return text;
}

static void cluster_with_bad_id(void *leaf) {
    gc_tensor *t = leaf;
    gc_autograd_write_dot_cluster(stderr, "a b", "", &t, 1);
}

static void test_dot(void) {
    gc_tensor *x = gc_uniform(GC_SHAPE(2, 3), GC_F32, cpu, -1, 1, 1, 0), *w = gc_uniform(GC_SHAPE(3, 4), GC_F32, cpu, -1, 1, 2, 0);
    gc_set_requires_grad(x, true);
    gc_set_requires_grad(w, true);
    gc_tensor *h = gc_matmul(x, w, false, false), *a = gc_relu(h), *x_again = gc_sum_last(x, true);
    gc_tensor *scaled = gc_mul(a, x_again), *loss = gc_sum_all(scaled);
    REQUIRE(loss);
    char *before = dot_of(&loss, 1), *again = dot_of(&loss, 1);
    CHECK(strcmp(before, again) == 0);
    CHECK(strstr(before, "digraph autograd {") && strstr(before, "#0 matmul") && strstr(before, "#1 relu"));
    CHECK(strstr(before, "#2 sum_last") && strstr(before, "#3 mul") && strstr(before, "#4 sum_all"));
    CHECK(strstr(before, "leaf0 -> op2") && strstr(before, "leaf0 -> op0") && strstr(before, "leaf1 -> op0"));
    CHECK(!strstr(before, "leaf2") && strstr(before, "op1 -> op3 [label=\"[2, 4] f32 cpu\"]"));
    CHECK(strstr(before, "[2, 3] f32 cpu\\ngrad: none yet") && strstr(before, "[3, 4] f32 cpu\\ngrad: none yet"));
    CHECK(strstr(before, "#0 matmul\\nsaved for backward: 2 tensors, 72 bytes")); /* x and w */
    CHECK(strstr(before, "op4 -> output0;") && !strstr(before, "backward ran"));
    REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK);
    char *after = dot_of(&loss, 1);
    CHECK(strstr(after, "#4 sum_all\\nbackward ran: saved tensors released") && !strstr(after, "op3"));
    gc_tensor *leaves[2] = {x, w};
    char *grads = dot_of(leaves, 2);
    CHECK(strstr(grads, "[2, 3] f32 cpu\\ngrad: [2, 3] f32 cpu") && strstr(grads, "leaf1 -> output1;"));
    free(grads);
    /* as a cluster of a larger picture: names prefixed, the label's quotes escaped */
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    REQUIRE(out && gc_autograd_write_dot_cluster(out, "step_1", "the \"x\" leaf", leaves, 1) == GC_OK);
    fclose(out);
    CHECK(strstr(text, "subgraph cluster_step_1 {") && strstr(text, "label=\"the \\\"x\\\" leaf\";"));
    CHECK(strstr(text, "step_1leaf0 -> step_1output0;") && !strstr(text, " leaf0"));
    free(text);
    gc_test_expect_fatal(cluster_with_bad_id, x, "autograd_write_dot_cluster: id \"a b\" is not letters");
    free(before);
    free(again);
    free(after);
    RELEASE(x, w, h, a, x_again, scaled, loss);
}

int main(void) {
    test_dot();
    test_diamond();
    test_reuse_and_accumulation();
    test_grad_mode();
    test_no_grad_leaf();
    test_long_chain();
    test_several_outputs();
    test_hooks();
    test_hook_order();
    test_no_grad_memory_is_flat();
    test_nothing_remains_after_backward();
    gc_test_expect_fatal(backward_twice, NULL, "was already consumed by an earlier backward");
    gc_test_expect_fatal(backward_vector_without_seed, NULL, "a seed gradient is needed");
    gc_test_expect_fatal(backward_without_graph, NULL, "does not require a gradient");
    gc_test_expect_fatal(requires_grad_on_result, NULL, "not a leaf");
    gc_test_expect_fatal(requires_grad_on_ints, NULL, "not of a floating dtype");
    gc_test_expect_fatal(seed_of_wrong_shape, NULL, "seed 0 is [3] f64 cpu but output 0 is [2] f64 cpu");
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
