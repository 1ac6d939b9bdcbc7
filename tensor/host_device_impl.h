/* GC_HD: marks the plain-arithmetic helpers that the CPU code and the CUDA kernels share
 * (launch_impl.h, index_key_impl.h, optim_impl.h, philox_impl.h): __host__ __device__ under nvcc,
 * nothing for the C compiler. */
#ifndef GC_TENSOR_HOST_DEVICE_IMPL_H
#define GC_TENSOR_HOST_DEVICE_IMPL_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#endif
