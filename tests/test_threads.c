/* Thread-count independence of the CPU kernels: every threaded kernel (tensor/cpu/, split
 * by tensor/cpu/thread_pool.c) gives bitwise the same result with 1, 2, 3 and 8 threads,
 * the determinism the project guarantees whatever GC_NUM_THREADS is. The inputs are large
 * enough (and of odd sizes) for each kernel to be split into 8 uneven ranges; a whole
 * training step of a text encoder (forward, backward, clipping, AdamW) checks the kernels
 * together, as the trainer runs them. Also: GC_NUM_THREADS is honoured and checked, and
 * gc_shutdown joins the workers without ending the pool. */
#include <dirent.h>
#include <time.h>

#include "check.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/op_internal.h"

static const int thread_counts[] = {1, 2, 3, 8};
#define RUNS ((int)(sizeof thread_counts / sizeof thread_counts[0]))
#define MAX_RESULTS 128

/* Each run's results, as host bytes, in the order they were computed. */
typedef struct results {
    int count;
    char name[MAX_RESULTS][64];
    void *bytes[MAX_RESULTS];
    size_t size[MAX_RESULTS];
} results;

/* Keeps a copy of t's bytes under `name`; releases t. */
static void keep(results *r, const char *name, gc_tensor *t) {
    REQUIRE(t && r->count < MAX_RESULTS);
    size_t size = gc_nbytes(t);
    void *copy = malloc(size ? size : 1);
    REQUIRE(copy);
    gc_copy_to_host(t, copy);
    snprintf(r->name[r->count], sizeof r->name[r->count], "%s", name);
    r->bytes[r->count] = copy;
    r->size[r->count] = size;
    r->count++;
    gc_tensor_release(t);
}

/* Elements: 24 ranges of the elementwise grain, and a few more, so every split is uneven. */
#define N ((int64_t)393216 + 7)
#define ROWS 1031
#define COLS 389

static gc_tensor *normal(int ndim, const int64_t *shape, gc_dtype dtype, uint64_t seed) {
    gc_tensor *t = gc_normal(ndim, shape, dtype, gc_cpu(), 0, 1, seed, 0);
    REQUIRE(t);
    return t;
}

static void elementwise_ops(results *r) {
    gc_tensor *x = normal(1, (int64_t[]){N}, GC_F32, 1), *y = normal(1, (int64_t[]){N}, GC_F32, 2);
    keep(r, "normal f32", gc_clone(x));
    keep(r, "uniform f64", gc_uniform(1, (int64_t[]){N}, GC_F64, gc_cpu(), -2, 3, 3, 5));
    keep(r, "exp", gc_exp(x));
    keep(r, "tanh", gc_tanh(x));
    keep(r, "gelu_erf", gc_gelu_erf(x));
    keep(r, "gelu_tanh", gc_gelu_tanh(x));
    keep(r, "gelu_erf backward", gc_unary_grad(GC_UNARY_GELU_ERF_GRAD, x, y));
    keep(r, "relu", gc_relu(x));
    keep(r, "add", gc_add(x, y));
    keep(r, "div", gc_div(x, y));
    keep(r, "mul_scalar", gc_mul_scalar(x, 0.3));
    keep(r, "rsub_scalar", gc_rsub_scalar(x, 1.5));
    keep(r, "cast bf16", gc_cast(x, GC_BF16));
    keep(r, "cast f16", gc_cast(x, GC_F16));
    gc_tensor *x64 = gc_cast(x, GC_F64);
    keep(r, "gelu_erf f64", gc_gelu_erf(x64));
    keep(r, "full", gc_full(1, (int64_t[]){N}, GC_F32, gc_cpu(), 0.25));
    keep(r, "arange", gc_arange(N, -3, 0.125, GC_F32, gc_cpu()));
    keep(r, "dropout", gc_dropout(x, 0.1, 77, 13));
    keep(r, "dropout f64", gc_dropout(x64, 0.3, 78, 3));
    RELEASE(x, y, x64);
}

static void row_ops(results *r) {
    gc_tensor *x = normal(2, (int64_t[]){ROWS, COLS}, GC_F32, 4);
    gc_tensor *bias = normal(1, (int64_t[]){COLS}, GC_F32, 5), *column = normal(2, (int64_t[]){ROWS, 1}, GC_F32, 6);
    gc_tensor *shift = normal(1, (int64_t[]){COLS}, GC_F32, 19);
    keep(r, "broadcast add [R, C] + [C]", gc_add(x, bias));
    keep(r, "broadcast mul [R, C] * [R, 1]", gc_mul(x, column));
    keep(r, "sum_to_shape [C]", gc_sum_to_shape(x, 1, (int64_t[]){COLS}));
    keep(r, "sum_last", gc_sum_last(x, false));
    keep(r, "mean_last", gc_mean_last(x, true));
    gc_tensor *argmax = NULL;
    keep(r, "max_last", gc_max_last(x, false, &argmax));
    keep(r, "argmax", argmax);
    keep(r, "sum_all", gc_sum_all(x));
    keep(r, "softmax", gc_softmax(x));
    keep(r, "log_softmax", gc_log_softmax(x));
    gc_tensor *mean = NULL, *rstd = NULL;
    keep(r, "layernorm", gc_layernorm(x, bias, shift, 1e-5, &mean, &rstd));
    keep(r, "layernorm mean", mean);
    keep(r, "layernorm rstd", rstd);
    gc_tensor *x4 = normal(4, (int64_t[]){8, 61, 12, 37}, GC_F32, 7);
    keep(r, "permute 0213", gc_permute(x4, (int[]){0, 2, 1, 3}));
    keep(r, "permute 3120", gc_permute(x4, (int[]){3, 1, 2, 0}));
    gc_tensor *parts[2] = {x, x};
    keep(r, "cat0", gc_cat0(parts, 2));
    /* rows at scattered positions: runs of consecutive ones cut wherever the threads split */
    int32_t position_values[ROWS];
    for (int i = 0; i < ROWS; i++) position_values[i] = i + i / 7 * 3;
    gc_tensor *positions = gc_from_host(position_values, GC_SHAPE(ROWS), GC_I32, gc_cpu());
    keep(r, "dropout_rows", gc_dropout_rows(x, positions, 0.2, 79, 5));
    RELEASE(x, bias, column, shift, x4, positions);
}

/* The library's own GEMM on every instruction set this CPU offers (gc_matmul may go
 * through the BLAS; test_gemm_variants.c holds that path to its own fixed split). */
static void own_gemm(results *r, const char *name, gc_dtype dtype, int64_t batch, int64_t m, int64_t k, int64_t n,
                     bool trans_a, bool trans_b) {
    gc_tensor *a = normal(1, (int64_t[]){batch * m * k}, dtype, 8), *b = normal(1, (int64_t[]){batch * k * n}, dtype, 9);
    for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++) {
        if (!gc_cpu_isa_available(isa)) continue;
        gc_tensor *c = gc_empty(1, (int64_t[]){batch * m * n}, dtype, gc_cpu());
        REQUIRE(c);
        gc_matmul_args args = {.a = gc_data(a), .b = gc_data(b), .c = gc_data(c), .dtype = dtype, .batch = batch,
                               .m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b, .alpha = 1};
        gc_cpu_matmul_own(&args, isa);
        keep(r, name, c);
    }
    RELEASE(a, b);
}

static void matmuls(results *r) {
    own_gemm(r, "gemm f32 [700, 300] [300, 520]", GC_F32, 1, 700, 300, 520, false, false);
    own_gemm(r, "gemm f32 a^T b^T, k past one block", GC_F32, 1, 333, 611, 130, true, true);
    own_gemm(r, "gemm f64 a b^T", GC_F64, 1, 257, 129, 301, false, true);
    own_gemm(r, "gemm bf16", GC_BF16, 1, 190, 70, 200, true, false);
    own_gemm(r, "gemm batch of 24 (attention)", GC_F32, 24, 64, 16, 64, false, true);
    own_gemm(r, "gemm batch of 3, each threaded", GC_F32, 3, 300, 200, 100, false, false);
    own_gemm(r, "gemm of 11 rows (panels shared out)", GC_F32, 1, 11, 384, 1000, false, true);
    gc_tensor *a = normal(2, (int64_t[]){517, 128}, GC_F32, 10), *b = normal(2, (int64_t[]){512, 128}, GC_F32, 11);
    keep(r, "gc_matmul (BLAS where built)", gc_matmul(a, b, false, true));
    RELEASE(a, b);
}

/* The embedding's forward and backward, and the optimizers' updates. */
static void gather_and_updates(results *r) {
    int64_t vocab = 97, dim = 131, count = 4099;
    gc_tensor *table = normal(2, (int64_t[]){vocab, dim}, GC_F32, 12);
    gc_set_requires_grad(table, true);
    gc_tensor *ids_f = gc_uniform(1, (int64_t[]){count}, GC_F32, gc_cpu(), 0, (double)vocab, 13, 0);
    gc_tensor *ids = gc_cast(ids_f, GC_I32);
    gc_tensor *rows = gc_embedding(table, ids);
    gc_tensor *seed = normal(2, (int64_t[]){count, dim}, GC_F32, 14);
    REQUIRE(rows && gc_backward(&rows, &seed, 1) == GC_OK);
    keep(r, "embedding", gc_tensor_retain(rows));
    keep(r, "embedding backward", gc_tensor_retain(gc_grad(table)));

    gc_param_list params = {0};
    gc_tensor *weight = normal(1, (int64_t[]){N}, GC_F32, 15), *plain = normal(1, (int64_t[]){N}, GC_F32, 16);
    gc_param_list_add(&params, "", "weight", weight, false);
    gc_param_list_add(&params, "", "plain", plain, true);
    gc_set_requires_grad(weight, true);
    gc_set_requires_grad(plain, true);
    gc_tensor *weight_grad = normal(1, (int64_t[]){N}, GC_F32, 17), *plain_grad = normal(1, (int64_t[]){N}, GC_F32, 18);
    gc_set_grad(weight, weight_grad);
    gc_set_grad(plain, plain_grad);
    gc_adamw adamw;
    gc_sgd sgd;
    REQUIRE(gc_adamw_init(&adamw, &params, 1e-3, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    REQUIRE(gc_sgd_init(&sgd, &params, 1e-2, 0.9, 0.01) == GC_OK);
    for (int step = 0; step < 2; step++) {
        REQUIRE(gc_adamw_step(&adamw) == GC_OK);
        REQUIRE(gc_sgd_step(&sgd) == GC_OK);
    }
    keep(r, "adamw + sgd weight", gc_clone(weight));
    keep(r, "adamw + sgd no-decay", gc_clone(plain));
    gc_adamw_free(&adamw);
    gc_sgd_free(&sgd);
    gc_param_list_free(&params);
    RELEASE(table, ids_f, ids, rows, seed, weight, plain, weight_grad, plain_grad);
}

/* A training step of a small text encoder (dropout on), and its loss and parameters; an
 * evaluation forward first, so that the step's forward multiplies the weights' kept panels
 * (tensor/packed.c: kept from a weight's second product at one version). */
static void training_step(results *r) {
    gc_text_encoder_config config = {.vocab = 211, .max_length = 24, .dim = 64, .heads = 4, .layers = 2,
                                     .hidden = 256, .projection = 32, .dropout = 0.1, .pre_norm = true,
                                     .activation = GC_ACT_GELU_ERF, .pooling = GC_POOL_MEAN, .dtype = GC_F32};
    gc_generator init = {21, 0};
    gc_text_encoder encoder;
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    gc_adamw adamw;
    REQUIRE(gc_adamw_init(&adamw, &params, 1e-3, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    gc_manual_seed(5); /* dropout */

    int64_t batch = 96, length = 24;
    gc_tensor *ids_f = gc_uniform(2, (int64_t[]){batch, length}, GC_F32, gc_cpu(), 0, 211, 22, 0);
    gc_tensor *ids = gc_cast(ids_f, GC_I32), *mask = gc_ones(2, (int64_t[]){batch, length}, GC_F32, gc_cpu());
    bool grad_mode = gc_set_grad_enabled(false);
    gc_tensor *evaluated = gc_text_encoder_forward(&encoder, ids, mask, false);
    gc_set_grad_enabled(grad_mode);
    REQUIRE(evaluated && gc_memory_get_stats(gc_cpu()).packed_bytes == 0);
    keep(r, "encoder output, evaluated", evaluated);
    gc_tensor *out = gc_text_encoder_forward(&encoder, ids, mask, true);
    CHECK(gc_memory_get_stats(gc_cpu()).packed_bytes > 0);
    gc_tensor *squashed = gc_tanh(out), *loss = gc_mean_all(squashed);
    gc_tensor *one = gc_scalar(1, GC_F32, gc_cpu());
    REQUIRE(loss && gc_backward(&loss, &one, 1) == GC_OK);
    gc_clip_grad_norm(&params, 1.0);
    REQUIRE(gc_adamw_step(&adamw) == GC_OK);
    keep(r, "encoder output", gc_tensor_retain(out));
    keep(r, "encoder loss", gc_tensor_retain(loss));
    for (int i = 0; i < params.count; i++) keep(r, params.items[i].name, gc_clone(params.items[i].tensor));
    gc_adamw_free(&adamw);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
    RELEASE(ids_f, ids, mask, out, squashed, loss, one);
}

static void compute_all(results *r) {
    elementwise_ops(r);
    row_ops(r);
    matmuls(r);
    gather_and_updates(r);
    training_step(r);
}

static void test_independence(void) {
    results runs[RUNS] = {{0}};
    for (int run = 0; run < RUNS; run++) {
        gc_set_cpu_threads(thread_counts[run]);
        CHECK(gc_cpu_threads() == thread_counts[run]);
        compute_all(&runs[run]);
    }
    for (int run = 1; run < RUNS; run++) {
        CHECK(runs[run].count == runs[0].count);
        for (int i = 0; i < runs[0].count && i < runs[run].count; i++)
            CHECK_MSG(runs[run].size[i] == runs[0].size[i] && memcmp(runs[run].bytes[i], runs[0].bytes[i], runs[0].size[i]) == 0,
                      "%s: %d threads differ from 1", runs[0].name[i], thread_counts[run]);
    }
    fprintf(stderr, "%d results compared bitwise across 1, 2, 3 and 8 threads\n", runs[0].count);
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < runs[run].count; i++) free(runs[run].bytes[i]);
}

/* --- GC_NUM_THREADS (read in a child: the count is read once per process) ----------- */

static void read_threads(void *text) {
    setenv("GC_NUM_THREADS", text, 1);
    fprintf(stderr, "threads %d\n", gc_cpu_threads());
}

typedef struct threads_case {
    const char *text;
    int want;
} threads_case;

static bool threads_as_expected(void *arg) {
    const threads_case *c = arg;
    setenv("GC_NUM_THREADS", c->text, 1);
    return gc_cpu_threads() == c->want;
}

static void expect_threads_from_env(const char *text, int want) {
    CHECK_MSG(gc_test_true_in_child(threads_as_expected, &(threads_case){text, want}),
              "GC_NUM_THREADS=%s should give %d threads", text, want);
}

static void test_environment(void) {
    expect_threads_from_env("3", 3);
    expect_threads_from_env("1", 1);
    expect_threads_from_env("1000", 64); /* capped */
    gc_test_expect_fatal(read_threads, (char[]){"two"}, "cpu threads: GC_NUM_THREADS=two is not a positive integer");
    gc_test_expect_fatal(read_threads, (char[]){"0"}, "cpu threads: GC_NUM_THREADS=0 is not a positive integer");
}

static bool exp_matches(void *arg) {
    gc_tensor **x_and_want = arg;
    gc_tensor *got = gc_exp(x_and_want[0]);
    return got && memcmp(gc_data(got), gc_data(x_and_want[1]), gc_nbytes(got)) == 0;
}

/* A child of fork() made while the pool's workers exist starts its own and computes the
 * same (dist/launch and the tests fork). */
static void test_fork_after_workers(void) {
    gc_set_cpu_threads(2);
    gc_tensor *x = normal(1, (int64_t[]){N}, GC_F32, 30);
    gc_tensor *want = gc_exp(x);
    CHECK_MSG(gc_test_true_in_child(exp_matches, (gc_tensor *[]){x, want}), "a forked child's threaded kernel");
    RELEASE(x, want);
}

/* The threads of this process (/proc/self/task). */
static int process_threads(void) {
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks) return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(tasks));) count += entry->d_name[0] != '.';
    closedir(tasks);
    return count;
}

/* Whether the process has `want` threads, waiting up to 2 s: a joined thread's task may
 * linger in /proc for a moment after pthread_join returns (the kernel wakes the joiner
 * before it has removed the task). Says what it found when not. */
static bool has_threads(int want, const char *when) {
    int count = process_threads();
    for (int wait = 0; count != want && wait < 200; wait++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        count = process_threads();
    }
    if (count != want) fprintf(stderr, "%s: %d threads, wanted %d\n", when, count, want);
    return count == want;
}

/* In a child of fork(), which has one thread (its caller's: no workers, no OpenBLAS thread):
 * gc_shutdown joins the workers, and the library goes on, the next threaded kernel starting
 * them again and computing the same. */
static bool shutdown_joins(void *arg) {
    gc_tensor *x = arg;
    bool ok = has_threads(1, "a forked child");
    gc_set_cpu_threads(3);
    gc_tensor *want = gc_exp(x);
    ok &= has_threads(3, "3 threads") && (gc_shutdown(), has_threads(1, "after gc_shutdown"));
    gc_shutdown(); /* again: nothing to join */
    gc_tensor *again = gc_exp(x);
    ok &= has_threads(3, "the workers started again") && again &&
          memcmp(gc_data(again), gc_data(want), gc_nbytes(want)) == 0;
    RELEASE(want, again);
    return ok;
}

static void test_shutdown(void) {
    gc_tensor *x = normal(1, (int64_t[]){N}, GC_F32, 31);
    CHECK_MSG(gc_test_true_in_child(shutdown_joins, x), "gc_shutdown: see above");
    RELEASE(x);
}

int main(void) {
    test_environment(); /* first: before this process reads its thread count */
    test_independence();
    test_fork_after_workers();
    test_shutdown();
    return gc_test_result();
}
