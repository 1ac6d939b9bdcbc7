/* Elementwise kernels on the CPU: unary maps, broadcasting binary ops, ops with a scalar.
 *
 * The math of each op is written once, in unary_apply_T / binary_apply_T, and shared by
 * two kinds of loops: direct loops over float arrays for f32 (the CPU training hot path),
 * and loops through gc_load / gc_store for the other dtypes. Those compute f16 and bf16
 * in float, so the stored result is rounded once from the f32 value as on CUDA; f64 in
 * double; i32 in 64-bit integers, so large values never pass through a double.
 *
 * Every kernel splits its elements (or rows) between the threads (thread_pool.h); each
 * element is computed alone, so the split changes nothing in the results. */
#include <tgmath.h>

#include "elem_cpu.h"
#include "gelu_cpu.h"
#include "gradcache/error.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi), for gelu_tanh */

/* The gelu (erf form) and its derivative in double, on libm's erf and exp; the float ones
 * are gelu_cpu.h's, on a float erf and exp of the library's own that vectorise (erff and
 * expf are scalar calls). */
static inline double gelu_erf_f64(double x) { return 0.5 * x * (1 + erf(x * GC_SQRT_HALF)); }
static inline double gelu_erf_grad_f64(double x) {
    return 0.5 * (1 + erf(x * GC_SQRT_HALF)) + x * GC_INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* tgmath.h makes exp, log, tanh and sqrt the float functions (expf, ...) for a float
 * argument and the double ones for a double, so one body gives both precisions. */
#define DEFINE_UNARY_APPLY(T, GELU_ERF, GELU_ERF_GRAD)                                         \
    static inline T unary_apply_##T(gc_unary_op op, T x) {                                     \
        switch (op) {                                                                          \
        case GC_UNARY_NEG: return -x;                                                          \
        case GC_UNARY_EXP: return exp(x);                                                      \
        case GC_UNARY_LOG: return log(x);                                                      \
        case GC_UNARY_TANH: return tanh(x);                                                    \
        case GC_UNARY_RELU: return x < 0 ? (T)0 : x; /* a nan stays a nan */                   \
        case GC_UNARY_GELU_TANH:                                                               \
            return (T)0.5 * x * ((T)1 + tanh((T)SQRT_2_OVER_PI * (x + (T)0.044715 * x * x * x))); \
        case GC_UNARY_GELU_ERF: return GELU_ERF(x);                                            \
        case GC_UNARY_SQRT: return sqrt(x);                                                    \
        case GC_UNARY_RSQRT: return (T)1 / sqrt(x);                                            \
        case GC_UNARY_RELU_GRAD: return x > 0 ? (T)1 : (T)0;                                   \
        case GC_UNARY_GELU_TANH_GRAD: {                                                        \
            T t = tanh((T)SQRT_2_OVER_PI * (x + (T)0.044715 * x * x * x));                     \
            return (T)0.5 * ((T)1 + t) +                                                       \
                   (T)0.5 * x * ((T)1 - t * t) * (T)SQRT_2_OVER_PI * ((T)1 + (T)(3 * 0.044715) * x * x); \
        }                                                                                      \
        case GC_UNARY_GELU_ERF_GRAD: return GELU_ERF_GRAD(x);                                  \
        }                                                                                      \
        return (T)NAN; /* not a gc_unary_op: the front-ends never pass one */                  \
    }
DEFINE_UNARY_APPLY(float, gc_gelu_erf_f32, gc_gelu_erf_grad_f32)
DEFINE_UNARY_APPLY(double, gelu_erf_f64, gelu_erf_grad_f64)

/* For int64_t only add, sub and mul are used (the front-end rejects i32 division). */
#define DEFINE_BINARY_APPLY(T)                                       \
    static inline T binary_apply_##T(gc_binary_op op, T a, T b) {    \
        switch (op) {                                                \
        case GC_BINARY_ADD: return a + b;                            \
        case GC_BINARY_SUB: return a - b;                            \
        case GC_BINARY_MUL: return a * b;                            \
        case GC_BINARY_DIV: return a / b;                            \
        }                                                            \
        return 0; /* not a gc_binary_op: the front-ends never pass one */ \
    }
DEFINE_BINARY_APPLY(float)
DEFINE_BINARY_APPLY(double)
DEFINE_BINARY_APPLY(int64_t)

/* The op in the working precision of a non-f32 dtype; x holds a value of the dtype
 * exactly, and so does the result for i32 (so gc_store converts it exactly). */
static inline double unary_in_precision(gc_unary_op op, gc_dtype dtype, double x) {
    return dtype == GC_F64 ? unary_apply_double(op, x) : unary_apply_float(op, (float)x);
}

static inline double binary_in_precision(gc_binary_op op, gc_dtype dtype, double a, double b) {
    switch (dtype) {
    case GC_F64: return binary_apply_double(op, a, b);
    /* The sum or product of two i32 values is exact in 64 bits; the conversions wrap it
     * to 32 bits as two's complement, like integer tensors in PyTorch. */
    case GC_I32: return (int32_t)(uint32_t)binary_apply_int64_t(op, (int64_t)a, (int64_t)b);
    default: return binary_apply_float(op, (float)a, (float)b);
    }
}

/* --- unary --- */

/* Called with a constant op (see gc_cpu_unary) so that, once inlined, the switch in
 * unary_apply_float folds away: no branch per element, and at -O3 the ops without a libm
 * call (neg, relu, the gelu of erf_cpu.h and its derivative) vectorise. */
static inline void unary_f32(gc_unary_op op, const float *restrict x, float *restrict y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = unary_apply_float(op, x[i]);
}

void gc_cpu_gelu_erf_on(gc_cpu_isa isa, bool derivative, const float *x, float *y, size_t n) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX512) {
        gc_gelu_erf_loop_avx512(derivative, x, y, n);
        return;
    }
    if (isa >= GC_ISA_AVX2) {
        gc_gelu_erf_loop_avx2(derivative, x, y, n);
        return;
    }
#endif
    (void)isa;
    gc_gelu_erf_loop(derivative, x, y, n);
}

typedef struct unary_job {
    gc_unary_op op;
    const char *x;
    char *y;
    gc_dtype dtype;
} unary_job;

static void unary_range(void *arg, int64_t begin, int64_t end) {
    const unary_job *job = arg;
    gc_unary_op op = job->op;
    gc_dtype dtype = job->dtype;
    size_t size = gc_dtype_size(dtype), n = (size_t)(end - begin);
    const void *x = job->x + (size_t)begin * size;
    void *y = job->y + (size_t)begin * size;
    if (dtype != GC_F32) {
        for (size_t i = 0; i < n; i++) gc_store(y, dtype, i, unary_in_precision(op, dtype, gc_load(x, dtype, i)));
        return;
    }
    switch (op) {
    case GC_UNARY_NEG: unary_f32(GC_UNARY_NEG, x, y, n); break;
    case GC_UNARY_EXP: unary_f32(GC_UNARY_EXP, x, y, n); break;
    case GC_UNARY_LOG: unary_f32(GC_UNARY_LOG, x, y, n); break;
    case GC_UNARY_TANH: unary_f32(GC_UNARY_TANH, x, y, n); break;
    case GC_UNARY_RELU: unary_f32(GC_UNARY_RELU, x, y, n); break;
    case GC_UNARY_GELU_TANH: unary_f32(GC_UNARY_GELU_TANH, x, y, n); break;
    case GC_UNARY_GELU_ERF: gc_cpu_gelu_erf_on(gc_cpu_isa_selected(), false, x, y, n); break;
    case GC_UNARY_SQRT: unary_f32(GC_UNARY_SQRT, x, y, n); break;
    case GC_UNARY_RSQRT: unary_f32(GC_UNARY_RSQRT, x, y, n); break;
    case GC_UNARY_RELU_GRAD: unary_f32(GC_UNARY_RELU_GRAD, x, y, n); break;
    case GC_UNARY_GELU_TANH_GRAD: unary_f32(GC_UNARY_GELU_TANH_GRAD, x, y, n); break;
    case GC_UNARY_GELU_ERF_GRAD: gc_cpu_gelu_erf_on(gc_cpu_isa_selected(), true, x, y, n); break;
    }
}

/* Elements worth a thread for `op`: those that evaluate exp, log, tanh or erf take 1-3.5 ns
 * an element (the gelu 1.4 with AVX-512, 2.0-3.5 with AVX2), some twenty times an add, so a
 * sixteenth of the grain is as much work. (One text's gelu, 11 tokens by 1536, ran on one
 * thread with the whole grain.) */
static int64_t unary_grain(gc_unary_op op) {
    switch (op) {
    case GC_UNARY_EXP:
    case GC_UNARY_LOG:
    case GC_UNARY_TANH:
    case GC_UNARY_GELU_TANH:
    case GC_UNARY_GELU_ERF:
    case GC_UNARY_GELU_TANH_GRAD:
    case GC_UNARY_GELU_ERF_GRAD: return GC_GRAIN_ELEMENTS / 16;
    default: return GC_GRAIN_ELEMENTS;
    }
}

void gc_cpu_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype) {
    unary_job job = {op, x, y, dtype};
    gc_parallel_for((int64_t)n, unary_grain(op), unary_range, &job);
}

/* --- unary_grad: g times a derivative, in one pass --- */

void gc_cpu_gelu_erf_grad_on(gc_cpu_isa isa, const float *x, const float *g, float *dx, size_t n) {
#ifdef GC_HAVE_X86_KERNELS
    if (isa >= GC_ISA_AVX512) {
        gc_gelu_erf_grad_loop_avx512(x, g, dx, n);
        return;
    }
    if (isa >= GC_ISA_AVX2) {
        gc_gelu_erf_grad_loop_avx2(x, g, dx, n);
        return;
    }
#endif
    (void)isa;
    gc_gelu_erf_grad_loop(x, g, dx, n);
}

/* The f32 loop for a constant derivative op, vectorised like unary_f32. */
static inline void unary_grad_f32(gc_unary_op op, const float *restrict x, const float *restrict g,
                                  float *restrict dx, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = g[i] * unary_apply_float(op, x[i]);
}

typedef struct unary_grad_job {
    gc_unary_op op;
    const char *x, *g;
    char *dx;
    gc_dtype dtype;
} unary_grad_job;

static void unary_grad_range(void *arg, int64_t begin, int64_t end) {
    const unary_grad_job *job = arg;
    size_t size = gc_dtype_size(job->dtype), n = (size_t)(end - begin), first = (size_t)begin * size;
    const void *x = job->x + first, *g = job->g + first;
    void *dx = job->dx + first;
    if (job->dtype == GC_F64) {
        const double *xd = x, *gd = g;
        double *dxd = dx;
        for (size_t i = 0; i < n; i++) dxd[i] = gd[i] * unary_apply_double(job->op, xd[i]);
        return;
    }
    switch (job->op) {
    case GC_UNARY_RELU_GRAD: unary_grad_f32(GC_UNARY_RELU_GRAD, x, g, dx, n); break;
    case GC_UNARY_GELU_TANH_GRAD: unary_grad_f32(GC_UNARY_GELU_TANH_GRAD, x, g, dx, n); break;
    case GC_UNARY_GELU_ERF_GRAD: gc_cpu_gelu_erf_grad_on(gc_cpu_isa_selected(), x, g, dx, n); break;
    default: gc_fatal("unary_grad: op %d is not a derivative taken from x", (int)job->op);
    }
}

void gc_cpu_unary_grad(gc_unary_op derivative, const void *x, const void *g, void *dx, size_t n, gc_dtype dtype) {
    unary_grad_job job = {derivative, x, g, dx, dtype};
    gc_parallel_for((int64_t)n, unary_grain(derivative), unary_grad_range, &job);
}

/* --- binary ---
 * Both kernels are a sequence of rows: out[k] = a[k * a_step] op b[k * b_step] for k < n. The steps are 1 (walk along the input) or 0 (repeat one element: a broadcast
 * last dim, or the scalar). */

typedef struct row_input {
    const void *data; /* the row's first element */
    gc_dtype dtype;
    int64_t step;     /* 0 or 1 */
} row_input;

/* Called with a constant op and constant steps (see binary_row_f32) so that each inlined
 * copy is a plain loop with no branch per element, which -O3 vectorises. */
static inline void binary_loop_f32(gc_binary_op op, const float *restrict a, int64_t a_step,
                                   const float *restrict b, int64_t b_step, float *restrict out,
                                   int64_t n) {
    for (int64_t k = 0; k < n; k++) out[k] = binary_apply_float(op, a[k * a_step], b[k * b_step]);
}

static inline void binary_steps_f32(gc_binary_op op, row_input a, row_input b, float *out, int64_t n) {
    if (a.step && b.step) binary_loop_f32(op, a.data, 1, b.data, 1, out, n);
    else if (a.step) binary_loop_f32(op, a.data, 1, b.data, 0, out, n);
    else binary_loop_f32(op, a.data, 0, b.data, b.step, out, n);
}

static void binary_row_f32(gc_binary_op op, row_input a, row_input b, void *out, int64_t n) {
    switch (op) {
    case GC_BINARY_ADD: binary_steps_f32(GC_BINARY_ADD, a, b, out, n); break;
    case GC_BINARY_SUB: binary_steps_f32(GC_BINARY_SUB, a, b, out, n); break;
    case GC_BINARY_MUL: binary_steps_f32(GC_BINARY_MUL, a, b, out, n); break;
    case GC_BINARY_DIV: binary_steps_f32(GC_BINARY_DIV, a, b, out, n); break;
    }
}

/* out has dtype `dtype`; the inputs may differ (a scalar comes in as one f64). */
static void binary_row_generic(gc_binary_op op, gc_dtype dtype, row_input a, row_input b, void *out,
                               int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        double x = gc_load(a.data, a.dtype, (size_t)(k * a.step));
        double y = gc_load(b.data, b.dtype, (size_t)(k * b.step));
        gc_store(out, dtype, (size_t)k, binary_in_precision(op, dtype, x, y));
    }
}

static void binary_row(gc_binary_op op, gc_dtype dtype, row_input a, row_input b, void *out, int64_t n) {
    if (dtype == GC_F32) binary_row_f32(op, a, b, out, n);
    else binary_row_generic(op, dtype, a, b, out, n);
}

/* The input element `index` elements after `data` (of `dtype`), walked with `step`. */
static row_input row_at(const void *data, gc_dtype dtype, int64_t index, int64_t step) {
    return (row_input){(const char *)data + (size_t)index * gc_dtype_size(dtype), dtype, step};
}

static bool is_contiguous(const int64_t *stride, const gc_broadcast *bc) {
    int64_t expected = 1;
    for (int d = GC_BCAST_DIMS - 1; d >= 0; d--) {
        if (bc->out_shape[d] != 1 && stride[d] != expected) return false;
        expected *= bc->out_shape[d];
    }
    return true;
}

/* The rows [begin, end) of a broadcast: one per index of the first three dims of the
 * output, along the last. The innermost stride of a contiguous input is 1, or 0 where it
 * is broadcast. A same-shape op is one long row, cut into ranges of elements. */
typedef struct binary_job {
    gc_binary_op op;
    const void *a, *b;
    char *out;
    const gc_broadcast *bc;
    gc_dtype dtype;
    bool flat; /* same shapes: [begin, end) are elements */
} binary_job;

static void binary_range(void *arg, int64_t begin, int64_t end) {
    const binary_job *job = arg;
    gc_dtype dtype = job->dtype;
    size_t size = gc_dtype_size(dtype);
    if (job->flat) {
        binary_row(job->op, dtype, row_at(job->a, dtype, begin, 1), row_at(job->b, dtype, begin, 1),
                   job->out + (size_t)begin * size, end - begin);
        return;
    }
    const int64_t *shape = job->bc->out_shape, *as = job->bc->a_stride, *bs = job->bc->b_stride;
    int64_t cols = shape[3];
    for (int64_t row = begin; row < end; row++) {
        int64_t i2 = row % shape[2], i1 = row / shape[2] % shape[1], i0 = row / shape[2] / shape[1];
        int64_t a_index = i0 * as[0] + i1 * as[1] + i2 * as[2];
        int64_t b_index = i0 * bs[0] + i1 * bs[1] + i2 * bs[2];
        binary_row(job->op, dtype, row_at(job->a, dtype, a_index, as[3]), row_at(job->b, dtype, b_index, bs[3]),
                   job->out + (size_t)(row * cols) * size, cols);
    }
}

void gc_cpu_binary(gc_binary_op op, const void *a, const void *b, void *out, const gc_broadcast *bc,
                   gc_dtype dtype) {
    binary_job job = {op, a, b, out, bc, dtype, is_contiguous(bc->a_stride, bc) && is_contiguous(bc->b_stride, bc)};
    if (job.flat) {
        gc_parallel_for(bc->numel, GC_GRAIN_ELEMENTS, binary_range, &job);
        return;
    }
    int64_t cols = bc->out_shape[3], rows = bc->out_shape[0] * bc->out_shape[1] * bc->out_shape[2];
    gc_parallel_for(cols ? rows : 0, cols ? GC_GRAIN_ELEMENTS / cols + 1 : 1, binary_range, &job);
}

typedef struct scalar_job {
    gc_binary_op op;
    const char *a;
    row_input scalar;
    bool scalar_first;
    char *out;
    gc_dtype dtype;
} scalar_job;

static void scalar_range(void *arg, int64_t begin, int64_t end) {
    const scalar_job *job = arg;
    row_input tensor = row_at(job->a, job->dtype, begin, 1);
    char *out = job->out + (size_t)begin * gc_dtype_size(job->dtype);
    if (job->scalar_first) binary_row(job->op, job->dtype, job->scalar, tensor, out, end - begin);
    else binary_row(job->op, job->dtype, tensor, job->scalar, out, end - begin);
}

void gc_cpu_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                          size_t n, gc_dtype dtype) {
    /* The scalar is a row input of step 0: a float for f32 (as the f32 loop reads it),
     * the double itself otherwise, converted to the working precision by the op. */
    float s_f32 = (float)s;
    row_input scalar = dtype == GC_F32 ? row_at(&s_f32, GC_F32, 0, 0) : row_at(&s, GC_F64, 0, 0);
    scalar_job job = {op, a, scalar, scalar_first, out, dtype};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, scalar_range, &job);
}
