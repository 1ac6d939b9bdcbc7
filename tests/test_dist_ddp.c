/* The gradient bucketer on its own, in worlds of 2 and 4 processes: gradients averaged over
 * the ranks equal one process's over the union of their rows (f64, <= 1e-10); with sync
 * suppressed, backward communicates nothing and the next synced backward reduces the
 * accumulated sum once (gradient accumulation); zero_grad keeps the gradients as views of
 * the buckets, and a gradient replaced behind the bucketer's back is still reduced; ranks
 * with different parameters are refused at set-up, naming the parameter, on every rank, and a
 * hostile peer's signatures with an error naming what it sent, never a stop. In
 * one process (a world of 1): a parameter no backward reached, a backward during a
 * reduction, and one reaching a parameter gc_ddp_expect_params left out, stop the program
 * with one line; find_unused_parameters lets the first pass. */
#include <fcntl.h>

#include "check.h"
#include "dist_spawn.h"
#include "mlp_encoder.h"

#define ROWS 6 /* per rank, per micro-batch */

/* mean over rows of sum(encoder(x)^2): a loss whose gradient is easy to average */
static gc_tensor *loss_of(mlp_encoder *e, const gc_tensor *x, double scale) {
    gc_batch batch = {1, {"x"}, {(gc_tensor *)x}};
    gc_tensor *out = encoder_forward(e, &batch), *squared = gc_mul(out, out), *total = gc_sum_all(squared);
    gc_tensor *loss = gc_mul_scalar(total, scale);
    RELEASE(out, squared, total);
    return loss;
}

static double sum_of(const gc_tensor *t) {
    gc_tensor *total = gc_sum_all(t);
    double value = gc_item(total);
    gc_tensor_release(total);
    return value;
}

static void backward_of(mlp_encoder *e, const gc_tensor *x, double scale) {
    gc_tensor *loss = loss_of(e, x, scale);
    REQUIRE(loss && gc_backward(&loss, NULL, 1) == GC_OK);
    RELEASE(loss);
}

static int reduce_body(int rank, int world, void *arg) {
    (void)arg;
    gc_process_group *group = dist_test_group(60);
    int micro = 3;
    gc_tensor *x = gc_uniform(GC_SHAPE(world * micro * ROWS, IN), GC_F64, gc_cpu(), -1, 1, 5, 0);
    mlp_encoder e = make_encoder(GC_F64, 100 + (uint64_t)rank, 0), ref = make_encoder(GC_F64, 100, 0);
    gc_ddp_options options = {.first_bucket_bytes = 1, .bucket_bytes = 1}; /* a bucket per parameter */
    gc_ddp *ddp = gc_ddp_new(group, &e.params, &options);
    REQUIRE(ddp);
    CHECK(gc_ddp_get_stats(ddp).buckets == 3);
    gc_tensor *view_before = gc_grad(e.w1);

    /* one synced backward: the average over ranks of each rank's mean = the global mean */
    double scale = 1.0 / (world * ROWS);
    gc_tensor *mine = gc_slice0(x, rank * ROWS, (rank + 1) * ROWS), *all = gc_slice0(x, 0, world * ROWS);
    backward_of(&e, mine, 1.0 / ROWS);
    CHECK(gc_ddp_wait(ddp) == GC_OK);
    backward_of(&ref, all, scale);
    int64_t n;
    mlp_encoder *ours[] = {&e}, *theirs[] = {&ref};
    double *got = collect_grads(ours, 1, &n), *want = collect_grads(theirs, 1, &n);
    CHECK_MSG(relative_error(got, want, n) <= 1e-10, "synced: %.3g", relative_error(got, want, n));
    free(got);
    free(want);
    RELEASE(mine, all);

    /* accumulation over 3 micro-batches: nothing sent until the last, then one reduction */
    gc_ddp_zero_grad(ddp);
    CHECK(gc_grad(e.w1) == view_before && sum_of(gc_grad(e.w1)) == 0);
    gc_param_list_zero_grad(&ref.params);
    gc_zero_grad(e.b1); /* replaced behind the bucketer's back: copied into its bucket */
    gc_dist_stats sent = gc_dist_get_stats(group);
    gc_ddp_stats reduced = gc_ddp_get_stats(ddp);
    for (int m = 0; m < micro; m++) {
        gc_ddp_micro_batch(ddp, m, micro);
        gc_tensor *rows = gc_slice0(x, (m * world + rank) * ROWS, (m * world + rank + 1) * ROWS);
        backward_of(&e, rows, 1.0 / ROWS);
        CHECK(gc_ddp_wait(ddp) == GC_OK); /* a no-op while sync is off */
        if (m < micro - 1) CHECK(gc_dist_get_stats(group).collectives == sent.collectives);
        RELEASE(rows);
    }
    CHECK(gc_ddp_get_stats(ddp).all_reduces - reduced.all_reduces == 3);
    CHECK(gc_grad(e.b1) != NULL);
    gc_tensor *every = gc_slice0(x, 0, micro * world * ROWS);
    backward_of(&ref, every, scale); /* the sum over micro-batches of each global mean */
    got = collect_grads(ours, 1, &n);
    want = collect_grads(theirs, 1, &n);
    CHECK_MSG(relative_error(got, want, n) <= 1e-10, "accumulated: %.3g", relative_error(got, want, n));
    free(got);
    free(want);
    RELEASE(every, x);
    CHECK(gc_ddp_set_require_sync(ddp, false) == true && gc_ddp_set_require_sync(ddp, true) == false);
    gc_ddp_free(ddp);
    free_encoder(&e);
    free_encoder(&ref);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 has another hidden width (or one parameter fewer): every rank refuses. */
static int mismatch_body(int rank, int world, void *arg) {
    (void)world;
    bool fewer = *(bool *)arg;
    gc_process_group *group = dist_test_group(20);
    mlp_encoder e = make_encoder(GC_F32, 1, 0);
    gc_param_list params = {0};
    for (int i = 0; i < e.params.count - (fewer && rank == 1); i++)
        gc_param_list_add(&params, "", e.params.items[i].name, e.params.items[i].tensor, false);
    if (rank == 1 && !fewer) {
        gc_tensor *wide = gc_zeros(GC_SHAPE(IN, HIDDEN + 1), GC_F32, gc_cpu());
        gc_set_requires_grad(wide, true);
        gc_tensor_release(params.items[0].tensor);
        params.items[0].tensor = wide;
    }
    gc_ddp *ddp = gc_ddp_new(group, &params, &(gc_ddp_options){0});
    CHECK(ddp == NULL && gc_last_status() == GC_ERR_FORMAT);
    const char *want = fewer ? "rank 1 has 2 parameters but rank 0 has 3" : "parameter 0 ('w1' on rank";
    CHECK_MSG(strstr(gc_last_error(), want) != NULL, "wanted '%s' in '%s'", want, gc_last_error());
    if (!fewer) CHECK(strstr(gc_last_error(), "[12, 24] f32 cpu on rank 0 but [12, 25] f32 cpu on rank 1") != NULL);
    gc_param_list_free(&params);
    free_encoder(&e);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank 1 sends crafted bytes where gc_ddp_new sends its parameters' signatures (ddp_setup.c:
 * a name hash, ndim, four sizes, dtype, device, as f64): a first row with 7 dims, a nan size
 * and a dtype no dtype has, or a row count of -1. Rank 0 returns an error naming what it got
 * and does not stop (nor read past its four sizes). */
static int hostile_signature_body(int rank, int world, void *arg) {
    (void)world;
    bool bad_count = *(bool *)arg;
    gc_process_group *group = dist_test_group(20);
    if (rank == 1 && bad_count) {
        int64_t ones[2] = {1, 1};
        gc_tensor *count = gc_full(GC_SHAPE(1), GC_F64, gc_cpu(), -1), *all = gc_empty(GC_SHAPE(2), GC_F64, gc_cpu());
        CHECK(gc_dist_work_wait(gc_dist_all_gather_start(group, count, all, ones)) == GC_OK);
        RELEASE(count, all);
    } else if (rank == 1) {
        gc_tensor *rows = gc_zeros(GC_SHAPE(3, 8), GC_F64, gc_cpu());
        const double first[8] = {0, 7, 12, 24, 5, NAN, -1118111650, 5};
        memcpy(gc_data(rows), first, sizeof first);
        int64_t counts[2];
        gc_tensor *all = gc_dist_all_gather(group, rows, counts);
        CHECK(all != NULL);
        RELEASE(rows, all);
    } else {
        mlp_encoder e = make_encoder(GC_F32, 1, 0);
        CHECK(gc_ddp_new(group, &e.params, &(gc_ddp_options){0}) == NULL && gc_last_status() == GC_ERR_FORMAT);
        const char *want = bad_count ? "all_gather: rank 1 says it has -1 rows"
                                     : "is [12, 24] f32 cpu (another name) on rank 0 but ndim 7 [12, 24, 5, nan] an "
                                       "unknown dtype -1118111650 an unknown device (another name) on rank 1";
        CHECK_MSG(strstr(gc_last_error(), want) != NULL, "wanted '%s' in '%s'", want, gc_last_error());
        free_encoder(&e);
    }
    gc_process_group_free(group);
    return gc_test_result();
}

/* Runs fn in a child process; true when it died of SIGABRT with `want` in its stderr. */
static bool dies_with(void (*fn)(void), const char *want) {
    char path[] = "/tmp/gc_test_ddp_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    char text[2048] = {0};
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    unlink(path);
    bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && got > 0 && strstr(text, want) != NULL;
    if (!ok) fprintf(stderr, "wanted an abort with '%s', got: %s\n", want, text);
    return ok;
}

/* A world of one: the bucketer's checks need no peer. */
static gc_ddp *solo_ddp(mlp_encoder *e, bool find_unused, gc_process_group **group) {
    dist_forget_launchers();
    *group = gc_process_group_from_env(&(gc_dist_options){.backend = GC_DIST_TCP});
    REQUIRE(*group);
    gc_ddp *ddp = gc_ddp_new(*group, &e->params, &(gc_ddp_options){.find_unused_parameters = find_unused});
    REQUIRE(ddp);
    return ddp;
}

/* w2 is left out of the loss: only w1 and b1 get a gradient */
static void backward_without_w2(mlp_encoder *e) {
    gc_tensor *x = gc_ones(GC_SHAPE(2, IN), GC_F32, gc_cpu()), *h = gc_matmul(x, e->w1, false, false);
    gc_tensor *hb = gc_add(h, e->b1), *loss = gc_sum_all(hb);
    REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK);
    RELEASE(x, h, hb, loss);
}

/* (these two run in a child that dies: what they hold goes with it) */
static void unused_parameter(void) {
    mlp_encoder e = make_encoder(GC_F32, 1, 0);
    gc_process_group *group;
    gc_ddp *ddp = solo_ddp(&e, false, &group);
    backward_without_w2(&e);
    gc_ddp_wait(ddp);
}

static void backward_during_reduction(void) {
    mlp_encoder e = make_encoder(GC_F32, 1, 0);
    gc_process_group *group;
    solo_ddp(&e, false, &group);
    gc_tensor *x = gc_ones(GC_SHAPE(2, IN), GC_F32, gc_cpu());
    for (int i = 0; i < 2; i++) backward_of(&e, x, 1.0); /* no gc_ddp_wait in between */
}

/* A backward announced to reach w1 and b1 only (gc_ddp_expect_params) reaches w2 too. */
static void backward_not_announced(void) {
    mlp_encoder e = make_encoder(GC_F32, 1, 0);
    gc_process_group *group;
    gc_ddp *ddp = solo_ddp(&e, false, &group);
    gc_param_list first = {0};
    gc_param_list_add(&first, "", "w1", e.w1, false);
    gc_param_list_add(&first, "", "b1", e.b1, false);
    gc_ddp_expect_params(ddp, &first);
    gc_tensor *x = gc_ones(GC_SHAPE(2, IN), GC_F32, gc_cpu());
    backward_of(&e, x, 1.0);
}

int main(void) {
    for (int world = 2; world <= 4; world += 2) CHECK_MSG(dist_all_pass(world, reduce_body, NULL, 60), "world %d", world);
    bool fewer = false, wider = false;
    fewer = true;
    CHECK(dist_all_pass(2, mismatch_body, &fewer, 60));
    CHECK(dist_all_pass(2, mismatch_body, &wider, 60));
    bool bad_count = false;
    CHECK_MSG(dist_all_pass(2, hostile_signature_body, &bad_count, 60), "a hostile peer's signature");
    bad_count = true;
    CHECK_MSG(dist_all_pass(2, hostile_signature_body, &bad_count, 60), "a hostile peer's row count");
    CHECK(dies_with(unused_parameter, "ddp: parameter 'w2' got no gradient since the last reduction"));
    CHECK(dies_with(backward_during_reduction, "ddp: a backward reached"));
    CHECK(dies_with(backward_not_announced, "ddp: a backward reached 'w2', which gc_ddp_expect_params said it would not"));
    /* with find_unused_parameters, w2 is reduced as it is (zero) */
    mlp_encoder e = make_encoder(GC_F32, 1, 0);
    gc_process_group *group;
    gc_ddp *ddp = solo_ddp(&e, true, &group);
    backward_without_w2(&e);
    CHECK(gc_ddp_wait(ddp) == GC_OK);
    CHECK(gc_grad(e.w2) && sum_of(gc_grad(e.w2)) == 0 && sum_of(gc_grad(e.b1)) == 2 * HIDDEN);
    gc_ddp_free(ddp);
    gc_process_group_free(group);
    free_encoder(&e);
    return gc_test_result();
}
