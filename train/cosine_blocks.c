/* Cosine scores a block of queries at a time (see cosine_blocks.h). */
#include <stdlib.h>

#include "cosine_blocks.h"
#include "gradcache/autograd.h"
#include "gradcache/nn.h"
#include "gradcache/ops.h"

gc_status gc_cosine_score_blocks(const gc_tensor *queries, const gc_tensor *candidates, gc_cosine_visit visit,
                                 void *user) {
    int64_t n_queries = queries->shape[0], n_candidates = candidates->shape[0];
    int64_t block_rows = n_queries < GC_COSINE_QUERY_BLOCK ? n_queries : GC_COSINE_QUERY_BLOCK;
    float *scores = malloc((size_t)(block_rows * n_candidates + 1) * sizeof *scores);
    if (!scores) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "cosine scores: out of host memory for %lld scores",
                     (long long)(block_rows * n_candidates));
        return GC_ERR_OUT_OF_MEMORY;
    }
    bool previous = gc_set_grad_enabled(false);
    gc_tensor *unit_queries = gc_l2_normalize(queries, 1e-12), *unit_candidates = gc_l2_normalize(candidates, 1e-12);
    gc_status status = unit_queries && unit_candidates ? GC_OK : gc_last_status();
    for (int64_t start = 0; start < n_queries && status == GC_OK; start += GC_COSINE_QUERY_BLOCK) {
        int64_t end = start + GC_COSINE_QUERY_BLOCK < n_queries ? start + GC_COSINE_QUERY_BLOCK : n_queries;
        gc_tensor *rows = gc_slice0(unit_queries, start, end);
        gc_tensor *block_scores = gc_matmul(rows, unit_candidates, false, true); /* [end - start, Nc] */
        if (block_scores) {
            gc_copy_to_host(block_scores, scores);
            status = visit(user, scores, start, end - start);
        } else {
            status = gc_last_status();
        }
        gc_tensor_release(rows);
        gc_tensor_release(block_scores);
    }
    gc_set_grad_enabled(previous);
    gc_tensor_release(unit_queries);
    gc_tensor_release(unit_candidates);
    free(scores);
    return status;
}
