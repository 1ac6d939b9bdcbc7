/* Fused attention's CUDA kernels against the CPU's (the reference, itself held to the unfused
 * ops by test_attention_fused), forward and the gradients of q, k and v, for every case of
 * attention_cases.h (padding both sides, a fully padded text, causal, windows, GQA, dropout,
 * T = 1, T across tiles) in every floating dtype. Suite cuda: skipped where there is no GPU.
 *
 * Both backends run attention_impl.h's formulas on the same inputs, summing in other orders
 * (the GPU by warp sums, the CPU along tiles) with other exps (CUDA's expf, the CPU's own):
 *  - f64: a few hundred roundings of 2^-53, far below 1e-12 of the largest element;
 *  - f32: attention_f32_rtol (attention_cases.h);
 *  - f16, bf16: computed in f32 from the same 16-bit inputs, each result rounded once to
 *    2^-11 or 2^-8 relative (and the output before the backward reads it): 4 roundings. */
#include "attention_cases.h"

static void test_against_cpu(void) {
    const gc_dtype dtypes[] = {GC_F64, GC_F32, GC_F16, GC_BF16};
    const double rtols[] = {1e-12, 0, 4 * 0x1p-11, 4 * 0x1p-8}; /* f32: attention_f32_rtol */
    const gc_device gpu = {GC_DEVICE_CUDA, 0};
    for (int i = 0; i < ATTENTION_CASES; i++) {
        const attention_case *c = &attention_cases[i];
        attention_inputs in = attention_make_inputs(c);
        for (int d = 0; d < 4; d++) {
            attention_results cpu = attention_fused_run(c, &in, dtypes[d], gc_cpu());
            attention_results cuda = attention_fused_run(c, &in, dtypes[d], gpu);
            char name[160];
            snprintf(name, sizeof name, "%s (%s)", c->name, gc_dtype_name(dtypes[d]));
            attention_expect_results(name, c, &cuda, &cpu, dtypes[d] == GC_F32 ? attention_f32_rtol(c) : rtols[d]);
            attention_free_results(&cpu);
            attention_free_results(&cuda);
        }
        attention_free_inputs(&in);
    }
}

int main(void) {
    gc_test_require_cuda();
    GC_TEST_CASE(test_against_cpu);
    return gc_test_result();
}
