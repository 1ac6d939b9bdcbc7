/* The tiles of the contrastive loss, shared by the tiled loss (contrastive_tiled.c: one
 * process, all rows at hand) and the ring loss (contrastive_ring.c: this rank's queries
 * against candidate blocks that travel around a process group). Both are Inf-CL (arXiv
 * 2410.17243): the scores of one tile of queries x candidates at a time, never the whole
 * matrix. The notation is contrastive_tiled.c's: s_ij = (q_i . p_j) a_i b_j, with the scales
 * a = r / T for the queries and b = r' for the candidates (r, r': cosine's inverse norms, 1
 * for dot). */
#ifndef GC_NN_CONTRASTIVE_TILES_H
#define GC_NN_CONTRASTIVE_TILES_H

#include "contrastive_internal.h"

/* One side of the score matrix, or a block of it: queries (its rows) or candidates (its
 * columns). Fields a side does not need are NULL. */
typedef struct gc_loss_side {
    gc_tensor *reps;         /* [N, D] in working precision (f32 for f16/bf16 inputs) */
    gc_tensor *inv_norm;     /* [N] cosine: r; NULL for dot */
    gc_tensor *scale;        /* [N]: a (queries) or b (candidates) */
    gc_tensor *max, *sum;    /* [N]: running log-sum-exp of the side's scores (candidates: symmetric only) */
    gc_tensor *lse;          /* [N]: max + log(sum) */
    gc_tensor *grad;         /* [N, D]: d loss / d reps (accumulated into) */
    gc_tensor *targets;      /* queries: i32 [N], each one's positive, a column of the whole matrix */
    gc_tensor *target_score; /* queries: [N], s_i,t_i */
    gc_tensor *col_weight;   /* candidates (symmetric): [N], w n_j (n_j: queries whose positive is j) */
} gc_loss_side;

/* Rows [start, end) of every tensor of s, as views (release with gc_loss_side_release). */
gc_loss_side gc_loss_side_rows(const gc_loss_side *s, int64_t start, int64_t end);
/* Releases every tensor of s and zeroes it. */
void gc_loss_side_release(gc_loss_side *s);
static inline int64_t gc_loss_side_count(const gc_loss_side *s) { return s->reps->shape[0]; }

/* s's representations x in working precision, its inverse norms (cosine) and scales
 * (factor: 1 / T for queries, 1 for candidates), `chunk` rows at a time, and, with_grad, its
 * zeroed gradient. An allocation error leaves what was made in s for the caller to release. */
gc_status gc_loss_side_prepare(gc_loss_side *s, const gc_tensor *x, gc_similarity similarity, double factor,
                               int64_t chunk, bool with_grad);
/* An empty running log-sum-exp for each row of s: max -inf, sum 0. */
gc_status gc_loss_side_start_lse(gc_loss_side *s);
/* lse = max + log(sum) for each row of s (a new tensor). */
gc_tensor *gc_loss_side_lse(const gc_loss_side *s);
/* Cosine: grad -= (grad . x) r^2 x for each row (contrastive_tiled.c says why), `chunk` rows
 * at a time. Nothing for dot. */
gc_status gc_loss_side_normalisation_backward(gc_loss_side *s, int64_t chunk);
/* seed times grad (in its working precision: a loss scale must multiply it before it is
 * rounded to 16 bits; grad is scaled in place), in `dtype` (a new reference). */
gc_tensor *gc_loss_seeded(gc_tensor *grad, double seed, gc_dtype dtype);

/* The bias [rows, cols] added to the scores of the tile of rows [row, row + rows) x columns
 * [col, col + cols) of the sides being folded or differentiated (0, or -inf to mask a
 * candidate out: the GIST loss), a new tensor; NULL on an allocation error, which the hook
 * keeps for its caller (the tile is then computed unmasked, and the caller fails). */
typedef gc_tensor *(*gc_tile_mask_fn)(void *user, int64_t row, int64_t rows, int64_t col, int64_t cols);

/* What every tile of one loss shares. */
typedef struct gc_loss_tiles {
    gc_tensor *buffer;    /* [rows * cols] of one tile's scores, the largest tile */
    int64_t tile;         /* rows and columns per tile */
    double weight;        /* w: the weight of one query's term in one direction */
    bool symmetric;
    gc_tile_mask_fn mask; /* NULL: no bias */
    void *mask_user;
} gc_loss_tiles;

/* The buffer for tiles of `tile` rows and columns over at most `rows` x `cols`. */
gc_status gc_loss_tiles_init(gc_loss_tiles *tiles, int64_t tile, int64_t rows, int64_t cols, gc_dtype dtype,
                             gc_device device);
void gc_loss_tiles_release(gc_loss_tiles *tiles);

/* The forward over every tile of rows x cols: each tile folded into the running log-sum-exp
 * of each row (and, symmetric, of each column), and the positives' scores picked up.
 * col_start: the whole matrix's column of cols' row 0 (the targets are columns of the whole
 * matrix). Allocates nothing but views (and, with a mask, each tile's bias). */
void gc_loss_tiles_fold(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                        int64_t col_start);
/* The gradient over every tile of rows x cols, from the completed log-sum-exps: each tile's
 * scores again, turned into d loss / d (q_i . p_j), added into rows->grad and cols->grad. */
void gc_loss_tiles_differentiate(const gc_loss_tiles *tiles, const gc_loss_side *rows, const gc_loss_side *cols,
                                 int64_t col_start);

#endif
