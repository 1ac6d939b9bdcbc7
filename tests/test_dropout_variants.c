/* The CPU dropout's variants: its mask comes from the Philox words of the instruction set
 * chosen at run time (tensor/cpu/philox_cpu.h). The portable words are held to the
 * published known answers and to gc_philox_read (what the CUDA kernel reads), the portable
 * dropout to its definition (mask and kept values), and every SIMD variant this CPU offers
 * to the portable one, bitwise, with 1, 2, 3 and 8 threads: on offsets inside a block,
 * block counters crossing 2^32 (the counter's high word, between and inside a register's
 * pair of blocks), word indices wrapping at 2^64, lengths of 0 and off every multiple of 4
 * and 8, every float dtype. The variants are called directly, as GC_CPU_KERNELS is read
 * once per process; children check that it selects them. */
#include "check.h"
#include "tensor/cpu/kernels_cpu.h"
#include "tensor/cpu/philox_cpu.h"
#include "tensor/philox_impl.h"

#define P 0.3
#define MAX_LENGTH 40003 /* split into 8 uneven ranges by 8 threads */

static const uint64_t seeds[] = {0, 0x9E3779B97F4A7C15u, UINT64_MAX};
static const uint64_t offsets[] = {
    0, 1, 2, 3, 0x0123456789abcdefu,
    (UINT64_C(1) << 34) - 6, /* blocks 2^32 - 2 on: the high word changes between two blocks' registers */
    (UINT64_C(1) << 34) - 1, /* blocks 2^32 - 1 on: and inside one */
    (UINT64_C(1) << 40) + 5, /* a high word from the start */
    UINT64_MAX - 9,          /* words 2^64 - 10 on: word 2^64 is word 0, block 2^62 is block 0 */
};
static const int64_t lengths[] = {0, 1, 3, 4, 5, 7, 8, 9, 17, 63, 255, 256, 257, 1021, MAX_LENGTH};
static const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16, GC_F64};
static const int thread_counts[] = {1, 2, 3, 8};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t threshold(void) { return (uint32_t)ceil(P * 16777216.0); }

/* Words of batches against the stream's blocks, and the first block of seed 0 against the
 * known answer (docs/philox4x32-10.md: counter 0, key 0). */
static void test_batches(gc_cpu_isa isa) {
    const uint32_t known[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    const uint64_t firsts[] = {0, 7, (UINT64_C(1) << 32) - 2, (UINT64_C(1) << 32) - 1, GC_PHILOX_BLOCK_MASK - 2};
    gc_philox_batch_fn *batch = gc_philox_batch_for(isa);
    uint32_t words[GC_PHILOX_BATCH_WORDS];
    batch(0, 0, words);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(words[r] == known[r], "%s: word %d of seed 0 is %08x, want %08x", gc_cpu_isa_name(isa), r, words[r],
                  known[r]);
    for (size_t s = 0; s < COUNT(seeds); s++)
        for (size_t f = 0; f < COUNT(firsts); f++) {
            batch(seeds[s], firsts[f], words);
            gc_philox_reader reader = gc_philox_reader_start(seeds[s]);
            int wrong = 0;
            for (uint64_t w = 0; w < GC_PHILOX_BATCH_WORDS; w++)
                wrong += words[w] != gc_philox_read(&reader, 4 * firsts[f] + w);
            CHECK_MSG(wrong == 0, "%s: seed %llx, blocks from %llx: %d words differ from gc_philox_read",
                      gc_cpu_isa_name(isa), (unsigned long long)seeds[s], (unsigned long long)firsts[f], wrong);
        }
}

/* Element i's bytes when kept: x * scale in float (double for f64), rounded once. */
static void kept_element(const void *x, gc_dtype dtype, size_t i, void *out) {
    const float scale = (float)(1.0 / (1.0 - P));
    switch (dtype) {
    case GC_F32: ((float *)out)[0] = ((const float *)x)[i] * scale; break;
    case GC_F64: ((double *)out)[0] = ((const double *)x)[i] * (1.0 / (1.0 - P)); break;
    case GC_F16: ((uint16_t *)out)[0] = gc_f32_to_f16(gc_f16_to_f32(((const uint16_t *)x)[i]) * scale); break;
    default: ((uint16_t *)out)[0] = gc_f32_to_bf16(gc_bf16_to_f32(((const uint16_t *)x)[i]) * scale); break;
    }
}

/* y against the definition: element i is kept when word offset + i (gc_philox_read) has
 * (word >> 8) >= threshold, and is then x * scale rounded once, else +0. */
static int64_t wrong_elements(const void *x, const unsigned char *y, gc_dtype dtype, int64_t n, uint64_t seed,
                              uint64_t offset) {
    size_t size = gc_dtype_size(dtype);
    const unsigned char zero[8] = {0};
    unsigned char want[8];
    gc_philox_reader reader = gc_philox_reader_start(seed);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) {
        bool kept = (gc_philox_read(&reader, offset + (uint64_t)i) >> 8) >= threshold();
        if (kept) kept_element(x, dtype, (size_t)i, want);
        wrong += memcmp(y + (size_t)i * size, kept ? want : zero, size) != 0;
    }
    return wrong;
}

static void run(const void *x, void *y, int64_t n, gc_dtype dtype, uint64_t seed, uint64_t offset, gc_cpu_isa isa) {
    gc_cpu_dropout_on(x, y, (size_t)n, dtype, threshold(), 1.0 / (1.0 - P), seed, offset, isa);
}

/* Every case on every thread count: the portable dropout against its definition, each other
 * variant bitwise against the portable one. */
static void test_dropout(void) {
    unsigned char *want = malloc(MAX_LENGTH * 8), *got = malloc(MAX_LENGTH * 8);
    REQUIRE(want && got);
    int compared = 0;
    for (size_t d = 0; d < COUNT(dtypes); d++) {
        gc_tensor *x = gc_uniform(GC_SHAPE(MAX_LENGTH), dtypes[d], gc_cpu(), 1, 2, 3, 0); /* kept: nonzero */
        REQUIRE(x);
        size_t size = gc_dtype_size(dtypes[d]);
        for (size_t t = 0; t < COUNT(thread_counts); t++) {
            gc_set_cpu_threads(thread_counts[t]);
            for (size_t s = 0; s < COUNT(seeds); s++)
                for (size_t o = 0; o < COUNT(offsets); o++)
                    for (size_t l = 0; l < COUNT(lengths); l++) {
                        int64_t n = lengths[l];
                        run(gc_data(x), want, n, dtypes[d], seeds[s], offsets[o], GC_ISA_PORTABLE);
                        int64_t wrong = wrong_elements(gc_data(x), want, dtypes[d], n, seeds[s], offsets[o]);
                        CHECK_MSG(wrong == 0, "portable %s, %d threads, seed %llx, offset %llx, n %lld: %lld "
                                  "elements differ from the definition", gc_dtype_name(dtypes[d]),
                                  thread_counts[t], (unsigned long long)seeds[s], (unsigned long long)offsets[o],
                                  (long long)n, (long long)wrong);
                        for (gc_cpu_isa isa = GC_ISA_PORTABLE + 1; isa < GC_ISA_COUNT; isa++) {
                            if (!gc_cpu_isa_available(isa)) continue;
                            run(gc_data(x), got, n, dtypes[d], seeds[s], offsets[o], isa);
                            CHECK_MSG(memcmp(got, want, (size_t)n * size) == 0,
                                      "%s %s, %d threads, seed %llx, offset %llx, n %lld: differs from portable",
                                      gc_cpu_isa_name(isa), gc_dtype_name(dtypes[d]), thread_counts[t],
                                      (unsigned long long)seeds[s], (unsigned long long)offsets[o], (long long)n);
                            compared++;
                        }
                    }
        }
        gc_tensor_release(x);
    }
    gc_set_cpu_threads(1);
    free(want);
    free(got);
    fprintf(stderr, "%d (dtype, threads, seed, offset, length, isa) cases compared with the portable dropout%s\n",
            compared, gc_cpu_isa_available(GC_ISA_AVX2) ? "" : " (no AVX2 here: its half skipped)");
}

/* GC_CPU_KERNELS=cap selects `want`, and gc_dropout then gives the portable bytes. */
typedef struct selection_case {
    const char *cap;
    gc_cpu_isa want;
} selection_case;

static bool dropout_selected_as_expected(void *arg) {
    const selection_case *c = arg;
    setenv("GC_CPU_KERNELS", c->cap, 1);
    const uint64_t seed = 5, offset = (UINT64_C(1) << 34) - 3;
    gc_tensor *x = gc_uniform(GC_SHAPE(MAX_LENGTH), GC_F32, gc_cpu(), -1, 1, 4, 0), *y = gc_dropout(x, P, seed, offset);
    float *want = malloc(MAX_LENGTH * sizeof *want);
    REQUIRE(x && y && want);
    run(gc_data(x), want, MAX_LENGTH, GC_F32, seed, offset, GC_ISA_PORTABLE);
    return gc_cpu_isa_selected() == c->want && memcmp(gc_data(y), want, MAX_LENGTH * sizeof *want) == 0;
}

static void test_selection(void) {
    const selection_case cases[] = {
        {"portable", GC_ISA_PORTABLE},
        {"avx2", gc_cpu_isa_available(GC_ISA_AVX2) ? GC_ISA_AVX2 : GC_ISA_PORTABLE},
    };
    for (size_t i = 0; i < COUNT(cases); i++)
        CHECK_MSG(gc_test_true_in_child(dropout_selected_as_expected, (void *)&cases[i]),
                  "GC_CPU_KERNELS=%s: gc_dropout should run on %s and give the portable bytes", cases[i].cap,
                  gc_cpu_isa_name(cases[i].want));
}

int main(void) {
    for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa < GC_ISA_COUNT; isa++)
        if (gc_cpu_isa_available(isa)) test_batches(isa);
    test_dropout();
    test_selection();
    return gc_test_result();
}
