/* The CUDA backend's index checks (backend check_index): a kernel per check records the
 * first bad index in a slot of device memory, and the host reads the slots only at points
 * where it waits for the device anyway (see index_check_cuda.cu). */
#ifndef GC_TENSOR_INDEX_CHECK_CUDA_H
#define GC_TENSOR_INDEX_CHECK_CUDA_H

#include <stddef.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks pending on one device before its slots must be read (each slot is 8 bytes of the
 * workspace). A training step makes a few per chunk and reads its loss once. */
#define GC_INDEX_SLOTS 4096

/* The slots of `device_index`, [GC_INDEX_SLOTS] in its workspace: marks them clean. */
void gc_cuda_index_checks_adopt(int device_index, unsigned long long *slots);
/* Reads the pending checks of the current device and stops the program naming the first bad
 * index, with `note` in the message; the device must have finished the checks (the caller
 * has just waited for it). Without pending checks it costs nothing. */
void gc_cuda_report_index_checks(const char *note);

#ifdef __cplusplus
}
#endif
#endif
