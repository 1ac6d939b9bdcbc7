/* Step 1: tensors and their memory. A tensor is a shape, a dtype, a device and a reference to
 * storage; a view (reshape, slice) shares its storage, an op makes a new one. The library
 * counts every byte it holds on every device: live bytes now, and the peak since a reset.
 * Build: cc 01_tensors.c $(pkg-config --cflags --libs gradcache). Exit status 0 when the
 * numbers it prints are the ones worked out by hand in the comments. */
#include <stdio.h>

#include <gradcache/gradcache.h>

static size_t live(void) { return gc_memory_get_stats(gc_cpu()).live_bytes; }

int main(void) {
    gc_device cpu = gc_cpu();
    gc_memory_reset_peak(cpu);
    gc_tensor *a = gc_arange(6, 0, 1, GC_F32, cpu);    /* [0 1 2 3 4 5]: 6 floats, 24 bytes */
    gc_tensor *m = gc_reshape(a, GC_SHAPE(2, 3));      /* [[0 1 2] [3 4 5]]: a view, no new bytes */
    gc_tensor *row = gc_slice0(m, 1, 2);               /* [[3 4 5]]: a view too */
    size_t after_views = live();
    gc_tensor *gram = gc_matmul(m, m, false, true);    /* m m^T [2, 2]: a new 16-byte tensor */
    gc_tensor *total = gc_sum_all(gram);               /* 0-dim: 5 + 14 + 14 + 50 = 83 */
    char text[64];
    printf("m is %s, row is %s, they share a's storage: %s\n", gc_tensor_str(m, text, sizeof text),
           gc_tensor_str(row, text + 32, 32), gc_data(row) == (float *)gc_data(a) + 3 ? "yes" : "no");
    printf("live bytes: %zu after a and its views, %zu with the product and its sum\n", after_views, live());
    printf("sum of m m^T = %g\n", gc_item(total));
    bool right = after_views == 24 && live() == 24 + 16 + 4 && gc_item(total) == 83 &&
                 gc_data(row) == (float *)gc_data(a) + 3;
    /* A view keeps the storage alive: releasing a alone frees nothing. */
    gc_tensor_release(a);
    size_t while_viewed = live();
    gc_tensor_release(m);
    gc_tensor_release(row);
    gc_tensor_release(gram);
    gc_tensor_release(total);
    gc_memory_stats stats = gc_memory_get_stats(cpu);
    printf("live bytes after releasing a: %zu (its views still hold it); after releasing everything: %zu; "
           "peak: %zu\n", while_viewed, stats.live_bytes, stats.peak_bytes);
    right = right && while_viewed == 44 && stats.live_bytes == 0 && stats.peak_bytes == 44;
    printf("example 01_tensors: %s\n", right ? "ok" : "WRONG");
    gc_shutdown();
    return right ? 0 : 1;
}
