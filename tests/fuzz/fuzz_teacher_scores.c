/* libFuzzer target for the teacher-score reader (train/teacher_scores.c). The first byte gives
 * the examples the pair file would have (1 to 8) and the scores per line (1 to 4); the rest is
 * the file, written to a temporary file the reader opens by name. Any input must either be
 * refused with GC_ERR_FORMAT and a one-line message naming the file, nothing kept, or be read
 * as exactly that many rows of that many finite scores. The sanitizers built in with it catch
 * out-of-bounds reads and leaks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One file per fuzzing process, rewritten for every input and removed at exit. */
static char path[] = "/tmp/fuzz_teacher_scores_XXXXXX";

static void remove_file(void) { unlink(path); }

static void write_file(const uint8_t *bytes, size_t size) {
    static bool made;
    if (!made) {
        int fd = mkstemp(path);
        if (fd < 0) abort();
        close(fd);
        atexit(remove_file);
        made = true;
    }
    FILE *out = fopen(path, "wb");
    if (!out || (size && fwrite(bytes, 1, size, out) != size) || fclose(out) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int64_t count = 1 + (data[0] & 7);
    int columns = 1 + ((data[0] >> 3) & 3);
    write_file(data + 1, size - 1);
    gc_teacher_scores scores = {0};
    gc_status status = gc_teacher_scores_read(path, count, columns, &scores);
    if (status != GC_OK) {
        const char *message = gc_last_error();
        if (status != GC_ERR_FORMAT || scores.scores || strncmp(message, path, strlen(path)) != 0 ||
            strchr(message, '\n'))
            abort();
        gc_clear_error();
        return 0;
    }
    if (scores.count != count || scores.columns != columns || !scores.scores) abort();
    for (int64_t i = 0; i < count * columns; i++)
        if (!isfinite(scores.scores[i])) abort();
    gc_teacher_scores_free(&scores);
    return 0;
}
