/* compare_safetensors A B TOLERANCE: whether two safetensors files hold the same tensors (the
 * same names, shapes and dtypes) whose values differ by at most TOLERANCE anywhere (compared
 * in f64), for the tests of runs that must agree to a stated tolerance rather than bitwise
 * (test_cli_train_zero.sh). Prints the largest difference and where; exit 0 within the
 * tolerance, 1 beyond it or on another set of tensors, 99 after a line on stderr (a setup
 * error for the test that runs it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/gradcache.h"

static gc_safetensors *open_file(const char *path) {
    gc_safetensors *file;
    if (gc_safetensors_open(path, &file) != GC_OK) {
        fprintf(stderr, "compare_safetensors: %s\n", gc_last_error());
        exit(99);
    }
    return file;
}

/* The tensor's values as doubles (a new array of gc_numel). */
static double *values(const gc_safetensors *file, const char *name) {
    gc_tensor *t = gc_safetensors_get(file, name, gc_cpu()), *wide = t ? gc_cast(t, GC_F64) : NULL;
    double *out = wide ? malloc((size_t)gc_numel(wide) * sizeof *out) : NULL;
    if (!out) {
        fprintf(stderr, "compare_safetensors: %s: %s\n", name, gc_last_error());
        exit(99);
    }
    memcpy(out, gc_data(wide), (size_t)gc_numel(wide) * sizeof *out);
    gc_tensor_release(t);
    gc_tensor_release(wide);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: compare_safetensors A B TOLERANCE\n");
        return 99;
    }
    gc_safetensors *a = open_file(argv[1]), *b = open_file(argv[2]);
    double tolerance = atof(argv[3]), worst = 0;
    char where[160] = "nowhere";
    if (gc_safetensors_count(a) != gc_safetensors_count(b)) {
        printf("%d tensors against %d\n", gc_safetensors_count(a), gc_safetensors_count(b));
        return 1;
    }
    for (int i = 0; i < gc_safetensors_count(a); i++) {
        const char *name = gc_safetensors_name(a, i);
        gc_tensor *x = gc_safetensors_get(a, name, gc_cpu()), *y = gc_safetensors_get(b, name, gc_cpu());
        bool same = x && y && x->dtype == y->dtype && gc_same_shape(x, y);
        int64_t n = same ? gc_numel(x) : 0;
        gc_tensor_release(x);
        gc_tensor_release(y);
        if (!same) {
            printf("%s: not in both files with one shape and dtype\n", name);
            return 1;
        }
        double *u = values(a, name), *v = values(b, name);
        for (int64_t k = 0; k < n; k++) {
            double difference = fabs(u[k] - v[k]);
            if (difference > worst || isnan(difference)) {
                worst = isnan(difference) ? INFINITY : difference;
                snprintf(where, sizeof where, "%s[%lld]: %.9g against %.9g", name, (long long)k, u[k], v[k]);
            }
        }
        free(u);
        free(v);
    }
    printf("largest difference %.3g at %s (tolerance %.3g)\n", worst, where, tolerance);
    gc_safetensors_close(a);
    gc_safetensors_close(b);
    return worst <= tolerance ? 0 : 1;
}
