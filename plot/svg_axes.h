/* The arithmetic of the SVG line chart's axes (the chart itself: gradcache/plot.h), apart
 * so that the tests can check it against hand-computed values. */
#ifndef GC_PLOT_SVG_AXES_H
#define GC_PLOT_SVG_AXES_H

#include <stdbool.h>

#define GC_SVG_MAX_TICKS 16

typedef struct gc_svg_ticks {
    int count;
    double values[GC_SVG_MAX_TICKS]; /* ascending */
} gc_svg_ticks;

/* Ticks from 0 to the first tick at or above max (> 0), spaced by 1, 2 or 5 times a power
 * of ten times `unit`, about `target` of them (2 <= target < GC_SVG_MAX_TICKS). */
gc_svg_ticks gc_svg_linear_ticks(double max, double unit, int target);
/* The powers of two in [lo, hi] (0 < lo <= hi), every k-th one so that there are at most
 * max_ticks (< GC_SVG_MAX_TICKS). */
gc_svg_ticks gc_svg_log2_ticks(double lo, double hi, int max_ticks);

/* Maps [domain_lo, domain_hi] onto the pixels [range_lo, range_hi] (which may run
 * backwards, as an SVG y axis does), linearly or in log2. */
typedef struct gc_svg_scale {
    double domain_lo, domain_hi, range_lo, range_hi;
    bool log2;
} gc_svg_scale;

double gc_svg_scale_apply(const gc_svg_scale *scale, double value);

#endif
