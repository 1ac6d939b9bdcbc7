/* Per-thread scratch memory for the CPU kernels (packing buffers, partial sums): kept
 * between calls and grown when a call needs more, so that a kernel allocates nothing in
 * the steady state. Freed when its thread exits. Kernels never fail: running out of host
 * memory for scratch stops the program. */
#ifndef GC_TENSOR_SCRATCH_CPU_H
#define GC_TENSOR_SCRATCH_CPU_H

#include <stddef.h>

/* Independent buffers per thread, so that one kernel can hold several at once. */
typedef enum gc_scratch_slot {
    GC_SCRATCH_PACK_A,
    GC_SCRATCH_PACK_B,
    GC_SCRATCH_ATTENTION, /* attention_packed_cpu.c's per-text buffers (its products use the two above) */
    GC_SCRATCH_SLOTS
} gc_scratch_slot;

/* At least `bytes` bytes, 64-byte aligned, owned by the calling thread; the contents of an
 * earlier call are not kept. */
void *gc_cpu_scratch(gc_scratch_slot slot, size_t bytes);

#endif
