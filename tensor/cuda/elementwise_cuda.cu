/* Elementwise unary and binary ops on CUDA. f32, f16 and bf16 are computed in float and
 * rounded once when stored, f64 in double, i32 (binary ops only) in integers. Each op is
 * a small functor, so the kernels are instantiated per op and carry no per-element
 * switch. A broadcast is read in one of three ways, the cheapest that applies: flat (one
 * shape), as two dims (a bias row or a column of per-row statistics beside a full operand:
 * 32-bit indices, one division), or by a walk over every dim. */
#include "dtype_cuda.cuh"
#include "kernels_cuda.h"

namespace {

/* --- unary ops (A: float or double) --- */

struct neg_op {
    template <typename A> __device__ A operator()(A x) const { return -x; }
};
struct exp_op {
    template <typename A> __device__ A operator()(A x) const { return exp(x); }
};
struct log_op {
    template <typename A> __device__ A operator()(A x) const { return log(x); }
};
struct tanh_op {
    template <typename A> __device__ A operator()(A x) const { return tanh(x); }
};
struct relu_op {
    /* written so that nan passes through, as on the CPU */
    template <typename A> __device__ A operator()(A x) const { return x < A(0) ? A(0) : x; }
};
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
struct gelu_tanh_op {
    template <typename A> __device__ A operator()(A x) const {
        const A sqrt_2_over_pi = A(0.7978845608028654);
        return A(0.5) * x * (A(1) + tanh(sqrt_2_over_pi * (x + A(0.044715) * x * x * x)));
    }
};
/* 0.5 x (1 + erf(x / sqrt 2)) */
struct gelu_erf_op {
    template <typename A> __device__ A operator()(A x) const {
        const A one_over_sqrt_2 = A(0.7071067811865476);
        return A(0.5) * x * (A(1) + erf(x * one_over_sqrt_2));
    }
};
struct sqrt_op {
    template <typename A> __device__ A operator()(A x) const { return sqrt(x); }
};
struct rsqrt_op {
    template <typename A> __device__ A operator()(A x) const { return rsqrt(x); }
};

/* The derivatives, for backward rules (same formulas as the CPU's). */
struct relu_grad_op {
    template <typename A> __device__ A operator()(A x) const { return x > A(0) ? A(1) : A(0); }
};
struct gelu_tanh_grad_op {
    template <typename A> __device__ A operator()(A x) const {
        const A sqrt_2_over_pi = A(0.7978845608028654);
        A t = tanh(sqrt_2_over_pi * (x + A(0.044715) * x * x * x));
        return A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * sqrt_2_over_pi * (A(1) + A(3 * 0.044715) * x * x);
    }
};
struct gelu_erf_grad_op { /* Phi(x) + x phi(x) */
    template <typename A> __device__ A operator()(A x) const {
        const A one_over_sqrt_2 = A(0.7071067811865476), inv_sqrt_2pi = A(0.3989422804014327);
        return A(0.5) * (A(1) + erf(x * one_over_sqrt_2)) + x * inv_sqrt_2pi * exp(A(-0.5) * x * x);
    }
};

/* Calls f(functor) for a unary op. */
template <typename F> void with_unary_op(gc_unary_op op, F &&f) {
    switch (op) {
    case GC_UNARY_NEG: f(neg_op{}); return;
    case GC_UNARY_EXP: f(exp_op{}); return;
    case GC_UNARY_LOG: f(log_op{}); return;
    case GC_UNARY_TANH: f(tanh_op{}); return;
    case GC_UNARY_RELU: f(relu_op{}); return;
    case GC_UNARY_GELU_TANH: f(gelu_tanh_op{}); return;
    case GC_UNARY_GELU_ERF: f(gelu_erf_op{}); return;
    case GC_UNARY_SQRT: f(sqrt_op{}); return;
    case GC_UNARY_RSQRT: f(rsqrt_op{}); return;
    case GC_UNARY_RELU_GRAD: f(relu_grad_op{}); return;
    case GC_UNARY_GELU_TANH_GRAD: f(gelu_tanh_grad_op{}); return;
    case GC_UNARY_GELU_ERF_GRAD: f(gelu_erf_grad_op{}); return;
    }
    gc_fatal("unary: unknown op %d", (int)op);
}

/* dx [n] = g [n] * derivative(x [n]): the derivative's functor and one multiply in the
 * working type, as the derivative stored and then multiplied by g would give for f32 and f64
 * (the dtypes the op fuses). */
template <typename T, typename Op>
__global__ void unary_grad_kernel(Op derivative, const T *x, const T *g, T *dx, int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) dx[i] = E::from_acc(E::to_acc(g[i]) * derivative(E::to_acc(x[i])));
}

/* --- binary ops (A: float, double or int32_t) ---
 * i32 wraps modulo 2^32 as on the CPU: the arithmetic is done on uint32_t, where
 * overflow is defined, instead of int32_t, where it is undefined behaviour. */

#define GC_WRAPPING_INT_OP(symbol)                                                          \
    __device__ int32_t operator()(int32_t a, int32_t b) const {                             \
        return (int32_t)((uint32_t)a symbol (uint32_t)b);                                   \
    }

struct add_op {
    template <typename A> __device__ A operator()(A a, A b) const { return a + b; }
    GC_WRAPPING_INT_OP(+)
};
struct sub_op {
    template <typename A> __device__ A operator()(A a, A b) const { return a - b; }
    GC_WRAPPING_INT_OP(-)
};
struct mul_op {
    template <typename A> __device__ A operator()(A a, A b) const { return a * b; }
    GC_WRAPPING_INT_OP(*)
};
struct div_op {
    template <typename A> __device__ A operator()(A a, A b) const { return a / b; }
};

template <typename F> void with_binary_op(gc_binary_op op, F &&f) {
    switch (op) {
    case GC_BINARY_ADD: f(add_op{}); return;
    case GC_BINARY_SUB: f(sub_op{}); return;
    case GC_BINARY_MUL: f(mul_op{}); return;
    case GC_BINARY_DIV: f(div_op{}); return;
    }
    gc_fatal("binary: unknown op %d", (int)op);
}

/* --- kernels --- */

/* x, y [n] */
template <typename T, typename Op> __global__ void unary_kernel(Op op, const T *x, T *y, int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) y[i] = E::from_acc(op(E::to_acc(x[i])));
}

/* a, b, out [n]: operands of the output's shape, read at the output's index. */
template <typename T, typename Op>
__global__ void binary_same_shape_kernel(Op op, const T *a, const T *b, T *out, int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) out[i] = E::from_acc(op(E::to_acc(a[i]), E::to_acc(b[i])));
}

/* out [bc.out_shape]; a and b read through bc's strides (0 along a broadcast dim). bc is
 * passed by value: a few dozen bytes of kernel parameters, no device copy. */
template <typename T, typename Op>
__global__ void binary_broadcast_kernel(Op op, const T *a, const T *b, T *out, gc_broadcast bc) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, bc.numel) {
        int64_t index[GC_BCAST_DIMS];
        gc_cuda_unravel(i, bc.out_shape, index);
        out[i] = E::from_acc(op(E::to_acc(a[gc_cuda_offset(index, bc.a_stride)]),
                                E::to_acc(b[gc_cuda_offset(index, bc.b_stride)])));
    }
}

/* out [outer, inner] (gc_broadcast_2d: fewer than 2^31 elements); a and b read at
 * q stride[0] + r stride[1] for element (q, r): the same elements, the same op, so the same
 * bits as binary_broadcast_kernel, with 32-bit indices and one division. A grid-stride step
 * past the last element stays under 2^32. */
template <typename T, typename Op>
__global__ void binary_2d_kernel(Op op, const T *a, const T *b, T *out, gc_broadcast_2d bc) {
    using E = gc_elem<T>;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < bc.numel; i += gridDim.x * blockDim.x) {
        uint32_t q = i / bc.inner, r = i - q * bc.inner;
        out[i] = E::from_acc(op(E::to_acc(a[q * bc.a_stride[0] + r * bc.a_stride[1]]),
                                E::to_acc(b[q * bc.b_stride[0] + r * bc.b_stride[1]])));
    }
}

/* a, out [n]: out = a op s, or s op a when scalar_first. The scalar is applied in the
 * working type: float for f32, f16 and bf16, double for f64, and int32 for i32 (the
 * front-end accepts only whole i32 scalars there), as on the CPU. */
template <typename T, typename Op>
__global__ void binary_scalar_kernel(Op op, const T *a, typename gc_elem<T>::acc s, bool scalar_first, T *out,
                                     int64_t n) {
    using E = gc_elem<T>;
    GC_CUDA_GRID_STRIDE(i, n) {
        typename E::acc x = E::to_acc(a[i]);
        out[i] = E::from_acc(scalar_first ? op(s, x) : op(x, s));
    }
}

/* True when a walk over `shape` with `stride` visits the elements in memory order. The
 * stride of a size-1 dim never matters (its index is always 0). */
bool is_contiguous(const int64_t shape[GC_BCAST_DIMS], const int64_t stride[GC_BCAST_DIMS]) {
    int64_t expected = 1;
    for (int d = GC_BCAST_DIMS - 1; d >= 0; d--) {
        if (shape[d] != 1 && stride[d] != expected) return false;
        expected *= shape[d];
    }
    return true;
}

} // namespace

extern "C" void gc_cuda_unary(gc_unary_op op, const void *x, void *y, size_t n, gc_dtype dtype) {
    gc_cuda_dispatch_float("unary", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_unary_op(op, [&](auto functor) {
            GC_CUDA_LAUNCH(unary_kernel<T, decltype(functor)>, gc_cuda_blocks((int64_t)n), functor,
                           (const T *)x, (T *)y, (int64_t)n);
        });
    });
}

extern "C" void gc_cuda_unary_grad(gc_unary_op derivative, const void *x, const void *g, void *dx, size_t n,
                                   gc_dtype dtype) {
    gc_cuda_dispatch_float("unary_grad", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_unary_op(derivative, [&](auto functor) {
            GC_CUDA_LAUNCH(unary_grad_kernel<T, decltype(functor)>, gc_cuda_blocks((int64_t)n), functor,
                           (const T *)x, (const T *)g, (T *)dx, (int64_t)n);
        });
    });
}

/* Same shapes: one flat walk. A broadcast whose dims merge into two (a bias row, a column of
 * per-row statistics, beside a full operand: gc_broadcast_merge_2d) and fits in 32-bit
 * indices: binary_2d_kernel. Any other: the walk over every dim. */
extern "C" void gc_cuda_binary(gc_binary_op op, const void *a, const void *b, void *out,
                               const gc_broadcast *bc, gc_dtype dtype) {
    bool same_shape = is_contiguous(bc->out_shape, bc->a_stride) && is_contiguous(bc->out_shape, bc->b_stride);
    gc_broadcast_2d merged = {}; /* zeroed for the compiler: read only when two_dims */
    bool two_dims = !same_shape && gc_broadcast_merge_2d(GC_BCAST_DIMS, bc->out_shape, bc->a_stride, bc->b_stride,
                                                         &merged);
    gc_cuda_dispatch_all("binary", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_binary_op(op, [&](auto functor) {
            using Op = decltype(functor);
            unsigned blocks = gc_cuda_blocks(bc->numel);
            if (same_shape)
                GC_CUDA_LAUNCH(binary_same_shape_kernel<T, Op>, blocks, functor, (const T *)a, (const T *)b,
                               (T *)out, bc->numel);
            else if (two_dims)
                GC_CUDA_LAUNCH(binary_2d_kernel<T, Op>, blocks, functor, (const T *)a, (const T *)b, (T *)out,
                               merged);
            else
                GC_CUDA_LAUNCH(binary_broadcast_kernel<T, Op>, blocks, functor, (const T *)a, (const T *)b,
                               (T *)out, *bc);
        });
    });
}

extern "C" void gc_cuda_binary_scalar(gc_binary_op op, const void *a, double s, bool scalar_first, void *out,
                                      size_t n, gc_dtype dtype) {
    gc_cuda_dispatch_all("binary_scalar", dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using S = typename gc_elem<T>::acc;
        with_binary_op(op, [&](auto functor) {
            GC_CUDA_LAUNCH(binary_scalar_kernel<T, decltype(functor)>, gc_cuda_blocks((int64_t)n), functor,
                           (const T *)a, (S)s, scalar_first, (T *)out, (int64_t)n);
        });
    });
}
