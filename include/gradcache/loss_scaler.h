/* Dynamic loss scaling, for training with f16 gradients (PyTorch's GradScaler, with its
 * defaults).
 *
 * f16 holds magnitudes from 6e-8 (subnormal) to 65504: many gradients of a real model are
 * smaller than that range allows and would round to zero. Multiplying the loss by a scale S
 * before the backward pass multiplies every gradient by S, lifting them into range; the
 * optimizer divides them by S again in f32. Too large an S overflows some gradient to inf
 * (or makes a nan): that step is skipped, parameters and optimizer state untouched, and S is
 * halved; after growth_interval clean steps in a row S is doubled, so that it stays near the
 * largest scale that does not overflow. bf16 has f32's exponent range and needs no scaler.
 *
 * One step, with f16 parameters and an optimizer keeping f32 masters (gradcache/optim.h):
 *
 *     gc_loss_scaler scaler;                        // once
 *     gc_loss_scaler_init(&scaler);
 *     config.scaler = &scaler;                      // GradCache scales the loss (gradcache/cache.h)
 *
 *     gc_cache_step(cache, inputs, &loss, NULL);    // gradients carry scaler.scale
 *     bool found_inf;
 *     gc_loss_scaler_check_grads(&params, &found_inf);   // one pass over every gradient
 *     // (data-parallel: combine found_inf over the ranks here; one rank's overflow skips all)
 *     if (!found_inf) {
 *         double grad_scale = 1 / scaler.scale;     // unscale first,
 *         gc_clip_grad_scale(&params, max_norm, &grad_scale);  // then clip the unscaled norm
 *         gc_adamw_step_scaled(&adamw, grad_scale); // both applied in f32 inside the update
 *     }
 *     gc_loss_scaler_update(&scaler, found_inf);
 *     gc_param_list_zero_grad(&params);
 *
 * The verdict is a value computed before the update consumes it, so that a data-parallel
 * trainer can agree on it across processes in between. The scaler is plain data: the fields
 * may be read and set (a checkpoint saves scale, growth_tracker and skipped_steps). */
#ifndef GRADCACHE_LOSS_SCALER_H
#define GRADCACHE_LOSS_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcache/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_loss_scaler {
    double scale;            /* S, the loss's multiplier: 2^16 at first */
    double growth_factor;    /* 2: S after growth_interval clean steps in a row */
    double backoff_factor;   /* 0.5: S after a step with an inf or nan gradient */
    int64_t growth_interval; /* 2000 */
    int64_t growth_tracker;  /* clean steps since S last changed */
    int64_t skipped_steps;   /* steps skipped so far (an inf or nan gradient) */
} gc_loss_scaler;

/* PyTorch's defaults: scale 2^16, growth 2 every 2000 clean steps, backoff 0.5. */
void gc_loss_scaler_init(gc_loss_scaler *scaler);

/* Whether any gradient of `params` (parameters without one are left out) holds an inf or a
 * nan, into *found_inf: one fused pass over all of them (gc_any_nonfinite), whose verdict is
 * then read back to the host. GC_OK, or an allocation error (*found_inf is then true: a step
 * that could not be checked is not taken). All gradients must be on one device. */
gc_status gc_loss_scaler_check_grads(const gc_param_list *params, bool *found_inf);

/* Ends a step. found_inf: S *= backoff_factor, growth_tracker = 0, skipped_steps + 1.
 * Otherwise growth_tracker + 1, and at growth_interval S *= growth_factor (unless that
 * is not finite in f32, as PyTorch keeps S) and growth_tracker = 0. Fields out of range
 * (S not positive and finite, growth_factor <= 1, backoff_factor outside (0, 1), an interval
 * below 1) are a programmer error naming them. */
void gc_loss_scaler_update(gc_loss_scaler *scaler, bool found_inf);

/* Stops the program, naming `op` and the field, when a field is out of range (see above). */
void gc_loss_scaler_check(const char *op, const gc_loss_scaler *scaler);

#ifdef __cplusplus
}
#endif
#endif
