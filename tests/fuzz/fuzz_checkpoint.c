/* libFuzzer target for the training checkpoint's reader (train/train_state.c), what
 * gc_trainer_resume (`gradcache train --resume`) trusts of a file beyond its format: the
 * settings, the model's description, the counters, the chunk sizes, the generators, the set of
 * metadata keys, the parameters and AdamW's moments. The run resuming is a fixed small one (a
 * dim-2 dual encoder, 8 steps of 4 per epoch, batch 2, --gc with chunks of 2, seed 5); the
 * corpus holds its checkpoints at steps 0 and 2 (with model.dtype, which a checkpoint must hold
 * now that it is checked). Any input must be refused with GC_ERR_FORMAT and a message naming
 * it, or load a state the run could have written: every counter in range and in step with the
 * others, so that the next step cannot overflow or abort. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The resuming run: what a fresh one starts from. */
typedef struct run {
    gc_dual_encoder model;
    gc_train_optim optimizer;
    gc_metadata settings;
    gc_multi_sampler batches;
    gc_train_plan plan;
    gc_train_progress progress;
} run;

static void run_begin(run *r) {
    gc_text_encoder_config config = gc_model_preset(0, 4);
    config.dim = 2, config.heads = 1, config.layers = 1, config.hidden = 3, config.projection = 2;
    if (gc_dual_encoder_init(&r->model, &config, false, gc_cpu(), 1) != GC_OK ||
        gc_train_optim_init(&r->optimizer, &(gc_train_dist){0}, &r->model.params, 1e-3, 0.01) != GC_OK)
        abort();
    r->settings = (gc_metadata){0};
    gc_metadata_set(&r->settings, "flag.seed", "5");
    int64_t examples = 8;
    gc_multi_sampler_init(&r->batches, 0, 1, &examples, 2, GC_SAMPLING_ROUND_ROBIN); /* 4 steps per epoch */
    r->plan = (gc_train_plan){.total_steps = 8, .batches = &r->batches, .gc = true, .rank = 0, .world = 1};
    gc_manual_seed(5);
    r->progress = (gc_train_progress){.chunk_sizes = {2, 2}, .rng = gc_rng_capture()};
}

static void run_end(run *r) {
    gc_train_optim_free(&r->optimizer);
    gc_dual_encoder_free(&r->model);
    gc_metadata_free(&r->settings);
    gc_multi_sampler_free(&r->batches);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gc_safetensors *file = NULL;
    if (gc_safetensors_open_memory(data, size, "fuzz", &file) != GC_OK) { /* fuzz_safetensors' concern */
        gc_clear_error();
        return 0;
    }
    run r;
    run_begin(&r);
    gc_status status = gc_train_state_load_from(file, "fuzz", &r.model, &r.optimizer, &r.progress, &r.settings, &r.plan);
    if (status == GC_OK) {
        const gc_train_progress *p = &r.progress;
        int64_t epoch, position;
        gc_multi_sampler_locate(&r.batches, p->step, &epoch, &position);
        if (p->step < 0 || p->step > r.plan.total_steps || p->epoch != epoch || p->position != position ||
            r.optimizer.whole.step != p->step || p->chunk_sizes[0] < 1 || p->chunk_sizes[0] > 2 ||
            p->chunk_sizes[1] < 1 || p->chunk_sizes[1] > 2)
            abort();
        for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES; slot++)
            if (p->rng.devices[slot].offset > GC_TRAIN_MAX_RNG_OFFSET) abort();
        for (int i = 0; i < r.optimizer.whole.params.count; i++)
            if ((r.optimizer.whole.exp_avg[i] != NULL) != (p->step > 0)) abort();
    } else if (status != GC_ERR_FORMAT || !strstr(gc_last_error(), "fuzz")) {
        abort();
    }
    gc_clear_error();
    run_end(&r);
    gc_safetensors_close(file);
    return 0;
}
