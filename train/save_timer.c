/* Checkpoints by wall time (see save_timer.h). */
#include "save_timer.h"

#include "gradcache/clock.h"
#include "gradcache/dist.h"

void gc_save_timer_start(gc_save_timer *timer, double minutes) {
    *timer = (gc_save_timer){.minutes = minutes, .since = gc_seconds()};
}

gc_status gc_save_timer_due(const gc_save_timer *timer, gc_train_dist *dist, bool *due) {
    *due = false;
    if (!(timer->minutes > 0)) return GC_OK;
    *due = gc_seconds() - timer->since >= 60 * timer->minutes;
    return dist->group ? gc_dist_any(dist->group, due) : GC_OK;
}

void gc_save_timer_restart(gc_save_timer *timer) { timer->since = gc_seconds(); }
