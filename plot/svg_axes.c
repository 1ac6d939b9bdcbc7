/* The arithmetic of the SVG line chart's axes: ticks and scales (svg_axes.h). */
#include <math.h>

#include "gradcache/error.h"
#include "svg_axes.h"

gc_svg_ticks gc_svg_linear_ticks(double max, double unit, int target) {
    if (!(max > 0) || !(unit > 0) || target < 2 || target >= GC_SVG_MAX_TICKS)
        gc_fatal("svg_linear_ticks: max %g, unit %g, target %d (want max > 0, unit > 0, 2 <= target < %d)", max, unit,
                 target, GC_SVG_MAX_TICKS);
    double raw = max / unit / target; /* in units */
    double magnitude = pow(10, floor(log10(raw)));
    double residual = raw / magnitude;
    double step = (residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 5 ? 5 : 10) * magnitude * unit;
    /* step >= max / target, so at most target + 1 ticks reach max */
    gc_svg_ticks ticks = {0};
    for (int i = 0; ticks.count < GC_SVG_MAX_TICKS; i++) {
        ticks.values[ticks.count++] = i * step;
        if (i * step >= max) break;
    }
    return ticks;
}

gc_svg_ticks gc_svg_log2_ticks(double lo, double hi, int max_ticks) {
    if (!(lo > 0) || !(hi >= lo) || max_ticks < 1 || max_ticks >= GC_SVG_MAX_TICKS)
        gc_fatal("svg_log2_ticks: [%g, %g] with at most %d ticks (want 0 < lo <= hi, 1 <= ticks < %d)", lo, hi, max_ticks,
                 GC_SVG_MAX_TICKS);
    int first = (int)ceil(log2(lo)), last = (int)floor(log2(hi));
    int every = (last - first + max_ticks) / max_ticks; /* ceil(powers / max_ticks), at least 1 */
    gc_svg_ticks ticks = {0};
    for (int exponent = first; exponent <= last; exponent += every) ticks.values[ticks.count++] = ldexp(1, exponent);
    return ticks;
}

double gc_svg_scale_apply(const gc_svg_scale *scale, double value) {
    double lo = scale->domain_lo, hi = scale->domain_hi;
    if (scale->log2) {
        lo = log2(lo);
        hi = log2(hi);
        value = log2(value);
    }
    double t = hi > lo ? (value - lo) / (hi - lo) : 0.5;
    return scale->range_lo + t * (scale->range_hi - scale->range_lo);
}
