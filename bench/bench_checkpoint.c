/* What the data checksum of a safetensors file costs: saving and opening a file of
 * `megabytes` MiB of f32 tensors (default 256, in 8 tensors) with gc_safetensors_save (which
 * hashes the data) beside gc_safetensors_save_plain (which does not), and opening each (the
 * checksummed one is verified). Runs alternate, `reps` of each (default 5); the medians and
 * their ratio are printed. The files go to $TMPDIR (default /tmp); a save ends with fsync,
 * so it is timed with the disk, while an open reads from the page cache: its ratio is the
 * hash's cost against copying the bytes, its worst case.
 * usage: bench_checkpoint [megabytes [reps]] */
#define _DEFAULT_SOURCE /* sync */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

enum { TENSORS = 8, MAX_REPS = 50 };

typedef gc_status (*save_fn)(const char *, const gc_param_list *, const char *const *);

/* Seconds to save `list` with `save`, then to open what it wrote (removed after). The disk
 * is synced first, so that the save's fsync writes only its own file. */
static void time_one(save_fn save, const char *path, const gc_param_list *list, double *saving, double *opening) {
    sync();
    double start = gc_seconds();
    if (save(path, list, NULL) != GC_OK) gc_fatal("bench_checkpoint: %s", gc_last_error());
    *saving = gc_seconds() - start;
    gc_safetensors *file;
    start = gc_seconds();
    if (gc_safetensors_open(path, &file) != GC_OK) gc_fatal("bench_checkpoint: %s", gc_last_error());
    *opening = gc_seconds() - start;
    gc_safetensors_close(file);
    unlink(path);
}

int main(int argc, char **argv) {
    int megabytes = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (megabytes < 8 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: bench_checkpoint [megabytes >= 8 [reps in 1..%d]]\n", MAX_REPS);
        return 2;
    }
    gc_param_list list = {0};
    int64_t rows = (int64_t)megabytes * (1 << 20) / TENSORS / 4 / 1024; /* [rows, 1024] f32 each */
    for (int i = 0; i < TENSORS; i++) {
        char name[32];
        snprintf(name, sizeof name, "tensor%d", i);
        gc_tensor *t = gc_full(GC_SHAPE(rows, 1024), GC_F32, gc_cpu(), 0.25 * i);
        if (!t) gc_fatal("bench_checkpoint: %s", gc_last_error());
        gc_param_list_add(&list, "", name, t, false);
        gc_tensor_release(t);
    }
    const char *folder = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char checked[4096], plain[4096];
    snprintf(checked, sizeof checked, "%s/bench_checkpoint_%ld_checked.safetensors", folder, (long)getpid());
    snprintf(plain, sizeof plain, "%s/bench_checkpoint_%ld_plain.safetensors", folder, (long)getpid());
    double save[2][MAX_REPS], open[2][MAX_REPS];
    for (int r = 0; r < reps; r++) { /* alternating, so that drift touches both alike */
        time_one(gc_safetensors_save, checked, &list, &save[0][r], &open[0][r]);
        time_one(gc_safetensors_save_plain, plain, &list, &save[1][r], &open[1][r]);
    }
    double save_checked = gc_median(save[0], reps), save_plain = gc_median(save[1], reps);
    double open_checked = gc_median(open[0], reps), open_plain = gc_median(open[1], reps);
    printf("%d MiB in %d tensors, median of %d, CPU:\n", megabytes, TENSORS, reps);
    printf("  save: checksummed %.3f s, plain %.3f s, ratio %.2f\n", save_checked, save_plain, save_checked / save_plain);
    printf("  open: verified %.3f s, plain %.3f s, ratio %.2f\n", open_checked, open_plain, open_checked / open_plain);
    gc_param_list_free(&list);
    return 0;
}
