/* A process of a distributed run started by whatever launcher (tests/test_dist_mpirun.sh runs
 * it under Open MPI's mpirun): reads the environment, forms the TCP group, all-reduces its
 * rank + 1 and checks the sum; rank 0 prints which launcher it found, as a program should.
 * Exits 0 when the sum is right, 1 otherwise (with the reason on stderr). */
#include <stdio.h>

#include "gradcache/gradcache.h"

int main(void) {
    gc_dist_env env;
    if (gc_dist_env_read(&env) != GC_OK) {
        fprintf(stderr, "dist_rank: %s\n", gc_last_error());
        return 1;
    }
    if (env.rank == 0) printf("started by %s: %d processes\n", gc_dist_launcher_name(env.launcher), env.world_size);
    gc_process_group *group = gc_process_group_new(&env, &(gc_dist_options){GC_DIST_TCP, 60, gc_cpu()});
    gc_tensor *value = group ? gc_scalar(env.rank + 1, GC_F64, gc_cpu()) : NULL;
    gc_status status = value ? gc_dist_all_reduce(group, value, GC_DIST_SUM) : gc_last_status();
    double want = env.world_size * (env.world_size + 1) / 2.0, got = status == GC_OK ? gc_item(value) : -1;
    if (status != GC_OK || got != want)
        fprintf(stderr, "dist_rank %d of %d: sum %g, want %g (%s)\n", env.rank, env.world_size, got, want,
                status == GC_OK ? "" : gc_last_error());
    gc_tensor_release(value);
    gc_process_group_free(group);
    return status == GC_OK && got == want ? 0 : 1;
}
