/* A tiny test harness for plain C test programs.
 *
 * Exit codes (meson's convention): 0 pass, 1 fail, 77 skip, 99 setup error.
 * CHECK records a failure and goes on, so one run shows every broken case; a test's
 * main() ends with `return gc_test_result();`. */
#ifndef GC_TESTS_CHECK_H
#define GC_TESTS_CHECK_H

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradcache/gradcache.h"

#define GC_TEST_PASS 0
#define GC_TEST_FAIL 1
#define GC_TEST_SKIP 77
#define GC_TEST_SETUP_ERROR 99

/* GC_TEST_SHADOW_MEMORY names the sanitizer of this build whose shadow memory (and, for
 * AddressSanitizer, quarantine of freed blocks) the resident set counts, so that a bound on
 * resident memory is not checked there. */
#if defined(__SANITIZE_ADDRESS__)
#define GC_TEST_SHADOW_MEMORY "AddressSanitizer"
#elif defined(__SANITIZE_THREAD__)
#define GC_TEST_SHADOW_MEMORY "ThreadSanitizer"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GC_TEST_SHADOW_MEMORY "AddressSanitizer"
#elif __has_feature(thread_sanitizer)
#define GC_TEST_SHADOW_MEMORY "ThreadSanitizer"
#endif
#endif

static int gc_test_failures;
static int gc_test_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        gc_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            gc_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        gc_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            gc_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

/* Values within atol + rtol * |want|. */
#define CHECK_NEAR(got, want, atol, rtol)                                                     \
    do {                                                                                      \
        double gc_got_ = (got), gc_want_ = (want);                                            \
        CHECK_MSG(fabs(gc_got_ - gc_want_) <= (atol) + (rtol)*fabs(gc_want_) ||                \
                      (isnan(gc_got_) && isnan(gc_want_)),                                    \
                  "got %.9g, want %.9g", gc_got_, gc_want_);                                  \
    } while (0)

/* A setup step that must work for the test to mean anything (an allocation, say). */
#define REQUIRE(cond)                                                                \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: setup failed: %s (%s)\n", __FILE__, __LINE__,    \
                    #cond, gc_last_error());                                         \
            exit(GC_TEST_SETUP_ERROR);                                               \
        }                                                                            \
    } while (0)

/* Releases every tensor listed: RELEASE(a, b, c). */
#define RELEASE(...)                                                                                 \
    do {                                                                                             \
        gc_tensor *to_release_[] = {__VA_ARGS__};                                                    \
        for (size_t i_ = 0; i_ < sizeof to_release_ / sizeof *to_release_; i_++)                    \
            gc_tensor_release(to_release_[i_]);                                                      \
    } while (0)

/* GC_TEST_CASE(fn) runs the case fn() unless GC_TEST_ONLY, a comma-separated list of case
 * names, leaves it out: the slow tools (compute-sanitizer, in bench/gpu_check.sh) run a small
 * fixed subset. A name listed that no case of the program has fails the program, so that a
 * misspelt subset cannot pass by running nothing. */
static int gc_test_only_ran; /* cases run that GC_TEST_ONLY named */

static inline bool gc_test_only_names(const char *list, const char *name) {
    size_t length = strlen(name);
    for (const char *item = list; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL)
        if (strncmp(item, name, length) == 0 && (item[length] == ',' || item[length] == '\0')) return true;
    return false;
}

static inline void gc_test_case(const char *name, void (*fn)(void)) {
    const char *only = getenv("GC_TEST_ONLY");
    if (only && !gc_test_only_names(only, name)) return;
    gc_test_only_ran += only != NULL;
    fn();
}
#define GC_TEST_CASE(fn) gc_test_case(#fn, fn)

static inline int gc_test_result(void) {
    const char *only = getenv("GC_TEST_ONLY");
    if (only) {
        int listed = 1;
        for (const char *c = only; *c; c++) listed += *c == ',';
        CHECK_MSG(gc_test_only_ran == listed, "GC_TEST_ONLY=%s names %d cases; %d of them are cases here", only,
                  listed, gc_test_only_ran);
    }
    fprintf(stderr, "%d checks, %d failed\n", gc_test_checks, gc_test_failures);
    return gc_test_failures ? GC_TEST_FAIL : GC_TEST_PASS;
}

/* Exits 77 (skip), saying why, when `devices` (a CUDA device count) is 0. */
static inline void gc_test_skip_without_gpu(int devices) {
    if (devices > 0) return;
    fprintf(stderr, "skip: %s\n", gc_cuda_built() ? "no CUDA device" : "built without CUDA");
    exit(GC_TEST_SKIP);
}

/* For the cuda suite: exits 77 (skip) when no GPU is usable. */
static inline void gc_test_require_cuda(void) { gc_test_skip_without_gpu(gc_cuda_device_count()); }

/* counts[0] + ... + counts[n - 1]: the rows of the ranks before rank n (or of the whole world
 * of n), from each rank's count. */
static inline int64_t gc_test_sum_counts(const int64_t *counts, int n) {
    int64_t total = 0;
    for (int r = 0; r < n; r++) total += counts[r];
    return total;
}

/* Whether this process runs under GC_CUDA_SYNC=1 (bench/gpu_check.sh runs the cuda suite
 * both ways), read as tensor/cuda/debug_cuda.c reads it: a wait after every launch, and a
 * bad index reported at its launch instead of at the next synchronisation. */
static inline bool gc_test_cuda_sync_mode(void) {
    const char *value = getenv("GC_CUDA_SYNC");
    return value && *value && strcmp(value, "0") != 0;
}

/* The same for a test whose child processes use CUDA (the fatal-error checks of
 * gc_test_expect_fatal, the ranks of tests/dist_spawn.h): CUDA does not survive fork(), so
 * a child can use it only if its parent never initialised it, and even asking for the
 * device count does. This learns the count from a probe child, so that this process still
 * has not touched CUDA (gc_cuda_asked() stays false), and returns it. Such a test runs
 * its children before it uses CUDA itself, if it ever does. */
static inline int gc_test_require_cuda_untouched(void) {
    fflush(NULL);
    pid_t probe = fork();
    REQUIRE(probe >= 0);
    if (probe == 0) {
        int count = gc_cuda_device_count();
        _exit(count < 100 ? count : 100);
    }
    int status = 0;
    REQUIRE(waitpid(probe, &status, 0) == probe && WIFEXITED(status));
    gc_test_skip_without_gpu(WEXITSTATUS(status));
    return WEXITSTATUS(status);
}

/* True when this run takes the paths a GPU takes (GC_COMPOSED_OPS=1: the CPU without its
 * fused kernels, tensor/backend_kernels.h); a case about a fused kernel itself checks then
 * that it did not run. */
static inline bool gc_test_composed_ops(void) {
    const char *value = getenv("GC_COMPOSED_OPS");
    return value && strcmp(value, "1") == 0;
}

/* Compares every element of `got` with `want` (any devices, any dtypes, one shape):
 * |got - want| <= atol + rtol |want|, nan only where want is nan. Reports the first few
 * offending elements under `what`. Returns the number of mismatches. */
static inline int gc_test_expect_close(const gc_tensor *want, const gc_tensor *got, double atol,
                                       double rtol, const char *what) {
    gc_test_checks++;
    if (!gc_same_shape(want, got)) {
        char a[128], b[128];
        fprintf(stderr, "%s: shape mismatch: want %s, got %s\n", what,
                gc_tensor_str(want, a, sizeof a), gc_tensor_str(got, b, sizeof b));
        gc_test_failures++;
        return 1;
    }
    int64_t n = gc_numel(want);
    double *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *g = malloc(sizeof(double) * (size_t)(n ? n : 1));
    REQUIRE(w && g);
    gc_to_host_f64(want, w);
    gc_to_host_f64(got, g);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok = isnan(w[i]) ? isnan(g[i]) : (w[i] == g[i] || fabs(g[i] - w[i]) <= atol + rtol * fabs(w[i]));
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s: element %lld: got %.9g, want %.9g\n", what, (long long)i, g[i], w[i]);
    }
    if (bad) {
        fprintf(stderr, "%s: %d of %lld elements differ (atol %g, rtol %g)\n", what, bad, (long long)n, atol, rtol);
        gc_test_failures++;
    }
    free(w);
    free(g);
    return bad;
}

/* Runs body(arg) in a child process (which then exits 0 if body returns), its stderr
 * captured into output[size] (NUL-terminated); returns the child's wait status. */
static inline int gc_test_run_child(void (*body)(void *), void *arg, char *output, size_t size) {
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        body(arg);
        _exit(0);
    }
    close(pipe_fds[1]);
    size_t used = 0;
    ssize_t got;
    while ((got = read(pipe_fds[0], output + used, size - 1 - used)) > 0) used += (size_t)got;
    output[used] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    return status;
}

/* Runs fn(arg) in a child process and checks that it stops the program (abort) with a
 * message on stderr containing `expected`. Programmer errors are tested this way. */
static inline void gc_test_expect_fatal(void (*fn)(void *), void *arg, const char *expected) {
    gc_test_checks++;
    char output[4096];
    int status = gc_test_run_child(fn, arg, output, sizeof output);
    bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    bool named = strstr(output, expected) != NULL;
    if (!aborted || !named) {
        fprintf(stderr, "expected a fatal error containing '%s'; the child %s and printed: %s\n", expected,
                aborted ? "aborted" : "did not abort", output);
        gc_test_failures++;
    }
}

/* Whether fn(arg) returns true when run in a child process: for what a process reads once
 * (an environment variable, say) and the tests must see fresh. */
static inline bool gc_test_true_in_child(bool (*fn)(void *), void *arg) {
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(fn(arg) ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A reproducible random CPU tensor, uniform in [lo, hi); an i32 one holds uniform f32
 * values truncated toward zero (gc_uniform makes floating dtypes only). */
static inline gc_tensor *gc_test_random_in(int ndim, const int64_t *shape, gc_dtype dtype, double lo, double hi,
                                           uint64_t seed) {
    gc_tensor *values = gc_uniform(ndim, shape, dtype == GC_I32 ? GC_F32 : dtype, gc_cpu(), lo, hi, seed, 0);
    REQUIRE(values);
    if (dtype != GC_I32) return values;
    gc_tensor *ints = gc_cast(values, GC_I32);
    REQUIRE(ints);
    gc_tensor_release(values);
    return ints;
}

/* The same in [-1, 1). */
static inline gc_tensor *gc_test_random(int ndim, const int64_t *shape, gc_dtype dtype, uint64_t seed) {
    return gc_test_random_in(ndim, shape, dtype, -1.0, 1.0, seed);
}

/* The largest |element| of t (any device and dtype; 0 when t is empty). */
static inline double gc_test_largest_abs(const gc_tensor *t) {
    int64_t n = gc_numel(t);
    double *values = malloc(sizeof(double) * (size_t)(n ? n : 1)), largest = 0;
    REQUIRE(values);
    gc_to_host_f64(t, values);
    for (int64_t i = 0; i < n; i++) largest = fmax(largest, fabs(values[i]));
    free(values);
    return largest;
}

/* The tolerance for comparing a CUDA result with the CPU's, per element, relative to the
 * magnitude of the values: both backends compute half-precision types in f32 and round
 * the result once, so they can differ by one unit in the last place of the stored type
 * (2^-8 for bf16, 2^-11 for f16), plus the different order of f32 sums (a few f32 ulps
 * times the length of a reduction, well under 1e-5 for the sizes tested). */
static inline double gc_test_tolerance(gc_dtype dtype) {
    switch (dtype) {
    case GC_BF16: return 1.0 / 128; /* two bf16 ulps */
    case GC_F16: return 1.0 / 1024; /* two f16 ulps */
    case GC_F64: return 1e-12;
    default: return 1e-5;
    }
}

#endif
