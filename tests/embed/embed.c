/* A program outside the tree that embeds the installed library, built by CI with nothing
 * but `pkg-config --cflags --libs gradcache`: proves the installed headers, library and
 * .pc file are complete. */
#include <stdbool.h>
#include <stdio.h>

#include <gradcache/gradcache.h>

int main(void) {
    gc_tensor *a = gc_ones(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_tensor *b = gc_add_scalar(a, 1.0);
    gc_tensor *total = gc_sum_all(b);
    if (!total) {
        fprintf(stderr, "embed: %s\n", gc_last_error());
        return 1;
    }
    double value = gc_item(total);
    printf("gradcache %s: sum of 2 x 3 twos = %g (cuda built: %s)\n", GC_VERSION, value,
           gc_cuda_built() ? "yes" : "no");
    /* the collectives too: a process group of one (not launched) averages to itself */
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 0, gc_cpu()});
    bool reduced = group && gc_dist_all_reduce(group, b, GC_DIST_AVG) == GC_OK && gc_dist_world_size(group) == 1;
    gc_process_group_free(group);
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(total);
    return value == 12.0 && reduced ? 0 : 1;
}
