/* Charts are checked by decoding the PNG they wrote: size, colours where the layout puts them, and
 * that bad input fails cleanly without touching the file system. Ticks and labels are pinned on
 * hand-worked ranges plus a randomized property sweep. */
#include "test_util.h"
#include "minigrad/plot.h"
#include "minigrad/rng.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

static char tmpdir[256];

static void make_tmpdir(void) {
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_plot");
}

static void remove_tmpdir(void) {
    tu_remove_tree(tmpdir);
}

static const char *tmp_path(const char *name) {
    return tu_path_in(tmpdir, name);
}

/* Entries in tmpdir whose name contains `part`. */
static int count_entries(const char *part) { return tu_count_entries(tmpdir, part); }

static bool file_equals(const char *path, const char *text) {
    char buf[256] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

typedef struct {
    int w, h;
    const uint8_t *px; /* RGB */
    mg_canvas *c;
} image;

/* Decodes with stb_image (through mg_canvas_load_png), independently of the PNG writer. */
static image load(const char *path) {
    image im = {0, 0, NULL, NULL};
    ck_assert_msg(mg_canvas_load_png(path, &im.c) == MG_OK, "%s", mg_last_error());
    im.w = mg_canvas_width(im.c);
    im.h = mg_canvas_height(im.c);
    im.px = mg_canvas_pixels(im.c);
    return im;
}

static void unload(image *im) {
    mg_canvas_free(im->c);
    *im = (image){0, 0, NULL, NULL};
}

static uint32_t pixel(const image *im, int x, int y) {
    const uint8_t *p = im->px + 3 * ((size_t)y * (size_t)im->w + (size_t)x);
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static bool near_rgb(uint32_t a, uint32_t b, int tol) {
    for (int s = 0; s < 24; s += 8)
        if (abs((int)((a >> s) & 255) - (int)((b >> s) & 255)) > tol) return false;
    return true;
}

/* Pixels of colour rgb (within tol per channel) in [x0, x1) x [y0, y1). */
static long count_rgb(const image *im, int x0, int y0, int x1, int y1, uint32_t rgb, int tol) {
    long n = 0;
    for (int y = y0 < 0 ? 0 : y0; y < y1 && y < im->h; y++)
        for (int x = x0 < 0 ? 0 : x0; x < x1 && x < im->w; x++)
            n += near_rgb(pixel(im, x, y), rgb, tol);
    return n;
}

/* Number of distinct colours, counted up to `cap`. */
static int distinct_colors(const image *im, int cap) {
    uint32_t *seen = malloc(sizeof(uint32_t) * (size_t)cap);
    int n = 0;
    for (int y = 0; y < im->h && n < cap; y++)
        for (int x = 0; x < im->w && n < cap; x++) {
            uint32_t p = pixel(im, x, y);
            int k = 0;
            while (k < n && seen[k] != p) k++;
            if (k == n) seen[n++] = p;
        }
    free(seen);
    return n;
}

/* Pixels that are neither white nor light grey: text, frame, data. */
static long dark_pixels(const image *im, int x0, int y0, int x1, int y1) {
    long n = 0;
    for (int y = y0; y < y1 && y < im->h; y++)
        for (int x = x0; x < x1 && x < im->w; x++) {
            uint32_t p = pixel(im, x, y);
            n += ((p >> 16) & 255) < 160 && ((p >> 8) & 255) < 160 && (p & 255) < 160;
        }
    return n;
}

/* The longest vertical run of colour rgb in any column of [x0, x1): finds the frame. */
static int longest_vertical_run(const image *im, int x0, int x1, uint32_t rgb) {
    int best = 0;
    for (int x = x0; x < x1 && x < im->w; x++)
        for (int y = 0, run = 0; y < im->h; y++) {
            run = pixel(im, x, y) == rgb ? run + 1 : 0;
            if (run > best) best = run;
        }
    return best;
}

static const uint32_t FRAME = 0x707070;

/* ---- ticks ---- */

static void assert_ticks(const mg_plot_ticks *t, double lo, double hi, double step, int n) {
    ck_assert_double_eq_tol(t->lo, lo, 1e-12 * fmax(1, fabs(lo)));
    ck_assert_double_eq_tol(t->hi, hi, 1e-12 * fmax(1, fabs(hi)));
    ck_assert_double_eq_tol(t->step, step, 1e-15 * fmax(1, step));
    ck_assert_int_eq(t->n, n);
    ck_assert_double_eq_tol(t->v[0], lo, 1e-12 * fmax(1, fabs(lo)));
    ck_assert_double_eq_tol(t->v[n - 1], hi, 1e-12 * fmax(1, fabs(hi)));
}

static void assert_label(const mg_plot_ticks *t, double v, const char *want) {
    char buf[64];
    mg_plot_tick_label(t, v, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
}

START_TEST(nice_ticks_hand_worked) {
    mg_plot_ticks t;
    ck_assert_int_eq(mg_plot_nice_ticks(0, 1, 5, &t), MG_OK);
    assert_ticks(&t, 0, 1, 0.2, 6);
    assert_label(&t, t.v[1], "0.2");
    assert_label(&t, t.v[0], "0.0");

    ck_assert_int_eq(mg_plot_nice_ticks(0, 97, 5, &t), MG_OK); /* 19.4 rounds up to 20 */
    assert_ticks(&t, 0, 100, 20, 6);
    assert_label(&t, 60, "60");

    ck_assert_int_eq(mg_plot_nice_ticks(-3.2, 7.9, 5, &t), MG_OK); /* 2.22 -> 5 */
    assert_ticks(&t, -5, 10, 5, 4);
    assert_label(&t, -5, "-5");

    ck_assert_int_eq(mg_plot_nice_ticks(0.0012, 0.0047, 4, &t), MG_OK);
    assert_ticks(&t, 0.001, 0.005, 0.001, 5);
    ck_assert(t.v[2] == 0.003); /* exact: 3 / 1000, not 3 * 0.001 */
    assert_label(&t, t.v[2], "0.003");

    ck_assert_int_eq(mg_plot_nice_ticks(10, 0, 5, &t), MG_OK); /* swapped */
    assert_ticks(&t, 0, 10, 2, 6);

    ck_assert_int_eq(mg_plot_nice_ticks(-1, 1, 4, &t), MG_OK);
    assert_ticks(&t, -1, 1, 0.5, 5);
    assert_label(&t, t.v[1], "-0.5");
    assert_label(&t, t.v[2], "0.0");
}
END_TEST

START_TEST(nice_ticks_degenerate_ranges) {
    mg_plot_ticks t;
    /* flat data still gets an axis that contains it strictly inside */
    ck_assert_int_eq(mg_plot_nice_ticks(5, 5, 5, &t), MG_OK);
    ck_assert(t.lo < 5 && t.hi > 5 && t.n >= 3);
    ck_assert_int_eq(mg_plot_nice_ticks(0, 0, 5, &t), MG_OK);
    ck_assert(t.lo <= -1 && t.hi >= 1);
    ck_assert_int_eq(mg_plot_nice_ticks(-2e-7, -2e-7, 5, &t), MG_OK);
    ck_assert(t.lo < -2e-7 && t.hi > -2e-7);

    /* denormal-sized values count as zero rather than producing a zero step */
    ck_assert_int_eq(mg_plot_nice_ticks(1e-310, 3e-310, 5, &t), MG_OK);
    ck_assert(t.lo <= -1 && t.hi >= 1 && t.step > 0);
    ck_assert_int_eq(mg_plot_nice_ticks(0, 1e-280, 5, &t), MG_OK);
    ck_assert(t.hi >= 1e-280 && t.step > 0 && t.n >= 3);

    ck_assert_int_eq(mg_plot_nice_ticks(NAN, 1, 5, &t), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "not finite"));
    ck_assert_int_eq(mg_plot_nice_ticks(0, INFINITY, 5, &t), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_nice_ticks(-1e308, 1e308, 5, &t), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "too wide"));
    ck_assert_int_eq(mg_plot_nice_ticks(0, 1, 5, NULL), MG_ERR_INVALID);
}
END_TEST

/* Any finite range: ticks cover it, are evenly spaced by 1, 2 or 5 x 10^k, and there are about
 * as many as asked for. */
START_TEST(nice_ticks_properties) {
    mg_rng r = mg_rng_make(2024);
    for (int it = 0; it < 20000; it++) {
        double scale = pow(10, mg_rng_range(&r, -8, 8));
        double a = (mg_rng_double(&r) - 0.5) * scale, b = a + mg_rng_double(&r) * scale;
        int target = 2 + (int)mg_rng_below(&r, 9);
        mg_plot_ticks t;
        ck_assert_int_eq(mg_plot_nice_ticks(a, b, target, &t), MG_OK);
        ck_assert(t.lo <= a && t.hi >= b);
        ck_assert(t.n >= 2 && t.n <= MG_PLOT_MAX_TICKS);
        ck_assert_msg(t.n - 1 <= target + 2, "[%g, %g] target %d gave %d intervals", a, b, target,
                      t.n - 1);
        double m = t.step / pow(10, floor(log10(t.step) + 1e-9));
        ck_assert_msg(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9,
                      "step %g is not 1, 2 or 5 x 10^k", t.step);
        for (int i = 1; i < t.n; i++)
            ck_assert_double_eq_tol(t.v[i] - t.v[i - 1], t.step,
                                    1e-9 * t.step + 1e-12 * fabs(t.v[i]));
        /* labels of neighbouring ticks differ */
        char p[64], q[64];
        for (int i = 1; i < t.n; i++) {
            mg_plot_tick_label(&t, t.v[i - 1], p, sizeof p);
            mg_plot_tick_label(&t, t.v[i], q, sizeof q);
            ck_assert_msg(strcmp(p, q) != 0, "ticks %g and %g both print as %s", t.v[i - 1], t.v[i],
                          p);
        }
    }
}
END_TEST

START_TEST(tick_labels_large_and_small) {
    mg_plot_ticks t;
    ck_assert_int_eq(mg_plot_nice_ticks(0, 20000, 4, &t), MG_OK);
    assert_label(&t, 0, "0");
    assert_label(&t, 5000, "5k");
    assert_label(&t, 20000, "20k");
    ck_assert_int_eq(mg_plot_nice_ticks(1e6, 3.5e6, 5, &t), MG_OK);
    ck_assert_double_eq(t.step, 5e5);
    assert_label(&t, 1.5e6, "1.5M");
    assert_label(&t, 2e6, "2M");
    ck_assert_int_eq(mg_plot_nice_ticks(0, 5e-5, 5, &t), MG_OK);
    assert_label(&t, 2e-5, "2e-5");
    assert_label(&t, 0, "0");
    ck_assert_int_eq(mg_plot_nice_ticks(0, 900, 5, &t), MG_OK);
    assert_label(&t, 800, "800");
}
END_TEST

START_TEST(log_ticks) {
    mg_plot_ticks t;
    ck_assert_int_eq(mg_plot_log_ticks(1, 1000, 6, &t), MG_OK);
    ck_assert(t.log);
    assert_ticks(&t, 1, 1000, 1, 4);
    assert_label(&t, 1000, "1000");

    /* less than two decades: 1-2-5 ticks, range widened to the outer ones */
    ck_assert_int_eq(mg_plot_log_ticks(0.3, 4, 6, &t), MG_OK);
    ck_assert_int_eq(t.n, 5);
    const double want[5] = {0.2, 0.5, 1, 2, 5};
    for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(t.v[i], want[i], 1e-12);
    assert_label(&t, 0.2, "0.2");

    /* many decades: every third, labels switch to the short scientific form far from 1 */
    ck_assert_int_eq(mg_plot_log_ticks(1e-8, 1e4, 5, &t), MG_OK);
    ck_assert_int_eq(t.n, 6);
    ck_assert_double_eq_tol(t.v[0], 1e-9, 1e-21);
    ck_assert_double_eq_tol(t.v[5], 1e6, 1e-6);
    assert_label(&t, t.v[0], "1e-9");
    assert_label(&t, t.v[2], "0.001");
    assert_label(&t, t.v[5], "1e6");

    ck_assert_int_eq(mg_plot_log_ticks(-1, 10, 5, &t), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "positive"));
    ck_assert_int_eq(mg_plot_log_ticks(0, 10, 5, &t), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_log_ticks(1, 1e308, 5, &t), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_log_ticks(1e-310, 1, 5, &t), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_log_ticks(1e-300, 1e300, 5, &t), MG_OK);
    for (int i = 0; i < t.n; i++) ck_assert(isfinite(t.v[i]) && t.v[i] > 0);
}
END_TEST

/* ---- canvas ---- */

START_TEST(canvas_rects_clip_and_errors) {
    ck_assert_ptr_null(mg_canvas_new(0, 10, 0));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "0x10"));
    ck_assert_ptr_null(mg_canvas_new(10, 20000, 0));

    mg_canvas *c = mg_canvas_new(40, 30, 0xFFFFFF);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(mg_canvas_width(c), 40);
    ck_assert_int_eq(mg_canvas_height(c), 30);
    mg_canvas_fill_rect(c, 2, 3, 4, 5, 0x102030); /* crisp at whole pixels */
    ck_assert_uint_eq(mg_canvas_get(c, 2, 3), 0x102030);
    ck_assert_uint_eq(mg_canvas_get(c, 5, 7), 0x102030);
    ck_assert_uint_eq(mg_canvas_get(c, 6, 7), 0xFFFFFF);
    ck_assert_uint_eq(mg_canvas_get(c, 5, 8), 0xFFFFFF);
    ck_assert_uint_eq(mg_canvas_get(c, 1, 3), 0xFFFFFF);
    /* half a pixel covered: half way to the colour */
    mg_canvas_fill_rect(c, 10.5, 10, 1, 1, 0x000000);
    ck_assert(near_rgb(mg_canvas_get(c, 10, 10), 0x808080, 1));
    ck_assert(near_rgb(mg_canvas_get(c, 11, 10), 0x808080, 1));
    mg_canvas_blend_rect(c, 20, 20, 1, 1, 0x000000, 0.25);
    ck_assert(near_rgb(mg_canvas_get(c, 20, 20), 0xBFBFBF, 1));

    mg_canvas_set_clip(c, 0, 0, 15, 30);
    mg_canvas_fill_rect(c, 0, 0, 40, 2, 0xFF0000);
    ck_assert_uint_eq(mg_canvas_get(c, 14, 0), 0xFF0000);
    ck_assert_uint_eq(mg_canvas_get(c, 15, 0), 0xFFFFFF);
    mg_canvas_reset_clip(c);
    mg_canvas_fill_rect(c, 30, 0, 100, 100, 0x00FF00); /* off the edge: clipped, no crash */
    ck_assert_uint_eq(mg_canvas_get(c, 39, 29), 0x00FF00);
    ck_assert_uint_eq(mg_canvas_get(c, 40, 0), 0); /* outside */

    /* the pixel buffer is what mg_canvas_get reads */
    const uint8_t *px = mg_canvas_pixels(c);
    ck_assert_uint_eq(px[3 * (3 * 40 + 2)], 0x10);
    ck_assert_uint_eq(px[3 * (3 * 40 + 2) + 2], 0x30);
    mg_canvas_free(c);
    mg_canvas_free(NULL);
}
END_TEST

START_TEST(canvas_lines_and_gaps) {
    mg_canvas *c = mg_canvas_new(100, 40, 0xFFFFFF);
    mg_canvas_line(c, 10, 10.5, 90, 10.5, 3, 0x0000FF);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 10), 0x0000FF);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 9), 0x0000FF);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 11), 0x0000FF);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 14), 0xFFFFFF);
    ck_assert_uint_eq(mg_canvas_get(c, 95, 10), 0xFFFFFF); /* round end stays near the endpoint */

    /* a non-finite point splits a polyline */
    double x[5] = {10, 30, 50, 70, 90}, y[5] = {30.5, 30.5, NAN, 30.5, 30.5};
    mg_canvas_polyline(c, x, y, 5, 2, 0xFF0000);
    ck_assert_uint_eq(mg_canvas_get(c, 20, 30), 0xFF0000);
    ck_assert_uint_eq(mg_canvas_get(c, 80, 30), 0xFF0000);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 30), 0xFFFFFF);

    /* overlapping segments of one polyline do not darken the anti-aliased edge */
    mg_canvas *a = mg_canvas_new(60, 20, 0xFFFFFF), *b = mg_canvas_new(60, 20, 0xFFFFFF);
    double xs[4] = {5, 25, 15, 55}, ys[4] = {10.3, 10.3, 10.3, 10.3};
    mg_canvas_polyline(a, xs, ys, 4, 2, 0);
    mg_canvas_line(b, 5, 10.3, 55, 10.3, 2, 0);
    ck_assert_mem_eq(mg_canvas_pixels(a), mg_canvas_pixels(b), 60 * 20 * 3);
    mg_canvas_free(a);
    mg_canvas_free(b);

    mg_canvas_fill_circle(c, 50, 20, 4, 0x00FF00);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 20), 0x00FF00);
    ck_assert_uint_eq(mg_canvas_get(c, 50, 26), 0xFFFFFF);
    mg_canvas_free(c);
}
END_TEST

/* Bounding box of non-background pixels. */
static void ink_box(const mg_canvas *c, int *x0, int *y0, int *x1, int *y1) {
    *x0 = *y0 = 1 << 30;
    *x1 = *y1 = -1;
    for (int y = 0; y < mg_canvas_height(c); y++)
        for (int x = 0; x < mg_canvas_width(c); x++)
            if (mg_canvas_get(c, x, y) != 0xFFFFFF) {
                if (x < *x0) *x0 = x;
                if (y < *y0) *y0 = y;
                if (x > *x1) *x1 = x;
                if (y > *y1) *y1 = y;
            }
}

START_TEST(text_metrics_and_placement) {
    /* proportional: narrow letters take less room; digits are all one width so columns align */
    ck_assert(mg_text_width("iii", 1, false) < mg_text_width("WWW", 1, false));
    ck_assert_double_eq(mg_text_width("0123", 1, false), mg_text_width("8888", 1, false));
    ck_assert_double_eq(mg_text_width("ab", 2, false), 2 * mg_text_width("ab", 1, false));
    ck_assert(mg_text_width("ab", 1, true) > mg_text_width("ab", 1, false));
    ck_assert_double_eq(mg_text_width("ab\nabcd", 1, false), mg_text_width("abcd", 1, false));
    ck_assert_double_eq(mg_text_height("x", 1), 13);
    ck_assert_double_eq(mg_text_height("x\ny", 2), 52);
    ck_assert_double_eq(mg_text_width("", 1, false), 0);
    ck_assert_double_eq(mg_text_width(NULL, 1, false), 0);

    /* ink stays inside the box the metrics promise */
    mg_canvas *c = mg_canvas_new(200, 100, 0xFFFFFF);
    const char *s = "Loss (gpt) 0.25";
    mg_canvas_text(c, 20, 30, s, 1, 0x000000);
    int x0, y0, x1, y1;
    ink_box(c, &x0, &y0, &x1, &y1);
    ck_assert_int_ge(x0, 20);
    ck_assert_int_ge(y0, 30);
    ck_assert_int_le(x1, 20 + (int)mg_text_width(s, 1, false) - 1);
    ck_assert_int_le(y1, 30 + 13 - 1);
    ck_assert_int_eq(x1, 20 + (int)mg_text_width(s, 1, false) - 1); /* and reaches its end */

    /* right/centre alignment and rotation */
    mg_canvas *v = mg_canvas_new(100, 200, 0xFFFFFF);
    mg_text_style st = {
        .scale = 2, .rgb = 0x000000, .align_x = 0.5, .align_y = 0.5, .vertical = true};
    mg_canvas_text_ex(v, 50, 100, "vertical", &st);
    ink_box(v, &x0, &y0, &x1, &y1);
    double w = mg_text_width("vertical", 2, false);
    ck_assert_int_le(x1 - x0 + 1, 26);         /* the line is now the box's width... */
    ck_assert_int_ge(y1 - y0 + 1, (int)w - 4); /* ...and its length the height */
    ck_assert_int_ge(y0, 100 - (int)(w / 2) - 1);
    ck_assert_int_le(y1, 100 + (int)(w / 2) + 1);
    mg_canvas_free(v);
    mg_canvas_free(c);
}
END_TEST

/* Every printable character has its own glyph, so no typo in the font table goes unseen. The one
 * deliberate twin is the plain zero, drawn like O as in proportional chart fonts. */
START_TEST(font_glyphs_distinct) {
    enum { N = 95 };
    static uint8_t glyph[N][13 * 8 * 3];
    for (int i = 0; i < N; i++) {
        mg_canvas *c = mg_canvas_new(8, 13, 0xFFFFFF);
        char s[2] = {(char)(32 + i), 0};
        mg_canvas_text(c, 0, 0, s, 1, 0x000000);
        memcpy(glyph[i], mg_canvas_pixels(c), sizeof glyph[i]);
        mg_canvas_free(c);
    }
    for (int i = 1; i < N; i++) { /* all but the space have ink */
        bool ink = false;
        for (size_t k = 0; k < sizeof glyph[i]; k++) ink |= glyph[i][k] != 255;
        ck_assert_msg(ink, "glyph '%c' is blank", 32 + i);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            if (32 + i == '0' && 32 + j == 'O') continue;
            ck_assert_msg(memcmp(glyph[i], glyph[j], sizeof glyph[i]) != 0,
                          "glyphs '%c' and '%c' are identical", 32 + i, 32 + j);
        }
}
END_TEST

/* ---- saving ---- */

START_TEST(save_png_round_trip_and_atomic) {
    make_tmpdir();
    mg_canvas *c = mg_canvas_new(64, 48, 0xFFFFFF);
    mg_canvas_fill_rect(c, 5, 5, 20, 10, 0x123456);
    mg_canvas_text(c, 2, 30, "ok", 1, 0x000000);
    const char *p = tmp_path("a.png");
    tu_write_text(p, "old contents");
    ck_assert_int_eq(mg_canvas_save_png(c, p), MG_OK);
    image im = load(p);
    ck_assert_int_eq(im.w, 64);
    ck_assert_int_eq(im.h, 48);
    ck_assert_mem_eq(im.px, mg_canvas_pixels(c), 64 * 48 * 3);
    unload(&im);
    ck_assert_int_eq(count_entries(".tmp"), 0);
    ck_assert_int_eq(count_entries(""), 1);

    /* a directory that does not exist: an I/O error naming the path and saying so */
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.png", tmpdir);
    ck_assert_int_eq(mg_canvas_save_png(c, missing), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), missing));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), ": cannot write: its folder does not exist"));

    /* the target is a directory: refused, no temporary file is left, nothing is harmed */
    const char *d = tmp_path("adir");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    ck_assert_int_eq(mg_canvas_save_png(c, d), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), d));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "Is a directory"));
    struct stat sb;
    ck_assert_int_eq(stat(d, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_int_eq(count_entries(".tmp"), 0);

    ck_assert_int_eq(mg_canvas_save_png(NULL, p), MG_ERR_INVALID);
    ck_assert_int_eq(mg_canvas_save_png(c, ""), MG_ERR_INVALID);

    /* loading: a missing file, a file that is no image */
    mg_canvas *back = (mg_canvas *)1;
    ck_assert_int_eq(mg_canvas_load_png(missing, &back), MG_ERR_IO);
    ck_assert_ptr_null(back);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), missing));
    const char *txt = tmp_path("not.png");
    tu_write_text(txt, "this is not a PNG");
    ck_assert_int_eq(mg_canvas_load_png(txt, &back), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "not a decodable image"));
    ck_assert_int_eq(mg_canvas_load_png(txt, NULL), MG_ERR_INVALID);
    mg_canvas_free(c);
    remove_tmpdir();
}
END_TEST

/* A full disk: /dev/full (and a link to it) is written in place and the failure names it; a regular
 * file that cannot grow (a file size limit) keeps its old contents and leaves no temporary. */
START_TEST(save_png_on_a_full_disk_fails_by_name) {
    make_tmpdir();
    mg_canvas *c = mg_canvas_new(300, 200, 0xFFFFFF);
    for (int i = 0; i < 300; i += 3) mg_canvas_line(c, i, 0, 299 - i, 199, 1.5, mg_plot_color(i));
    ck_assert_int_eq(mg_canvas_save_png(c, "/dev/full"), MG_ERR_IO);
    tu_assert_error_has("/dev/full");
    tu_assert_error_has(strerror(ENOSPC));
    tu_assert_dev_full_intact();
    const char *link = tmp_path("loss.png");
    ck_assert_int_eq(symlink("/dev/full", link), 0);
    ck_assert_int_eq(mg_canvas_save_png(c, link), MG_ERR_IO);
    tu_assert_error_has(link);
    tu_assert_error_has(strerror(ENOSPC));
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(unlink(link), 0);

    const char *p = tmp_path("chart.png");
    tu_write_text(p, "old contents");
    struct rlimit old = tu_limit_file_size(512);
    ck_assert_int_eq(mg_plot_lines(p, &(mg_plot_opts){.title = "t"},
                                   &(mg_plot_series){.label = "a", .x = (double[]){1, 2, 3},
                                                     .y = (double[]){3, 1, 2}, .n = 3},
                                   1),
                     MG_ERR_IO);
    tu_assert_error_has(p);
    tu_assert_error_has(strerror(EFBIG));
    ck_assert_int_eq(mg_canvas_save_png(c, p), MG_ERR_IO);
    tu_assert_error_has(strerror(EFBIG));
    tu_restore_file_size(old);
    char *b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "old contents");
    free(b);
    ck_assert_int_eq(count_entries(".tmp"), 0);
    mg_canvas_free(c);
    remove_tmpdir();
}
END_TEST

/* ---- line charts ---- */

enum { NPTS = 400 };

static void decaying(double *y, int n, double tau, double floor_v) {
    for (int i = 0; i < n; i++) y[i] = 4 * exp(-i / tau) + floor_v + 0.05 * sin(i * 0.7);
}

START_TEST(lines_chart_layout) {
    make_tmpdir();
    static double a[NPTS], b[NPTS];
    decaying(a, NPTS, 60, 1.5);
    decaying(b, NPTS, 40, 1.2);
    mg_plot_series s[2] = {{"learned", NULL, a, NPTS}, {"rope", NULL, b, NPTS}};
    mg_plot_opts o = {.title = "Training loss", .xlabel = "step", .ylabel = "loss"};
    const char *p = tmp_path("lines.png");
    ck_assert_int_eq(mg_plot_lines(p, &o, s, 2), MG_OK);
    ck_assert_int_eq(count_entries(".tmp"), 0);
    image im = load(p);
    ck_assert_int_eq(im.w, 800); /* the default size */
    ck_assert_int_eq(im.h, 500);
    ck_assert_int_ge(distinct_colors(&im, 64), 20); /* anti-aliased lines, text, grid */
    /* both series colours are drawn, mostly in the plot area */
    ck_assert_int_gt(count_rgb(&im, 60, 40, 790, 460, mg_plot_color(0), 0), 300);
    ck_assert_int_gt(count_rgb(&im, 60, 40, 790, 460, mg_plot_color(1), 0), 300);
    /* decaying curves leave the top-right corner free: the legend goes there, with a swatch line
     * of each colour */
    ck_assert_int_ge(count_rgb(&im, 550, 40, 800, 140, mg_plot_color(0), 0), 30);
    ck_assert_int_ge(count_rgb(&im, 550, 40, 800, 140, mg_plot_color(1), 0), 30);
    /* the frame: a long vertical run of frame grey on the left, tick labels left of it, the
     * title on top and the x label at the bottom */
    ck_assert_int_gt(longest_vertical_run(&im, 0, 150, FRAME), 300);
    ck_assert_int_gt(dark_pixels(&im, 0, 40, 60, 460), 100);
    ck_assert_int_gt(dark_pixels(&im, 300, 0, 500, 40), 100);
    ck_assert_int_gt(dark_pixels(&im, 350, 470, 450, 500), 20);
    ck_assert_int_eq(dark_pixels(&im, 0, 0, 250, 10), 0); /* margins stay clear */
    unload(&im);

    /* a custom size is honoured */
    o.width = 640;
    o.height = 360;
    ck_assert_int_eq(mg_plot_lines(p, &o, s, 2), MG_OK);
    im = load(p);
    ck_assert_int_eq(im.w, 640);
    ck_assert_int_eq(im.h, 360);
    unload(&im);
    remove_tmpdir();
}
END_TEST

/* Row with the most pixels of colour rgb, and the columns of its first and last such pixel. */
static int densest_row(const image *im, uint32_t rgb, int *first, int *last) {
    int best = -1;
    long best_n = 0;
    for (int y = 0; y < im->h; y++) {
        long n = count_rgb(im, 0, y, im->w, y + 1, rgb, 0);
        if (n > best_n) {
            best_n = n;
            best = y;
        }
    }
    *first = *last = -1;
    for (int x = 0; best >= 0 && x < im->w; x++)
        if (pixel(im, x, best) == rgb) {
            if (*first < 0) *first = x;
            *last = x;
        }
    return best;
}

START_TEST(lines_gaps_flat_and_single_points) {
    make_tmpdir();
    const char *p = tmp_path("g.png");
    /* a flat series with NaN and inf in the middle: the axis is sane and the line has a hole */
    static double y[100];
    for (int i = 0; i < 100; i++) y[i] = i >= 40 && i < 60 ? (i % 2 ? NAN : INFINITY) : 0.7;
    mg_plot_series s = {"flat", NULL, y, 100};
    ck_assert_int_eq(mg_plot_lines(p, NULL, &s, 1), MG_OK);
    image im = load(p);
    int first, last, row = densest_row(&im, mg_plot_color(0), &first, &last);
    ck_assert_int_gt(row, 50); /* the flat line is well inside the plot, not on an edge */
    ck_assert_int_lt(row, 450);
    int mid = (first + last) / 2, hole = 0;
    for (int x = mid - 40; x <= mid + 40; x++) hole += pixel(&im, x, row) != mg_plot_color(0);
    ck_assert_int_gt(hole, 50);
    ck_assert_int_gt(last - first, 500);
    unload(&im);

    /* one point, and series of different lengths and x ranges */
    double px[1] = {3}, py[1] = {2.5};
    double qx[3] = {10, 20, 30}, qy[3] = {1, 3, 2};
    mg_plot_series two[3] = {{"point", px, py, 1}, {"short", qx, qy, 3}, {"empty", NULL, NULL, 0}};
    ck_assert_int_eq(mg_plot_lines(p, NULL, two, 3), MG_OK);
    im = load(p);
    ck_assert_int_gt(count_rgb(&im, 0, 0, im.w, im.h, mg_plot_color(0), 0), 15); /* a dot */
    ck_assert_int_gt(count_rgb(&im, 0, 0, im.w, im.h, mg_plot_color(1), 0), 300);
    unload(&im);

    /* all points missing: an empty frame, not a failure */
    double nan3[3] = {NAN, NAN, NAN};
    mg_plot_series none = {"nothing", NULL, nan3, 3};
    ck_assert_int_eq(mg_plot_lines(p, NULL, &none, 1), MG_OK);

    /* log scale: values <= 0 are gaps, the rest is drawn */
    double ly[6] = {100, 10, 0, -1, 1, 0.1};
    mg_plot_series ls = {"log", NULL, ly, 6};
    mg_plot_opts o = {.log_y = true, .title = "log"};
    ck_assert_int_eq(mg_plot_lines(p, &o, &ls, 1), MG_OK);
    im = load(p);
    ck_assert_int_gt(count_rgb(&im, 0, 0, im.w, im.h, mg_plot_color(0), 0), 200);
    unload(&im);

    /* a fixed y range clips what lies outside */
    mg_plot_opts f = {.y_fixed = true, .y_min = 0, .y_max = 2};
    ck_assert_int_eq(mg_plot_lines(p, &f, two, 2), MG_OK);
    remove_tmpdir();
}
END_TEST

START_TEST(lines_bad_input) {
    make_tmpdir();
    const char *p = tmp_path("keep.png");
    tu_write_text(p, "precious");
    double y[3] = {1, 2, 3};
    mg_plot_series s = {"s", NULL, y, 3};

    ck_assert_int_eq(mg_plot_lines(p, NULL, &s, 0), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "need at least one series"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), p));
    ck_assert_int_eq(mg_plot_lines(p, NULL, NULL, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "series is NULL"));
    mg_plot_series bad = {"broken", NULL, NULL, 3};
    ck_assert_int_eq(mg_plot_lines(p, NULL, &bad, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "(\"broken\"): y is NULL"));
    bad = (mg_plot_series){"neg", NULL, y, -1};
    ck_assert_int_eq(mg_plot_lines(p, NULL, &bad, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "negative point count"));
    mg_plot_opts o = {.width = 100};
    ck_assert_int_eq(mg_plot_lines(p, &o, &s, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "100x500"));
    o = (mg_plot_opts){.y_fixed = true, .y_min = 1, .y_max = 1};
    ck_assert_int_eq(mg_plot_lines(p, &o, &s, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "fixed y range"));
    o = (mg_plot_opts){.log_y = true, .y_fixed = true, .y_min = 0, .y_max = 1};
    ck_assert_int_eq(mg_plot_lines(p, &o, &s, 1), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_lines(NULL, NULL, &s, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "no output path"));
    ck_assert(file_equals(p, "precious"));

    /* an unwritable place: an I/O error naming the path, and nothing created */
    char missing[512];
    snprintf(missing, sizeof missing, "%s/missing/chart.png", tmpdir);
    ck_assert_int_eq(mg_plot_lines(missing, NULL, &s, 1), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), missing));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), ": cannot write: its folder does not exist"));
    ck_assert_int_eq(count_entries(""), 1);
    ck_assert(file_equals(p, "precious"));
    remove_tmpdir();
}
END_TEST

/* ---- heatmaps ---- */

START_TEST(heatmap_colours_and_colour_bar) {
    make_tmpdir();
    enum { R = 16, C = 32 };
    static float v[R * C];
    for (int i = 0; i < R * C; i++) v[i] = (float)(i / C) / (R - 1); /* rows 0..1 downwards */
    v[5] = NAN;
    mg_plot_opts o = {.title = "gradient", .xlabel = "col", .ylabel = "row", .value_label = "v"};
    const char *p = tmp_path("h.png");
    ck_assert_int_eq(mg_plot_heatmap(p, &o, v, R, C), MG_OK);
    image im = load(p);
    ck_assert_int_eq(im.w, 800);
    ck_assert_int_eq(im.h, 500);
    ck_assert_int_ge(distinct_colors(&im, 200), 100);
    /* crisp cells: the colour map's ends appear exactly, on whole rows, and the NaN cell is grey */
    ck_assert_int_gt(count_rgb(&im, 0, 0, 600, im.h, 0x440154, 0), 500);
    ck_assert_int_gt(count_rgb(&im, 0, 0, 600, im.h, 0xFDE725, 0), 500);
    ck_assert_int_gt(count_rgb(&im, 0, 0, 600, im.h, 0xC8C8C8, 0), 50);
    /* the colour bar is the rightmost column holding the top colour; it runs down to the bottom
     * colour, with tick labels right of it */
    int bar = -1;
    for (int x = im.w - 1; x >= 0 && bar < 0; x--)
        if (count_rgb(&im, x, 0, x + 1, im.h, 0xFDE725, 6) > 0) bar = x;
    ck_assert_int_gt(bar, 600);
    ck_assert_int_gt(count_rgb(&im, bar, 0, bar + 1, im.h, 0x440154, 6), 0);
    ck_assert_int_gt(count_rgb(&im, bar, 0, bar + 1, im.h, 0x21918C, 6), 0);
    ck_assert_int_eq(count_rgb(&im, bar - 22, 0, bar - 21, im.h, 0xFDE725, 6), 0); /* gap */
    ck_assert_int_gt(dark_pixels(&im, bar + 1, 40, im.w, 460), 50);
    unload(&im);

    /* diverging map: zero is the white middle */
    for (int i = 0; i < R * C; i++) v[i] = (float)(i % C - C / 2);
    o.colormap = MG_CMAP_DIVERGING;
    ck_assert_int_eq(mg_plot_heatmap(p, &o, v, R, C), MG_OK);
    im = load(p);
    ck_assert_int_gt(count_rgb(&im, 0, 0, 680, im.h, 0xF7F7F7, 0), 50);
    unload(&im);
    remove_tmpdir();
}
END_TEST

START_TEST(heatmap_constant_labels_and_large) {
    make_tmpdir();
    const char *p = tmp_path("h.png");
    float k[6] = {2, 2, 2, 2, 2, 2};
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, k, 2, 3), MG_OK);
    image im = load(p);
    /* a constant matrix maps to the middle of the colour map */
    ck_assert_int_gt(count_rgb(&im, 0, 0, im.w, im.h, 0x21918C, 0), 10000);
    unload(&im);

    /* a lone cell, all-NaN data and named, square cells */
    float one = 1, nan4[4] = {NAN, NAN, NAN, NAN};
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, &one, 1, 1), MG_OK);
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, nan4, 2, 2), MG_OK);
    const char *toks[6] = {"<s>", "the", "cat", "sat", "on", "mat"};
    float att[36];
    for (int i = 0; i < 36; i++) att[i] = i % 7 == 0 ? 1.0f : 0.0f;
    mg_plot_opts o = {.row_labels = toks,
                      .col_labels = toks,
                      .square_cells = true,
                      .v_fixed = true,
                      .v_min = 0,
                      .v_max = 1};
    ck_assert_int_eq(mg_plot_heatmap(p, &o, att, 6, 6), MG_OK);
    im = load(p);
    /* square: the diagonal's yellow cells have as many columns as rows */
    int x0 = im.w, x1 = -1, y0 = im.h, y1 = -1;
    for (int y = 0; y < im.h; y++)
        for (int x = 0; x < 680; x++)
            if (pixel(&im, x, y) == 0xFDE725) {
                x0 = x < x0 ? x : x0;
                x1 = x > x1 ? x : x1;
                y0 = y < y0 ? y : y0;
                y1 = y > y1 ? y : y1;
            }
    ck_assert_int_gt(x1 - x0, 100);
    ck_assert_int_eq(x1 - x0, y1 - y0);
    unload(&im);

    /* a positional table as big as the music model's shrinks without trouble */
    enum { T = 2048, D = 512 };
    float *pe = malloc(sizeof(float) * T * D);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++)
            pe[t * D + i] = (float)sin(t / pow(10000, (i & ~1) / (double)D) + (i & 1) * 1.5707963);
    mg_plot_opts big = {.title = "sinusoidal", .colormap = MG_CMAP_DIVERGING};
    ck_assert_int_eq(mg_plot_heatmap(p, &big, pe, T, D), MG_OK);
    free(pe);
    im = load(p);
    ck_assert_int_ge(distinct_colors(&im, 500), 500);
    unload(&im);
    remove_tmpdir();
}
END_TEST

/* A heatmap drawn as a panel of a larger canvas has the very pixels of the saved chart; the
 * canvas around it is untouched, what falls outside is cut off, and errors name the panel. */
START_TEST(heatmap_onto_a_canvas_is_the_same_chart) {
    make_tmpdir();
    enum { R = 7, C = 11 };
    float v[R * C];
    for (int i = 0; i < R * C; i++) v[i] = sinf(0.37f * (float)i);
    mg_plot_opts o = {.title = "panel", .width = 300, .height = 200, .value_label = "v"};
    const char *p = tmp_path("alone.png");
    ck_assert_int_eq(mg_plot_heatmap(p, &o, v, R, C), MG_OK);
    mg_canvas *alone = NULL;
    ck_assert_int_eq(mg_canvas_load_png(p, &alone), MG_OK);
    mg_canvas *fig = mg_canvas_new(420, 260, 0x123456);
    ck_assert_ptr_nonnull(fig);
    ck_assert_int_eq(mg_plot_heatmap_onto(fig, 50, 40, "fig.png", &o, v, R, C), MG_OK);
    for (int y = 0; y < 260; y++)
        for (int x = 0; x < 420; x++) {
            const bool in = x >= 50 && x < 350 && y >= 40 && y < 240;
            const uint32_t want = in ? mg_canvas_get(alone, x - 50, y - 40) : 0x123456;
            if (mg_canvas_get(fig, x, y) != want) /* only a failure reaches Check, not 109k passes */
                ck_abort_msg("(%d, %d): %06x, want %06x", x, y, mg_canvas_get(fig, x, y), want);
        }
    /* partly outside, on every side */
    ck_assert_int_eq(mg_plot_heatmap_onto(fig, -100, -50, "fig.png", &o, v, R, C), MG_OK);
    ck_assert_int_eq(mg_canvas_get(fig, 0, 0), mg_canvas_get(alone, 100, 50));
    ck_assert_int_eq(mg_plot_heatmap_onto(fig, 300, 200, "fig.png", &o, v, R, C), MG_OK);
    ck_assert_int_eq(mg_canvas_get(fig, 419, 259), mg_canvas_get(alone, 119, 59));
    ck_assert_int_eq(mg_plot_heatmap_onto(fig, 0, 0, "fig.png", &o, v, 0, C), MG_ERR_INVALID);
    tu_assert_error_has("fig.png: the matrix is empty");
    ck_assert_int_eq(mg_plot_heatmap_onto(NULL, 0, 0, "fig.png", &o, v, R, C), MG_ERR_INVALID);
    tu_assert_error_has("no canvas");
    mg_canvas_free(fig);
    mg_canvas_free(alone);
    ck_assert_int_eq(count_entries(""), 1); /* nothing written but the chart saved on purpose */
    remove_tmpdir();
}
END_TEST

START_TEST(heatmap_bad_input) {
    make_tmpdir();
    const char *p = tmp_path("keep.png");
    tu_write_text(p, "precious");
    float v[4] = {1, 2, 3, 4};
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, v, 0, 4), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "the matrix is empty (rows 0, cols 4)"));
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, v, 2, -1), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_heatmap(p, NULL, NULL, 2, 2), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "values is NULL"));
    mg_plot_opts o = {.v_fixed = true, .v_min = 1, .v_max = 0};
    ck_assert_int_eq(mg_plot_heatmap(p, &o, v, 2, 2), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "value range"));
    o = (mg_plot_opts){.log_y = true};
    ck_assert_int_eq(mg_plot_heatmap(p, &o, v, 2, 2), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "log_y"));
    ck_assert(file_equals(p, "precious"));
    char missing[512];
    snprintf(missing, sizeof missing, "%s/missing/h.png", tmpdir);
    ck_assert_int_eq(mg_plot_heatmap(missing, NULL, v, 2, 2), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), missing));
    ck_assert_int_eq(count_entries(""), 1);
    remove_tmpdir();
}
END_TEST

/* ---- bar charts ---- */

START_TEST(bars_chart_layout) {
    make_tmpdir();
    const char *groups[3] = {"T=128", "T=512", "T=2048"};
    const char *series[4] = {"1 thread", "2 threads", "4 threads", "8 threads"};
    double v[12];
    for (int g = 0; g < 3; g++)
        for (int s = 0; s < 4; s++) v[g * 4 + s] = 120000.0 * (1 << s) / (g + 1);
    mg_plot_opts o = {.title = "Throughput", .ylabel = "tokens/s", .xlabel = "config"};
    const char *p = tmp_path("b.png");
    ck_assert_int_eq(mg_plot_bars(p, &o, groups, 3, series, 4, v), MG_OK);
    image im = load(p);
    ck_assert_int_eq(im.w, 800);
    ck_assert_int_eq(im.h, 500);
    /* each series' bars, with the largest bar the tallest */
    long area[4];
    for (int s = 0; s < 4; s++) {
        area[s] = count_rgb(&im, 0, 80, im.w, im.h, mg_plot_color(s), 0);
        ck_assert_int_gt(area[s], 500);
        if (s > 0) ck_assert_int_gt(area[s], area[s - 1]);
    }
    /* the legend row under the title has a square of each colour */
    for (int s = 0; s < 4; s++)
        ck_assert_int_ge(count_rgb(&im, 0, 30, im.w, 75, mg_plot_color(s), 0), 100);
    ck_assert_int_gt(longest_vertical_run(&im, 0, 150, FRAME), 250);
    ck_assert_int_gt(dark_pixels(&im, 60, 440, 800, 500), 50); /* group labels, x label */
    unload(&im);

    /* negative, missing and all-zero values; printed values; no legend */
    double w[6] = {1.2, -0.4, 0.8, NAN, 2.5, 1.9};
    mg_plot_opts o2 = {.bar_values = true};
    ck_assert_int_eq(mg_plot_bars(p, &o2, groups, 3, NULL, 2, w), MG_OK);
    im = load(p);
    ck_assert_int_gt(count_rgb(&im, 0, 0, im.w, im.h, mg_plot_color(1), 0), 500);
    ck_assert_int_eq(count_rgb(&im, 0, 0, im.w, 40, mg_plot_color(0), 0), 0); /* no legend row */
    long with_values = dark_pixels(&im, 90, 20, 780, 440);
    unload(&im);
    o2.bar_values = false;
    ck_assert_int_eq(mg_plot_bars(p, &o2, groups, 3, NULL, 2, w), MG_OK);
    im = load(p);
    ck_assert_int_gt(with_values, dark_pixels(&im, 90, 20, 780, 440) + 5 * 40); /* 5 numbers */
    unload(&im);
    double z[3] = {0, 0, 0};
    ck_assert_int_eq(mg_plot_bars(p, NULL, groups, 3, series, 1, z), MG_OK);
    /* many long group names take two staggered rows instead of overlapping */
    const char *longg[8] = {"configuration A", "configuration B", "configuration C",
                            "configuration D", "configuration E", "configuration F",
                            "configuration G", "configuration H"};
    double l[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(mg_plot_bars(p, NULL, longg, 8, series, 1, l), MG_OK);
    remove_tmpdir();
}
END_TEST

START_TEST(bars_bad_input) {
    make_tmpdir();
    const char *p = tmp_path("keep.png");
    tu_write_text(p, "precious");
    const char *g[2] = {"a", "b"};
    double v[2] = {1, 2};
    ck_assert_int_eq(mg_plot_bars(p, NULL, g, 0, NULL, 1, v), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "need at least one group and one series"));
    ck_assert_int_eq(mg_plot_bars(p, NULL, g, 2, NULL, 0, v), MG_ERR_INVALID);
    ck_assert_int_eq(mg_plot_bars(p, NULL, NULL, 2, NULL, 1, v), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "groups is NULL"));
    ck_assert_int_eq(mg_plot_bars(p, NULL, g, 2, NULL, 1, NULL), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "values is NULL"));
    mg_plot_opts o = {.log_y = true};
    ck_assert_int_eq(mg_plot_bars(p, &o, g, 2, NULL, 1, v), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "log_y"));
    ck_assert(file_equals(p, "precious"));
    char missing[512];
    snprintf(missing, sizeof missing, "%s/missing/b.png", tmpdir);
    ck_assert_int_eq(mg_plot_bars(missing, NULL, g, 2, NULL, 1, v), MG_ERR_IO);
    ck_assert_int_eq(count_entries(""), 1);
    remove_tmpdir();
}
END_TEST

/* The canvas is enough for a piano roll: lanes, notes at arbitrary positions, labels. */
START_TEST(canvas_piano_roll) {
    make_tmpdir();
    mg_canvas *c = mg_canvas_new(400, 200, 0xFFFFFF);
    for (int k = 0; k < 10; k++)
        if (k % 2) mg_canvas_fill_rect(c, 40, 10 + k * 18, 350, 18, 0xF4F4F4);
    mg_canvas_set_clip(c, 40, 10, 350, 180);
    mg_canvas_fill_rect(c, 35.5, 28, 60.25, 18, mg_plot_color(0)); /* starts before the clip */
    mg_canvas_fill_rect(c, 120, 82, 30, 18, mg_plot_color(1));
    mg_canvas_stroke_rect(c, 120, 82, 30, 18, 1, 0x000000);
    mg_canvas_reset_clip(c);
    mg_canvas_text_ex(c, 36, 91, "C4",
                      &(mg_text_style){.rgb = 0x333333, .align_x = 1, .align_y = 0.5});
    ck_assert_uint_eq(mg_canvas_get(c, 39, 30), 0xFFFFFF); /* clipped */
    ck_assert_uint_eq(mg_canvas_get(c, 40, 30), mg_plot_color(0));
    ck_assert_uint_eq(mg_canvas_get(c, 130, 90), mg_plot_color(1));
    ck_assert_uint_eq(mg_canvas_get(c, 120, 90), 0x000000);
    ck_assert_int_eq(mg_canvas_save_png(c, tmp_path("roll.png")), MG_OK);
    mg_canvas_free(c);
    image im = load(tmp_path("roll.png"));
    ck_assert_int_gt(dark_pixels(&im, 0, 80, 40, 100), 10);
    unload(&im);
    remove_tmpdir();
}
END_TEST

static Suite *plot_suite(void) {
    Suite *s = suite_create("plot");
    TCase *t = tcase_create("ticks");
    tcase_add_test(t, nice_ticks_hand_worked);
    tcase_add_test(t, nice_ticks_degenerate_ranges);
    tcase_add_test(t, nice_ticks_properties);
    tcase_add_test(t, tick_labels_large_and_small);
    tcase_add_test(t, log_ticks);
    suite_add_tcase(s, t);
    t = tcase_create("canvas");
    tcase_add_test(t, canvas_rects_clip_and_errors);
    tcase_add_test(t, canvas_lines_and_gaps);
    tcase_add_test(t, text_metrics_and_placement);
    tcase_add_test(t, font_glyphs_distinct);
    tcase_add_test(t, save_png_round_trip_and_atomic);
    if (tu_have_dev_full())
        tcase_add_test(t, save_png_on_a_full_disk_fails_by_name);
    else
        fprintf(stderr, "# /dev/full not found: save_png_on_a_full_disk_fails_by_name skipped\n");
    tcase_add_test(t, canvas_piano_roll);
    suite_add_tcase(s, t);
    t = tcase_create("charts");
    tcase_add_test(t, lines_chart_layout);
    tcase_add_test(t, lines_gaps_flat_and_single_points);
    tcase_add_test(t, lines_bad_input);
    tcase_add_test(t, heatmap_colours_and_colour_bar);
    tcase_add_test(t, heatmap_constant_labels_and_large);
    tcase_add_test(t, heatmap_bad_input);
    tcase_add_test(t, heatmap_onto_a_canvas_is_the_same_chart);
    tcase_add_test(t, bars_chart_layout);
    tcase_add_test(t, bars_bad_input);
    suite_add_tcase(s, t);
    return s;
}

MG_TEST_MAIN(plot_suite)
