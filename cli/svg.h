/* Line charts of measurements as SVG files (`gradcache bench memory --svg`): the program's
 * drawing, not the library's. The arithmetic of the axes is declared here too, so that the
 * tests can check it against hand-computed values. */
#ifndef GC_CLI_SVG_H
#define GC_CLI_SVG_H

#include <stdbool.h>
#include <stdio.h>

#define CLI_SVG_MAX_TICKS 16

typedef struct cli_svg_ticks {
    int count;
    double values[CLI_SVG_MAX_TICKS]; /* ascending */
} cli_svg_ticks;

/* Ticks from 0 to the first tick at or above max (> 0), spaced by 1, 2 or 5 times a power
 * of ten times `unit`, about `target` of them (2 <= target < CLI_SVG_MAX_TICKS). */
cli_svg_ticks cli_svg_linear_ticks(double max, double unit, int target);
/* The powers of two in [lo, hi] (0 < lo <= hi), every k-th one so that there are at most
 * max_ticks (< CLI_SVG_MAX_TICKS). */
cli_svg_ticks cli_svg_log2_ticks(double lo, double hi, int max_ticks);

/* Maps [domain_lo, domain_hi] onto the pixels [range_lo, range_hi] (which may run
 * backwards, as an SVG y axis does), linearly or in log2. */
typedef struct cli_svg_scale {
    double domain_lo, domain_hi, range_lo, range_hi;
    bool log2;
} cli_svg_scale;

double cli_svg_scale_apply(const cli_svg_scale *scale, double value);

/* A standalone SVG file (it opens in any browser): one line per series with a marker at each
 * point, axes with ticks and labels, a legend and a title. The x axis is logarithmic in base 2
 * (for sizes that double: x > 0); the y axis is linear from 0, so that heights compare
 * honestly. */
typedef struct cli_svg_series {
    const char *name;    /* the legend entry */
    int count;
    const double *x, *y; /* [count], x ascending. A NaN y has no value (a run that did not fit):
                            the line breaks there and a cross marks the point at the limit line,
                            or at the top of the plot when there is none (the crosses of several
                            series at one x stacked upwards). */
} cli_svg_series;

typedef struct cli_svg_chart {
    const char *title, *subtitle, *x_label, *y_label; /* subtitle: "" for none */
    double y_unit;             /* y ticks are round multiples of it and labelled in it (1024 * 1024
                                  for MiB; 1 for plain numbers): say which in y_label */
    double y_limit;            /* > 0: a dashed horizontal line labelled limit_label */
    const char *limit_label;
    const char *missing_label; /* the legend entry of the cross */
    int series_count;
    const cli_svg_series *series;
} cli_svg_chart;

/* Writes the whole SVG document; errors show in ferror(out). */
void cli_svg_write_line_chart(FILE *out, const cli_svg_chart *chart);

#endif
