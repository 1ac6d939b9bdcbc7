/* Step 6: data parallelism with Gradient Cache. Run as is, the program starts itself twice
 * under the library's launcher (gc_launch: what `gradcache launch -n 2` and torchrun do). Each
 * process joins the process group, gives its parameters to the bucketer (gc_ddp: gradients
 * grouped into buckets and averaged over the processes) and takes three cached steps on its
 * own 32 pairs, in chunks of 8: the loss sees all 64 pairs of both processes, and although
 * each step runs 8 backwards (4 chunks per tower), sync suppression lets only the step's last
 * one reduce the gradients -- once per bucket per step, not once per chunk.
 * Build: cc 06_data_parallel.c $(pkg-config --cflags --libs gradcache). Exit status 0 when
 * each step reduced every bucket exactly once and both processes hold the same parameters. */
#include <stdio.h>
#include <stdlib.h>

#include <gradcache/gradcache.h>

enum { VOCAB = 64, LENGTH = 8, ROWS = 32, CHUNK = 8, STEPS = 3 };

static gc_tensor *encode(void *tower, const gc_batch *chunk) {
    return gc_text_encoder_forward(tower, chunk->tensors[0], chunk->tensors[1], true);
}

/* The sum of every parameter: equal on every rank when their parameters are. */
static double checksum(const gc_param_list *params) {
    double total = 0;
    for (int i = 0; i < params->count; i++) {
        gc_tensor *sum = gc_sum_all(params->items[i].tensor);
        total += gc_item(sum);
        gc_tensor_release(sum);
    }
    return total;
}

static int rank_main(void) {
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 30, gc_cpu()});
    if (!group) {
        fprintf(stderr, "%s\n", gc_last_error());
        return 1;
    }
    int rank = gc_dist_rank(group);
    gc_text_encoder_config config = {.vocab = VOCAB, .max_length = LENGTH, .dim = 16, .heads = 2, .layers = 1,
                                     .hidden = 32, .activation = GC_ACT_GELU_ERF, .pooling = GC_POOL_MEAN,
                                     .dtype = GC_F32};
    gc_generator init = {3, 0}; /* the same weights on every rank (the bucketer checks it) */
    gc_text_encoder towers[2];
    gc_param_list params = {0};
    for (int t = 0; t < 2; t++) {
        if (gc_text_encoder_init(&towers[t], &config, gc_cpu(), &init) != GC_OK) return 1;
        gc_text_encoder_params(&towers[t], t ? "passage" : "query", &params);
    }
    /* small buckets, so that this small model has several (a real model's are 25 MiB) */
    gc_ddp *ddp = gc_ddp_new(group, &params, &(gc_ddp_options){.first_bucket_bytes = 8192, .bucket_bytes = 16384});
    if (!ddp) {
        fprintf(stderr, "%s\n", gc_last_error());
        return 1;
    }
    gc_adamw adamw;
    gc_adamw_init(&adamw, &params, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    gc_contrastive_options loss_options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    gc_cache *cache = gc_cache_new(&(gc_cache_config){
        .n_models = 2, .models = {{&towers[0], encode, CHUNK, NULL}, {&towers[1], encode, CHUNK, NULL}},
        .loss = gc_contrastive_loss_fn(&loss_options), .group = group, .ddp = ddp});
    int buckets = gc_ddp_get_stats(ddp).buckets;
    bool once_per_step = true;
    for (int step = 0; step < STEPS; step++) {
        /* this rank's rows: its own draw of ids */
        gc_tensor *uniform = gc_uniform(GC_SHAPE(2 * ROWS, LENGTH), GC_F32, gc_cpu(), 0, VOCAB, 100 * step + rank, 0);
        gc_tensor *ids = gc_cast(uniform, GC_I32), *mask = gc_ones(GC_SHAPE(ROWS, LENGTH), GC_F32, gc_cpu());
        gc_tensor *queries = gc_slice0(ids, 0, ROWS), *passages = gc_slice0(ids, ROWS, 2 * ROWS);
        gc_batch inputs[2] = {{2, {"ids", "mask"}, {queries, mask}}, {2, {"ids", "mask"}, {passages, mask}}};
        int64_t before = gc_ddp_get_stats(ddp).all_reduces;
        double loss;
        gc_ddp_zero_grad(ddp);
        if (gc_cache_step(cache, inputs, &loss, NULL) != GC_OK || gc_adamw_step(&adamw) != GC_OK) return 1;
        int64_t reductions = gc_ddp_get_stats(ddp).all_reduces - before;
        once_per_step = once_per_step && reductions == buckets;
        if (rank == 0) printf("step %d: loss %.4f, 8 backwards, %lld bucket reductions (%d buckets)\n", step, loss,
                              (long long)reductions, buckets);
        gc_tensor *all[] = {uniform, ids, mask, queries, passages};
        for (int i = 0; i < 5; i++) gc_tensor_release(all[i]);
    }
    double mine = checksum(&params), both[2];
    bool same = gc_dist_all_gather_host(group, &mine, sizeof mine, both) == GC_OK && both[0] == both[1];
    if (rank == 0) printf("parameter checksums: %.9g and %.9g\n", both[0], both[1]);
    bool right = once_per_step && same;
    if (rank == 0) printf("example 06_data_parallel: %s\n", right ? "ok" : "WRONG");
    gc_cache_free(cache);
    gc_adamw_free(&adamw);
    gc_ddp_free(ddp);
    gc_param_list_free(&params);
    for (int t = 0; t < 2; t++) gc_text_encoder_free(&towers[t]);
    gc_process_group_free(group);
    gc_shutdown();
    return right ? 0 : 1;
}

int main(int argc, char **argv) {
    (void)argc;
    if (getenv("WORLD_SIZE")) return rank_main(); /* a process of the run */
    return gc_launch(&(gc_launch_options){.nproc = 2}, argv);
}
