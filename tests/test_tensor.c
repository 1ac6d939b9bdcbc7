/* Tensor objects: creation, views sharing storage, reference counting, copies, host
 * access for every dtype, and the one-line fatal errors of misuse. */
#include "check.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

static void test_creation(void) {
    gc_tensor *full = gc_full(GC_SHAPE(2, 3), GC_F32, cpu, 2.5);
    gc_tensor *range = gc_arange(5, 1.0, 0.5, GC_F64, cpu);
    gc_tensor *ints = gc_arange(4, -2, 1, GC_I32, cpu);
    gc_tensor *scalar = gc_scalar(-7, GC_F16, cpu);
    REQUIRE(full && range && ints && scalar);
    CHECK(full->ndim == 2 && full->shape[0] == 2 && full->shape[1] == 3 && gc_numel(full) == 6);
    CHECK(gc_nbytes(full) == 24);
    double values[6];
    gc_to_host_f64(full, values);
    for (int i = 0; i < 6; i++) CHECK(values[i] == 2.5);
    gc_to_host_f64(range, values);
    CHECK(values[0] == 1.0 && values[4] == 3.0);
    int32_t int_values[4];
    gc_copy_to_host(ints, int_values);
    CHECK(int_values[0] == -2 && int_values[3] == 1);
    CHECK(scalar->ndim == 0 && gc_numel(scalar) == 1 && gc_item(scalar) == -7.0);
    char text[64];
    CHECK(strcmp(gc_tensor_str(full, text, sizeof text), "[2, 3] f32 cpu") == 0);
    CHECK(strcmp(gc_tensor_str(scalar, text, sizeof text), "[] f16 cpu") == 0);
    gc_tensor *tensors[] = {full, range, ints, scalar};
    for (int i = 0; i < 4; i++) gc_tensor_release(tensors[i]);
}

/* Every dtype reads back through gc_to_host_f64 (which widens in place). */
static void test_host_access_every_dtype(void) {
    const float f32[3] = {1.5f, -2.0f, 65504.0f};
    const uint16_t f16[3] = {0x3e00, 0xc000, 0x7bff};  /* 1.5, -2, 65504 */
    const uint16_t bf16[3] = {0x3fc0, 0xc000, 0x477f}; /* 1.5, -2, 65280 */
    const int32_t i32[3] = {7, -8, 2147483647};
    const double f64[3] = {0.1, -1e300, 3.0};
    const void *sources[] = {f32, f16, bf16, i32, f64};
    const double want[5][3] = {{1.5, -2, 65504}, {1.5, -2, 65504}, {1.5, -2, 65280}, {7, -8, 2147483647},
                               {0.1, -1e300, 3}};
    for (int d = 0; d < GC_DTYPE_COUNT; d++) {
        gc_tensor *t = gc_from_host(sources[d], GC_SHAPE(3), (gc_dtype)d, cpu);
        REQUIRE(t);
        double got[3];
        gc_to_host_f64(t, got);
        for (int i = 0; i < 3; i++) CHECK_MSG(got[i] == want[d][i], "%s[%d] = %g", gc_dtype_name((gc_dtype)d), i, got[i]);
        gc_tensor_release(t);
    }
}

static void test_views_share_storage(void) {
    gc_tensor *t = gc_arange(12, 0, 1, GC_F32, cpu);
    gc_tensor *grid = gc_reshape(t, GC_SHAPE(4, -1));
    gc_tensor *middle = gc_slice0(grid, 1, 3); /* rows 1 and 2: elements 3..8 */
    gc_tensor *replacement = gc_full(GC_SHAPE(2, 3), GC_F32, cpu, -1);
    REQUIRE(grid && middle && replacement);
    CHECK(grid->shape[0] == 4 && grid->shape[1] == 3);
    CHECK(middle->shape[0] == 2 && middle->offset == 3);
    CHECK(gc_data(middle) == (float *)gc_data(t) + 3);
    CHECK(gc_copy_(middle, replacement) == GC_OK); /* writing through the view ... */
    double values[12];
    gc_to_host_f64(t, values); /* ... changes the original */
    for (int i = 0; i < 12; i++) CHECK(values[i] == ((i >= 3 && i < 9) ? -1 : i));
    gc_tensor *empty_rows = gc_slice0(grid, 4, 4);
    REQUIRE(empty_rows);
    CHECK(empty_rows->shape[0] == 0 && gc_numel(empty_rows) == 0);
    gc_tensor *tensors[] = {t, grid, middle, replacement, empty_rows};
    for (int i = 0; i < 5; i++) gc_tensor_release(tensors[i]);
}

static void test_retain_release(void) {
    gc_tensor *t = gc_zeros(GC_SHAPE(3), GC_F32, cpu);
    REQUIRE(t);
    size_t live = gc_memory_get_stats(cpu).live_bytes;
    CHECK(gc_tensor_retain(t) == t && t->refcount == 2);
    gc_tensor_release(t);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live); /* still referenced */
    gc_tensor_release(t);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live - 12);
    gc_tensor_release(NULL); /* a no-op */
}

static int ext_freed;
static void count_ext_free(void *ext) { ext_freed += *(int *)ext; }

static void test_ext_freed_with_last_reference(void) {
    static int weight = 1;
    gc_tensor *t = gc_zeros(GC_SHAPE(1), GC_F32, cpu);
    REQUIRE(t);
    t->ext = &weight;
    t->ext_free = count_ext_free;
    gc_tensor_retain(t);
    gc_tensor_release(t);
    CHECK(ext_freed == 0);
    gc_tensor_release(t);
    CHECK(ext_freed == 1);
}

static void test_clone_and_copy(void) {
    gc_tensor *a = gc_arange(4, 0, 1, GC_F32, cpu);
    gc_tensor *b = gc_clone(a);
    REQUIRE(a && b);
    CHECK(b->storage != a->storage && gc_same_shape(a, b));
    gc_tensor *ones = gc_ones(GC_SHAPE(4), GC_F32, cpu);
    REQUIRE(ones);
    CHECK(gc_copy_(a, ones) == GC_OK);
    double values[4];
    gc_to_host_f64(b, values); /* the clone has its own storage: unchanged */
    CHECK(values[0] == 0 && values[3] == 3);
    gc_to_host_f64(a, values);
    CHECK(values[0] == 1 && values[3] == 1);
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(ones);
}

/* --- programmer errors: one line naming the op and the values --- */
static void slice_past_end(void *unused) {
    (void)unused;
    gc_tensor *t = gc_zeros(GC_SHAPE(4, 2), GC_F32, gc_cpu());
    gc_slice0(t, 2, 5);
}
static void reshape_wrong_count(void *unused) {
    (void)unused;
    gc_tensor *t = gc_zeros(GC_SHAPE(4, 2), GC_F32, gc_cpu());
    gc_reshape(t, GC_SHAPE(3, 3));
}
static void copy_shape_mismatch(void *unused) {
    (void)unused;
    gc_tensor *a = gc_zeros(GC_SHAPE(4), GC_F32, gc_cpu());
    gc_tensor *b = gc_zeros(GC_SHAPE(5), GC_F32, gc_cpu());
    gc_copy_(a, b);
}
static void too_many_dims(void *unused) {
    (void)unused;
    gc_zeros(GC_SHAPE(1, 1, 1, 1, 1), GC_F32, gc_cpu());
}
static void item_of_many(void *unused) {
    (void)unused;
    gc_item(gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()));
}
static void cuda_without_device(void *unused) {
    (void)unused;
    gc_zeros(GC_SHAPE(2), GC_F32, gc_cuda(GC_MAX_CUDA_DEVICES - 1));
}

/* The CPU computes in every dtype (16-bit ones stored, with f32 arithmetic). */
static void test_cpu_computes_every_dtype(void) {
    for (int d = 0; d < GC_DTYPE_COUNT; d++) CHECK(gc_device_check_dtype(gc_cpu(), (gc_dtype)d) == GC_OK);
}

/* A recoverable error is one line, whatever it quotes: a control byte of a name or value that
 * came from outside (a tensor name from a file, an environment variable) is shown as '?'. */
static void test_error_is_one_line(void) {
    gc_set_error(GC_ERR_FORMAT, "file: tensor '%s' at 100%%", "a\nb\tc\x7f\xc3\xa9");
    CHECK_MSG(strcmp(gc_last_error(), "file: tensor 'a?b?c?\xc3\xa9' at 100%") == 0, "message: %s", gc_last_error());
    CHECK(gc_last_status() == GC_ERR_FORMAT);
    gc_clear_error();
}

int main(void) {
    test_cpu_computes_every_dtype();
    test_error_is_one_line();
    test_creation();
    test_host_access_every_dtype();
    test_views_share_storage();
    test_retain_release();
    test_ext_freed_with_last_reference();
    test_clone_and_copy();
    gc_test_expect_fatal(slice_past_end, NULL, "slice0: rows [2, 5) out of range for [4, 2] f32 cpu");
    gc_test_expect_fatal(reshape_wrong_count, NULL, "reshape: [4, 2] f32 cpu cannot be viewed as [3, 3]");
    gc_test_expect_fatal(copy_shape_mismatch, NULL, "copy_: destination [4] f32 cpu and source [5] f32 cpu");
    gc_test_expect_fatal(too_many_dims, NULL, "empty: 5 dims, at most 4");
    gc_test_expect_fatal(item_of_many, NULL, "item: [2] f32 cpu has 2 elements");
    gc_test_expect_fatal(cuda_without_device, NULL, "cuda:15 requested");
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
