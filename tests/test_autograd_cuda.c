/* The backward pass on CUDA against the same pass on the CPU: a small encoder-like
 * graph that goes through every backward rule (embedding, matmul with both transpose
 * flags, broadcasting, layernorm, both gelus, relu, tanh, softmax and log-softmax,
 * reductions, permute, slice, cat, cast), run on both devices from the same parameters. */
#include "check.h"

#define VOCAB 11
#define DIM 16
#define TOKENS 6

typedef struct params {
    gc_tensor *table;  /* [VOCAB, DIM] */
    gc_tensor *weight; /* [DIM, DIM] */
    gc_tensor *bias;   /* [DIM] */
    gc_tensor *gamma;  /* [DIM] */
    gc_tensor *beta;   /* [DIM] */
} params;

static params make_params(gc_device device) {
    params p = {
        .table = gc_uniform(GC_SHAPE(VOCAB, DIM), GC_F32, gc_cpu(), -1, 1, 1, 0),
        .weight = gc_uniform(GC_SHAPE(DIM, DIM), GC_F32, gc_cpu(), -0.3, 0.3, 2, 0),
        .bias = gc_uniform(GC_SHAPE(DIM), GC_F32, gc_cpu(), -0.1, 0.1, 3, 0),
        .gamma = gc_uniform(GC_SHAPE(DIM), GC_F32, gc_cpu(), 0.5, 1.5, 4, 0),
        .beta = gc_uniform(GC_SHAPE(DIM), GC_F32, gc_cpu(), -0.1, 0.1, 5, 0),
    };
    gc_tensor **all[] = {&p.table, &p.weight, &p.bias, &p.gamma, &p.beta};
    for (int i = 0; i < 5; i++) {
        gc_tensor *moved = gc_to_device(*all[i], device);
        REQUIRE(moved);
        gc_tensor_release(*all[i]);
        *all[i] = moved;
        gc_set_requires_grad(moved, true);
    }
    return p;
}


/* A scalar loss over the tokens, through every rule. */
static gc_tensor *loss_of(const params *p, const gc_tensor *ids) {
    gc_tensor *x = gc_embedding(p->table, ids);                     /* [T, D] */
    gc_tensor *h = gc_matmul(x, p->weight, false, true);            /* [T, D] */
    gc_tensor *hb = gc_add(h, p->bias);
    gc_tensor *n = gc_layernorm(hb, p->gamma, p->beta, 1e-5, NULL, NULL);
    gc_tensor *g1 = gc_gelu_erf(n), *g2 = gc_gelu_tanh(n), *r = gc_relu(n), *t = gc_tanh(n);
    gc_tensor *mix = gc_add(g1, g2), *mix2 = gc_mul(r, t), *both = gc_cat0((gc_tensor *[]){mix, mix2}, 2); /* [2T, D] */
    gc_tensor *top = gc_slice0(both, 1, 2 * TOKENS - 1);            /* [2T-2, D] */
    gc_tensor *heads = gc_reshape(top, GC_SHAPE(2 * TOKENS - 2, 4, DIM / 4));
    gc_tensor *swapped = gc_permute(heads, (const int[]){1, 0, 2}); /* [4, 2T-2, D/4] */
    gc_tensor *scores = gc_matmul(swapped, swapped, false, true);   /* [4, 2T-2, 2T-2] */
    gc_tensor *probs = gc_softmax(scores), *logp = gc_log_softmax(scores);
    gc_tensor *weighted = gc_mul(probs, logp);
    gc_tensor *row_max = gc_max_last(weighted, false, NULL);
    gc_tensor *half = gc_cast(row_max, GC_F64);
    gc_tensor *loss = gc_mean_all(half);
    RELEASE(x, h, hb, n, g1, g2, r, t, mix, mix2, both, top, heads, swapped, scores, probs, logp, weighted, row_max, half);
    return loss;
}

int main(void) {
    gc_test_require_cuda();
    const int32_t id_values[TOKENS] = {3, 0, 10, 3, 7, 3}; /* duplicates accumulate */
    params on_cpu = make_params(gc_cpu()), on_gpu = make_params(gc_cuda(0));
    gc_tensor *ids_cpu = gc_from_host(id_values, GC_SHAPE(TOKENS), GC_I32, gc_cpu());
    gc_tensor *ids_gpu = gc_to_device(ids_cpu, gc_cuda(0));
    gc_tensor *loss_cpu = loss_of(&on_cpu, ids_cpu), *loss_gpu = loss_of(&on_gpu, ids_gpu);
    REQUIRE(loss_cpu && loss_gpu);
    REQUIRE(gc_backward(&loss_cpu, NULL, 1) == GC_OK);
    REQUIRE(gc_backward(&loss_gpu, NULL, 1) == GC_OK);
    /* f32 through ~20 ops whose CUDA and CPU versions round differently (CUDA's exp, erf
     * and tanh are a few ulps from glibc's; sums run in another order): a relative error
     * of ~1e-6 per op compounds to well under 1e-4. */
    gc_test_expect_close(loss_cpu, loss_gpu, 1e-6, 1e-4, "loss");
    gc_tensor *cpu_params[] = {on_cpu.table, on_cpu.weight, on_cpu.bias, on_cpu.gamma, on_cpu.beta};
    gc_tensor *gpu_params[] = {on_gpu.table, on_gpu.weight, on_gpu.bias, on_gpu.gamma, on_gpu.beta};
    const char *names[] = {"table grad", "weight grad", "bias grad", "gamma grad", "beta grad"};
    for (int i = 0; i < 5; i++) {
        REQUIRE(gc_grad(cpu_params[i]) && gc_grad(gpu_params[i]));
        gc_test_expect_close(gc_grad(cpu_params[i]), gc_grad(gpu_params[i]), 1e-5, 1e-3, names[i]);
    }
    RELEASE(loss_cpu, loss_gpu, ids_cpu, ids_gpu);
    for (int i = 0; i < 5; i++) RELEASE(cpu_params[i], gpu_params[i]);
    CHECK(gc_memory_get_stats(gc_cuda(0)).live_bytes == 0);
    return gc_test_result();
}
