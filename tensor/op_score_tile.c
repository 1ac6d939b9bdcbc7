/* The tiled contrastive loss's tile ops (op_internal.h): the checks, then the backend's
 * kernels. Every tensor is the caller's (views of its vectors); nothing is allocated, so
 * nothing can fail but a programmer error. */
#include "backend.h"
#include "op_internal.h"
#include "op_util.h"

#define OP "score_tile"

/* x is a vector [length] (or, for the scores, whatever the caller checked) of the tile's
 * dtype on its device. */
static void check_vector(const gc_tensor *x, const gc_tensor *scores, int64_t length, const char *what) {
    char text[128];
    gc_check_same_device(OP, scores, x);
    gc_check_same_dtype(OP, scores, x);
    if (x->ndim != 1 || x->shape[0] != length)
        gc_fatal(OP ": %s needs [%lld], got %s", what, (long long)length, gc_tensor_str(x, text, sizeof text));
}

/* Per column, two vectors that go together: both [cols], or both NULL. */
static void check_column_pair(const gc_tensor *a, const gc_tensor *b, const gc_tensor *scores, int64_t cols,
                              const char *name_a, const char *name_b) {
    if (!a != !b) gc_fatal(OP ": %s and %s go together", name_a, name_b);
    if (!a) return;
    check_vector(a, scores, cols, name_a);
    check_vector(b, scores, cols, name_b);
}

/* The tile's own checks: f32 or f64 scores [rows, cols], scales and i32 targets to match. */
static gc_score_tile_args tile_args(const gc_score_tile *tile) {
    char text[128];
    const gc_tensor *scores = tile->scores;
    if (scores->ndim != 2 || (scores->dtype != GC_F32 && scores->dtype != GC_F64))
        gc_fatal(OP ": needs f32 or f64 scores [rows, cols], got %s", gc_tensor_str(scores, text, sizeof text));
    int64_t rows = scores->shape[0], cols = scores->shape[1];
    check_vector(tile->row_scale, scores, rows, "row_scale");
    check_vector(tile->col_scale, scores, cols, "col_scale");
    gc_check_same_device(OP, scores, tile->targets);
    if (tile->targets->dtype != GC_I32 || tile->targets->ndim != 1 || tile->targets->shape[0] != rows)
        gc_fatal(OP ": needs i32 targets [%lld], got %s", (long long)rows,
                 gc_tensor_str(tile->targets, text, sizeof text));
    if (tile->bias) {
        gc_check_same_device(OP, scores, tile->bias);
        gc_check_same_dtype(OP, scores, tile->bias);
        if (!gc_same_shape(scores, tile->bias))
            gc_fatal(OP ": needs a bias [%lld, %lld], got %s", (long long)rows, (long long)cols,
                     gc_tensor_str(tile->bias, text, sizeof text));
    }
    return (gc_score_tile_args){.scores = gc_data(scores),
                                .bias = tile->bias ? gc_data(tile->bias) : NULL,
                                .row_scale = gc_data(tile->row_scale),
                                .col_scale = gc_data(tile->col_scale),
                                .targets = gc_data(tile->targets),
                                .rows = rows,
                                .cols = cols,
                                .col_start = tile->col_start,
                                .dtype = scores->dtype};
}

void gc_score_tile_lse(const gc_score_tile *tile, gc_tensor *row_max, gc_tensor *row_sum, gc_tensor *col_max,
                       gc_tensor *col_sum, gc_tensor *target_score) {
    gc_score_tile_args args = tile_args(tile);
    check_vector(row_max, tile->scores, args.rows, "row_max");
    check_vector(row_sum, tile->scores, args.rows, "row_sum");
    check_vector(target_score, tile->scores, args.rows, "target_score");
    check_column_pair(col_max, col_sum, tile->scores, args.cols, "col_max", "col_sum");
    args.row_max = gc_data(row_max);
    args.row_sum = gc_data(row_sum);
    args.col_max = col_max ? gc_data(col_max) : NULL;
    args.col_sum = col_sum ? gc_data(col_sum) : NULL;
    args.target_score = gc_data(target_score);
    gc_backend_for(tile->scores->device)->score_tile_lse(&args);
}

void gc_score_tile_grad(const gc_score_tile *tile, const gc_tensor *row_lse, double row_weight,
                        const gc_tensor *col_lse, const gc_tensor *col_weight, double target_weight) {
    gc_score_tile_args args = tile_args(tile);
    check_vector(row_lse, tile->scores, args.rows, "row_lse");
    check_column_pair(col_lse, col_weight, tile->scores, args.cols, "col_lse", "col_weight");
    args.row_lse = gc_data(row_lse);
    args.col_lse = col_lse ? gc_data(col_lse) : NULL;
    args.col_weight = col_weight ? gc_data(col_weight) : NULL;
    args.row_weight = row_weight;
    args.target_weight = target_weight;
    gc_backend_for(tile->scores->device)->score_tile_grad(&args);
}
