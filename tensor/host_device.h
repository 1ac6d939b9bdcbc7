/* GC_HD: marks a function that the CPU backend and CUDA kernels share (compiled for host
 * and device by nvcc, plain C elsewhere). */
#ifndef GC_TENSOR_HOST_DEVICE_H
#define GC_TENSOR_HOST_DEVICE_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#endif
