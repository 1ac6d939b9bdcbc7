/* Memory accounting on the CPU: exact live/peak/count, their split by role (and the split of
 * the peak taken when it is reached), the byte limit (API and
 * GC_MEM_LIMIT), the size-class cache (the same code CUDA uses, on by default for the CPU
 * too), and that a failed allocation leaks nothing. */
#include <fcntl.h>

#include "check.h"
#include "limit_cache_case.h"
#include "tensor/alloc.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

static void test_exact_accounting(void) {
    gc_memory_empty_cache(cpu);
    gc_memory_stats before = gc_memory_get_stats(cpu);
    gc_tensor *a = gc_zeros(GC_SHAPE(10, 3), GC_F32, cpu); /* 120 bytes */
    gc_tensor *b = gc_zeros(GC_SHAPE(7), GC_F16, cpu);     /* 14 bytes */
    gc_tensor *c = gc_zeros(GC_SHAPE(2, 2), GC_F64, cpu);  /* 32 bytes */
    REQUIRE(a && b && c);
    gc_memory_stats during = gc_memory_get_stats(cpu);
    CHECK(during.live_bytes == before.live_bytes + 166);
    CHECK(during.peak_bytes >= during.live_bytes);
    CHECK(during.alloc_count == before.alloc_count + 3);
    gc_tensor_release(b);
    gc_memory_stats after_one = gc_memory_get_stats(cpu);
    CHECK(after_one.live_bytes == before.live_bytes + 152);
    CHECK(after_one.free_count == before.free_count + 1);
    CHECK(after_one.peak_bytes == during.peak_bytes); /* the peak remembers */
    gc_memory_reset_peak(cpu);
    CHECK(gc_memory_get_stats(cpu).peak_bytes == after_one.live_bytes);
    gc_tensor_release(a);
    gc_tensor_release(c);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before.live_bytes);
    /* the CPU caches freed blocks (three of the 512-byte class) until asked to give them back */
    CHECK(gc_memory_get_stats(cpu).reserved_bytes == before.reserved_bytes + 3 * 512);
    gc_memory_empty_cache(cpu);
    CHECK(gc_memory_get_stats(cpu).reserved_bytes == before.reserved_bytes);
}

/* Each storage counts under the role set when it was made, until it is freed (a later role
 * does not move it); the peak's split is the live split at the moment of the peak. */
static void test_roles(void) {
    gc_memory_reset_peak(cpu);
    gc_memory_stats before = gc_memory_get_stats(cpu);
    CHECK(gc_memory_get_role() == GC_MEMORY_OTHER);
    gc_memory_role previous = gc_memory_set_role(GC_MEMORY_PARAMETERS);
    gc_tensor *weights = gc_zeros(GC_SHAPE(100), GC_F32, cpu); /* 400 bytes */
    gc_memory_set_role(GC_MEMORY_OPTIMIZER);
    gc_tensor *moments = gc_zeros(GC_SHAPE(50), GC_F32, cpu); /* 200 */
    CHECK(gc_memory_set_role(previous) == GC_MEMORY_OPTIMIZER && gc_memory_get_role() == GC_MEMORY_OTHER);
    gc_tensor *activation = gc_zeros(GC_SHAPE(1000), GC_F32, cpu); /* 4000: the peak */
    REQUIRE(weights && moments && activation);
    gc_memory_stats during = gc_memory_get_stats(cpu);
    size_t want[GC_MEMORY_ROLES] = {4000, 400, 0, 200};
    for (int r = 0; r < GC_MEMORY_ROLES; r++)
        CHECK_MSG(during.role_live_bytes[r] == before.role_live_bytes[r] + want[r], "%s: %zu live bytes",
                  gc_memory_role_name((gc_memory_role)r), during.role_live_bytes[r]);
    gc_tensor_release(activation);
    gc_memory_set_role(GC_MEMORY_GRADIENTS);
    gc_tensor *grads = gc_zeros(GC_SHAPE(100), GC_F32, cpu); /* 400, below the peak */
    gc_memory_set_role(GC_MEMORY_OTHER);
    REQUIRE(grads);
    gc_memory_stats after = gc_memory_get_stats(cpu);
    size_t sum = 0;
    for (int r = 0; r < GC_MEMORY_ROLES; r++) sum += after.role_peak_bytes[r];
    CHECK(sum == after.peak_bytes && after.peak_bytes == during.live_bytes);
    CHECK(after.role_peak_bytes[GC_MEMORY_GRADIENTS] == before.role_live_bytes[GC_MEMORY_GRADIENTS]); /* came later */
    CHECK(after.role_peak_bytes[GC_MEMORY_OTHER] == before.role_live_bytes[GC_MEMORY_OTHER] + 4000);
    CHECK(after.role_live_bytes[GC_MEMORY_OTHER] == before.role_live_bytes[GC_MEMORY_OTHER]);
    gc_memory_reset_peak(cpu);
    after = gc_memory_get_stats(cpu);
    CHECK(memcmp(after.role_peak_bytes, after.role_live_bytes, sizeof after.role_peak_bytes) == 0);
    RELEASE(weights, moments, grads);
    CHECK(memcmp(gc_memory_get_stats(cpu).role_live_bytes, before.role_live_bytes, sizeof before.role_live_bytes) == 0);
    CHECK(strcmp(gc_memory_role_name(GC_MEMORY_OPTIMIZER), "optimizer") == 0);
}

static void bad_role(void *arg) {
    (void)arg;
    gc_memory_set_role(GC_MEMORY_ROLES);
}

static void test_views_allocate_nothing(void) {
    gc_tensor *t = gc_zeros(GC_SHAPE(8, 4), GC_F32, cpu);
    REQUIRE(t);
    gc_memory_stats before = gc_memory_get_stats(cpu);
    gc_tensor *rows = gc_slice0(t, 2, 6);
    gc_tensor *flat = gc_reshape(rows, GC_SHAPE(-1));
    gc_memory_stats after = gc_memory_get_stats(cpu);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.alloc_count == before.alloc_count);
    CHECK(flat->shape[0] == 16);
    /* The storage outlives the tensor it came from while a view holds it. */
    gc_tensor_release(t);
    gc_tensor_release(rows);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before.live_bytes);
    gc_tensor_release(flat);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before.live_bytes - 128);
}

static void test_zero_byte_tensor(void) {
    gc_memory_stats before = gc_memory_get_stats(cpu);
    gc_tensor *empty = gc_zeros(GC_SHAPE(0, 5), GC_F32, cpu);
    REQUIRE(empty);
    CHECK(gc_numel(empty) == 0 && gc_data(empty) != NULL);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before.live_bytes);
    CHECK(gc_memory_get_stats(cpu).alloc_count == before.alloc_count + 1);
    gc_tensor_release(empty);
}

static void test_limit(void) {
    size_t base = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_set_limit(cpu, base + 1000);
    gc_tensor *fits = gc_zeros(GC_SHAPE(250), GC_F32, cpu); /* exactly up to the limit */
    REQUIRE(fits);
    gc_clear_error();
    gc_memory_stats before = gc_memory_get_stats(cpu);
    gc_tensor *over = gc_zeros(GC_SHAPE(1), GC_F32, cpu);
    CHECK(over == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);
    char expected[160];
    snprintf(expected, sizeof expected, "requested 4 bytes, live %zu bytes, limit %zu bytes", base + 1000, base + 1000);
    CHECK_MSG(strstr(gc_last_error(), expected) != NULL, "message was: %s", gc_last_error());
    gc_memory_stats after = gc_memory_get_stats(cpu);
    CHECK(after.live_bytes == before.live_bytes && after.alloc_count == before.alloc_count);

    /* Ops that allocate fail the same way and leak nothing: here a clone. */
    gc_tensor *copy = gc_clone(fits);
    CHECK(copy == NULL && gc_last_status() == GC_ERR_MEM_LIMIT);
    CHECK(gc_memory_get_stats(cpu).live_bytes == before.live_bytes);
    /* A NULL input makes the next op return NULL too, without touching the error. */
    gc_tensor *view = gc_slice0(copy, 0, 1);
    CHECK(view == NULL);
    CHECK(gc_last_status() == GC_ERR_MEM_LIMIT);

    gc_tensor_release(fits); /* memory freed: allocations work again */
    gc_tensor *again = gc_zeros(GC_SHAPE(250), GC_F32, cpu);
    CHECK(again != NULL);
    gc_tensor_release(again);
    gc_memory_set_limit(cpu, 0);
    gc_tensor *big = gc_zeros(GC_SHAPE(1000, 1000), GC_F32, cpu);
    CHECK(big != NULL); /* limit removed */
    gc_tensor_release(big);
    gc_clear_error();
    CHECK(gc_last_status() == GC_OK);
}

static void test_parse_size(void) {
    static const struct { const char *text; size_t bytes; } good[] = {
        {"0", 0}, {"512", 512}, {"1K", 1024}, {"2m", 2u << 20}, {"3G", (size_t)3 << 30},
        {"1T", (size_t)1 << 40}, {"512MB", (size_t)512 << 20}, {"18446744073709551615", SIZE_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t bytes = 1;
        CHECK_MSG(gc_parse_size(good[i].text, &bytes) == GC_OK && bytes == good[i].bytes, "%s", good[i].text);
    }
    static const char *const bad[] = {"", "1.5G", "-1", "G", "12X", "1KK", " 1", "1 ", "18446744073709551616",
                                      "17179869184G", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t bytes = 7;
        CHECK_MSG(gc_parse_size(bad[i], &bytes) == GC_ERR_FORMAT && bytes == 7, "'%s' accepted", bad[i]);
        CHECK(strstr(gc_last_error(), "size") != NULL);
    }
    gc_clear_error();
}

static void test_limit_spec(void) {
    gc_limit_entry entries[GC_MAX_LIMIT_ENTRIES];
    int count = 0;
    CHECK(gc_parse_limit_spec("cpu=1K,cuda:0=2G,cuda:15=3", entries, &count) == GC_OK);
    CHECK(count == 3);
    CHECK(entries[0].device.type == GC_DEVICE_CPU && entries[0].limit_bytes == 1024);
    CHECK(entries[1].device.type == GC_DEVICE_CUDA && entries[1].device.index == 0 &&
          entries[1].limit_bytes == (size_t)2 << 30);
    CHECK(entries[2].device.index == 15 && entries[2].limit_bytes == 3);
    CHECK(gc_parse_limit_spec("64M", entries, &count) == GC_OK && count == 1 + GC_MAX_CUDA_DEVICES);
    static const char *const bad[] = {"cpu=", "=1K", "cpu=1K,", "gpu=1K", "cuda:16=1K", "cuda:=1K",
                                      "cuda:0x=1", "cpu=1K;cuda:0=1K", "cpu:1K", ",", "cpu=1K,,cpu=2K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(gc_parse_limit_spec(bad[i], entries, &count) == GC_ERR_FORMAT, "'%s' accepted", bad[i]);
        CHECK_MSG(strlen(gc_last_error()) > 10, "no message for '%s'", bad[i]);
    }
    /* All or nothing: a bad part applies none of the good ones. */
    gc_memory_set_limit(cpu, 0);
    CHECK(gc_memory_apply_limit_spec("cpu=1K,bogus=2K") == GC_ERR_FORMAT);
    CHECK(gc_memory_get_stats(cpu).limit_bytes == 0);
    CHECK(gc_memory_apply_limit_spec("cpu=1M") == GC_OK);
    CHECK(gc_memory_get_stats(cpu).limit_bytes == (size_t)1 << 20);
    gc_memory_set_limit(cpu, 0);
    gc_clear_error();
}

static void test_size_classes(void) {
    CHECK(gc_alloc_size_class(0) == 512);
    CHECK(gc_alloc_size_class(1) == 512);
    CHECK(gc_alloc_size_class(512) == 512);
    CHECK(gc_alloc_size_class(513) == 1024);
    CHECK(gc_alloc_size_class((size_t)1 << 16) == (size_t)1 << 16);
    CHECK(gc_alloc_size_class(((size_t)1 << 16) + 1) == ((size_t)5 << 14)); /* 80 KiB */
    CHECK(gc_alloc_size_class((size_t)1 << 20) == (size_t)1 << 20);
    CHECK(gc_alloc_size_class(((size_t)1 << 20) + 1) == ((size_t)5 << 18)); /* 1.25 MiB */
    CHECK(gc_alloc_size_class((size_t)3 << 20) == (size_t)3 << 20);
    for (size_t n = 1; n < ((size_t)1 << 34); n = n * 3 + 7) {
        size_t size_class = gc_alloc_size_class(n);
        /* Never smaller than asked; slack at most 511 bytes below 64 KiB, 25% above. */
        CHECK_MSG(size_class >= n && (size_class - n < 512 || size_class - n <= n / 4), "n %zu -> %zu", n, size_class);
    }
}

/* A stream of batches of other lengths (one encode batch after another, variable-length
 * training batches) asks for a slightly different size each time: the cache must serve them
 * from a few classes, not keep a block for every size ever asked for. 400 tensors of one to
 * two hundred 1.5 KiB rows (a 384-wide activation per token), each freed before the next:
 * with classes of 512 bytes up to 1 MiB the cache kept a block for each of the 200 sizes, 92 MB. */
static void test_varying_sizes_share_classes(void) {
    gc_alloc_set_caching(cpu, true);
    gc_memory_empty_cache(cpu);
    size_t reserved_before = gc_memory_get_stats(cpu).reserved_bytes, largest = 0;
    for (int i = 0; i < 400; i++) {
        size_t nbytes = (size_t)(200 + (i * 37) % 200) * 1536;
        largest = nbytes > largest ? nbytes : largest;
        void *block = gc_alloc(cpu, nbytes, GC_MEMORY_OTHER);
        REQUIRE(block);
        gc_free(cpu, block, nbytes, GC_MEMORY_OTHER);
    }
    size_t grown = gc_memory_get_stats(cpu).reserved_bytes - reserved_before;
    CHECK_MSG(grown <= 8 * largest, "the cache kept %zu bytes for requests of at most %zu", grown, largest);
    gc_memory_empty_cache(cpu);
}

static void test_block_cache(void) {
    gc_alloc_set_caching(cpu, true);
    gc_memory_empty_cache(cpu); /* no block left by the tests before */
    gc_memory_stats start = gc_memory_get_stats(cpu);
    void *first = gc_alloc(cpu, 1000, GC_MEMORY_OTHER);
    REQUIRE(first);
    gc_memory_stats one = gc_memory_get_stats(cpu);
    CHECK(one.live_bytes == start.live_bytes + 1000);               /* exact, not the class size */
    CHECK(one.reserved_bytes == start.reserved_bytes + 1024);       /* the class size */
    CHECK(one.driver_alloc_count == start.driver_alloc_count + 1);
    gc_free(cpu, first, 1000, GC_MEMORY_OTHER);
    CHECK(gc_memory_get_stats(cpu).reserved_bytes == start.reserved_bytes + 1024); /* kept */
    void *second = gc_alloc(cpu, 900, GC_MEMORY_OTHER); /* same class: reused, no new backend allocation */
    CHECK(second == first);
    CHECK(gc_memory_get_stats(cpu).driver_alloc_count == one.driver_alloc_count);
    CHECK(gc_memory_get_stats(cpu).live_bytes == start.live_bytes + 900);
    void *third = gc_alloc(cpu, 5000, GC_MEMORY_OTHER); /* another class: a new block */
    REQUIRE(third);
    CHECK(gc_memory_get_stats(cpu).driver_alloc_count == one.driver_alloc_count + 1);
    gc_free(cpu, second, 900, GC_MEMORY_OTHER);
    gc_free(cpu, third, 5000, GC_MEMORY_OTHER);
    gc_memory_empty_cache(cpu);
    gc_memory_stats end = gc_memory_get_stats(cpu);
    CHECK(end.live_bytes == start.live_bytes && end.reserved_bytes == start.reserved_bytes);
    gc_alloc_set_caching(cpu, false);
}

/* A request whose class has no cached block takes one of up to four classes above (at most
 * twice its size above 64 KiB), and the block goes back to the cache under its own class:
 * the reserved bytes stay exact and the next request of that class finds it again. */
static void test_larger_block_lent(void) {
    gc_alloc_set_caching(cpu, true);
    gc_memory_empty_cache(cpu);
    gc_memory_stats start = gc_memory_get_stats(cpu);
    const size_t mib = (size_t)1 << 20, large = 2 * mib; /* classes 2 MiB, then 1.25 MiB, 0.75 MiB */
    void *block = gc_alloc(cpu, large, GC_MEMORY_OTHER);
    REQUIRE(block);
    gc_free(cpu, block, large, GC_MEMORY_OTHER);
    gc_memory_stats cached = gc_memory_get_stats(cpu);
    void *lent = gc_alloc(cpu, mib + 1, GC_MEMORY_OTHER); /* class 1.25 MiB: 2 MiB is three classes up */
    CHECK(lent == block);
    CHECK(gc_memory_get_stats(cpu).driver_alloc_count == cached.driver_alloc_count);
    CHECK(gc_memory_get_stats(cpu).live_bytes == start.live_bytes + mib + 1); /* the request, not the block */
    CHECK(gc_memory_get_stats(cpu).reserved_bytes == cached.reserved_bytes);
    gc_free(cpu, lent, mib + 1, GC_MEMORY_OTHER);
    CHECK(gc_memory_get_stats(cpu).reserved_bytes == cached.reserved_bytes);
    void *again = gc_alloc(cpu, large, GC_MEMORY_OTHER); /* back under 2 MiB, found by its own class */
    CHECK(again == block);
    CHECK(gc_memory_get_stats(cpu).driver_alloc_count == cached.driver_alloc_count);
    gc_free(cpu, again, large, GC_MEMORY_OTHER);
    void *small = gc_alloc(cpu, 3 * mib / 4, GC_MEMORY_OTHER); /* 0.75 MiB: 2 MiB is six classes up */
    REQUIRE(small);
    CHECK(small != block);
    CHECK(gc_memory_get_stats(cpu).driver_alloc_count == cached.driver_alloc_count + 1);
    gc_free(cpu, small, 3 * mib / 4, GC_MEMORY_OTHER);
    gc_memory_empty_cache(cpu);
    gc_memory_stats end = gc_memory_get_stats(cpu);
    CHECK(end.live_bytes == start.live_bytes && end.reserved_bytes == start.reserved_bytes);
    gc_alloc_set_caching(cpu, false);
}

static void test_limit_bounds_cache(void) {
    gc_alloc_set_caching(cpu, true);
    check_limit_bounds_cache(cpu);
    gc_alloc_set_caching(cpu, false);
}

/* The CPU's available memory is Linux's MemAvailable (the page cache counted as available),
 * not the free pages alone: what a default memory limit is taken from. */
static void test_cpu_memory_info(void) {
    size_t free_bytes = 0, total_bytes = 0;
    gc_memory_device_info(gc_cpu(), &free_bytes, &total_bytes);
    CHECK_MSG(free_bytes > 0 && free_bytes <= total_bytes, "cpu: %zu bytes available of %zu", free_bytes, total_bytes);
    FILE *meminfo = fopen("/proc/meminfo", "r");
    if (!meminfo) return; /* not Linux: the free pages */
    char line[128];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, meminfo) && sscanf(line, "MemAvailable: %llu kB", &kib) != 1) {
    }
    fclose(meminfo);
    /* read a moment apart on a machine others use: within 1/8 of each other */
    double ratio = (double)free_bytes / ((double)kib * 1024);
    CHECK_MSG(kib > 0 && ratio > 0.875 && ratio < 1.125, "cpu: %zu bytes available, MemAvailable %llu kB", free_bytes,
              kib);
}

static void switch_caching_while_live(void *unused) {
    (void)unused;
    gc_tensor *t = gc_zeros(GC_SHAPE(4), GC_F32, gc_cpu());
    (void)t;
    gc_alloc_set_caching(gc_cpu(), true);
}

/* Re-runs this program with GC_MEM_LIMIT set, as a user would, and returns its status. */
static int run_self_with_limit(const char *self, const char *limit, const char *mode) {
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDERR_FILENO);
        setenv("GC_MEM_LIMIT", limit, 1);
        execl(self, self, mode, (char *)NULL);
        _exit(98);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return status;
}

/* The child side: the limit from the environment is in force from the first allocation. */
static int env_limit_child(void) {
    gc_memory_stats stats = gc_memory_get_stats(gc_cpu());
    if (stats.limit_bytes != 4096) return 2;
    gc_tensor *fits = gc_zeros(GC_SHAPE(1024), GC_F32, gc_cpu());
    gc_tensor *over = gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu());
    int ok = fits && !over && gc_last_status() == GC_ERR_MEM_LIMIT;
    gc_tensor_release(fits);
    return ok ? 0 : 3;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "env-child") == 0) return env_limit_child();
    if (argc > 1 && strcmp(argv[1], "alloc-child") == 0) {
        gc_tensor *t = gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu()); /* must not get here */
        gc_tensor_release(t);
        return 0;
    }
    test_exact_accounting();
    test_roles();
    gc_test_expect_fatal(bad_role, NULL, "memory_set_role: no memory role 4");
    test_views_allocate_nothing();
    test_zero_byte_tensor();
    test_limit();
    test_parse_size();
    test_limit_spec();
    test_size_classes();
    test_varying_sizes_share_classes();
    test_block_cache();
    test_larger_block_lent();
    test_limit_bounds_cache();
    test_cpu_memory_info();
    gc_test_expect_fatal(switch_caching_while_live, NULL, "caching can only be switched while no memory is live");

    int status = run_self_with_limit(argv[0], "cpu=4K", "env-child");
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "GC_MEM_LIMIT child status %d", status);
    status = run_self_with_limit(argv[0], "cpu=4Q", "alloc-child"); /* malformed: stops, not ignored */
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "malformed GC_MEM_LIMIT child status %d", status);
    return gc_test_result();
}
