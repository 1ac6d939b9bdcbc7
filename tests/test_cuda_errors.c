/* How errors on a GPU are reported: bad indices found by the device (embedding ids,
 * cross-entropy targets) at the next synchronisation, the first one of several checks, and
 * with GC_CUDA_SYNC=1 at the launch itself; a kernel's fault at the next CUDA call with a
 * hint, and with GC_CUDA_SYNC=1 at the launch's own file and line. Each case runs in a child
 * process (see gc_test_require_cuda_untouched). */
#include <stdlib.h>

#include "check.h"
#include "tensor/backend.h"

/* ids [count] on cuda:0 looked up in a [10, 4] table; `wait` synchronises afterwards. */
static void embed(const int32_t *values, int64_t count, bool wait) {
    gc_tensor *table = gc_zeros(GC_SHAPE(10, 4), GC_F32, gc_cuda(0));
    gc_tensor *ids = gc_from_host(values, 1, &count, GC_I32, gc_cuda(0));
    gc_tensor_release(gc_embedding(table, ids));
    if (wait) gc_device_synchronize(gc_cuda(0));
    RELEASE(table, ids);
}

static void bad_id_found_at_wait(void *arg) {
    (void)arg;
    embed((const int32_t[]){1, 2, 1000003, 5, -777}, 5, true);
}

/* Two lookups, each with a bad id, before any wait: the earlier lookup's is named. */
static void first_check_wins(void *arg) {
    (void)arg;
    embed((const int32_t[]){3, -5}, 2, false);
    embed((const int32_t[]){11, 0, 0}, 3, true);
}

/* A good lookup, then a wait: nothing to report, the child returns. */
static void good_ids(void *arg) {
    (void)arg;
    embed((const int32_t[]){0, 9}, 2, true);
    fputs("gradcache: returned", stderr);
    abort();
}

/* Read back with gc_item, as a training loop reads its loss. */
static void bad_target(void *arg) {
    (void)arg;
    gc_tensor *logits = gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cuda(0));
    gc_tensor *targets = gc_from_host((const int32_t[]){0, 9}, GC_SHAPE(2), GC_I32, gc_cuda(0));
    gc_tensor *loss = gc_cross_entropy(logits, targets, GC_LOSS_MEAN);
    gc_item(loss);
}

/* As a training step runs: the backward is queued before the loss is read, so the bad target (its flat
 * index 4 + 1000 past the [8, 1] column) reaches the backward's scatter first, which must neither write out of bounds nor fault:
 * the report is the target's, when the loss is read. */
static void bad_target_then_backward(void *arg) {
    (void)arg;
    gc_tensor *logits = gc_zeros(GC_SHAPE(2, 4), GC_F32, gc_cuda(0));
    gc_set_requires_grad(logits, true);
    gc_tensor *targets = gc_from_host((const int32_t[]){0, 1000}, GC_SHAPE(2), GC_I32, gc_cuda(0));
    gc_tensor *loss = gc_cross_entropy(logits, targets, GC_LOSS_MEAN);
    REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK);
    gc_item(loss);
}

/* Under GC_CUDA_SYNC=1 the lookup itself stops: no wait follows it. */
static void bad_id_at_launch(void *arg) {
    (void)arg;
    embed((const int32_t[]){4, 10}, 2, false);
    fputs("gradcache: returned", stderr);
    _exit(0);
}

/* A kernel writing to an address that is not the device's. */
static void kernel_fault(void *arg) {
    (void)arg;
    gc_tensor *warm = gc_zeros(GC_SHAPE(1), GC_F32, gc_cuda(0)); /* the device is set up */
    gc_backend_for(gc_cuda(0))->fill((void *)(uintptr_t)256, (size_t)1 << 20, GC_F32, 1.0);
    gc_device_synchronize(gc_cuda(0));
    gc_tensor_release(warm);
}

/* Runs a case with GC_CUDA_SYNC set (the child reads it at its first launch). */
static void expect_fatal_synced(void (*fn)(void *), const char *expected) {
    REQUIRE(setenv("GC_CUDA_SYNC", "1", 1) == 0);
    gc_test_expect_fatal(fn, NULL, expected);
    REQUIRE(unsetenv("GC_CUDA_SYNC") == 0);
}

int main(void) {
    /* The cases choose GC_CUDA_SYNC themselves, whatever the suite runs under. */
    REQUIRE(unsetenv("GC_CUDA_SYNC") == 0);
    gc_test_require_cuda_untouched();
    const char *at_wait = "(found at the device's next synchronisation; GC_CUDA_SYNC=1 reports it at its launch)";
    char expected[256];
    snprintf(expected, sizeof expected,
             "embedding: id 1000003 at position 2 of ids [5] i32 cuda:0 is outside [0, 10) %s", at_wait);
    gc_test_expect_fatal(bad_id_found_at_wait, NULL, expected);
    gc_test_expect_fatal(first_check_wins, NULL, "embedding: id -5 at position 1 of ids [2] i32 cuda:0");
    gc_test_expect_fatal(good_ids, NULL, "gradcache: returned");
    snprintf(expected, sizeof expected,
             "cross_entropy: target 9 at position 1 of targets [2] i32 cuda:0 is outside [0, 4) %s", at_wait);
    gc_test_expect_fatal(bad_target, NULL, expected);
    snprintf(expected, sizeof expected,
             "cross_entropy: target 1000 at position 1 of targets [2] i32 cuda:0 is outside [0, 4) %s", at_wait);
    gc_test_expect_fatal(bad_target_then_backward, NULL, expected);
    expect_fatal_synced(bad_id_at_launch,
                        "embedding: id 10 at position 1 of ids [2] i32 cuda:0 is outside [0, 10) (GC_CUDA_SYNC=1: "
                        "found at its launch)");

    /* The fault surfaces at the next call, with the hint; under GC_CUDA_SYNC=1 at the fill's
     * own launch (tensor/cuda/fill_cuda.cu). */
    gc_test_expect_fatal(kernel_fault, NULL, "cudaErrorIllegalAddress");
    gc_test_expect_fatal(kernel_fault, NULL, "run with GC_CUDA_SYNC=1 to report it at its launch");
    expect_fatal_synced(kernel_fault, "in the work launched (GC_CUDA_SYNC=1) at ");
    expect_fatal_synced(kernel_fault, "tensor/cuda/fill_cuda.cu:");
    return gc_test_result();
}
