/* Step 3: training. A small MLP (nn's Linear layers, relu) learns which points of the square
 * [-1, 1]^2 lie inside the circle x^2 + y^2 < 1/2, from 1024 labelled points, with the
 * cross-entropy loss and AdamW: forward, backward, step, zero the gradients, 300 times. Then
 * it classifies 1024 points it has not seen.
 * Build: cc 03_train_mlp.c $(pkg-config --cflags --libs gradcache). Exit status 0 when the
 * accuracy on the unseen points is at least 95%. */
#include <stdio.h>

#include <gradcache/gradcache.h>

enum { POINTS = 1024, HIDDEN = 32, STEPS = 300 };

/* points [POINTS, 2] uniform in the square, labels i32 [POINTS]: 1 inside the circle. */
static void make_points(uint64_t seed, gc_tensor **points, gc_tensor **labels) {
    *points = gc_uniform(GC_SHAPE(POINTS, 2), GC_F32, gc_cpu(), -1, 1, seed, 0);
    *labels = gc_zeros(GC_SHAPE(POINTS), GC_I32, gc_cpu());
    const float *p = gc_data(*points);
    int32_t *label = gc_data(*labels);
    for (int i = 0; i < POINTS; i++) label[i] = p[2 * i] * p[2 * i] + p[2 * i + 1] * p[2 * i + 1] < 0.5f;
}

typedef struct model {
    gc_linear in, out;
} model;

/* logits [POINTS, 2] */
static gc_tensor *forward(const model *m, const gc_tensor *points) {
    gc_tensor *hidden = gc_linear_forward(&m->in, points), *active = gc_relu(hidden);
    gc_tensor *logits = gc_linear_forward(&m->out, active);
    gc_tensor_release(hidden);
    gc_tensor_release(active);
    return logits;
}

/* The fraction of points whose larger logit is their label. */
static double accuracy(const model *m, const gc_tensor *points, const gc_tensor *labels) {
    bool previous = gc_set_grad_enabled(false); /* no graph: nothing to differentiate */
    gc_tensor *logits = forward(m, points), *predicted = NULL, *best = gc_max_last(logits, false, &predicted);
    const int32_t *guess = gc_data(predicted), *truth = gc_data(labels);
    int right = 0;
    for (int i = 0; i < POINTS; i++) right += guess[i] == truth[i];
    gc_tensor_release(logits);
    gc_tensor_release(best);
    gc_tensor_release(predicted);
    gc_set_grad_enabled(previous);
    return (double)right / POINTS;
}

int main(void) {
    gc_generator init = {7, 0};
    model m;
    gc_param_list params = {0};
    if (gc_linear_init(&m.in, 2, HIDDEN, true, GC_F32, gc_cpu(), &init) != GC_OK ||
        gc_linear_init(&m.out, HIDDEN, 2, true, GC_F32, gc_cpu(), &init) != GC_OK)
        return 1;
    gc_linear_params(&m.in, "in", &params);
    gc_linear_params(&m.out, "out", &params);
    gc_adamw adamw;
    gc_adamw_init(&adamw, &params, 1e-2, 0.9, 0.999, 1e-8, 0);

    gc_tensor *points, *labels, *test_points, *test_labels;
    make_points(1, &points, &labels);
    make_points(2, &test_points, &test_labels);
    for (int step = 1; step <= STEPS; step++) {
        gc_tensor *logits = forward(&m, points), *loss = gc_cross_entropy(logits, labels, GC_LOSS_MEAN);
        if (!loss || gc_backward(&loss, NULL, 1) != GC_OK || gc_adamw_step(&adamw) != GC_OK) return 1;
        gc_param_list_zero_grad(&params);
        if (step % 100 == 0) printf("step %d: loss %.4f\n", step, gc_item(loss));
        gc_tensor_release(logits);
        gc_tensor_release(loss);
    }
    double seen = accuracy(&m, points, labels), unseen = accuracy(&m, test_points, test_labels);
    printf("accuracy: %.1f%% on the training points, %.1f%% on unseen ones\n", 100 * seen, 100 * unseen);
    printf("example 03_train_mlp: %s\n", unseen >= 0.95 ? "ok" : "WRONG");
    gc_tensor *data[] = {points, labels, test_points, test_labels};
    for (int i = 0; i < 4; i++) gc_tensor_release(data[i]);
    gc_adamw_free(&adamw);
    gc_param_list_free(&params);
    gc_linear_free(&m.in);
    gc_linear_free(&m.out);
    gc_shutdown();
    return unseen >= 0.95 ? 0 : 1;
}
