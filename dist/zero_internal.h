/* What ZeRO's optimizer (zero_adamw.c) and its checkpoints (zero_state.c) share. Private to
 * dist/. */
#ifndef GC_DIST_ZERO_INTERNAL_H
#define GC_DIST_ZERO_INTERNAL_H

#include "gradcache/zero.h"

struct gc_zero_adamw {
    gc_ddp *ddp;
    gc_process_group *group;
    gc_adamw adamw;      /* over the pieces: flat views of the parameters' parts in this rank's
                            shards, named after their parameters, in bucket order */
    gc_zero_stats stats;
};

/* Whether the bucketer shards (ZeRO >= 1): otherwise every rank updates every parameter and
 * nothing is gathered. */
bool gc_zero_sharded(const gc_zero_adamw *opt);
/* Parameter `index` of bucket b (its elements start at *offset in the bucket) and its part in
 * this rank's shard: elements [*from, *end) of the bucket, none when *from >= *end. */
const gc_param *gc_zero_part(const gc_ddp *ddp, int b, int index, int64_t *offset, int64_t *from, int64_t *end);
/* Elements [start, start + count) of t, flattened: a new view, outside any graph. */
gc_tensor *gc_zero_flat_range(const gc_tensor *t, int64_t start, int64_t count);

#endif
