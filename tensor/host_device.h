/* GC_HD marks a function that the CPU kernels and the CUDA kernels both call (the *_impl.h
 * headers): __host__ __device__ under nvcc, nothing for the C compiler. */
#ifndef GC_TENSOR_HOST_DEVICE_H
#define GC_TENSOR_HOST_DEVICE_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#endif
