/* The multi-tensor finiteness check on the CPU (gc_any_nonfinite): the verdict over lists of
 * mixed dtypes and sizes with one inf or nan planted where an indexing mistake would miss it,
 * the shared pieces of ../tensor/finite_impl.h that the CUDA kernel runs (the element test on
 * raw bits, strided ranges, the task search), errors, and memory. */
#include "check.h"
#include "nonfinite_cases.h"
#include "tensor/finite_impl.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* Every bit pattern of f16 and bf16: flagged exactly when the exponent is all ones. */
static void test_every_half_pattern(void) {
    int wrong = 0;
    for (uint32_t bits = 0; bits <= 0xFFFF; bits++) {
        uint16_t value = (uint16_t)bits;
        float f16 = gc_f16_to_f32(value), bf16 = gc_bf16_to_f32(value);
        wrong += gc_range_nonfinite(&value, GC_F16, 0, 1, 1) != !isfinite(f16);
        wrong += gc_range_nonfinite(&value, GC_BF16, 0, 1, 1) != !isfinite(bf16);
    }
    CHECK_MSG(wrong == 0, "%d of the 2 x 65536 half patterns misjudged", wrong);
    float f32[3] = {0x1.fffffep127f, 0x1p-149f, INFINITY};
    double f64[3] = {0x1.fffffffffffffp1023, 0x1p-1074, NAN};
    CHECK(!gc_range_nonfinite(f32, GC_F32, 0, 2, 1) && gc_range_nonfinite(f32, GC_F32, 0, 3, 1));
    CHECK(!gc_range_nonfinite(f64, GC_F64, 0, 2, 1) && gc_range_nonfinite(f64, GC_F64, 0, 3, 1));
}

/* A CUDA thread scans begin, begin + step, ...: it must see exactly those elements. */
static void test_strided_range(void) {
    float values[10] = {0};
    values[7] = NAN;
    CHECK(gc_range_nonfinite(values, GC_F32, 1, 10, 3));  /* 1, 4, 7 */
    CHECK(!gc_range_nonfinite(values, GC_F32, 0, 10, 3)); /* 0, 3, 6, 9 */
    CHECK(!gc_range_nonfinite(values, GC_F32, 2, 10, 3)); /* 2, 5, 8 */
    CHECK(!gc_range_nonfinite(values, GC_F32, 1, 7, 3));  /* 1, 4: the end is excluded */
    CHECK(!gc_range_nonfinite(values, GC_F32, 8, 8, 1));  /* empty */
}

/* The task search: for task counts with runs of empty arrays at the start, in the middle and
 * at the end, every task maps to the array whose range holds it. */
static void test_span_of_task(void) {
    static const int64_t tasks[][8] = {
        {3, 0, 0, 2, 1, 0, 4, 0}, {0, 0, 1, 0, 0, 0, 0, 5}, {1, 1, 1, 1, 1, 1, 1, 1}, {7, 0, 0, 0, 0, 0, 0, 0}};
    for (int c = 0; c < 4; c++) {
        int64_t first[9] = {0};
        for (int s = 0; s < 8; s++) first[s + 1] = first[s] + tasks[c][s];
        for (int count = 1; count <= 8; count++)
            for (int64_t t = 0; t < first[count]; t++) {
                int s = gc_span_of_task(first, count, t);
                CHECK_MSG(s >= 0 && s < count && first[s] <= t && t < first[s + 1],
                          "case %d, %d arrays: task %lld went to array %d", c, count, (long long)t, s);
            }
    }
    CHECK(gc_span_tasks(0) == 0 && gc_span_tasks(1) == 1 && gc_span_tasks(65536) == 1 && gc_span_tasks(65537) == 2);
}

static void test_lists(void) {
    nonfinite_check_all(7, cpu);
    nonfinite_check_all(9, cpu); /* its last tensor is empty */
    /* one tensor, and a tensor of one element */
    gc_tensor *one = gc_full(GC_SHAPE(1), GC_BF16, cpu, 3);
    CHECK(nonfinite_verdict(&one, 1) == 0);
    nonfinite_set(one, 0, 1e39); /* past bf16's largest: rounds to inf */
    CHECK(nonfinite_verdict(&one, 1) == 1);
    /* a 0-dim tensor and a [2, 3] one */
    gc_tensor *scalar = gc_scalar(NAN, GC_F16, cpu), *matrix = gc_zeros(GC_SHAPE(2, 3), GC_F32, cpu);
    gc_tensor *pair[2] = {matrix, scalar};
    CHECK(nonfinite_verdict(pair, 1) == 0 && nonfinite_verdict(pair, 2) == 1);
    RELEASE(one, scalar, matrix);
}

/* The verdict is a new 0-dim tensor: under a memory limit that leaves no room for it, NULL
 * with the limit's error and nothing leaked; a NULL in the list gives NULL (error chaining). */
static void test_errors_returned(void) {
    gc_tensor *x = gc_zeros(GC_SHAPE(4), GC_F32, cpu);
    size_t live = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_set_limit(cpu, live + 1);
    CHECK(gc_any_nonfinite(&x, 1) == NULL && gc_last_status() == GC_ERR_MEM_LIMIT);
    gc_memory_set_limit(cpu, 0);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live);
    gc_clear_error();
    gc_tensor *with_null[2] = {x, NULL};
    CHECK(gc_any_nonfinite(with_null, 2) == NULL && gc_last_status() == GC_OK);
    gc_tensor_release(x);
}

static void no_tensors(void *unused) {
    (void)unused;
    gc_any_nonfinite(NULL, 0);
}

static void int_tensor(void *unused) {
    (void)unused;
    gc_tensor *x = gc_zeros(GC_SHAPE(2), GC_I32, cpu);
    gc_any_nonfinite(&x, 1);
}

int main(void) {
    test_every_half_pattern();
    test_strided_range();
    test_span_of_task();
    test_lists();
    test_errors_returned();
    gc_test_expect_fatal(no_tensors, NULL, "any_nonfinite: 0 tensors");
    gc_test_expect_fatal(int_tensor, NULL, "any_nonfinite");
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
