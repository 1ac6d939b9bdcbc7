/* A program outside the tree that embeds the installed library, built by CI with nothing
 * but `pkg-config --cflags --libs gradcache`: proves the installed headers, library and
 * .pc file are complete. */
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
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(total);
    return value == 12.0 ? 0 : 1;
}
