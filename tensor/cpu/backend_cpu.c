/* The CPU backend's tables of kernels: the whole one, and the one without the fused kernels
 * that CUDA lacks (GC_COMPOSED_OPS=1: the paths a GPU takes, run on the CPU). Both pack
 * weights: packing changes how a product is computed, never which ops compose another. */
#include "kernels_cpu.h"

#define GC_CPU_ENTRY(name, params) .name = gc_cpu_##name,
#define GC_CPU_MEMORY                                                                                               \
    .raw_alloc = gc_cpu_raw_alloc, .raw_free = gc_cpu_raw_free, .trim = gc_cpu_trim,                                \
    .memory_info = gc_cpu_memory_info,                                                                              \
    .memcpy_to_host = gc_cpu_memcpy, .memcpy_from_host = gc_cpu_memcpy, .memcpy_same_device = gc_cpu_memcpy,        \
    .synchronize = gc_cpu_synchronize

const gc_backend gc_cpu_backend = {
    .name = "cpu",
    GC_CPU_MEMORY,
    GC_KERNELS(GC_CPU_ENTRY)
    GC_FUSED_KERNELS(GC_CPU_ENTRY)
    GC_PACKING_KERNELS(GC_CPU_ENTRY)
};

const gc_backend gc_cpu_composed_backend = {
    .name = "cpu",
    GC_CPU_MEMORY,
    GC_KERNELS(GC_CPU_ENTRY)
    GC_PACKING_KERNELS(GC_CPU_ENTRY)
};
