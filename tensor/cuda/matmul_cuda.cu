/* Matrix multiply on CUDA through cuBLAS.
 *
 * cuBLAS is column-major and our tensors are row-major. A row-major [r, c] buffer read
 * column-major is its transpose, so we ask cuBLAS for c^T [n, m] = op(b)^T @ op(a)^T:
 * b comes first, m and n swap, and each operand keeps its own transpose flag (the
 * buffer of a row-major [k, n] b, read column-major, is already op(b)^T).
 *
 * f32 computes in full f32 (CUBLAS_COMPUTE_32F, never TF32: the CPU is the reference);
 * f16 and bf16 accumulate in f32 on the tensor cores and round once; f64 computes in
 * f64. */
#include <climits>
#include <pthread.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "check.h"
#include "gradcache/device.h"
#include "kernels_cuda.h"
#include "workspace_cuda.h"

/* One handle per device, created on its first matmul: a handle belongs to the device that
 * was current when it was created. It runs on the legacy default stream, like every kernel
 * here, and computes in the device's workspace (workspace_cuda.h), so that cuBLAS allocates
 * no memory of its own that the statistics would miss. The handles live as long as the
 * process; the lock makes two threads' first matmuls on a device create one handle. */
static cublasHandle_t handle_for_current_device() {
    static cublasHandle_t handles[GC_MAX_CUDA_DEVICES];
    static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
    int device = gc_cuda_current_device();
    pthread_mutex_lock(&handles_lock);
    if (!handles[device]) {
        const gc_cuda_workspace *workspace = gc_cuda_workspace_of(device);
        GC_CUBLAS_CHECK(cublasCreate(&handles[device]));
        GC_CUBLAS_CHECK(cublasSetWorkspace(handles[device], workspace->cublas, workspace->cublas_bytes));
    }
    cublasHandle_t handle = handles[device];
    pthread_mutex_unlock(&handles_lock);
    return handle;
}

static cudaDataType data_type(gc_dtype dtype) {
    switch (dtype) {
    case GC_F32: return CUDA_R_32F;
    case GC_F16: return CUDA_R_16F;
    case GC_BF16: return CUDA_R_16BF;
    case GC_F64: return CUDA_R_64F;
    default: gc_fatal("matmul: no CUDA kernel for %s", gc_dtype_name(dtype));
    }
}

/* cuBLAS takes int sizes (the _64 entry points need CUDA 12). */
static int as_int(int64_t value, const char *what) {
    if (value > INT_MAX) gc_fatal("matmul: %s = %lld is too large for cuBLAS", what, (long long)value);
    return (int)value;
}

/* k = 0: an empty sum, so c = beta * c; zeros without reading c when beta is 0. The
 * scaling is the library's own multiply by a scalar (elementwise_cuda.cu: every dtype, as on
 * the CPU), not cuBLAS's scal, whose 16-bit type combinations vary between versions. */
static void scale_c(const gc_matmul_args *g) {
    size_t count = (size_t)(g->batch * g->m * g->n);
    if (g->beta == 0) {
        GC_CUDA_CHECK(cudaMemsetAsync(g->c, 0, count * gc_dtype_size(g->dtype), 0));
        GC_CUDA_AFTER_LAUNCH();
        return;
    }
    gc_cuda_binary_scalar(GC_BINARY_MUL, g->c, g->beta, false, g->c, count, g->dtype);
}

extern "C" void gc_cuda_matmul(const gc_matmul_args *args) {
    const gc_matmul_args &g = *args;
    if (g.batch == 0 || g.m == 0 || g.n == 0) return; /* c is empty */
    if (g.k == 0) {
        scale_c(args);
        return;
    }
    cublasHandle_t handle = handle_for_current_device();
    cudaDataType type = data_type(g.dtype);
    int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
    /* Leading dims of the column-major views: the row length of each stored buffer. */
    int ldb = g.trans_b ? k : n, lda = g.trans_a ? m : k;
    bool f64 = g.dtype == GC_F64;
    double alpha64 = g.alpha, beta64 = g.beta;
    float alpha32 = g.alpha, beta32 = g.beta;
    const void *alpha = f64 ? (const void *)&alpha64 : &alpha32;
    const void *beta = f64 ? (const void *)&beta64 : &beta32;
    GC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha,
        g.b, type, ldb, (long long)g.k * g.n, g.a, type, lda, (long long)g.m * g.k, beta, g.c, type, n,
        (long long)g.m * g.n, as_int(g.batch, "batch"), f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    GC_CUDA_AFTER_LAUNCH();
}
