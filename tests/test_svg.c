/* The SVG chart writer (plot/svg_chart.c, gradcache/plot.h): the arithmetic of its axes against hand-computed
 * values, and what a written chart contains (broken lines, stacked crosses, escaped text). */
#include "check.h"
#include "gradcache/plot.h"
#include "plot/svg_axes.h"

#define MIB 1048576.0

/* Ticks are products i * step of two doubles: within one rounding of the decimal value. */
static void check_ticks(gc_svg_ticks ticks, const double *want, int count) {
    CHECK_MSG(ticks.count == count, "%d ticks, want %d", ticks.count, count);
    for (int i = 0; i < count && i < ticks.count; i++) CHECK_NEAR(ticks.values[i], want[i], 0, 1e-15);
}

static void test_linear_ticks(void) {
    /* 157 / 6 = 26.2 per tick -> 50 (the next of 1, 2, 5 x 10^k), up to the first >= 157 */
    check_ticks(gc_svg_linear_ticks(157, 1, 6), (const double[]){0, 50, 100, 150, 200}, 5);
    /* 10 / 5 = 2 exactly: step 2, and the last tick is max itself */
    check_ticks(gc_svg_linear_ticks(10, 1, 5), (const double[]){0, 2, 4, 6, 8, 10}, 6);
    /* in MiB: 3 MiB / 6 = 0.5 MiB */
    check_ticks(gc_svg_linear_ticks(3 * MIB, MIB, 6),
                (const double[]){0, 0.5 * MIB, MIB, 1.5 * MIB, 2 * MIB, 2.5 * MIB, 3 * MIB}, 7);
    /* below one unit: 0.3 / 2 = 0.15 -> 0.2 */
    check_ticks(gc_svg_linear_ticks(0.3, 1, 2), (const double[]){0, 0.2, 0.4}, 3);
    /* 7.3 / 6 = 1.2 -> 2 */
    check_ticks(gc_svg_linear_ticks(7.3, 1, 6), (const double[]){0, 2, 4, 6, 8}, 5);
}

static void test_log2_ticks(void) {
    check_ticks(gc_svg_log2_ticks(16, 1024, 12), (const double[]){16, 32, 64, 128, 256, 512, 1024}, 7);
    /* ends that are not powers of two: only the powers inside */
    check_ticks(gc_svg_log2_ticks(10, 1000, 12), (const double[]){16, 32, 64, 128, 256, 512}, 6);
    /* 21 powers, at most 5 ticks: every 5th */
    check_ticks(gc_svg_log2_ticks(1, 1048576, 5), (const double[]){1, 32, 1024, 32768, 1048576}, 5);
    /* a range with no power of two in it */
    CHECK(gc_svg_log2_ticks(3, 3.5, 4).count == 0);
}

static void test_scale(void) {
    /* Exact in binary: the ends, and points whose fractions are dyadic. */
    gc_svg_scale y = {0, 200, 436, 64, false}; /* backwards, as SVG's y */
    CHECK(gc_svg_scale_apply(&y, 0) == 436);
    CHECK(gc_svg_scale_apply(&y, 200) == 64);
    CHECK(gc_svg_scale_apply(&y, 100) == 250);
    gc_svg_scale x = {16, 1024, 98, 626, true};
    CHECK(gc_svg_scale_apply(&x, 16) == 98);
    CHECK(gc_svg_scale_apply(&x, 1024) == 626);
    CHECK(gc_svg_scale_apply(&x, 128) == 362); /* log2: 4 .. 10, 7 is halfway */
    gc_svg_scale point = {5, 5, 0, 100, false};
    CHECK(gc_svg_scale_apply(&point, 5) == 50); /* an empty domain maps to the middle */
}

static void bad_linear(void *arg) {
    (void)arg;
    gc_svg_linear_ticks(0, 1, 6);
}
static void bad_log2(void *arg) {
    (void)arg;
    gc_svg_log2_ticks(0, 16, 6);
}

static void bad_x(void *arg) {
    (void)arg;
    const double x[] = {0, 1}, y[] = {1, 2};
    gc_svg_series series = {"s", 2, x, y};
    gc_svg_chart chart = {"t", "", "x", "y", 1, 0, "", "", 1, &series};
    gc_svg_write_line_chart(stderr, &chart);
}

static int count_of(const char *text, const char *needle) {
    int count = 0;
    for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle)) count++;
    return count;
}

static void test_chart(void) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    REQUIRE(out);
    const double x[] = {16, 64, 256}, a[] = {1 * MIB, NAN, 3 * MIB}, b[] = {2 * MIB, NAN, NAN};
    gc_svg_series series[] = {{"first <a>", 3, x, a}, {"second & b", 3, x, b}};
    gc_svg_chart chart = {.title = "a < b & \"c\"",
                          .subtitle = "",
                          .x_label = "batch",
                          .y_label = "bytes (MiB)",
                          .y_unit = MIB,
                          .y_limit = 4 * MIB,
                          .limit_label = "limit",
                          .missing_label = "does not fit",
                          .series_count = 2,
                          .series = series};
    gc_svg_write_line_chart(out, &chart);
    REQUIRE(fclose(out) == 0);
    CHECK(strncmp(text, "<?xml", 5) == 0);
    CHECK(size > 7 && strcmp(text + size - 7, "</svg>\n") == 0);
    CHECK(strstr(text, "a &lt; b &amp; &quot;c&quot;") != NULL);
    CHECK(strstr(text, "first &lt;a&gt;") != NULL && strstr(text, "second &amp; b") != NULL);
    /* "first" is broken at its missing point: two pieces; "second" has one */
    CHECK_MSG(count_of(text, "<polyline") == 3, "%d polylines", count_of(text, "<polyline"));
    /* 3 crosses on the plot and 1 in the legend */
    CHECK_MSG(count_of(text, "l10 10") == 4, "%d crosses", count_of(text, "l10 10"));
    /* The limit (4 MiB, missing points: the axis reaches 1.1 x 4.4 -> ticks to 5 MiB) is at
     * 436 - 4/5 * 372 = 138.4 px; x = 64 is at 98 + 2/4 * 528 = 362 px. The crosses at x = 64:
     * "first" on the limit line, "second" stacked 14 px above it; each drawn from (-5, -5). */
    CHECK(strstr(text, "M357.0 133.4 l10 10") != NULL);
    CHECK(strstr(text, "M357.0 119.4 l10 10") != NULL);
    CHECK(strstr(text, ">limit</text>") != NULL);
    free(text);
}

int main(void) {
    test_linear_ticks();
    test_log2_ticks();
    test_scale();
    gc_test_expect_fatal(bad_linear, NULL, "svg_linear_ticks");
    gc_test_expect_fatal(bad_log2, NULL, "svg_log2_ticks");
    gc_test_expect_fatal(bad_x, NULL, "svg_write_line_chart: x = 0");
    test_chart();
    return gc_test_result();
}
