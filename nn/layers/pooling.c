/* From token vectors to one vector per sequence, and its normalisation to unit length. */
#include "layer_util.h"

static void check_inputs(const gc_tensor *x, const gc_tensor *mask) {
    char x_text[128];
    if (x->ndim != 3) gc_fatal("pool: x %s is not [B, T, D]", gc_tensor_str(x, x_text, sizeof x_text));
    gc_nn_check_mask("pool", mask, x->shape[0], x->shape[1], x->dtype, x->device);
}

/* x [B, T, D] -> [B, D]: position `t` of each sequence. */
static gc_tensor *token_at(const gc_tensor *x, int64_t t) {
    int64_t batch = x->shape[0], dim = x->shape[2];
    gc_tensor *by_position = gc_permute(x, (const int[]){1, 0, 2}); /* [T, B, D] */
    gc_tensor *token = gc_nn_then(by_position, gc_slice0(by_position, t, t + 1));
    return gc_nn_then(token, gc_reshape(token, GC_SHAPE(batch, dim)));
}

/* x [B, T, D] -> [B, D, T], summed over T -> [B, D]: a reduction over T needs T last. */
static gc_tensor *sum_over_tokens(const gc_tensor *x) {
    gc_tensor *tokens_last = gc_permute(x, (const int[]){0, 2, 1});
    return gc_nn_then(tokens_last, gc_sum_last(tokens_last, false));
}

/* x [B, T, D], weights [B, T] -> [B, D]: sum over t of weights[b, t] x[b, t]. */
static gc_tensor *weighted_sum(const gc_tensor *x, const gc_tensor *weights) {
    gc_tensor *column = gc_reshape(weights, GC_SHAPE(x->shape[0], x->shape[1], 1));
    gc_tensor *kept = gc_mul(x, column);
    gc_tensor_release(column);
    return gc_nn_then(kept, sum_over_tokens(kept));
}

/* x [B, T, D], mask [B, T] -> [B, D]: the mean of the kept tokens. A row the mask keeps no
 * token of counts as one token, so it pools to 0 rather than to 0 / 0. */
static gc_tensor *masked_mean(const gc_tensor *x, const gc_tensor *mask) {
    gc_tensor *sum = weighted_sum(x, mask); /* [B, D] */
    /* max(count, 1) = relu(count - 1) + 1, as there is no max op */
    gc_tensor *count = gc_sum_last(mask, true); /* [B, 1] */
    count = gc_nn_then(count, gc_sub_scalar(count, 1));
    count = gc_nn_then(count, gc_relu(count));
    count = gc_nn_then(count, gc_add_scalar(count, 1));
    gc_tensor *mean = gc_div(sum, count);
    gc_tensor_release(sum);
    gc_tensor_release(count);
    return mean;
}

/* mask [B, T] -> [B, T]: 1 at each row's last kept token, mask[b, t] (1 - mask[b, t + 1]) with
 * mask[b, T] = 0, so that one weighted sum picks it whichever side the padding is on (no
 * index is read back from the device). Exact in any dtype: the sum adds zeros to one vector. */
static gc_tensor *last_kept(const gc_tensor *mask) {
    int64_t batch = mask->shape[0], length = mask->shape[1];
    gc_tensor *by_position = gc_transpose(mask, 0, 1); /* [T, B] */
    gc_tensor *after = gc_slice0(by_position, 1, length), *end = gc_zeros(GC_SHAPE(1, batch), mask->dtype, mask->device);
    gc_tensor *next = after && end ? gc_cat0((gc_tensor *[]){after, end}, 2) : NULL; /* next[t] = mask[t + 1] */
    gc_tensor *last = next ? gc_rsub_scalar(next, 1) : NULL;
    last = gc_nn_then(last, gc_mul(by_position, last));
    gc_tensor_release(by_position);
    gc_tensor_release(after);
    gc_tensor_release(end);
    gc_tensor_release(next);
    return gc_nn_then(last, gc_transpose(last, 0, 1));
}

gc_tensor *gc_pool(const gc_tensor *x /* [B, T, D] */, const gc_tensor *mask /* [B, T] or NULL */,
                   gc_pooling pooling) {
    if (!x) return NULL;
    check_inputs(x, mask);
    switch (pooling) {
    case GC_POOL_CLS: return token_at(x, 0);
    case GC_POOL_MEAN: {
        if (mask) return masked_mean(x, mask);
        gc_tensor *sum = sum_over_tokens(x);
        return gc_nn_then(sum, gc_div_scalar(sum, (double)x->shape[1]));
    }
    case GC_POOL_LAST: {
        if (!mask) return token_at(x, x->shape[1] - 1);
        gc_tensor *selector = last_kept(mask);
        return gc_nn_then(selector, weighted_sum(x, selector));
    }
    }
    gc_fatal("pool: unknown pooling %d", (int)pooling);
}

/* x rsqrt(sum(x^2) + eps^2) over the last dim (see nn.h for how this meets x / max(||x||, eps)). */
gc_tensor *gc_l2_normalize(const gc_tensor *x /* [..., D] */, double eps) {
    if (!x) return NULL;
    if (!(eps > 0)) gc_fatal("l2_normalize: eps %g must be positive", eps);
    gc_tensor *squares = gc_mul(x, x);
    gc_tensor *norm_squared = gc_nn_then(squares, gc_sum_last(squares, true)); /* [..., 1] */
    gc_tensor *inverse = gc_nn_then(norm_squared, gc_add_scalar(norm_squared, eps * eps));
    inverse = gc_nn_then(inverse, gc_rsqrt(inverse));
    gc_tensor *unit = gc_mul(x, inverse);
    gc_tensor_release(inverse);
    return unit;
}
