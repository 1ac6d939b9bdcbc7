/* What the BERT tests share: a model's embeddings and contrastive-loss gradients compared
 * with the PyTorch reference of tests/make_bert_fixture.py. */
#ifndef GC_TESTS_BERT_CHECK_H
#define GC_TESTS_BERT_CHECK_H

#include "check.h"
#include "fixture.h"

#define TEMPERATURE 0.05

/* Embeddings in f32 against the reference's f64: within 1e-5 + 1e-4 relative (the issue's
 * bound). Unit vectors of a few hundred elements from a handful of layers round to ~1e-7
 * each; 1e-5 leaves room for the different summation orders, not for a wrong formula. */
static inline void check_embeddings(const gc_text_encoder *encoder, const gc_tensor *ids, const gc_tensor *mask,
                                    const gc_tensor *want, const char *what) {
    gc_tensor *got = gc_text_encoder_forward(encoder, ids, mask, false);
    REQUIRE(got);
    gc_test_expect_close(want, got, 1e-5, 1e-4, what);
    gc_tensor_release(got);
}

/* The contrastive loss of `queries` rows against `passages` rows (cosine / 0.05, mean
 * cross-entropy; eval mode, so no dropout) and its gradient for every weight the fixture has
 * ("grad.<Hugging Face name>"), against the f64 reference. Tolerance: the loss to 1e-5
 * relative; each gradient element within 1e-3 relative, or 1e-4 of its tensor's largest
 * gradient plus 1e-6 of the largest gradient of all: an f32 backward through the layers loses
 * about 1e-6 relative per op; elements far below their tensor's scale come out of
 * cancellations whose relative error means nothing; and a gradient that is 0 in exact
 * arithmetic (a key bias: softmax ignores a constant shift of the scores) is f32 rounding
 * noise on the scale of the others. Returns how many weights were compared. */
static inline int check_gradients(const gc_text_encoder *encoder, const gc_tensor *query_ids,
                                  const gc_tensor *query_mask, const gc_tensor *passage_ids,
                                  const gc_tensor *passage_mask, const gc_param_list *fixture) {
    gc_tensor *queries = gc_text_encoder_forward(encoder, query_ids, query_mask, false);
    gc_tensor *passages = gc_text_encoder_forward(encoder, passage_ids, passage_mask, false);
    gc_contrastive_options options = {
        .similarity = GC_SIMILARITY_COSINE, .temperature = TEMPERATURE, .reduction = GC_LOSS_MEAN};
    gc_tensor *loss = gc_contrastive_loss(queries, passages, &options);
    REQUIRE(loss);
    CHECK_NEAR(gc_item(loss), gc_item(gc_fixture_get(fixture, "loss")), 0, 1e-5);
    REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(encoder, "", &params);
    double largest = 0;
    for (int i = 0; i < fixture->count; i++)
        if (!strncmp(fixture->items[i].name, "grad.", 5))
            largest = fmax(largest, gc_test_largest_abs(fixture->items[i].tensor));
    int compared = 0;
    for (int i = 0; i < params.count; i++) {
        char name[GC_PARAM_NAME_MAX], key[GC_PARAM_NAME_MAX + 8];
        REQUIRE(gc_bert_weight_name(params.items[i].name, name));
        snprintf(key, sizeof key, "grad.%s", name);
        const gc_tensor *want = gc_param_list_find(fixture, key);
        if (!want) continue;
        const gc_tensor *got = gc_grad(params.items[i].tensor);
        REQUIRE(got);
        gc_test_expect_close(want, got, 1e-4 * gc_test_largest_abs(want) + 1e-6 * largest, 1e-3, key);
        compared++;
    }
    gc_param_list_zero_grad(&params);
    gc_param_list_free(&params);
    RELEASE(queries, passages, loss);
    return compared;
}

#endif
