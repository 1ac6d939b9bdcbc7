/* Run-time choice of the CPU kernels' instruction set (see cpu_isa.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_isa.h"
#include "gradcache/error.h"

static const char *const names[GC_ISA_COUNT] = {"portable", "avx2", "avx512"};

const char *gc_cpu_isa_name(gc_cpu_isa isa) { return isa >= 0 && isa < GC_ISA_COUNT ? names[isa] : "?"; }

bool gc_cpu_isa_available(gc_cpu_isa isa) {
    switch (isa) {
    case GC_ISA_PORTABLE: return true;
#ifdef GC_HAVE_X86_KERNELS
    /* The compiler's run-time checks read CPUID and whether the OS saves the registers. */
    case GC_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GC_ISA_AVX512: return gc_cpu_isa_available(GC_ISA_AVX2) && __builtin_cpu_supports("avx512f");
#endif
    default: return false;
    }
}

static gc_cpu_isa selected;
static pthread_once_t selected_once = PTHREAD_ONCE_INIT;

static void select_isa(void) {
    gc_cpu_isa cap = GC_ISA_COUNT - 1;
    const char *text = getenv("GC_CPU_KERNELS");
    if (text && *text) {
        for (cap = 0; cap < GC_ISA_COUNT && strcmp(text, names[cap]) != 0; cap++) {}
        if (cap == GC_ISA_COUNT)
            gc_fatal("cpu kernels: GC_CPU_KERNELS=%s is none of portable, avx2, avx512", text);
    }
    selected = GC_ISA_PORTABLE;
    for (gc_cpu_isa isa = GC_ISA_PORTABLE; isa <= cap; isa++)
        if (gc_cpu_isa_available(isa)) selected = isa;
}

gc_cpu_isa gc_cpu_isa_selected(void) {
    pthread_once(&selected_once, select_isa);
    return selected;
}
