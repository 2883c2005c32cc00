/* PNG charts: a small anti-aliased raster canvas with a built-in bitmap font, nice axis ticks,
 * and line, heatmap and grouped-bar charts drawn on it. PNG encoding is stb_image_write's. */
#include "minigrad/plot.h"

#include "minigrad/file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>
#include <stb_image_write.h>

#define MAX_SIDE 16384

struct mg_canvas {
    int w, h;
    int cx0, cy0, cx1, cy1; /* clip rectangle [cx0, cx1) x [cy0, cy1) */
    uint8_t *px;
};

static double clampd(double v, double lo, double hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static bool has_text(const char *s) {
    return s && *s;
}

mg_canvas *mg_canvas_new(int w, int h, uint32_t bg_rgb) {
    if (w < 1 || h < 1 || w > MAX_SIDE || h > MAX_SIDE) {
        mg_set_error(MG_ERR_INVALID, "mg_canvas_new: size %dx%d is outside 1..%d", w, h, MAX_SIDE);
        return NULL;
    }
    mg_canvas *c = malloc(sizeof *c);
    uint8_t *px = malloc((size_t)w * (size_t)h * 3);
    if (!c || !px) {
        free(c);
        free(px);
        mg_set_error(MG_ERR_NOMEM, "mg_canvas_new: no memory for %dx%d pixels", w, h);
        return NULL;
    }
    *c = (mg_canvas){.w = w, .h = h, .cx1 = w, .cy1 = h, .px = px};
    const uint8_t r = (uint8_t)(bg_rgb >> 16), g = (uint8_t)(bg_rgb >> 8), b = (uint8_t)bg_rgb;
    for (size_t i = 0, n = (size_t)w * (size_t)h; i < n; i++) {
        px[3 * i] = r;
        px[3 * i + 1] = g;
        px[3 * i + 2] = b;
    }
    return c;
}

void mg_canvas_free(mg_canvas *c) {
    if (!c) return;
    free(c->px);
    free(c);
}

int mg_canvas_width(const mg_canvas *c) {
    return c->w;
}
int mg_canvas_height(const mg_canvas *c) {
    return c->h;
}
uint8_t *mg_canvas_pixels(mg_canvas *c) {
    return c->px;
}

uint32_t mg_canvas_get(const mg_canvas *c, int x, int y) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return 0;
    const uint8_t *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

void mg_canvas_blit(mg_canvas *dst, const mg_canvas *src, int x, int y) {
    const int i0 = x < 0 ? -x : 0, i1 = src->w < dst->w - x ? src->w : dst->w - x;
    const int j0 = y < 0 ? -y : 0, j1 = src->h < dst->h - y ? src->h : dst->h - y;
    for (int j = j0; j < j1 && i0 < i1; j++)
        memcpy(dst->px + 3 * ((size_t)(y + j) * (size_t)dst->w + (size_t)(x + i0)),
               src->px + 3 * ((size_t)j * (size_t)src->w + (size_t)i0), 3 * (size_t)(i1 - i0));
}

void mg_canvas_set_clip(mg_canvas *c, double x, double y, double w, double h) {
    /* Whole pixels: a clip edge that cut pixels would need coverage bookkeeping for no gain. */
    c->cx0 = (int)clampd(floor(x + 0.5), 0, c->w);
    c->cy0 = (int)clampd(floor(y + 0.5), 0, c->h);
    c->cx1 = (int)clampd(floor(x + w + 0.5), c->cx0, c->w);
    c->cy1 = (int)clampd(floor(y + h + 0.5), c->cy0, c->h);
}

void mg_canvas_reset_clip(mg_canvas *c) {
    c->cx0 = c->cy0 = 0;
    c->cx1 = c->w;
    c->cy1 = c->h;
}

/* Caller guarantees (x, y) is inside the clip rectangle. */
static void blend_px(mg_canvas *c, int x, int y, uint32_t rgb, double a) {
    if (a <= 0) return;
    uint8_t *p = c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x);
    const int src[3] = {(int)(rgb >> 16) & 255, (int)(rgb >> 8) & 255, (int)rgb & 255};
    if (a >= 1) {
        for (int k = 0; k < 3; k++) p[k] = (uint8_t)src[k];
        return;
    }
    for (int k = 0; k < 3; k++) p[k] = (uint8_t)(p[k] + (src[k] - p[k]) * a + 0.5);
}

/* Integer pixel span [*i0, *i1) touched by [a, b), intersected with [lo, hi). */
static bool span(double a, double b, int lo, int hi, int *i0, int *i1) {
    if (!(b > a)) return false;
    double f0 = floor(a), f1 = ceil(b);
    if (f0 < lo) f0 = lo;
    if (f1 > hi) f1 = hi;
    if (f0 >= f1) return false;
    *i0 = (int)f0;
    *i1 = (int)f1;
    return true;
}

static double overlap(int i, double a, double b) {
    return fmin(i + 1.0, b) - fmax((double)i, a);
}

void mg_canvas_blend_rect(mg_canvas *c, double x, double y, double w, double h, uint32_t rgb,
                          double alpha) {
    int x0, x1, y0, y1;
    if (!(alpha > 0) || !span(x, x + w, c->cx0, c->cx1, &x0, &x1) ||
        !span(y, y + h, c->cy0, c->cy1, &y0, &y1))
        return;
    alpha = fmin(alpha, 1.0);
    for (int j = y0; j < y1; j++) {
        double cy = overlap(j, y, y + h);
        for (int i = x0; i < x1; i++) blend_px(c, i, j, rgb, alpha * cy * overlap(i, x, x + w));
    }
}

void mg_canvas_fill_rect(mg_canvas *c, double x, double y, double w, double h, uint32_t rgb) {
    mg_canvas_blend_rect(c, x, y, w, h, rgb, 1.0);
}

void mg_canvas_stroke_rect(mg_canvas *c, double x, double y, double w, double h, double t,
                           uint32_t rgb) {
    if (!(w > 0 && h > 0 && t > 0)) return;
    t = fmin(t, fmin(w, h) / 2);
    mg_canvas_fill_rect(c, x, y, w, t, rgb);
    mg_canvas_fill_rect(c, x, y + h - t, w, t, rgb);
    mg_canvas_fill_rect(c, x, y + t, t, h - 2 * t, rgb);
    mg_canvas_fill_rect(c, x + w - t, y + t, t, h - 2 * t, rgb);
}

/* ---- coverage masks: shapes are accumulated first and blended once, so that pieces which
 * overlap or abut (segments of a polyline, pixels of a glyph) do not darken each other's
 * anti-aliased edges. ---- */

typedef struct {
    int x0, y0, w, h; /* canvas pixels covered, already clipped */
    float *a;
} mask;

/* When memory runs out the mask has a == NULL and draws nothing: a chart missing a line is
 * better than an error path through every drawing primitive. */
static mask mask_new(const mg_canvas *c, double x0, double y0, double x1, double y1) {
    mask m = {0, 0, 0, 0, NULL};
    int i0, i1, j0, j1;
    if (!span(x0, x1, c->cx0, c->cx1, &i0, &i1) || !span(y0, y1, c->cy0, c->cy1, &j0, &j1))
        return m;
    m.a = calloc((size_t)(i1 - i0) * (size_t)(j1 - j0), sizeof(float));
    if (!m.a) return m;
    m.x0 = i0;
    m.y0 = j0;
    m.w = i1 - i0;
    m.h = j1 - j0;
    return m;
}

static void mask_blend(mg_canvas *c, mask *m, uint32_t rgb, double alpha) {
    if (!m->a) return;
    for (int j = 0; j < m->h; j++)
        for (int i = 0; i < m->w; i++) {
            float a = m->a[(size_t)j * (size_t)m->w + (size_t)i];
            if (a > 0) blend_px(c, m->x0 + i, m->y0 + j, rgb, alpha * fmin(a, 1.0));
        }
    free(m->a);
    m->a = NULL;
}

/* Adds the exact coverage of an axis-aligned rectangle. */
static void mask_add_rect(mask *m, double x, double y, double w, double h) {
    int i0, i1, j0, j1;
    if (!m->a || !span(x, x + w, m->x0, m->x0 + m->w, &i0, &i1) ||
        !span(y, y + h, m->y0, m->y0 + m->h, &j0, &j1))
        return;
    for (int j = j0; j < j1; j++) {
        double cy = overlap(j, y, y + h);
        float *row = m->a + (size_t)(j - m->y0) * (size_t)m->w - m->x0;
        for (int i = i0; i < i1; i++) row[i] += (float)(cy * overlap(i, x, x + w));
    }
}

/* Coverage of a capsule (a segment with round ends), approximated per pixel centre by its
 * distance to the segment; max() with what is there so joins stay smooth. */
static void mask_max_capsule(mask *m, double x0, double y0, double x1, double y1, double r) {
    int i0, i1, j0, j1;
    if (!m->a || !span(fmin(x0, x1) - r - 1, fmax(x0, x1) + r + 1, m->x0, m->x0 + m->w, &i0, &i1) ||
        !span(fmin(y0, y1) - r - 1, fmax(y0, y1) + r + 1, m->y0, m->y0 + m->h, &j0, &j1))
        return;
    const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    for (int j = j0; j < j1; j++) {
        float *row = m->a + (size_t)(j - m->y0) * (size_t)m->w - m->x0;
        const double py = j + 0.5 - y0;
        for (int i = i0; i < i1; i++) {
            const double px = i + 0.5 - x0;
            double t = len2 > 0 ? clampd((px * dx + py * dy) / len2, 0, 1) : 0;
            double ex = px - t * dx, ey = py - t * dy;
            double cov = clampd(r + 0.5 - sqrt(ex * ex + ey * ey), 0, 1);
            if (cov > row[i]) row[i] = (float)cov;
        }
    }
}

/* Lines thinner than a pixel are drawn one pixel wide and proportionally fainter. */
static void thin_line(double *thickness, double *alpha) {
    *alpha = 1;
    if (*thickness < 1) {
        *alpha = fmax(*thickness, 0);
        *thickness = 1;
    }
}

void mg_canvas_line(mg_canvas *c, double x0, double y0, double x1, double y1, double thickness,
                    uint32_t rgb) {
    mg_canvas_polyline(c, (const double[]){x0, x1}, (const double[]){y0, y1}, 2, thickness, rgb);
}

void mg_canvas_polyline(mg_canvas *c, const double *x, const double *y, int n, double thickness,
                        uint32_t rgb) {
    double alpha;
    thin_line(&thickness, &alpha);
    const double r = thickness / 2;
    double bx0 = INFINITY, by0 = INFINITY, bx1 = -INFINITY, by1 = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            bx0 = fmin(bx0, x[i]);
            bx1 = fmax(bx1, x[i]);
            by0 = fmin(by0, y[i]);
            by1 = fmax(by1, y[i]);
        }
    if (!(bx0 <= bx1)) return;
    mask m = mask_new(c, bx0 - r - 1, by0 - r - 1, bx1 + r + 1, by1 + r + 1);
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        bool prev = i > 0 && isfinite(x[i - 1]) && isfinite(y[i - 1]);
        bool next = i + 1 < n && isfinite(x[i + 1]) && isfinite(y[i + 1]);
        if (next)
            mask_max_capsule(&m, x[i], y[i], x[i + 1], y[i + 1], r);
        else if (!prev) /* an isolated point: a dot as wide as the line */
            mask_max_capsule(&m, x[i], y[i], x[i], y[i], r);
    }
    mask_blend(c, &m, rgb, alpha);
}

void mg_canvas_fill_circle(mg_canvas *c, double cx, double cy, double r, uint32_t rgb) {
    if (!(r > 0)) return;
    mask m = mask_new(c, cx - r - 1, cy - r - 1, cx + r + 1, cy + r + 1);
    mask_max_capsule(&m, cx, cy, cx, cy, r);
    mask_blend(c, &m, rgb, 1.0);
}

/* ---- the font: printable ASCII 32..126 and a box for anything else, drawn for this project on
 * a 5 x 13 grid (one blank row on top, capitals on rows 2..10, descenders on 11..12). Glyphs are
 * laid out 12 to a strip so the source reads as a picture. ---- */

enum { GLYPH_W = 5, GLYPH_H = 13, GLYPHS_PER_STRIP = 12, SPACE_ADVANCE = 4 };

// clang-format off
static const char *const font_strips[] = {
    /* sp ! " # $ % & ' ( ) * + */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ...#. .#... ..... .....",
    "..... ..#.. .#.#. ..... ..#.. ##..# .##.. ..#.. ..#.. ..#.. ..... .....",
    "..... ..#.. .#.#. .#.#. .#### ##..# #..#. ..#.. .#... ...#. ..#.. .....",
    "..... ..#.. .#.#. .#.#. #.#.. ...#. #..#. ..#.. .#... ...#. #.#.# .....",
    "..... ..#.. ..... ##### #.#.. ...#. .##.. ..... .#... ...#. .###. ..#..",
    "..... ..#.. ..... .#.#. .###. ..#.. .#... ..... .#... ...#. #.#.# ..#..",
    "..... ..#.. ..... .#.#. ..#.# .#... #.#.# ..... .#... ...#. ..#.. #####",
    "..... ..#.. ..... ##### ..#.# .#... #..#. ..... .#... ...#. ..... ..#..",
    "..... ..... ..... .#.#. ####. #..## #..#. ..... .#... ...#. ..... ..#..",
    "..... ..#.. ..... .#.#. ..#.. #..## .##.# ..... ..#.. ..#.. ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ...#. .#... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    /* , - . / 0 1 2 3 4 5 6 7 */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ....# .###. ..#.. .###. .###. ...#. ##### ..##. #####",
    "..... ..... ..... ....# #...# .##.. #...# #...# ..##. #.... .#... ....#",
    "..... ..... ..... ...#. #...# #.#.. ....# ....# .#.#. #.... #.... ....#",
    "..... ..... ..... ...#. #...# ..#.. ....# ....# #..#. ####. #.... ...#.",
    "..... ..... ..... ..#.. #...# ..#.. ...#. ..##. #..#. ....# ####. ...#.",
    "..... ####. ..... .#... #...# ..#.. ..#.. ....# ##### ....# #...# ..#..",
    "..... ..... ..... .#... #...# ..#.. .#... ....# ...#. ....# #...# ..#..",
    ".##.. ..... .##.. #.... #...# ..#.. #.... #...# ...#. #...# #...# ..#..",
    ".##.. ..... .##.. #.... .###. ##### ##### .###. ...#. .###. .###. ..#..",
    "..#.. ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    ".#... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    /* 8 9 : ; < = > ? @ A B C */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    ".###. .###. ..... ..... ..... ..... ..... .###. .###. ..#.. ####. .###.",
    "#...# #...# ..... ..... ..... ..... ..... #...# #...# .#.#. #...# #...#",
    "#...# #...# ..... ..... ....# ..... #.... ....# #.### #...# #...# #....",
    "#...# #...# .##.. .##.. ...#. ..... .#... ...#. #.#.# #...# #...# #....",
    ".###. .#### .##.. .##.. ..#.. ##### ..#.. ..#.. #.#.# #...# ####. #....",
    "#...# ....# ..... ..... .#... ..... ...#. ..#.. #.### ##### #...# #....",
    "#...# ....# ..... ..... ..#.. ##### ..#.. ..#.. #.... #...# #...# #....",
    "#...# ...#. .##.. .##.. ...#. ..... .#... ..... #...# #...# #...# #...#",
    ".###. .##.. .##.. .##.. ....# ..... #.... ..#.. .###. #...# ####. .###.",
    "..... ..... ..... ..#.. ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... .#... ..... ..... ..... ..... ..... ..... ..... .....",
    /* D E F G H I J K L M N O */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "###.. ##### ##### .###. #...# .###. ..### #...# #.... #...# #...# .###.",
    "#..#. #.... #.... #...# #...# ..#.. ...#. #...# #.... ##.## ##..# #...#",
    "#...# #.... #.... #.... #...# ..#.. ...#. #..#. #.... #.#.# ##..# #...#",
    "#...# #.... #.... #.... #...# ..#.. ...#. #.#.. #.... #.#.# #.#.# #...#",
    "#...# ####. ####. #.### ##### ..#.. ...#. ##... #.... #...# #.#.# #...#",
    "#...# #.... #.... #...# #...# ..#.. ...#. #.#.. #.... #...# #..## #...#",
    "#...# #.... #.... #...# #...# ..#.. ...#. #..#. #.... #...# #..## #...#",
    "#..#. #.... #.... #...# #...# ..#.. #..#. #...# #.... #...# #...# #...#",
    "###.. ##### #.... .###. #...# .###. .##.. #...# ##### #...# #...# .###.",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    /* P Q R S T U V W X Y Z [ */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .###.",
    "####. .###. ####. .###. ##### #...# #...# #...# #...# #...# ##### .#...",
    "#...# #...# #...# #...# ..#.. #...# #...# #...# #...# #...# ....# .#...",
    "#...# #...# #...# #.... ..#.. #...# #...# #...# .#.#. .#.#. ...#. .#...",
    "#...# #...# #...# #.... ..#.. #...# #...# #...# .#.#. .#.#. ...#. .#...",
    "####. #...# ####. .###. ..#.. #...# #...# #...# ..#.. ..#.. ..#.. .#...",
    "#.... #...# #.#.. ....# ..#.. #...# #...# #.#.# .#.#. ..#.. .#... .#...",
    "#.... #.#.# #..#. ....# ..#.. #...# .#.#. #.#.# .#.#. ..#.. .#... .#...",
    "#.... #..#. #...# #...# ..#.. #...# .#.#. ##.## #...# ..#.. #.... .#...",
    "#.... .##.# #...# .###. ..#.. .###. ..#.. #...# #...# ..#.. ##### .#...",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .###.",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    /* \ ] ^ _ ` a b c d e f g */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... .###. ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "#.... ...#. ..#.. ..... .#... ..... #.... ..... ....# ..... ..### .....",
    "#.... ...#. .#.#. ..... ..#.. ..... #.... ..... ....# ..... .#... .....",
    ".#... ...#. #...# ..... ..... ..... #.... ..... ....# ..... .#... .....",
    ".#... ...#. ..... ..... ..... .###. #.##. .###. .##.# .###. ####. .##.#",
    "..#.. ...#. ..... ..... ..... ....# ##..# #...# #..## #...# .#... #..##",
    "...#. ...#. ..... ..... ..... .#### #...# #.... #...# ##### .#... #...#",
    "...#. ...#. ..... ..... ..... #...# #...# #.... #...# #.... .#... #...#",
    "....# ...#. ..... ..... ..... #..## ##..# #...# #..## #...# .#... #..##",
    "....# ...#. ..... ..... ..... .##.# #.##. .###. .##.# .###. .#... .##.#",
    "..... .###. ..... ##### ..... ..... ..... ..... ..... ..... ..... ....#",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .###.",
    /* h i j k l m n o p q r s */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "#.... ..... ..... #.... .##.. ..... ..... ..... ..... ..... ..... .....",
    "#.... ..#.. ...#. #.... ..#.. ..... ..... ..... ..... ..... ..... .....",
    "#.... ..... ..... #.... ..#.. ..... ..... ..... ..... ..... ..... .....",
    "#.##. .##.. ..##. #..#. ..#.. ##.#. #.##. .###. #.##. .##.# #.##. .####",
    "##..# ..#.. ...#. #.#.. ..#.. #.#.# ##..# #...# ##..# #..## ##..# #....",
    "#...# ..#.. ...#. ##... ..#.. #.#.# #...# #...# #...# #...# #.... .###.",
    "#...# ..#.. ...#. #.#.. ..#.. #.#.# #...# #...# #...# #...# #.... ....#",
    "#...# ..#.. ...#. #..#. ..#.. #.#.# #...# #...# ##..# #..## #.... ....#",
    "#...# .###. ...#. #...# .###. #.#.# #...# .###. #.##. .##.# #.... ####.",
    "..... ..... #..#. ..... ..... ..... ..... ..... #.... ....# ..... .....",
    "..... ..... .##.. ..... ..... ..... ..... ..... #.... ....# ..... .....",
    /* t u v w x y z { | } ~ box */
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ...## ..#.. ##... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..#.. ..#.. ..#.. ..... #####",
    ".#... ..... ..... ..... ..... ..... ..... ..#.. ..#.. ..#.. ..... #...#",
    ".#... ..... ..... ..... ..... ..... ..... ..#.. ..#.. ..#.. ..... #...#",
    "####. #...# #...# #...# #...# #...# ##### ..#.. ..#.. ..#.. ..... #...#",
    ".#... #...# #...# #...# .#.#. #...# ...#. ##... ..#.. ...## .#..# #...#",
    ".#... #...# #...# #.#.# ..#.. #...# ..#.. ..#.. ..#.. ..#.. #.##. #...#",
    ".#... #...# .#.#. #.#.# ..#.. #...# .#... ..#.. ..#.. ..#.. ..... #...#",
    ".#... #..## .#.#. #.#.# .#.#. #..## #.... ..#.. ..#.. ..#.. ..... #...#",
    "..##. .##.# ..#.. .#.#. #...# .##.# ##### ..#.. ..#.. ..#.. ..... #####",
    "..... ..... ..... ..... ..... ....# ..... ...## ..#.. ##... ..... .....",
    "..... ..... ..... ..... ..... .###. ..... ..... ..... ..... ..... .....",
};
// clang-format on

#define N_GLYPHS (127 - 32 + 1) /* the last one is the box */
_Static_assert(sizeof font_strips / sizeof font_strips[0] ==
                   GLYPH_H * ((N_GLYPHS + GLYPHS_PER_STRIP - 1) / GLYPHS_PER_STRIP),
               "font strips are 13 rows each");

static int glyph_index(unsigned char ch) {
    return ch >= 32 && ch < 127 ? ch - 32 : N_GLYPHS - 1;
}

static bool glyph_ink(int g, int row, int col) {
    const char *s = font_strips[(g / GLYPHS_PER_STRIP) * GLYPH_H + row];
    return s[(g % GLYPHS_PER_STRIP) * (GLYPH_W + 1) + col] == '#';
}

/* Proportional spacing from the ink itself: glyph columns [*left, *right] are drawn. */
static void glyph_cols(int g, int *left, int *right) {
    *left = GLYPH_W;
    *right = -1;
    for (int col = 0; col < GLYPH_W; col++)
        for (int row = 0; row < GLYPH_H; row++)
            if (glyph_ink(g, row, col)) {
                if (col < *left) *left = col;
                *right = col;
                break;
            }
}

/* Bold doubles every stroke sideways by this many pixels. */
static double bold_px(double scale) {
    return fmax(1.0, floor(scale * 0.5 + 0.5));
}

/* Advance of one glyph in font pixels (before scaling); bold adds its offset after scaling. */
static int glyph_advance(int g) {
    int l, r;
    glyph_cols(g, &l, &r);
    return r < 0 ? SPACE_ADVANCE : r - l + 2;
}

static double line_width(const char *s, size_t len, double scale, bool bold) {
    if (len == 0) return 0;
    double w = 0;
    for (size_t i = 0; i < len; i++) {
        w += glyph_advance(glyph_index((unsigned char)s[i])) * scale;
        if (bold) w += bold_px(scale);
    }
    return w - scale; /* no spacing after the last glyph */
}

double mg_text_width(const char *text, double scale, bool bold) {
    if (!text) return 0;
    if (!(scale > 0)) scale = 1;
    double w = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, "\n");
        w = fmax(w, line_width(p, len, scale, bold));
        if (!p[len]) break;
        p += len + 1;
    }
    return w;
}

double mg_text_height(const char *text, double scale) {
    if (!(scale > 0)) scale = 1;
    int lines = 1;
    for (const char *p = text ? text : ""; *p; p++) lines += *p == '\n';
    return lines * GLYPH_H * scale;
}

void mg_canvas_text(mg_canvas *c, double x, double y, const char *text, double scale,
                    uint32_t rgb) {
    mg_text_style st = {.scale = scale, .rgb = rgb};
    mg_canvas_text_ex(c, x, y, text, &st);
}

void mg_canvas_text_ex(mg_canvas *c, double x, double y, const char *text,
                       const mg_text_style *style) {
    if (!text || !*text || !style) return;
    const double s = style->scale > 0 ? style->scale : 1;
    const double bw = style->bold ? bold_px(s) : 0;
    const double tw = mg_text_width(text, s, style->bold), th = mg_text_height(text, s);
    /* (ox, oy): canvas position of the text box's own top-left corner; (u, v) in text space map to
     * (ox + u, oy + v) or, rotated counter-clockwise, to (ox + v, oy - u). */
    double ox, oy;
    mask m;
    if (style->vertical) {
        double left = x - style->align_x * th, top = y - style->align_y * tw;
        ox = left;
        oy = top + tw;
        m = mask_new(c, left, top, left + th, top + tw);
    } else {
        ox = x - style->align_x * tw;
        oy = y - style->align_y * th;
        m = mask_new(c, ox, oy, ox + tw, oy + th);
    }
    double pen_v = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, "\n");
        double pen_u = 0;
        for (size_t k = 0; k < len; k++) {
            int g = glyph_index((unsigned char)p[k]), l, r;
            glyph_cols(g, &l, &r);
            for (int row = 0; row < GLYPH_H && r >= 0; row++)
                for (int col = l; col <= r; col++) {
                    if (!glyph_ink(g, row, col)) continue;
                    int end = col; /* a run of ink becomes one rectangle */
                    while (end + 1 <= r && glyph_ink(g, row, end + 1)) end++;
                    double u = pen_u + (col - l) * s, v = pen_v + row * s;
                    double w = (end - col + 1) * s + bw, h = s;
                    if (style->vertical)
                        mask_add_rect(&m, ox + v, oy - u - w, h, w);
                    else
                        mask_add_rect(&m, ox + u, oy + v, w, h);
                    col = end;
                }
            pen_u += glyph_advance(g) * s + bw;
        }
        if (!p[len]) break;
        p += len + 1;
        pen_v += GLYPH_H * s;
    }
    mask_blend(c, &m, style->rgb, 1.0);
}

/* ---- PNG output ---- */

/* stb hands the encoded bytes over in pieces; a failed write shows in the stream's error state,
 * which mg_outfile_commit checks. */
static void png_write(void *ctx, void *data, int size) {
    if (size > 0) fwrite(data, 1, (size_t)size, ctx);
}

mg_status mg_canvas_save_png(const mg_canvas *c, const char *path) {
    if (!c || !path || !*path)
        return mg_set_error(MG_ERR_INVALID, "mg_canvas_save_png: %s",
                            !c ? "canvas is NULL" : "no output path given");
    mg_outfile o;
    mg_status st = mg_outfile_open(&o, path);
    if (st != MG_OK) return st;
    /* stb_image_write returns 0 when the encoder itself fails (it ran out of memory) */
    if (!stbi_write_png_to_func(png_write, o.f, c->w, c->h, 3, c->px, c->w * 3)) {
        mg_outfile_discard(&o);
        return mg_set_error(MG_ERR_NOMEM, "%s: the PNG encoder ran out of memory (%dx%d)", path, c->w, c->h);
    }
    return mg_outfile_commit(&o);
}

mg_status mg_canvas_load_png(const char *path, mg_canvas **out) {
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_canvas_load_png: out is NULL");
    *out = NULL;
    if (!has_text(path)) return mg_set_error(MG_ERR_INVALID, "mg_canvas_load_png: no path given");
    FILE *f = fopen(path, "rb");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int w = 0, h = 0, n = 0;
    uint8_t *px = stbi_load_from_file(f, &w, &h, &n, 3);
    fclose(f);
    if (!px)
        return mg_set_error(MG_ERR_FORMAT, "%s: not a decodable image: %s", path,
                            stbi_failure_reason());
    mg_canvas *c = NULL;
    if (w > MAX_SIDE || h > MAX_SIDE) {
        stbi_image_free(px);
        return mg_set_error(MG_ERR_FORMAT, "%s: image of %dx%d is larger than %d on a side", path,
                            w, h, MAX_SIDE);
    }
    if (!(c = mg_canvas_new(w, h, 0))) {
        stbi_image_free(px);
        return mg_wrap_error(MG_ERR_NOMEM, "%s", path);
    }
    memcpy(c->px, px, (size_t)w * (size_t)h * 3);
    stbi_image_free(px);
    *out = c;
    return MG_OK;
}

/* ---- ticks ---- */

/* 10^k exactly for the k a tick step can have; division by it (for negative k) rounds once, so
 * that 3 * 0.1 prints as 0.3 rather than 0.30000000000000004. */
static double pow10i(int k) {
    int m = k < 0 ? -k : k;
    if (m > 22) return pow(10, m); /* beyond 1e22 powers of ten are not exact doubles anyway */
    double p = 1;
    for (int i = 0; i < m; i++) p *= 10;
    return p;
}

static double tick_value(double i, double mant, int e) {
    if (i == 0) return 0; /* never -0 */
    return e >= 0 ? i * mant * pow10i(e) : i * mant / pow10i(-e);
}

/* tight: ticks only inside [lo, hi], which stays the axis range; otherwise the range grows
 * outwards to whole steps. */
static mg_status ticks_linear(double lo, double hi, int target, bool tight, mg_plot_ticks *t) {
    if (!t) return mg_set_error(MG_ERR_INVALID, "mg_plot_nice_ticks: output is NULL");
    if (!isfinite(lo) || !isfinite(hi))
        return mg_set_error(MG_ERR_INVALID, "mg_plot_nice_ticks: range [%g, %g] is not finite", lo,
                            hi);
    if (lo > hi) {
        double s = lo;
        lo = hi;
        hi = s;
    }
    target = target < 1 ? 1 : target > 20 ? 20 : target;
    if (fabs(lo) < 1e-290) lo = 0; /* keeps every step a normal double */
    if (fabs(hi) < 1e-290) hi = 0;
    const double mag = fmax(fabs(lo), fabs(hi));
    if (!isfinite(hi - lo) || mag > 1e300)
        return mg_set_error(MG_ERR_INVALID, "mg_plot_nice_ticks: range [%g, %g] is too wide", lo,
                            hi);
    if (hi - lo <= mag * 1e-12) { /* flat data still gets an axis around its value */
        double d = mag > 0 ? mag * 0.1 : 1;
        lo -= d;
        hi += d;
    }
    double raw = (hi - lo) / target;
    for (;;) {
        int e = (int)floor(log10(raw));
        double f = raw / pow(10, e);
        double mant = f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10;
        double step = mant * pow(10, e), i0, i1;
        if (tight) {
            i0 = ceil(lo / step - 1e-9);
            i1 = floor(hi / step + 1e-9);
        } else {
            i0 = floor(lo / step + 1e-9);
            i1 = ceil(hi / step - 1e-9);
        }
        if (!tight) { /* rounding must not leave the data a hair outside the range */
            while (i0 > -1e15 && tick_value(i0, mant, e) > lo) i0--;
            while (i1 < 1e15 && tick_value(i1, mant, e) < hi) i1++;
        }
        if (i1 - i0 + 1 > MG_PLOT_MAX_TICKS) {
            raw = step * 1.5;
            continue;
        }
        t->n = i1 >= i0 ? (int)(i1 - i0) + 1 : 0;
        for (int k = 0; k < t->n; k++) t->v[k] = tick_value(i0 + k, mant, e);
        t->step = tick_value(1, mant, e);
        t->lo = tight ? lo : tick_value(i0, mant, e);
        t->hi = tight ? hi : tick_value(i1, mant, e);
        t->log = false;
        return MG_OK;
    }
}

mg_status mg_plot_nice_ticks(double lo, double hi, int target, mg_plot_ticks *out) {
    return ticks_linear(lo, hi, target, false, out);
}

mg_status mg_plot_log_ticks(double lo, double hi, int target, mg_plot_ticks *t) {
    if (!t) return mg_set_error(MG_ERR_INVALID, "mg_plot_log_ticks: output is NULL");
    if (lo > hi) {
        double s = lo;
        lo = hi;
        hi = s;
    }
    if (!(lo >= 1e-300 && hi <= 1e300)) /* so that the decades around them are normal doubles */
        return mg_set_error(MG_ERR_INVALID,
                            "mg_plot_log_ticks: range [%g, %g] must be positive and within "
                            "1e-300..1e300",
                            lo, hi);
    target = target < 1 ? 1 : target > 20 ? 20 : target;
    double la = log10(lo), lb = log10(hi);
    if (lb - la < 1e-9) {
        la -= 0.5;
        lb += 0.5;
    }
    int d0 = (int)floor(la + 1e-9), d1 = (int)ceil(lb - 1e-9);
    t->log = true;
    if (d1 - d0 <= 2) {
        /* Few decades: ticks at 1, 2, 5 x 10^k (or every mantissa when that gives too few). */
        static const int m125[] = {1, 2, 5}, m19[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        for (int pass = 0; pass < 2; pass++) {
            const int *ms = pass ? m19 : m125, nm = pass ? 9 : 3;
            double a = 0, b = 0;
            int n = 0;
            for (int d = d0 - 1; d <= d1; d++)
                for (int k = 0; k < nm; k++) {
                    double v = tick_value(ms[k], 1, d), lv = log10(v);
                    if (lv <= la + 1e-9) a = v; /* the last candidate at or below lo */
                    if (lv >= lb - 1e-9 && b == 0) b = v;
                }
            for (int d = d0 - 1; d <= d1; d++)
                for (int k = 0; k < nm; k++) {
                    double v = tick_value(ms[k], 1, d);
                    if (v >= a * (1 - 1e-12) && v <= b * (1 + 1e-12) && n < MG_PLOT_MAX_TICKS)
                        t->v[n++] = v;
                }
            t->n = n;
            t->lo = a;
            t->hi = b;
            t->step = 0;
            if (n >= 3) break;
        }
        return MG_OK;
    }
    /* Every k-th decade, at multiples of k so that 10^0 is a tick; the range grows to the outer
     * ticks unless that would leave the doubles, and then it stays at the data's decades. */
    int k = (d1 - d0 + target - 1) / target, a0, a1;
    for (k = k < 1 ? 1 : k;; k++) {
        a0 = (int)floor((double)d0 / k) * k;
        a1 = (int)ceil((double)d1 / k) * k;
        if ((a1 - a0) / k + 1 <= MG_PLOT_MAX_TICKS) break;
    }
    const bool grow = a0 >= -300 && a1 <= 300;
    t->n = 0;
    for (int d = a0; d <= a1; d += k)
        if (grow || (d >= d0 && d <= d1)) t->v[t->n++] = tick_value(1, 1, d);
    t->lo = tick_value(1, 1, grow ? a0 : d0);
    t->hi = tick_value(1, 1, grow ? a1 : d1);
    t->step = k;
    return MG_OK;
}

static int exponent10(double v) {
    return (int)floor(log10(fabs(v)) + 1e-9);
}

/* "2.50" -> "2.5", "3.0" -> "3": a label printed on its own needs no trailing zeros. */
static void strip_zeros(char *s) {
    if (!strchr(s, '.')) return;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '0') s[--n] = 0;
    if (n > 0 && s[n - 1] == '.') s[--n] = 0;
}

void mg_plot_tick_label(const mg_plot_ticks *t, double v, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    if (!t || !isfinite(v) || (t->log && !(v > 0))) {
        snprintf(buf, cap, "%g", v);
        return;
    }
    int e = v != 0 ? exponent10(v) : 0;
    if (t->log) {
        if (e >= -4 && e <= 5)
            snprintf(buf, cap, "%.*f", e < 0 ? -e : 0, v);
        else
            snprintf(buf, cap, "%.0fe%d", v / pow(10, e), e);
        return;
    }
    const int es = exponent10(t->step);
    if (fabs(v) < t->step * 1e-6) v = 0;
    const double big = fmax(fabs(t->lo), fabs(t->hi));
    if (v != 0 && big >= 1e4 && big < 1e15 && e >= 3) {
        /* Thousands and up with a suffix (2.5k, 800k, 1.2M): short, and what benchmark readers
         * expect. Each label picks its own suffix. */
        static const char suffix[] = "kMGT";
        int g = e / 3, dec = 3 * g - es > 0 ? 3 * g - es : 0;
        snprintf(buf, cap, "%.*f", dec, v / pow(10, 3 * g));
        strip_zeros(buf);
        size_t len = strlen(buf);
        if (len + 1 < cap) {
            buf[len] = suffix[g - 1];
            buf[len + 1] = 0;
        }
        return;
    }
    if (v != 0 && (big >= 1e15 || es < -4)) {
        /* Each label in its own shortest scientific form with the digits the step needs: 2e-5,
         * 2.5e-5. */
        int dec = e - es > 0 ? e - es : 0;
        double mant = v / pow(10, e);
        if (fabs(mant) >= 10 - 0.5 * pow(10, -dec)) { /* would round up to 10.0 */
            mant /= 10;
            e++;
        }
        snprintf(buf, cap, "%.*f", dec, mant);
        strip_zeros(buf);
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "e%d", e);
        return;
    }
    /* Zero gets the decimals of its neighbours ("0.5", "0.0", "-0.5") unless they are scientific.
     */
    snprintf(buf, cap, "%.*f", es < 0 && es >= -4 ? -es : 0, v);
}

/* ---- chart scaffolding ---- */

enum {
    C_BG = 0xFFFFFF,
    C_TEXT = 0x1E1E1E,
    C_TICK_TEXT = 0x3C3C3C,
    C_FRAME = 0x707070,
    C_GRID = 0xE6E6E6,
    C_MINOR_GRID = 0xF3F3F3,
    C_NAN = 0xC8C8C8,
};

uint32_t mg_plot_color(int i) {
    /* The ten "tableau" category colours: distinct in hue and lightness. */
    static const uint32_t pal[10] = {0x1F77B4, 0xFF7F0E, 0x2CA02C, 0xD62728, 0x9467BD,
                                     0x8C564B, 0xE377C2, 0x7F7F7F, 0xBCBD22, 0x17BECF};
    return pal[((i % 10) + 10) % 10];
}

static mg_status resolve_opts(const char *fn, const mg_plot_opts *in, mg_plot_opts *o) {
    *o = in ? *in : (mg_plot_opts){0};
    if (o->width == 0) o->width = 800;
    if (o->height == 0) o->height = 500;
    if (o->width < 200 || o->height < 200 || o->width > MAX_SIDE || o->height > MAX_SIDE)
        return mg_set_error(MG_ERR_INVALID, "%s: image size %dx%d is outside 200..%d", fn, o->width,
                            o->height, MAX_SIDE);
    if (o->y_fixed && !(isfinite(o->y_min) && isfinite(o->y_max) && o->y_min < o->y_max))
        return mg_set_error(MG_ERR_INVALID, "%s: fixed y range [%g, %g] is empty or not finite", fn,
                            o->y_min, o->y_max);
    return MG_OK;
}

static mg_status check_path(const char *fn, const char *path) {
    return has_text(path) ? MG_OK : mg_set_error(MG_ERR_INVALID, "%s: no output path given", fn);
}

/* Everything a chart needs to place things: the image, a scale for text and strokes that grows
 * with large images, and the plot area inside its frame. The frame's lines lie just outside the
 * area: columns x0 - 1 and x0 + w, rows y0 - 1 and y0 + h. */
typedef struct {
    mg_canvas *c;
    const mg_plot_opts *o;
    double ui, pad, tick_len, title_h, label_h, tick_h;
    int x0, y0, w, h;
    double ytick_w; /* widest label left of the plot area */
    double xtick_h; /* height of the labels below it */
} chart;

static mg_status chart_begin(chart *ch, const char *fn, const mg_plot_opts *o) {
    *ch = (chart){.o = o};
    ch->ui = fmax(1, floor(fmin(o->width / 800.0, o->height / 500.0) + 0.25));
    ch->c = mg_canvas_new(o->width, o->height, C_BG);
    if (!ch->c) return mg_wrap_error(MG_ERR_NOMEM, "%s", fn);
    ch->pad = 14 * ch->ui;
    ch->tick_len = 5 * ch->ui;
    ch->title_h = mg_text_height("", 2 * ch->ui);
    ch->label_h = mg_text_height("", ch->ui);
    ch->tick_h = mg_text_height("", ch->ui);
    return MG_OK;
}

static mg_status chart_end(chart *ch, const char *path) {
    mg_status st = mg_canvas_save_png(ch->c, path);
    mg_canvas_free(ch->c);
    ch->c = NULL;
    return st;
}

static void text_at(const chart *ch, double x, double y, const char *s, double scale, uint32_t rgb,
                    double ax, double ay, bool bold, bool vertical) {
    mg_text_style st = {scale * ch->ui, rgb, ax, ay, bold, vertical};
    mg_canvas_text_ex(ch->c, x, y, s, &st);
}

static double text_w(const chart *ch, const char *s, double scale, bool bold) {
    return mg_text_width(s, scale * ch->ui, bold);
}

/* Space above the plot area taken by the title (and `extra`, e.g. a legend). */
static double top_margin(const chart *ch, double extra) {
    double top = ch->pad + extra;
    if (has_text(ch->o->title)) top += ch->title_h + 6 * ch->ui;
    return top + (extra > 0 ? 6 * ch->ui : 4 * ch->ui);
}

static void draw_title(const chart *ch) {
    if (!has_text(ch->o->title)) return;
    /* Centred on the plot area, as the eye expects, unless that would push it off the image. */
    double cx = ch->x0 + ch->w / 2.0, half = text_w(ch, ch->o->title, 2, true) / 2;
    cx = clampd(cx, half + ch->pad / 2, ch->o->width - half - ch->pad / 2);
    text_at(ch, cx, ch->pad, ch->o->title, 2, C_TEXT, 0.5, 0, true, false);
}

static double left_margin(const chart *ch, double tick_label_w) {
    double left = ch->pad + tick_label_w + 4 * ch->ui + ch->tick_len + 1;
    if (has_text(ch->o->ylabel)) left += ch->label_h + 8 * ch->ui;
    return left;
}

static double bottom_margin(const chart *ch, double tick_band_h) {
    double b = ch->pad + ch->tick_len + 1 + 3 * ch->ui + tick_band_h;
    if (has_text(ch->o->xlabel)) b += ch->label_h + 6 * ch->ui;
    return b;
}

/* Axis titles sit just outside the tick labels (not at the image edge, which may be far away
 * when the plot area is centred). */
static void draw_axis_labels(const chart *ch) {
    if (has_text(ch->o->xlabel))
        text_at(ch, ch->x0 + ch->w / 2.0,
                ch->y0 + ch->h + 1 + ch->tick_len + 3 * ch->ui + ch->xtick_h + 6 * ch->ui,
                ch->o->xlabel, 1, C_TEXT, 0.5, 0, true, false);
    if (has_text(ch->o->ylabel))
        text_at(ch, ch->x0 - (left_margin(ch, ch->ytick_w) - ch->pad), ch->y0 + ch->h / 2.0,
                ch->o->ylabel, 1, C_TEXT, 0, 0.5, true, true);
}

static void draw_frame(const chart *ch) {
    mg_canvas_stroke_rect(ch->c, ch->x0 - 1, ch->y0 - 1, ch->w + 2, ch->h + 2, 1, C_FRAME);
}

/* Canvas coordinate of an axis value: the range's ends fall on the frame lines' centres. */
static double axis_frac(const mg_plot_ticks *t, double v) {
    if (t->log) return (log10(v) - log10(t->lo)) / (log10(t->hi) - log10(t->lo));
    return (v - t->lo) / (t->hi - t->lo);
}
static double map_x(const chart *ch, const mg_plot_ticks *t, double v) {
    return ch->x0 - 0.5 + axis_frac(t, v) * (ch->w + 1);
}
static double map_y(const chart *ch, const mg_plot_ticks *t, double v) {
    return ch->y0 + ch->h + 0.5 - axis_frac(t, v) * (ch->h + 1);
}

static double max_label_w(const chart *ch, const mg_plot_ticks *t) {
    double w = 0;
    char buf[64];
    for (int i = 0; i < t->n; i++) {
        mg_plot_tick_label(t, t->v[i], buf, sizeof buf);
        w = fmax(w, text_w(ch, buf, 1, false));
    }
    return w;
}

/* The value axis on the left: ticks for about one label per 45 px of height. */
static mg_status value_ticks(const chart *ch, double lo, double hi, double plot_h,
                             mg_plot_ticks *t) {
    int target = (int)clampd(plot_h / (45 * ch->ui), 2, 10);
    if (ch->o->y_fixed)
        return ch->o->log_y ? mg_plot_log_ticks(ch->o->y_min, ch->o->y_max, target, t)
                            : ticks_linear(ch->o->y_min, ch->o->y_max, target, true, t);
    return ch->o->log_y ? mg_plot_log_ticks(lo, hi, target, t)
                        : mg_plot_nice_ticks(lo, hi, target, t);
}

/* Horizontal grid, tick marks and labels of the value axis. */
static void draw_value_axis(const chart *ch, const mg_plot_ticks *t) {
    char buf[64];
    if (t->log && t->step <= 1 && t->step != 0) { /* faint 2..9 lines inside each decade */
        for (int i = 0; i + 1 < t->n; i++)
            for (int m = 2; m <= 9; m++) {
                double y = floor(map_y(ch, t, t->v[i] * m));
                if (y > ch->y0 && y < ch->y0 + ch->h - 1)
                    mg_canvas_fill_rect(ch->c, ch->x0, y, ch->w, 1, C_MINOR_GRID);
            }
    }
    for (int i = 0; i < t->n; i++) {
        double y = floor(map_y(ch, t, t->v[i]));
        if (y >= ch->y0 && y < ch->y0 + ch->h)
            mg_canvas_fill_rect(ch->c, ch->x0, y, ch->w, 1, C_GRID);
        mg_canvas_fill_rect(ch->c, ch->x0 - 1 - ch->tick_len, y, ch->tick_len, 1, C_FRAME);
        mg_plot_tick_label(t, t->v[i], buf, sizeof buf);
        text_at(ch, ch->x0 - 1 - ch->tick_len - 4 * ch->ui, y + 0.5, buf, 1, C_TICK_TEXT, 1, 0.5,
                false, false);
    }
}

/* ---- legends ---- */

/* How much of a rectangle is already inked (neither background nor grid): where a legend hides
 * the least data. */
static long inked(const mg_canvas *c, double x, double y, double w, double h) {
    long n = 0;
    for (int j = (int)y; j < (int)(y + h); j++)
        for (int i = (int)x; i < (int)(x + w); i++) {
            uint32_t p = mg_canvas_get(c, i, j);
            n += p != C_BG && p != C_GRID && p != C_MINOR_GRID;
        }
    return n;
}

/* A boxed legend inside the plot area, in the corner where it covers the least data. */
static void draw_legend_inside(const chart *ch, const mg_plot_series *series, int n_series) {
    const double ui = ch->ui, row = 16 * ui, swatch = 22 * ui, gap = 6 * ui, bpad = 8 * ui;
    double lw = 0;
    int rows = 0;
    for (int i = 0; i < n_series; i++)
        if (has_text(series[i].label)) {
            lw = fmax(lw, text_w(ch, series[i].label, 1, false));
            rows++;
        }
    if (rows == 0) return;
    const double bw = ceil(2 * bpad + swatch + gap + lw), bh = ceil(2 * bpad + rows * row - 3 * ui);
    const double inset = 8 * ui;
    const double xs[4] = {ch->x0 + ch->w - inset - bw, ch->x0 + inset, ch->x0 + ch->w - inset - bw,
                          ch->x0 + inset};
    const double ys[4] = {ch->y0 + inset, ch->y0 + inset, ch->y0 + ch->h - inset - bh,
                          ch->y0 + ch->h - inset - bh};
    int best = 0;
    long best_ink = -1;
    for (int k = 0; k < 4; k++) {
        long ink = inked(ch->c, xs[k], ys[k], bw, bh);
        if (best_ink < 0 || ink < best_ink) {
            best = k;
            best_ink = ink;
        }
    }
    const double x = xs[best], y = ys[best];
    mg_canvas_blend_rect(ch->c, x, y, bw, bh, C_BG, 0.88);
    mg_canvas_stroke_rect(ch->c, x, y, bw, bh, 1, 0xCCCCCC);
    double ty = y + bpad;
    for (int i = 0; i < n_series; i++) {
        if (!has_text(series[i].label)) continue;
        double mid = ty + ch->label_h / 2;
        mg_canvas_fill_rect(ch->c, floor(x + bpad), floor(mid) - ui, swatch, 2 * ui,
                            mg_plot_color(i));
        text_at(ch, x + bpad + swatch + gap, mid, series[i].label, 1, C_TEXT, 0, 0.5, false, false);
        ty += row;
    }
}

/* Legend laid out in rows of colour squares and labels, wrapped to `max_w`; returns its height
 * and draws it only when `draw` (centred on cx, top at y). */
static double legend_rows(const chart *ch, const char *const *labels, int n, double max_w,
                          bool draw, double cx, double y) {
    const double ui = ch->ui, sq = 10 * ui, gap = 5 * ui, sep = 18 * ui, row = 17 * ui;
    double h = 0;
    int i = 0;
    while (i < n) {
        double w = 0;
        int j = i;
        for (; j < n; j++) { /* as many entries as fit on this row, at least one */
            double ew = sq + gap + text_w(ch, labels[j] ? labels[j] : "", 1, false);
            if (j > i && w + sep + ew > max_w) break;
            w += (j > i ? sep : 0) + ew;
        }
        if (draw) {
            double x = cx - w / 2, mid = y + h + ch->label_h / 2;
            for (int k = i; k < j; k++) {
                mg_canvas_fill_rect(ch->c, floor(x), floor(mid - sq / 2), sq, sq, mg_plot_color(k));
                text_at(ch, floor(x) + sq + gap, mid, labels[k], 1, C_TEXT, 0, 0.5, false, false);
                x += sq + gap + text_w(ch, labels[k] ? labels[k] : "", 1, false) + sep;
            }
        }
        h += row;
        i = j;
    }
    return h > 0 ? h - row + ch->label_h : 0;
}

/* ---- line charts ---- */

static bool point_ok(const mg_plot_series *s, int i, bool log_y) {
    double x = s->x ? s->x[i] : i, y = s->y[i];
    return isfinite(x) && isfinite(y) && (!log_y || y > 0);
}

/* The x ticks with the most labels that do not crowd each other. */
static mg_status x_ticks(const chart *ch, double lo, double hi, mg_plot_ticks *t) {
    char a[64], b[64];
    for (int target = (int)clampd(ch->w / (100 * ch->ui), 2, 12);; target--) {
        mg_status st = mg_plot_nice_ticks(lo, hi, target, t);
        if (st != MG_OK || target <= 1) return st;
        bool crowded = false;
        for (int i = 0; i + 1 < t->n && !crowded; i++) {
            mg_plot_tick_label(t, t->v[i], a, sizeof a);
            mg_plot_tick_label(t, t->v[i + 1], b, sizeof b);
            double room = map_x(ch, t, t->v[i + 1]) - map_x(ch, t, t->v[i]);
            crowded = room < (text_w(ch, a, 1, false) + text_w(ch, b, 1, false)) / 2 + 12 * ch->ui;
        }
        if (!crowded) return MG_OK;
    }
}

static void draw_x_axis(const chart *ch, const mg_plot_ticks *t) {
    char buf[64];
    for (int i = 0; i < t->n; i++) {
        double x = floor(map_x(ch, t, t->v[i]));
        if (x >= ch->x0 && x < ch->x0 + ch->w)
            mg_canvas_fill_rect(ch->c, x, ch->y0, 1, ch->h, C_GRID);
        mg_canvas_fill_rect(ch->c, x, ch->y0 + ch->h + 1, 1, ch->tick_len, C_FRAME);
        mg_plot_tick_label(t, t->v[i], buf, sizeof buf);
        text_at(ch, x + 0.5, ch->y0 + ch->h + 1 + ch->tick_len + 3 * ch->ui, buf, 1, C_TICK_TEXT,
                0.5, 0, false, false);
    }
}

mg_status mg_plot_lines(const char *path, const mg_plot_opts *opts, const mg_plot_series *series,
                        int n_series) {
    static const char fn[] = "mg_plot_lines";
    mg_plot_opts o;
    mg_status st = check_path(fn, path);
    if (st != MG_OK) return st;
    if (!series || n_series < 1)
        return mg_set_error(MG_ERR_INVALID, "%s: %s: need at least one series", path,
                            !series ? "series is NULL" : "n_series < 1");
    for (int i = 0; i < n_series; i++)
        if (series[i].n < 0 || (series[i].n > 0 && !series[i].y))
            return mg_set_error(MG_ERR_INVALID, "%s: series %d (\"%s\"): %s", path, i,
                                series[i].label ? series[i].label : "",
                                series[i].n < 0 ? "negative point count" : "y is NULL");
    if ((st = resolve_opts(fn, opts, &o)) != MG_OK) return st;
    if (o.log_y && o.y_fixed && !(o.y_min > 0))
        return mg_set_error(MG_ERR_INVALID, "%s: log scale needs y_min > 0, got %g", path, o.y_min);

    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++)
            if (point_ok(&series[s], i, o.log_y)) {
                double x = series[s].x ? series[s].x[i] : i, y = series[s].y[i];
                xlo = fmin(xlo, x);
                xhi = fmax(xhi, x);
                ylo = fmin(ylo, y);
                yhi = fmax(yhi, y);
            }
    if (!(xlo <= xhi)) { /* nothing to draw: an empty frame with a sane default range */
        xlo = 0;
        xhi = 1;
        ylo = o.log_y ? 1 : 0;
        yhi = o.log_y ? 10 : 1;
    }

    chart ch;
    if ((st = chart_begin(&ch, fn, &o)) != MG_OK) return st;
    ch.xtick_h = ch.tick_h;
    const double top = top_margin(&ch, 0), bottom = bottom_margin(&ch, ch.xtick_h);
    mg_plot_ticks yt, xt;
    if ((st = value_ticks(&ch, ylo, yhi, o.height - top - bottom, &yt)) != MG_OK) goto fail;
    ch.ytick_w = max_label_w(&ch, &yt);
    ch.x0 = (int)ceil(left_margin(&ch, ch.ytick_w));
    ch.y0 = (int)ceil(top);
    ch.h = o.height - ch.y0 - (int)ceil(bottom);
    double right = ch.pad * 1.5;
    for (int pass = 0; pass < 2; pass++) { /* the last x label may need a wider right margin */
        ch.w = o.width - ch.x0 - (int)ceil(right);
        if ((st = x_ticks(&ch, xlo, xhi, &xt)) != MG_OK) goto fail;
        char buf[64];
        mg_plot_tick_label(&xt, xt.v[xt.n - 1], buf, sizeof buf);
        double need = text_w(&ch, buf, 1, false) / 2 + 4 * ch.ui;
        if (need <= right) break;
        right = need;
    }
    if (ch.w < 20 || ch.h < 20) {
        st = mg_set_error(MG_ERR_INVALID, "%s: %dx%d leaves no room for the plot area", path,
                          o.width, o.height);
        goto fail;
    }

    draw_value_axis(&ch, &yt);
    draw_x_axis(&ch, &xt);
    mg_canvas_set_clip(ch.c, ch.x0 - 1, ch.y0 - 1, ch.w + 2, ch.h + 2);
    for (int s = 0; s < n_series; s++) {
        const mg_plot_series *se = &series[s];
        if (se->n == 0) continue;
        double *px = malloc(2 * (size_t)se->n * sizeof(double)), *py = px + se->n;
        if (!px) {
            st = mg_set_error(MG_ERR_NOMEM, "%s: no memory for series %d (%d points)", path, s,
                              se->n);
            goto fail;
        }
        int valid = 0;
        double len = 0;
        for (int i = 0; i < se->n; i++) {
            px[i] = py[i] = NAN;
            if (!point_ok(se, i, o.log_y)) continue;
            px[i] = map_x(&ch, &xt, se->x ? se->x[i] : i);
            py[i] = map_y(&ch, &yt, se->y[i]);
            if (i > 0 && isfinite(px[i - 1])) len += hypot(px[i] - px[i - 1], py[i] - py[i - 1]);
            valid++;
        }
        const uint32_t col = mg_plot_color(s);
        mg_canvas_polyline(ch.c, px, py, se->n, 2 * ch.ui, col);
        /* Sparse curves (evaluations every few hundred steps) get a dot on each point; isolated
         * points always do, or they would vanish. */
        bool dots = valid > 1 && len / (valid - 1) >= 14 * ch.ui;
        for (int i = 0; i < se->n; i++) {
            if (!isfinite(px[i])) continue;
            bool alone =
                (i == 0 || !isfinite(px[i - 1])) && (i + 1 == se->n || !isfinite(px[i + 1]));
            if (dots || alone) mg_canvas_fill_circle(ch.c, px[i], py[i], 3 * ch.ui, col);
        }
        free(px);
    }
    mg_canvas_reset_clip(ch.c);
    draw_frame(&ch);
    draw_legend_inside(&ch, series, n_series);
    draw_title(&ch);
    draw_axis_labels(&ch);
    return chart_end(&ch, path);
fail:
    mg_canvas_free(ch.c);
    return st;
}

/* ---- heatmaps ---- */

static void colormap_rgb(mg_colormap cm, double t, double rgb[3]) {
    /* Anchors sampled from viridis (dark blue to yellow) and from ColorBrewer's RdBu (blue - white
     * - red); linear interpolation between them is smooth enough for a chart. */
    static const uint32_t viridis[9] = {0x440154, 0x472D7B, 0x3B528B, 0x2C728E, 0x21918C,
                                        0x28AE80, 0x5EC962, 0xADDC30, 0xFDE725};
    static const uint32_t rdbu[7] = {0x2166AC, 0x67A9CF, 0xD1E5F0, 0xF7F7F7,
                                     0xFDDBC7, 0xEF8A62, 0xB2182B};
    const uint32_t *a = cm == MG_CMAP_DIVERGING ? rdbu : viridis;
    const int n = cm == MG_CMAP_DIVERGING ? 7 : 9;
    double f = clampd(t, 0, 1) * (n - 1);
    int k = (int)fmin(f, n - 2);
    f -= k;
    for (int ch = 0; ch < 3; ch++) {
        double lo = (a[k] >> (16 - 8 * ch)) & 255, hi = (a[k + 1] >> (16 - 8 * ch)) & 255;
        rgb[ch] = lo + (hi - lo) * f;
    }
}

typedef struct {
    int n;                    /* how many entries the axis has */
    int every;                /* label each every-th entry */
    const char *const *names; /* NULL: numeric indices, placed by `ticks` */
    mg_plot_ticks ticks;
} index_axis;

/* Which entries of an axis of n cells, `pitch` pixels apart, get a label: names where they fit
 * (label extent `need` pixels), else nice integer indices. */
static void index_labels(index_axis *ax, int n, const char *const *names, double pitch,
                         double need) {
    ax->n = n;
    ax->names = names;
    ax->every = names ? (int)fmax(1, ceil(need / pitch)) : 1;
    if (!names) {
        ticks_linear(0, n - 1, (int)clampd(n * pitch / need, 1, 12), true, &ax->ticks);
        int m = 0;
        for (int i = 0; i < ax->ticks.n; i++) { /* whole indices only */
            double v = ax->ticks.v[i];
            if (v >= 0 && v <= n - 1 && v == floor(v)) ax->ticks.v[m++] = v;
        }
        ax->ticks.n = m;
    }
}

/* Visits labelled entries: returns the next index after `from` that carries a label, or -1, and
 * its text in buf. */
static int index_next(const index_axis *ax, int *cursor, char *buf, size_t cap) {
    if (ax->names) {
        int i = *cursor * ax->every;
        if (i >= ax->n) return -1;
        (*cursor)++;
        snprintf(buf, cap, "%s", ax->names[i] ? ax->names[i] : "");
        return i;
    }
    if (*cursor >= ax->ticks.n) return -1;
    int i = (int)ax->ticks.v[(*cursor)++];
    snprintf(buf, cap, "%d", i);
    return i;
}

static double index_max_w(const chart *ch, const index_axis *ax) {
    char buf[256];
    double w = 0;
    for (int cur = 0; index_next(ax, &cur, buf, sizeof buf) >= 0;)
        w = fmax(w, text_w(ch, buf, 1, false));
    return w;
}

static double names_max_w(const chart *ch, const char *const *names, int n) {
    double w = 0;
    for (int i = 0; names && i < n; i++)
        if (names[i]) w = fmax(w, text_w(ch, names[i], 1, false));
    return w;
}

/* Pixels per cell; whole pixels when cells are 2 px or more, so that their edges are crisp. */
static double cell_pitch(int area, int n) {
    double p = (double)area / n;
    return p >= 2 ? floor(p) : p;
}

/* The heatmap drawn on a new canvas (*out, the caller's); `path` names it in messages. */
static mg_status heatmap_chart(const char *fn, const char *path, const mg_plot_opts *opts,
                               const float *values, int rows, int cols, mg_canvas **out) {
    mg_plot_opts o;
    mg_status st;
    if (!values || rows < 1 || cols < 1)
        return mg_set_error(MG_ERR_INVALID, "%s: %s (rows %d, cols %d)", path,
                            !values ? "values is NULL" : "the matrix is empty", rows, cols);
    if ((st = resolve_opts(fn, opts, &o)) != MG_OK) return st;
    if (o.log_y)
        return mg_set_error(MG_ERR_INVALID, "%s: log_y is not supported by heatmaps", path);
    if (o.v_fixed && !(isfinite(o.v_min) && isfinite(o.v_max) && o.v_min < o.v_max))
        return mg_set_error(MG_ERR_INVALID, "%s: value range [%g, %g] is empty or not finite", path,
                            o.v_min, o.v_max);

    const size_t count = (size_t)rows * (size_t)cols;
    double vlo = INFINITY, vhi = -INFINITY;
    for (size_t i = 0; i < count; i++)
        if (isfinite(values[i])) {
            vlo = fmin(vlo, values[i]);
            vhi = fmax(vhi, values[i]);
        }
    if (!(vlo <= vhi)) vlo = vhi = 0;
    if (o.v_fixed) {
        vlo = o.v_min;
        vhi = o.v_max;
    } else if (o.colormap == MG_CMAP_DIVERGING) {
        double m = fmax(fabs(vlo), fabs(vhi));
        vlo = -m;
        vhi = m;
    }
    mg_plot_ticks ct;
    if (!(vhi - vlo > fmax(fabs(vlo), fabs(vhi)) * 1e-12)) { /* constant: a range around it */
        if ((st = mg_plot_nice_ticks(vlo, vhi, 4, &ct)) != MG_OK) return st;
        vlo = ct.lo;
        vhi = ct.hi;
    }

    chart ch;
    if ((st = chart_begin(&ch, fn, &o)) != MG_OK) return st;
    const double ui = ch.ui, bar_gap = 14 * ui, bar_w = 16 * ui;
    const double top = top_margin(&ch, 0);
    int area_h = o.height - (int)ceil(top) - (int)ceil(bottom_margin(&ch, ch.tick_h));
    if ((st = ticks_linear(vlo, vhi, (int)clampd(area_h / (45 * ui), 2, 10), true, &ct)) != MG_OK)
        goto fail;
    double right = ch.pad + bar_gap + bar_w + 1 + ch.tick_len + 4 * ui + max_label_w(&ch, &ct);
    if (has_text(o.value_label)) right += 8 * ui + ch.label_h;

    /* Rows first: their labels' width decides the left margin, which decides the column pitch.
     * Column names too wide to sit side by side are turned to read upwards, which takes a second
     * pass because they then need more room below. */
    index_axis ra, ca;
    const double col_names_w = names_max_w(&ch, o.col_labels, cols);
    bool col_vertical = false;
    double row_pitch = 0, col_pitch = 0, left = 0;
    int area_w = 0;
    for (int pass = 0; pass < 2; pass++) {
        ch.xtick_h = col_vertical ? col_names_w : ch.tick_h;
        area_h = o.height - (int)ceil(top) - (int)ceil(bottom_margin(&ch, ch.xtick_h));
        row_pitch = cell_pitch(area_h, rows);
        index_labels(&ra, rows, o.row_labels, row_pitch, ch.tick_h + 3 * ui);
        ch.ytick_w = index_max_w(&ch, &ra);
        left = left_margin(&ch, ch.ytick_w);
        area_w = o.width - (int)ceil(left) - (int)ceil(right);
        col_pitch = cell_pitch(area_w, cols);
        if (o.square_cells) row_pitch = col_pitch = fmin(row_pitch, col_pitch);
        if (pass > 0 || !o.col_labels || col_names_w + 10 * ui <= col_pitch ||
            ch.tick_h + 3 * ui > col_pitch)
            break;
        col_vertical = true;
    }
    if (area_w < 20 || area_h < 20 || !(row_pitch > 0 && col_pitch > 0)) {
        st = mg_set_error(MG_ERR_INVALID, "%s: %dx%d leaves no room for the plot area", path,
                          o.width, o.height);
        goto fail;
    }
    index_labels(&ra, rows, o.row_labels, row_pitch, ch.tick_h + 3 * ui);
    double col_need = col_vertical   ? ch.tick_h + 3 * ui
                      : o.col_labels ? col_names_w + 10 * ui
                                     : text_w(&ch, "0000", 1, false) + 14 * ui;
    index_labels(&ca, cols, o.col_labels, col_pitch, col_need);
    /* Square cells may leave spare room: the map keeps its pitch and sits centred in the area. */
    ch.w = (int)fmin(area_w, ceil(col_pitch * cols));
    ch.h = (int)fmin(area_h, ceil(row_pitch * rows));
    ch.x0 = (int)ceil(left) + (area_w - ch.w) / 2;
    ch.y0 = (int)ceil(top) + (area_h - ch.h) / 2;

    /* Each pixel shows the area-weighted mean colour of the cells under it, so big matrices shrink
     * without aliasing and small ones get crisp cells. */
    uint8_t *px = mg_canvas_pixels(ch.c);
    const double sx = (double)cols / ch.w, sy = (double)rows / ch.h;
    for (int j = 0; j < ch.h; j++) {
        const double v0 = j * sy, v1 = (j + 1) * sy;
        for (int i = 0; i < ch.w; i++) {
            const double u0 = i * sx, u1 = (i + 1) * sx;
            double acc[3] = {0, 0, 0}, wsum = 0;
            for (int r = (int)v0; r < rows && r < v1; r++) {
                double wy = fmin(r + 1, v1) - fmax(r, v0);
                for (int q = (int)u0; q < cols && q < u1; q++) {
                    double wgt = wy * (fmin(q + 1, u1) - fmax(q, u0)), rgb[3];
                    if (wgt <= 0) continue;
                    float v = values[(size_t)r * (size_t)cols + (size_t)q];
                    if (isfinite(v)) {
                        colormap_rgb(o.colormap, (v - vlo) / (vhi - vlo), rgb);
                    } else {
                        rgb[0] = (C_NAN >> 16) & 255;
                        rgb[1] = (C_NAN >> 8) & 255;
                        rgb[2] = C_NAN & 255;
                    }
                    for (int k = 0; k < 3; k++) acc[k] += wgt * rgb[k];
                    wsum += wgt;
                }
            }
            uint8_t *p = px + 3 * ((size_t)(ch.y0 + j) * (size_t)o.width + (size_t)(ch.x0 + i));
            for (int k = 0; k < 3; k++) p[k] = (uint8_t)(acc[k] / wsum + 0.5);
        }
    }
    draw_frame(&ch);

    char buf[256];
    for (int cur = 0, r; (r = index_next(&ra, &cur, buf, sizeof buf)) >= 0;) {
        double y = ch.y0 + (r + 0.5) * ch.h / rows;
        mg_canvas_fill_rect(ch.c, ch.x0 - 1 - ch.tick_len, floor(y), ch.tick_len, 1, C_FRAME);
        text_at(&ch, ch.x0 - 1 - ch.tick_len - 4 * ui, floor(y) + 0.5, buf, 1, C_TICK_TEXT, 1, 0.5,
                false, false);
    }
    for (int cur = 0, q; (q = index_next(&ca, &cur, buf, sizeof buf)) >= 0;) {
        double x = ch.x0 + (q + 0.5) * ch.w / cols;
        mg_canvas_fill_rect(ch.c, floor(x), ch.y0 + ch.h + 1, 1, ch.tick_len, C_FRAME);
        text_at(&ch, floor(x) + 0.5, ch.y0 + ch.h + 1 + ch.tick_len + 3 * ui, buf, 1, C_TICK_TEXT,
                0.5, 0, false, col_vertical);
    }

    /* Colour bar: top is vhi. */
    const double bx = ch.x0 + ch.w + 1 + bar_gap;
    for (int j = 0; j < ch.h; j++) {
        double rgb[3];
        colormap_rgb(o.colormap, 1 - (j + 0.5) / ch.h, rgb);
        mg_canvas_fill_rect(ch.c, bx, ch.y0 + j, bar_w, 1,
                            (uint32_t)(rgb[0] + 0.5) << 16 | (uint32_t)(rgb[1] + 0.5) << 8 |
                                (uint32_t)(rgb[2] + 0.5));
    }
    mg_canvas_stroke_rect(ch.c, bx - 1, ch.y0 - 1, bar_w + 2, ch.h + 2, 1, C_FRAME);
    double label_w = 0;
    for (int i = 0; i < ct.n; i++) {
        double y = floor(ch.y0 + (1 - (ct.v[i] - vlo) / (vhi - vlo)) * ch.h);
        y = clampd(y, ch.y0 - 1, ch.y0 + ch.h);
        mg_canvas_fill_rect(ch.c, bx + bar_w + 1, y, ch.tick_len, 1, C_FRAME);
        mg_plot_tick_label(&ct, ct.v[i], buf, sizeof buf);
        label_w = fmax(label_w, text_w(&ch, buf, 1, false));
        text_at(&ch, bx + bar_w + 1 + ch.tick_len + 4 * ui, y + 0.5, buf, 1, C_TICK_TEXT, 0, 0.5,
                false, false);
    }
    if (has_text(o.value_label))
        text_at(&ch, bx + bar_w + 1 + ch.tick_len + 4 * ui + label_w + 8 * ui, ch.y0 + ch.h / 2.0,
                o.value_label, 1, C_TEXT, 0, 0.5, true, true);
    draw_title(&ch);
    draw_axis_labels(&ch);
    *out = ch.c;
    return MG_OK;
fail:
    mg_canvas_free(ch.c);
    return st;
}

mg_status mg_plot_heatmap(const char *path, const mg_plot_opts *opts, const float *values, int rows,
                          int cols) {
    static const char fn[] = "mg_plot_heatmap";
    mg_status st = check_path(fn, path);
    mg_canvas *c = NULL;
    if (st == MG_OK) st = heatmap_chart(fn, path, opts, values, rows, cols, &c);
    if (st == MG_OK) st = mg_canvas_save_png(c, path);
    mg_canvas_free(c);
    return st;
}

mg_status mg_plot_heatmap_onto(mg_canvas *dst, int x, int y, const char *name,
                               const mg_plot_opts *opts, const float *values, int rows, int cols) {
    static const char fn[] = "mg_plot_heatmap_onto";
    mg_canvas *c = NULL;
    mg_status st = dst ? heatmap_chart(fn, has_text(name) ? name : fn, opts, values, rows, cols, &c)
                       : mg_set_error(MG_ERR_INVALID, "%s: no canvas to draw onto", fn);
    if (st == MG_OK) mg_canvas_blit(dst, c, x, y);
    mg_canvas_free(c);
    return st;
}

/* ---- grouped bar charts ---- */

/* Three significant digits (every digit below 10000, as the value axis prints them), with a
 * suffix from 10000 up: 0.25, 1137, 15.2k, 1.5M. */
static void value_label(double v, char *buf, size_t cap) {
    static const char suffix[] = "kMGT";
    double a = fabs(v);
    int e = a > 0 ? exponent10(v) : 0, g = e >= 4 && e < 15 ? e / 3 : 0;
    if (a > 0 && (e >= 15 || e < -3)) {
        snprintf(buf, cap, "%.2f", v / pow(10, e));
        strip_zeros(buf);
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "e%d", e);
        return;
    }
    int dec = 2 - (e - 3 * g);
    snprintf(buf, cap, "%.*f", dec > 0 ? dec : 0, v / pow(10, 3 * g));
    strip_zeros(buf);
    size_t len = strlen(buf);
    if (g > 0 && len + 1 < cap) {
        buf[len] = suffix[g - 1];
        buf[len + 1] = 0;
    }
}

mg_status mg_plot_bars(const char *path, const mg_plot_opts *opts, const char *const *groups,
                       int n_groups, const char *const *series_labels, int n_series,
                       const double *values) {
    static const char fn[] = "mg_plot_bars";
    mg_plot_opts o;
    mg_status st = check_path(fn, path);
    if (st != MG_OK) return st;
    if (!groups || !values || n_groups < 1 || n_series < 1)
        return mg_set_error(MG_ERR_INVALID, "%s: %s (n_groups %d, n_series %d)", path,
                            !groups   ? "groups is NULL"
                            : !values ? "values is NULL"
                                      : "need at least one group and one series",
                            n_groups, n_series);
    if ((st = resolve_opts(fn, opts, &o)) != MG_OK) return st;
    if (o.log_y)
        return mg_set_error(MG_ERR_INVALID, "%s: log_y is not supported by bar charts", path);

    double lo = 0, hi = 0; /* bars grow from zero, so zero is always on the axis */
    for (size_t i = 0; i < (size_t)n_groups * (size_t)n_series; i++)
        if (isfinite(values[i])) {
            lo = fmin(lo, values[i]);
            hi = fmax(hi, values[i]);
        }
    if (lo == 0 && hi == 0) hi = 1;
    if (o.bar_values) { /* headroom for the numbers over the bars */
        if (hi > 0) hi += (hi - lo) * 0.08;
        if (lo < 0) lo -= (hi - lo) * 0.08;
    }

    chart ch;
    if ((st = chart_begin(&ch, fn, &o)) != MG_OK) return st;
    const double ui = ch.ui;
    double legend_h = 0, legend_w = o.width - 2 * ch.pad;
    if (series_labels) legend_h = legend_rows(&ch, series_labels, n_series, legend_w, false, 0, 0);
    const double top = top_margin(&ch, legend_h);
    /* Group labels go on one row when they fit under their slots, else on two staggered rows. */
    double gw = names_max_w(&ch, groups, n_groups);
    mg_plot_ticks yt;
    if ((st = value_ticks(&ch, lo, hi, o.height - top - bottom_margin(&ch, ch.tick_h), &yt)) !=
        MG_OK)
        goto fail;
    ch.ytick_w = max_label_w(&ch, &yt);
    ch.x0 = (int)ceil(left_margin(&ch, ch.ytick_w));
    ch.w = o.width - ch.x0 - (int)ceil(ch.pad * 1.5);
    const double slot = (double)ch.w / n_groups;
    const int label_rows = gw + 8 * ui <= slot ? 1 : 2;
    ch.xtick_h = label_rows * ch.tick_h;
    const double bottom = bottom_margin(&ch, ch.xtick_h);
    ch.y0 = (int)ceil(top);
    ch.h = o.height - ch.y0 - (int)ceil(bottom);
    if (ch.w < 20 || ch.h < 20) {
        st = mg_set_error(MG_ERR_INVALID, "%s: %dx%d leaves no room for the plot area", path,
                          o.width, o.height);
        goto fail;
    }
    if (label_rows == 2 && (st = value_ticks(&ch, lo, hi, ch.h, &yt)) != MG_OK) goto fail;

    draw_value_axis(&ch, &yt);
    const double base = floor(map_y(&ch, &yt, clampd(0, yt.lo, yt.hi)) + 0.5);
    const double inner = slot * 0.8, bw = inner / n_series;
    const double bar_gap = bw >= 6 * ui ? ui : 0;
    char buf[64];
    bool values_fit = o.bar_values;
    for (size_t i = 0; values_fit && i < (size_t)n_groups * (size_t)n_series; i++) {
        if (!isfinite(values[i])) continue;
        value_label(values[i], buf, sizeof buf);
        values_fit = text_w(&ch, buf, 1, false) <= bw + 2 * ui;
    }
    mg_canvas_set_clip(ch.c, ch.x0, ch.y0, ch.w, ch.h);
    for (int g = 0; g < n_groups; g++) {
        const double gx = ch.x0 + g * slot + (slot - inner) / 2;
        for (int s = 0; s < n_series; s++) {
            double v = values[(size_t)g * (size_t)n_series + (size_t)s];
            if (!isfinite(v)) continue;
            double y = map_y(&ch, &yt, clampd(v, yt.lo, yt.hi));
            double x0 = round(gx + s * bw + bar_gap / 2),
                   x1 = round(gx + (s + 1) * bw - bar_gap / 2);
            double y0 = fmin(y, base), y1 = fmax(y, base);
            mg_canvas_fill_rect(ch.c, x0, y0, fmax(x1 - x0, 1), y1 - y0, mg_plot_color(s));
            if (values_fit) {
                value_label(v, buf, sizeof buf);
                text_at(&ch, (x0 + x1) / 2, v >= 0 ? y0 - 3 * ui : y1 + 3 * ui, buf, 1, C_TICK_TEXT,
                        0.5, v >= 0 ? 1 : 0, false, false);
            }
        }
    }
    mg_canvas_reset_clip(ch.c);
    if (yt.lo < 0 && yt.hi > 0) mg_canvas_fill_rect(ch.c, ch.x0, base, ch.w, 1, C_FRAME);
    draw_frame(&ch);
    for (int g = 0; g < n_groups; g++) {
        double cx = floor(ch.x0 + (g + 0.5) * slot);
        double ty =
            ch.y0 + ch.h + 1 + ch.tick_len + 3 * ui + (label_rows == 2 && g % 2) * ch.tick_h;
        mg_canvas_fill_rect(ch.c, cx, ch.y0 + ch.h + 1, 1, ch.tick_len, C_FRAME);
        text_at(&ch, cx + 0.5, ty, groups[g], 1, C_TICK_TEXT, 0.5, 0, false, false);
    }
    if (series_labels)
        legend_rows(&ch, series_labels, n_series, legend_w, true, ch.x0 + ch.w / 2.0,
                    ch.pad + (has_text(o.title) ? ch.title_h + 6 * ui : 0));
    draw_title(&ch);
    draw_axis_labels(&ch);
    return chart_end(&ch, path);
fail:
    mg_canvas_free(ch.c);
    return st;
}
