/* Devices and the dispatch from a device to its backend. */
#include <stdio.h>

#include "backend.h"
#include "gradcache/config.h"
#include "gradcache/device.h"
#include "gradcache/error.h"

#ifdef GC_HAVE_CUDA
#include "cuda/runtime_cuda.h"
#endif

const gc_backend *gc_backend_for(gc_device device) {
    if (device.type == GC_DEVICE_CPU) return &gc_cpu_backend;
    if (device.type != GC_DEVICE_CUDA) gc_fatal("device: unknown device type %d", (int)device.type);
#ifdef GC_HAVE_CUDA
    int count = gc_cuda_device_count();
    if (device.index < 0 || device.index >= count)
        gc_fatal("device: cuda:%d requested but %d CUDA device(s) are present", device.index, count);
    gc_cuda_activate(device.index);
    return &gc_cuda_backend;
#else
    gc_fatal("device: cuda:%d requested but this gradcache was built without CUDA (-Dcuda=disabled "
             "or no CUDA toolkit at configure time)", device.index);
#endif
}

bool gc_cuda_built(void) {
#ifdef GC_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

#ifndef GC_HAVE_CUDA
int gc_cuda_device_count(void) { return 0; }
#endif

void gc_device_synchronize(gc_device device) { gc_backend_for(device)->synchronize(device.index); }

const char *gc_device_str(gc_device device, char *buf, int size) {
    if (device.type == GC_DEVICE_CPU) snprintf(buf, (size_t)size, "cpu");
    else snprintf(buf, (size_t)size, "cuda:%d", device.index);
    return buf;
}
