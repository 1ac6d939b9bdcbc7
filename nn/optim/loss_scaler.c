/* Dynamic loss scaling (see gradcache/loss_scaler.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "gradcache/autograd.h"
#include "gradcache/loss_scaler.h"
#include "gradcache/ops.h"

void gc_loss_scaler_init(gc_loss_scaler *scaler) {
    *scaler = (gc_loss_scaler){.scale = 65536, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 2000};
}

void gc_loss_scaler_check(const char *op, const gc_loss_scaler *s) {
    /* written so that nan fails every test */
    if (!(s->scale > 0 && s->scale <= FLT_MAX && s->growth_factor > 1 && s->backoff_factor > 0 &&
          s->backoff_factor < 1 && s->growth_interval >= 1 && s->growth_tracker >= 0 && s->skipped_steps >= 0))
        gc_fatal("%s: loss scaler with scale %g (want (0, FLT_MAX]), growth_factor %g (> 1), backoff_factor %g"
                 " (in (0, 1)), growth_interval %lld (>= 1), growth_tracker %lld and skipped_steps %lld (>= 0)",
                 op, s->scale, s->growth_factor, s->backoff_factor, (long long)s->growth_interval,
                 (long long)s->growth_tracker, (long long)s->skipped_steps);
}

gc_status gc_loss_scaler_check_grads(const gc_param_list *params, bool *found_inf) {
    *found_inf = true;
    gc_tensor **grads = malloc(((size_t)params->count + 1) * sizeof *grads);
    if (!grads) gc_fatal("loss_scaler_check_grads: out of host memory for %d gradients", params->count);
    int count = 0;
    for (int i = 0; i < params->count; i++)
        if (gc_grad(params->items[i].tensor)) grads[count++] = gc_grad(params->items[i].tensor);
    gc_status status = GC_OK;
    if (count == 0) {
        *found_inf = false;
    } else {
        gc_tensor *flag = gc_any_nonfinite(grads, count);
        if (flag) *found_inf = gc_item(flag) != 0;
        else status = gc_last_status();
        gc_tensor_release(flag);
    }
    free(grads);
    return status;
}

void gc_loss_scaler_update(gc_loss_scaler *scaler, bool found_inf) {
    gc_loss_scaler_check("loss_scaler_update", scaler);
    if (found_inf) {
        scaler->scale *= scaler->backoff_factor;
        scaler->growth_tracker = 0;
        scaler->skipped_steps++;
        return;
    }
    if (++scaler->growth_tracker < scaler->growth_interval) return;
    double grown = scaler->scale * scaler->growth_factor;
    if (grown <= FLT_MAX) scaler->scale = grown;
    scaler->growth_tracker = 0;
}
