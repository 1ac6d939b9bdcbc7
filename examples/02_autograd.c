/* Step 2: autograd by hand. A two-layer MLP written with ops -- h = gelu(x W1 + b1),
 * y = h W2, loss = mean((y - target)^2) -- records a graph as it runs; gc_backward walks it
 * back and leaves d loss / d parameter in each parameter's gradient. gc_gradcheck then
 * checks every one of them against central differences of the loss (in f64), and the graph
 * is written as Graphviz DOT for `dot -Tsvg` (the file named by the first argument).
 * Build: cc 02_autograd.c $(pkg-config --cflags --libs gradcache). Exit status 0 when no
 * gradient element differs from its finite difference. */
#include <stdio.h>

#include <gradcache/gradcache.h>

/* The leaves of the model and its data. */
typedef struct mlp {
    gc_tensor *x;      /* [8, 3] inputs */
    gc_tensor *target; /* [8, 1] */
    gc_tensor *w1;     /* [3, 5] */
    gc_tensor *b1;     /* [5] */
    gc_tensor *w2;     /* [5, 1] */
} mlp;

/* The loss of the MLP: a scalar, with a graph when grad mode is on. */
static gc_tensor *loss_of(void *model) {
    const mlp *m = model;
    gc_tensor *z = gc_matmul_bias(m->x, m->w1, m->b1, false, false), *h = gc_gelu_erf(z);
    gc_tensor *y = gc_matmul(h, m->w2, false, false), *error = gc_sub(y, m->target);
    gc_tensor *squared = gc_mul(error, error), *loss = gc_mean_all(squared);
    gc_tensor *temporaries[] = {z, h, y, error, squared};
    for (int i = 0; i < 5; i++) gc_tensor_release(temporaries[i]); /* the graph keeps what it needs */
    return loss;
}

static gc_tensor *leaf(int ndim, const int64_t *shape, uint64_t seed) {
    gc_tensor *t = gc_uniform(ndim, shape, GC_F64, gc_cpu(), -1, 1, seed, 0);
    gc_set_requires_grad(t, true);
    return t;
}

int main(int argc, char **argv) {
    mlp m = {gc_uniform(GC_SHAPE(8, 3), GC_F64, gc_cpu(), -1, 1, 1, 0),
             gc_uniform(GC_SHAPE(8, 1), GC_F64, gc_cpu(), -1, 1, 2, 0), leaf(GC_SHAPE(3, 5), 3),
             leaf(GC_SHAPE(5), 4), leaf(GC_SHAPE(5, 1), 5)};
    gc_tensor *loss = loss_of(&m);
    if (argc > 1) { /* the graph, before backward consumes it */
        FILE *out = fopen(argv[1], "w");
        if (!out || gc_autograd_write_dot(out, &loss, 1) != GC_OK) {
            fprintf(stderr, "02_autograd: cannot write %s\n", argv[1]);
            return 1;
        }
        fclose(out);
        printf("the graph is in %s (dot -Tsvg %s -o graph.svg)\n", argv[1], argv[1]);
    }
    if (gc_backward(&loss, NULL, 1) != GC_OK) return 1;
    printf("loss %.6f; d loss / d W2 = [", gc_item(loss));
    const double *dw2 = gc_data(gc_grad(m.w2));
    for (int i = 0; i < 5; i++) printf("%s%.5f", i ? " " : "", dw2[i]);
    printf("]\n");

    gc_tensor *params[3] = {m.w1, m.b1, m.w2};
    gc_gradcheck_report report;
    if (gc_gradcheck(loss_of, &m, params, 3, NULL, &report) != GC_OK) return 1;
    printf("gradcheck: %lld of %lld gradient elements differ from central differences (the closest call: "
           "%.10f against %.10f)\n", (long long)report.failed, (long long)report.checked, report.worst_analytic,
           report.worst_numeric);
    printf("example 02_autograd: %s\n", report.failed == 0 ? "ok" : "WRONG");
    gc_tensor *all[] = {loss, m.x, m.target, m.w1, m.b1, m.w2};
    for (int i = 0; i < 6; i++) gc_tensor_release(all[i]);
    gc_shutdown();
    return report.failed == 0 ? 0 : 1;
}
