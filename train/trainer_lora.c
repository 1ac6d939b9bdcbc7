/* --lora-r and its flags (see gc_trainer_config): LoRA adapters over a pretrained model's
 * frozen weights. The model's parameter list becomes the adapters alone, so that the optimizer,
 * the gradient bucketer, ZeRO's shards, clipping and the checkpoint see nothing else; the base
 * is --init's folder, read again by a resumed run, and written nowhere. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <math.h>
#include <stdlib.h>

#include "gradcache/pretrained.h"
#include "trainer_internal.h"

/* GC_ERR_CONFIG with a printf-style message: a setting that cannot work. */
#define refuse(...) (gc_set_error(GC_ERR_CONFIG, __VA_ARGS__), GC_ERR_CONFIG)

gc_status gc_trainer_lora_check(const gc_trainer_config *c) {
    if (c->lora_r < 0) return refuse("--lora-r %lld: expected at least 0 (0: no adapters)", (long long)c->lora_r);
    if (!c->lora_r) {
        if (c->lora_targets || c->lora_dropout != 0 || c->lora_alpha != gc_trainer_config_default().lora_alpha)
            return refuse("--lora-alpha, --lora-dropout and --lora-targets need --lora-r");
        return GC_OK;
    }
    /* an adapter over randomly drawn weights would learn next to nothing; and its folder names
     * the base a reader applies it over */
    if (!c->init) return refuse("--lora-r needs --init: adapters adapt a pretrained model folder");
    if (!c->lora_targets || !*c->lora_targets)
        return refuse("--lora-r needs --lora-targets, e.g. query,value (BERT) or q_proj,v_proj (the decoders)");
    if (c->lora_r > 1 << 20) return refuse("--lora-r %lld: expected at most %d", (long long)c->lora_r, 1 << 20);
    if (!(c->lora_alpha > 0) || isinf(c->lora_alpha))
        return refuse("--lora-alpha %g: expected a positive, finite number", c->lora_alpha);
    if (!(c->lora_dropout >= 0 && c->lora_dropout < 1))
        return refuse("--lora-dropout %g: expected a probability in [0, 1)", c->lora_dropout);
    return GC_OK;
}

static gc_lora_config lora_config(const gc_trainer_config *c) {
    return (gc_lora_config){(int)c->lora_r, c->lora_alpha, c->lora_dropout, c->lora_targets};
}

gc_status gc_trainer_lora_attach(gc_trainer *t, uint64_t init_seed) {
    gc_lora_config config = lora_config(&t->config);
    gc_generator init = {init_seed, 0};
    gc_text_encoder *encoder = &t->model.towers[0]; /* --init's model is one tied encoder */
    gc_status status = gc_lora_attach_targets(encoder, &config, &init, NULL);
    if (status != GC_OK) return status;
    /* the encoder's list again (each adapter named after its Linear), then the learning ones */
    gc_param_list all = {0};
    gc_text_encoder_params(encoder, "encoder", &all);
    gc_param_list_free(&t->model.params);
    gc_param_list_trainable(&all, &t->model.params);
    gc_param_list_free(&all);
    return GC_OK;
}

gc_status gc_trainer_save_model(const gc_trainer *t, const char *dir) {
    if (!t->config.lora_r) return gc_dual_encoder_save(&t->model, dir);
    char *adapter = gc_path_join(dir, "adapter");
    gc_lora_config config = lora_config(&t->config);
    /* the base as an absolute path, so that the run folder finds it from any working folder
     * (`--init` as typed where it cannot be resolved) */
    char *base = realpath(t->config.init, NULL);
    gc_status status = gc_make_directories(adapter);
    if (status == GC_OK) status = gc_lora_save(adapter, &t->model.towers[0], &config, base ? base : t->config.init);
    free(base);
    free(adapter);
    return status;
}
