/* The CUDA runtime as the rest of the library sees it. */
#ifndef GC_TENSOR_RUNTIME_CUDA_H
#define GC_TENSOR_RUNTIME_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* The number of usable CUDA devices, asked of the driver once (gc_cuda_device_count, which
 * also notes that the process has touched CUDA, is the one caller). */
int gc_cuda_probe_device_count(void);
/* Makes `index` the current device of the calling thread (kernels launch there). */
void gc_cuda_activate(int index);
/* The compute capability of device `index`, e.g. 9.0 for an H100. */
void gc_cuda_capability(int index, int *major, int *minor);

#ifdef __cplusplus
}
#endif
#endif
