/* SwiGLU's gated product on the CPU (tensor/swiglu_impl.h): f32 in float on the library's own
 * e^y (erf_cpu.h: selects, no libm call, so the f32 loops vectorise), f16 and bf16 in float
 * rounded once when stored, f64 in double on libm's exp. The threads split the elements. */
#include <math.h>

#include "../swiglu_impl.h"
#include "elem_cpu.h"
#include "erf_cpu.h"
#include "kernels_cpu.h"
#include "thread_pool.h"

GC_DEFINE_SWIGLU_ELEMENT(float, gc_exp_nonpositive_f32)
GC_DEFINE_SWIGLU_ELEMENT(double, exp)

typedef struct swiglu_job {
    const void *gate, *up, *g;
    void *out, *d_gate, *d_up;
    gc_dtype dtype;
} swiglu_job;

static void swiglu_range(void *arg, int64_t begin, int64_t end) {
    const swiglu_job *job = arg;
    if (job->dtype == GC_F32) {
        const float *gate = job->gate, *up = job->up;
        float *out = job->out;
        for (int64_t i = begin; i < end; i++) out[i] = gc_swiglu_float(gate[i], up[i]);
        return;
    }
    for (size_t i = (size_t)begin; i < (size_t)end; i++) {
        double gate = gc_load(job->gate, job->dtype, i), up = gc_load(job->up, job->dtype, i);
        gc_store(job->out, job->dtype, i,
                 job->dtype == GC_F64 ? gc_swiglu_double(gate, up) : gc_swiglu_float((float)gate, (float)up));
    }
}

void gc_cpu_swiglu(const void *gate, const void *up, void *out, size_t n, gc_dtype dtype) {
    swiglu_job job = {.gate = gate, .up = up, .out = out, .dtype = dtype};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, swiglu_range, &job);
}

/* Element i's two gradients, in the working type of the dtype, stored where wanted. */
static void grad_element(const swiglu_job *job, size_t i) {
    double gate = gc_load(job->gate, job->dtype, i), up = gc_load(job->up, job->dtype, i);
    double g = gc_load(job->g, job->dtype, i), d_gate, d_up;
    if (job->dtype == GC_F64) {
        gc_swiglu_grad_double(gate, up, g, &d_gate, &d_up);
    } else {
        float d_gate_f, d_up_f;
        gc_swiglu_grad_float((float)gate, (float)up, (float)g, &d_gate_f, &d_up_f);
        d_gate = d_gate_f, d_up = d_up_f;
    }
    if (job->d_gate) gc_store(job->d_gate, job->dtype, i, d_gate);
    if (job->d_up) gc_store(job->d_up, job->dtype, i, d_up);
}

static void swiglu_grad_range(void *arg, int64_t begin, int64_t end) {
    const swiglu_job *job = arg;
    if (job->dtype == GC_F32 && job->d_gate && job->d_up) {
        const float *gate = job->gate, *up = job->up, *g = job->g;
        float *d_gate = job->d_gate, *d_up = job->d_up;
        for (int64_t i = begin; i < end; i++) gc_swiglu_grad_float(gate[i], up[i], g[i], &d_gate[i], &d_up[i]);
        return;
    }
    for (size_t i = (size_t)begin; i < (size_t)end; i++) grad_element(job, i);
}

void gc_cpu_swiglu_backward(const void *gate, const void *up, const void *g, void *d_gate, void *d_up, size_t n,
                            gc_dtype dtype) {
    swiglu_job job = {gate, up, g, NULL, d_gate, d_up, dtype};
    gc_parallel_for((int64_t)n, GC_GRAIN_ELEMENTS, swiglu_grad_range, &job);
}
