/* Line charts as SVG (gradcache/plot.h; the axes' arithmetic: svg_axes.h). */
#include <math.h>

#include "gradcache/error.h"
#include "gradcache/plot.h"
#include "svg_axes.h"

/* The page: the plot in the middle, the legend to its right. */
enum { WIDTH = 840, HEIGHT = 500, LEFT = 84, RIGHT = 200, TOP = 64, BOTTOM = 64, INSET = 14, CROSS_STEP = 14 };
#define PLOT_RIGHT (WIDTH - RIGHT)
#define PLOT_BOTTOM (HEIGHT - BOTTOM)

/* Okabe and Ito's palette: distinguishable with the common colour-vision deficiencies. */
static const char *const palette[] = {"#000000", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"};
#define PALETTE_SIZE (int)(sizeof palette / sizeof *palette)

/* Text content or attribute value, with XML's special characters escaped. */
static void write_text(FILE *out, const char *text) {
    for (; *text; text++) {
        switch (*text) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*text, out);
        }
    }
}

/* Where everything goes, worked out from the data before anything is drawn. */
typedef struct layout {
    gc_svg_scale x, y;
    gc_svg_ticks x_ticks, y_ticks;
    bool any_missing, limit_shown;
    double cross_y; /* the pixel height of the crosses of missing points */
} layout;

static layout make_layout(const gc_svg_chart *chart) {
    double x_lo = INFINITY, x_hi = -INFINITY, y_hi = 0;
    bool any_missing = false;
    for (int s = 0; s < chart->series_count; s++) {
        const gc_svg_series *series = &chart->series[s];
        for (int i = 0; i < series->count; i++) {
            x_lo = fmin(x_lo, series->x[i]);
            x_hi = fmax(x_hi, series->x[i]);
            if (isnan(series->y[i])) any_missing = true;
            else y_hi = fmax(y_hi, series->y[i]);
        }
    }
    if (x_lo > x_hi) x_lo = x_hi = 1; /* no points at all: an empty chart with valid axes */
    /* The limit matters when a point did not fit under it: then the axis reaches past it,
     * leaving room above it for the crosses. */
    if (chart->y_limit > 0 && any_missing) y_hi = fmax(y_hi, 1.1 * chart->y_limit);
    layout l = {.any_missing = any_missing};
    l.y_ticks = gc_svg_linear_ticks(y_hi > 0 ? y_hi : chart->y_unit, chart->y_unit, 6);
    l.y = (gc_svg_scale){0, l.y_ticks.values[l.y_ticks.count - 1], PLOT_BOTTOM, TOP, false};
    if (x_lo == x_hi) x_lo /= 2, x_hi *= 2; /* one size: centred, with a tick on each side */
    l.x_ticks = gc_svg_log2_ticks(x_lo, x_hi, 12);
    l.x = (gc_svg_scale){x_lo, x_hi, LEFT + INSET, PLOT_RIGHT - INSET, true};
    l.limit_shown = chart->y_limit > 0 && chart->y_limit <= l.y.domain_hi;
    /* on the limit line; without one, low enough under the top for every series' cross */
    l.cross_y = l.limit_shown ? gc_svg_scale_apply(&l.y, chart->y_limit)
                              : TOP + CROSS_STEP * (chart->series_count > 0 ? chart->series_count - 1 : 0);
    return l;
}

static void write_axes(FILE *out, const gc_svg_chart *chart, const layout *l) {
    for (int i = 0; i < l->y_ticks.count; i++) {
        double py = gc_svg_scale_apply(&l->y, l->y_ticks.values[i]);
        fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", LEFT, py, PLOT_RIGHT, py);
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" dy=\"0.35em\" text-anchor=\"end\">%g</text>\n", LEFT - 8, py,
                l->y_ticks.values[i] / chart->y_unit);
    }
    for (int i = 0; i < l->x_ticks.count; i++) {
        double px = gc_svg_scale_apply(&l->x, l->x_ticks.values[i]);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>\n", px, TOP, px, PLOT_BOTTOM);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", px, PLOT_BOTTOM, px,
                PLOT_BOTTOM + 5);
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px, PLOT_BOTTOM + 20,
                l->x_ticks.values[i]);
    }
    fprintf(out, "<path d=\"M%d %d V%d H%d\" fill=\"none\" stroke=\"#333\"/>\n", LEFT, TOP, PLOT_BOTTOM, PLOT_RIGHT);
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">", (LEFT + PLOT_RIGHT) / 2, HEIGHT - 18);
    write_text(out, chart->x_label);
    fprintf(out, "</text>\n<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">",
            (TOP + PLOT_BOTTOM) / 2);
    write_text(out, chart->y_label);
    fputs("</text>\n", out);
    if (l->limit_shown) {
        fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>\n",
                LEFT, l->cross_y, PLOT_RIGHT, l->cross_y);
        /* at the left end: the crosses of the runs that do not fit are at the large batches */
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" fill=\"#555\">", LEFT + 6, l->cross_y - 6);
        write_text(out, chart->limit_label);
        fputs("</text>\n", out);
    }
}

static void write_cross(FILE *out, double px, double py, const char *color) {
    fprintf(out, "<path d=\"M%.1f %.1f l10 10 m0 -10 l-10 10\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", px - 5, py - 5,
            color);
}

/* How many series before `index` miss a value at x: the crosses of one x are stacked
 * upwards in series order, so that none hides another. */
static int crosses_below(const gc_svg_chart *chart, int index, double x) {
    int below = 0;
    for (int s = 0; s < index; s++) {
        const gc_svg_series *series = &chart->series[s];
        for (int i = 0; i < series->count; i++) below += series->x[i] == x && isnan(series->y[i]);
    }
    return below;
}

/* The series' line (broken at missing points), its markers with a tooltip each, and crosses. */
static void write_series(FILE *out, const gc_svg_chart *chart, const layout *l, int index) {
    const gc_svg_series *series = &chart->series[index];
    const char *color = palette[index % PALETTE_SIZE];
    bool in_line = false;
    for (int i = 0; i < series->count; i++) {
        bool present = !isnan(series->y[i]);
        if (present && !in_line) fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
        if (!present && in_line) fputs("\"/>\n", out);
        if (present)
            fprintf(out, "%.1f,%.1f ", gc_svg_scale_apply(&l->x, series->x[i]), gc_svg_scale_apply(&l->y, series->y[i]));
        in_line = present;
    }
    if (in_line) fputs("\"/>\n", out);
    for (int i = 0; i < series->count; i++) {
        double px = gc_svg_scale_apply(&l->x, series->x[i]);
        fputs("<g><title>", out);
        write_text(out, series->name);
        if (isnan(series->y[i])) {
            fprintf(out, " at %g: ", series->x[i]);
            write_text(out, chart->missing_label);
            fputs("</title>", out);
            write_cross(out, px, l->cross_y - CROSS_STEP * crosses_below(chart, index, series->x[i]), color);
        } else {
            fprintf(out, " at %g: %.4g</title>", series->x[i], series->y[i] / chart->y_unit);
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", px,
                    gc_svg_scale_apply(&l->y, series->y[i]), color);
        }
        fputs("</g>\n", out);
    }
}

static void write_legend(FILE *out, const gc_svg_chart *chart, const layout *l) {
    int x = PLOT_RIGHT + 20, y = TOP + 8;
    for (int s = 0; s < chart->series_count; s++, y += 22) {
        const char *color = palette[s % PALETTE_SIZE];
        fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>", x, y, x + 26, y,
                color);
        fprintf(out, "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>", x + 13, y, color);
        fprintf(out, "<text x=\"%d\" y=\"%d\" dy=\"0.35em\">", x + 34, y);
        write_text(out, chart->series[s].name);
        fputs("</text>\n", out);
    }
    if (l->any_missing) {
        write_cross(out, x + 13, y, "#333");
        fprintf(out, "<text x=\"%d\" y=\"%d\" dy=\"0.35em\">", x + 34, y);
        write_text(out, chart->missing_label);
        fputs("</text>\n", out);
    }
}

void gc_svg_write_line_chart(FILE *out, const gc_svg_chart *chart) {
    if (!(chart->y_unit > 0)) gc_fatal("svg_write_line_chart: y unit %g is not positive", chart->y_unit);
    for (int s = 0; s < chart->series_count; s++)
        for (int i = 0; i < chart->series[s].count; i++)
            if (!(chart->series[s].x[i] > 0))
                gc_fatal("svg_write_line_chart: x = %g in series %d: the log2 x axis needs x > 0", chart->series[s].x[i], s);
    layout l = make_layout(chart);
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\" fill=\"#222\">\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            WIDTH, HEIGHT, WIDTH, HEIGHT, WIDTH, HEIGHT);
    fprintf(out, "<text x=\"%d\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">",
            (LEFT + PLOT_RIGHT) / 2);
    write_text(out, chart->title);
    fprintf(out, "</text>\n<text x=\"%d\" y=\"46\" text-anchor=\"middle\" fill=\"#555\">", (LEFT + PLOT_RIGHT) / 2);
    write_text(out, chart->subtitle);
    fputs("</text>\n", out);
    write_axes(out, chart, &l);
    for (int s = 0; s < chart->series_count; s++) write_series(out, chart, &l, s);
    write_legend(out, chart, &l);
    fputs("</svg>\n", out);
}
