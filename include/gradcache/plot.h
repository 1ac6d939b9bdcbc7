/* Line charts as standalone SVG files, for the programs' figures (`gradcache bench memory
 * --svg`): drawing is no part of training, so it is a module of its own (plot/). */
#ifndef GRADCACHE_PLOT_H
#define GRADCACHE_PLOT_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A standalone SVG file (it opens in any browser): one line per series with a marker at each
 * point, axes with ticks and labels, a legend and a title. The x axis is logarithmic in base 2
 * (for sizes that double: x > 0); the y axis is linear from 0, so that heights compare
 * honestly. */
typedef struct gc_svg_series {
    const char *name;    /* the legend entry */
    int count;
    const double *x, *y; /* [count], x ascending. A NaN y has no value (a run that did not fit):
                            the line breaks there and a cross marks the point at the limit line,
                            or at the top of the plot when there is none (the crosses of several
                            series at one x stacked upwards). */
} gc_svg_series;

typedef struct gc_svg_chart {
    const char *title, *subtitle, *x_label, *y_label; /* subtitle: "" for none */
    double y_unit;             /* y ticks are round multiples of it and labelled in it (1024 * 1024
                                  for MiB; 1 for plain numbers): say which in y_label */
    double y_limit;            /* > 0: a dashed horizontal line labelled limit_label */
    const char *limit_label;
    const char *missing_label; /* the legend entry of the cross */
    int series_count;
    const gc_svg_series *series;
} gc_svg_chart;

/* Writes the whole SVG document; errors show in ferror(out). */
void gc_svg_write_line_chart(FILE *out, const gc_svg_chart *chart);

#ifdef __cplusplus
}
#endif
#endif
