/* Memory given back when steps are refused under a byte limit: the process's resident memory
 * (VmRSS, VmHWM of /proc/self/status) stays near the limit whatever sequence of refused steps
 * runs, and returns near where it started once the cache is emptied.
 *
 * A "step" here allocates tensors of its own sizes until the limit refuses one, then frees
 * them all, as a training step that does not fit unwinds. Each step's sizes differ from the
 * others' (another batch size is other tensor sizes), so a cache that kept the blocks of
 * every refused step would hold them all: the process would grow by about the limit per step.
 *
 * Resident memory is the kernel's count of the process's touched pages, so the margins are
 * generous against noise (the thread pool's stacks, malloc's own heap) and still far below
 * one more limit's worth, which is what a kept refused step costs. Under a sanitizer the
 * shadow memory (and ASan's quarantine of freed blocks) make RSS meaningless: the test skips. */
#include <stdint.h>

#include "check.h"

enum {
    MIB = 1 << 20,
    LIMIT_MIB = 128,  /* small enough to be quick to fill, large against the noise */
    STEPS = 4,        /* refused steps, each of its own sizes */
    MAX_TENSORS = 512 /* more than a step can allocate under the limit */
};

/* Slack allowed above the baseline plus the limit: a quarter of the limit for malloc's heap
 * around the small blocks and the pages of size classes' rounding, plus 16 MiB of noise. */
static const size_t limit_margin = LIMIT_MIB * MIB / 4 + 16 * (size_t)MIB;
/* Slack allowed above the baseline once the cache is emptied: noise. The allocator comes back
 * to the baseline to the MiB; a heap that kept the freed small blocks held 12 MiB more. */
static const size_t empty_margin = 4 * (size_t)MIB;

/* A field of /proc/self/status ("VmRSS:", "VmHWM:") in bytes; 0 when unreadable. */
static size_t status_bytes(const char *field) {
    FILE *status = fopen("/proc/self/status", "r");
    if (!status) return 0;
    char line[256];
    unsigned long long kib = 0;
    size_t length = strlen(field);
    while (fgets(line, sizeof line, status))
        if (strncmp(line, field, length) == 0 && sscanf(line + length, "%llu", &kib) == 1) break;
    fclose(status);
    return (size_t)kib * 1024;
}

/* Resets VmHWM to the current VmRSS (Linux's clear_refs "5"); false where not allowed. */
static bool reset_peak_rss(void) {
    FILE *clear = fopen("/proc/self/clear_refs", "w");
    if (!clear) return false;
    bool written = fputs("5", clear) >= 0;
    return fclose(clear) == 0 && written;
}

/* One refused step: float tensors of `large` elements (big blocks) and `small` elements (the
 * blocks malloc keeps in its heap), alternating, until the limit refuses one; then all freed.
 * Returns how many were allocated. */
static int refused_step(int64_t large, int64_t small) {
    gc_tensor *tensors[MAX_TENSORS];
    int count = 0;
    for (; count < MAX_TENSORS; count++) {
        int64_t numel = count % 2 ? small : large;
        tensors[count] = gc_zeros(1, &numel, GC_F32, gc_cpu()); /* zeros: every page touched */
        if (!tensors[count]) break;
    }
    CHECK_MSG(count < MAX_TENSORS && gc_last_status() == GC_ERR_MEM_LIMIT, "step of %lld and %lld: %d tensors, %s",
              (long long)large, (long long)small, count, gc_last_error());
    gc_clear_error();
    for (int i = 0; i < count; i++) gc_tensor_release(tensors[i]);
    return count;
}

/* Refused steps of growing sizes keep the process within the limit of its starting memory;
 * emptying the cache afterwards brings it back near the start. */
static void test_refused_steps(void) {
    gc_device cpu = gc_cpu();
    gc_memory_empty_cache(cpu);
    size_t base_live = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_set_limit(cpu, base_live + (size_t)LIMIT_MIB * MIB);
    size_t before = status_bytes("VmRSS:");
    REQUIRE(before > 0);
    bool peak_known = reset_peak_rss();
    size_t highest = before;
    for (int step = 0; step < STEPS; step++) {
        /* 3 MiB and up by 1 MiB a step (another size class each time); small blocks of 96 KiB
         * and up by 8 KiB, below malloc's usual mmap threshold. */
        int64_t large = (int64_t)(3 + step) * MIB / 4, small = (96 + 8 * step) * 1024 / 4;
        REQUIRE(refused_step(large, small) > 2);
        size_t now = status_bytes("VmRSS:");
        if (now > highest) highest = now;
    }
    size_t peak = peak_known ? status_bytes("VmHWM:") : highest;
    size_t ceiling = before + (size_t)LIMIT_MIB * MIB + limit_margin;
    CHECK_MSG(highest <= ceiling, "resident after refused steps %zu MiB, started at %zu MiB, limit %d MiB",
              highest / MIB, before / MIB, LIMIT_MIB);
    CHECK_MSG(peak <= ceiling, "resident peak over refused steps %zu MiB, started at %zu MiB, limit %d MiB",
              peak / MIB, before / MIB, LIMIT_MIB);
    gc_memory_empty_cache(cpu);
    size_t after = status_bytes("VmRSS:");
    fprintf(stderr, "resident: %zu MiB before, %zu MiB at most after a refused step, %zu MiB peak%s, %zu MiB "
            "after emptying the cache (limit %d MiB)\n", before / MIB, highest / MIB, peak / MIB,
            peak_known ? "" : " (sampled)", after / MIB, LIMIT_MIB);
    CHECK_MSG(after <= before + empty_margin, "resident after emptying the cache %zu MiB, started at %zu MiB",
              after / MIB, before / MIB);
    gc_memory_set_limit(cpu, 0);
}

int main(void) {
#ifdef GC_TEST_SHADOW_MEMORY
    fprintf(stderr, "skip: resident memory under %s counts its shadow memory\n", GC_TEST_SHADOW_MEMORY);
    return GC_TEST_SKIP;
#endif
    if (status_bytes("VmRSS:") == 0) {
        fprintf(stderr, "skip: no /proc/self/status to read resident memory from\n");
        return GC_TEST_SKIP;
    }
    /* The thread pool's workers and their stacks start with the first kernel: before the
     * baseline, not inside it. */
    gc_tensor *warm = gc_zeros(GC_SHAPE(1 << 16), GC_F32, gc_cpu());
    REQUIRE(warm);
    gc_tensor_release(warm);
    GC_TEST_CASE(test_refused_steps);
    gc_shutdown();
    return gc_test_result();
}
