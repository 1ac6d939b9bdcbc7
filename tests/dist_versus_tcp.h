/* One multi-process run through two backends, compared rank by rank: the run through the TCP
 * ring (on the CPU) writes each rank's values (its parameters after the steps, as f64) to a file
 * of a folder, and the same run through another backend (NCCL, on a GPU) reads them and must
 * reach them to the run's tolerance. The runs are processes of their own, so the values travel
 * through files; the TCP run goes first, each rank's file replacing the previous run's. */
#ifndef GC_TESTS_DIST_VERSUS_TCP_H
#define GC_TESTS_DIST_VERSUS_TCP_H

#include <stdio.h>

#include "check.h"
#include "mlp_encoder.h"

static inline void dist_versus_path(char *path, size_t size, const char *folder, int rank) {
    snprintf(path, size, "%s/rank%d.f64", folder, rank);
}

/* Through TCP: writes values[n]; through any other backend: compares them with the TCP run's
 * (norm-relative, at most `tolerance`), naming `what`. */
static inline void dist_versus_tcp(const char *folder, gc_dist_backend backend, int rank, const double *values,
                                   int64_t n, double tolerance, const char *what) {
    char path[512];
    dist_versus_path(path, sizeof path, folder, rank);
    FILE *file = fopen(path, backend == GC_DIST_TCP ? "wb" : "rb");
    REQUIRE(file);
    if (backend == GC_DIST_TCP) {
        REQUIRE(fwrite(values, sizeof *values, (size_t)n, file) == (size_t)n && fclose(file) == 0);
        return;
    }
    double *tcp = malloc((size_t)n * sizeof *tcp);
    REQUIRE(tcp);
    bool whole = fread(tcp, sizeof *tcp, (size_t)n, file) == (size_t)n && fgetc(file) == EOF;
    fclose(file);
    CHECK_MSG(whole, "%s: rank %d's values from the TCP run are not %lld numbers", what, rank, (long long)n);
    double error = whole ? relative_error(values, tcp, n) : 0;
    CHECK_MSG(error <= tolerance, "%s: rank %d differs from the TCP ring's run by %.3g (relative)", what, rank, error);
    free(tcp);
}

/* Makes a folder for the runs' files (removed by dist_versus_folder_free). */
static inline void dist_versus_folder(char folder[64]) {
    snprintf(folder, 64, "/tmp/gc_versus_tcp_XXXXXX");
    REQUIRE(mkdtemp(folder));
}

static inline void dist_versus_folder_free(const char *folder, int world) {
    char path[512];
    for (int rank = 0; rank < world; rank++) {
        dist_versus_path(path, sizeof path, folder, rank);
        remove(path);
    }
    rmdir(folder);
}

#endif
