/* The memory benchmark's outputs: CSV and SVG chart (see bench_commands.h). */
#include <math.h>
#include <stdlib.h>

#include "bench_commands.h"
#include "gradcache/measure.h"
#include "gradcache/plot.h"
#include "gradcache/train.h"
#include "int_list.h"

const char *cli_memory_loss_name(gc_contrastive_method loss) { return loss == GC_CONTRASTIVE_FULL ? "full" : "tiled"; }

void cli_memory_rows_write_csv(FILE *out, const cli_memory_row *rows, int count) {
    fputs("mode,batch,chunk,loss,peak_bytes,cache_bytes,packed_bytes,workspace_bytes,step_ms,fits\n", out);
    for (int i = 0; i < count; i++) {
        const cli_memory_row *row = &rows[i];
        fprintf(out, "%s,%lld,%lld,%s,", row->plain ? "plain" : "gc", (long long)row->batch, (long long)row->chunk,
                cli_memory_loss_name(row->loss));
        if (row->result.status == GC_OK)
            fprintf(out, "%zu,%zu,%zu,%zu,%.3f,1\n", row->result.peak_bytes, row->result.cache_bytes,
                    row->result.packed_bytes, row->result.workspace_bytes, row->result.step_ms);
        else fputs(",,,,,0\n", out);
    }
}

/* A GradCache line of the chart is one chunk size with one loss: key 2 chunk + (loss is full),
 * so that the lines sort by chunk size. */
static int64_t line_key(const cli_memory_row *row) { return 2 * row->chunk + (row->loss == GC_CONTRASTIVE_FULL); }

/* Appends the rows of one line of the chart (plain, or GradCache's line `key`) to series. */
static void fill_series(gc_svg_series *series, double *x, double *y, const cli_memory_row *rows, int count, bool plain,
                        int64_t key) {
    series->count = 0;
    for (int i = 0; i < count; i++) {
        if (rows[i].plain != plain || (!plain && line_key(&rows[i]) != key)) continue;
        x[series->count] = (double)rows[i].batch;
        y[series->count] = rows[i].result.status == GC_OK ? (double)rows[i].result.peak_bytes : NAN;
        series->count++;
    }
    series->x = x;
    series->y = y;
}

void cli_memory_rows_write_svg(FILE *out, const cli_memory_row *rows, int count, const char *title,
                               const char *subtitle, size_t limit_bytes) {
    cli_int_list lines = {0};
    double largest = (double)limit_bytes;
    for (int i = 0; i < count; i++) {
        if (!rows[i].plain && cli_int_list_insert(&lines, line_key(&rows[i])) != 0)
            gc_fatal("memory_rows_write_svg: more than %d lines (chunk sizes x losses)", CLI_INT_LIST_MAX);
        if (rows[i].result.status == GC_OK) largest = fmax(largest, (double)rows[i].result.peak_bytes);
    }
    int series_count = 1 + lines.count;
    gc_svg_series series[1 + CLI_INT_LIST_MAX];
    char names[1 + CLI_INT_LIST_MAX][64];
    double *values = malloc(2 * (size_t)(series_count * (count > 0 ? count : 1)) * sizeof *values);
    if (!values) gc_fatal("memory_rows_write_svg: out of host memory for %d rows", count);
    for (int s = 0; s < series_count; s++) {
        double *x = values + 2 * s * count, *y = x + count;
        int64_t key = s == 0 ? 0 : lines.values[s - 1];
        fill_series(&series[s], x, y, rows, count, s == 0, key);
        if (s == 0) snprintf(names[s], sizeof names[s], "plain step");
        else snprintf(names[s], sizeof names[s], "GradCache, chunk %lld, %s loss", (long long)(key / 2),
                      key % 2 ? "full" : "tiled");
        series[s].name = names[s];
    }
    const char *unit_name;
    double unit = gc_byte_unit(largest, &unit_name);
    char y_label[64], limit_label[64], limit_text[32];
    snprintf(y_label, sizeof y_label, "peak live memory (%s)", unit_name);
    snprintf(limit_label, sizeof limit_label, "memory limit %s", gc_format_bytes((double)limit_bytes, limit_text, 32));
    gc_svg_chart chart = {.title = title,
                          .subtitle = subtitle,
                          .x_label = "batch size (query/passage pairs, log scale)",
                          .y_label = y_label,
                          .y_unit = unit,
                          .y_limit = (double)limit_bytes,
                          .limit_label = limit_label,
                          .missing_label = "does not fit",
                          .series_count = series_count,
                          .series = series};
    gc_svg_write_line_chart(out, &chart);
    free(values);
}
