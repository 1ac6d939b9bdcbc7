/* Learning-rate schedules: linear warm-up, then a constant rate or a linear or cosine decay
 * (the formulas are in gradcache/optim.h). */
#include <math.h>

#include "gradcache/optim.h"

#define PI 3.14159265358979323846

double gc_lr_at(const gc_lr_schedule *schedule, int64_t step) {
    int64_t warmup = schedule->warmup_steps, total = schedule->total_steps;
    bool decays = schedule->decay != GC_LR_CONSTANT;
    if (step < 0 || warmup < 0 || (decays && total < warmup))
        gc_fatal("lr_at: step %lld with warmup_steps %lld and total_steps %lld (want step >= 0, warmup_steps >= 0"
                 " and, for a decay, total_steps >= warmup_steps)",
                 (long long)step, (long long)warmup, (long long)total);
    double peak = schedule->peak, min = schedule->min;
    if (step < warmup) return peak * (double)(step + 1) / (double)warmup;
    if (!decays) return peak;
    if (step >= total) return min;
    double progress = (double)(step - warmup) / (double)(total - warmup); /* in [0, 1) */
    if (schedule->decay == GC_LR_LINEAR) return peak + (min - peak) * progress;
    return min + (peak - min) * 0.5 * (1 + cos(PI * progress));
}
