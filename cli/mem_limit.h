/* The memory limit of the commands whose memory grows with their flags (train, bench speed):
 * --mem-limit on the command's device when given; else GC_MEM_LIMIT's, which the library
 * applied at start; else, on the CPU, a default of 2/3 of the memory available when the
 * command starts (Linux's MemAvailable), divided among the processes a launcher runs on this
 * machine. Without it a run too large for the machine grew until the kernel's OOM killer ended
 * it (bench speed --batch-size 1048576: 23.8 GB of a 24 GB machine); with it the library
 * refuses the allocation and the command stops with one line. 2/3, not all of it: what the
 * allocator holds rounds a block up by as much as a quarter and keeps freed blocks for reuse,
 * and the process has memory outside its tensors. A GPU gets no default: its driver refuses
 * what it cannot serve, and that error is as clean. */
#ifndef GC_CLI_MEM_LIMIT_H
#define GC_CLI_MEM_LIMIT_H

#include <stddef.h>

#include "gradcache/device.h"
#include "gradcache/error.h"

/* The limit a command runs under on its device. */
typedef struct gc_mem_limit {
    size_t bytes;     /* 0: none */
    char source[160]; /* where it comes from, for people: "--mem-limit", "GC_MEM_LIMIT", "the default, ..." */
} gc_mem_limit;

/* The flag's limit on `device` (flag_bytes 0: not given), and the CPU's default where nothing
 * set one; `sharers`: the processes of the run on this machine (the launcher's
 * LOCAL_WORLD_SIZE; 1 when not launched). Returns the device's limit. */
gc_mem_limit gc_mem_limit_apply(gc_device device, size_t flag_bytes, int sharers);

/* "15.1 GiB on cpu (the default, 2/3 of the 22.7 GiB available; --mem-limit to change)" or
 * "none on cuda:0", into buf; returns buf. */
const char *gc_mem_limit_describe(const gc_mem_limit *limit, gc_device device, char *buf, size_t size);

/* What a failure line ends with: for GC_ERR_MEM_LIMIT, " (the limit: SOURCE)", so that
 * the line says where the limit came from and how to change it; "" for any other status. */
const char *gc_mem_limit_hint(const gc_mem_limit *limit, gc_status status, char *buf, size_t size);

#endif
