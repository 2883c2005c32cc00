/* minigrad/plot.h: PNG charts for the examples and benchmarks, and the raster canvas they draw on.
 *
 * Ownership:
 *  - mg_canvas_new returns a canvas the caller owns and releases with mg_canvas_free.
 *  - mg_canvas_pixels points into the canvas; it stays valid until mg_canvas_free.
 *  - Every other pointer argument (strings, arrays, options) is borrowed for the duration of the
 *    call and never kept.
 *
 * Coordinates are in pixels, x to the right and y down; pixel (i, j) covers the square
 * [i, i+1) x [j, j+1), so a rectangle at integer coordinates is crisp and fractional edges are
 * anti-aliased by their exact coverage. Colours are 0xRRGGBB.
 *
 * Saving is atomic: the PNG goes to a temporary file beside `path`, which is then renamed over
 * it, so a failed save (a full disk included) leaves neither a partial file nor a harmed old one.
 * A `path` that is a device or a FIFO (/dev/stdout) is written in place (minigrad/file.h). The
 * chart functions (mg_plot_*) validate their inputs before touching the file system. Errors return MG_ERR_INVALID
 * (bad argument), MG_ERR_NOMEM or MG_ERR_IO, with mg_last_error() naming the function or path and
 * the reason.
 */
#ifndef MINIGRAD_PLOT_H
#define MINIGRAD_PLOT_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- canvas ---- */

typedef struct mg_canvas mg_canvas;

/* A w x h canvas (1..16384 each) filled with bg_rgb. NULL (and mg_last_error set) on a bad size or
 * when memory runs out. */
MG_API mg_canvas *mg_canvas_new(int w, int h, uint32_t bg_rgb);
MG_API void mg_canvas_free(mg_canvas *c); /* NULL is fine */

MG_API int mg_canvas_width(const mg_canvas *c);
MG_API int mg_canvas_height(const mg_canvas *c);
/* Row-major RGB bytes, 3 per pixel, no row padding (stride 3 * width). */
MG_API uint8_t *mg_canvas_pixels(mg_canvas *c);
/* 0xRRGGBB of pixel (x, y); 0 outside the canvas. */
MG_API uint32_t mg_canvas_get(const mg_canvas *c, int x, int y);
/* Copies src onto dst with its top-left corner at (x, y); what falls outside dst is cut off (the
 * clip rectangle does not apply). */
MG_API void mg_canvas_blit(mg_canvas *dst, const mg_canvas *src, int x, int y);

/* Restricts all drawing to the rectangle (intersected with the canvas), e.g. a plot area or a
 * piano-roll lane. mg_canvas_reset_clip restores the whole canvas. */
MG_API void mg_canvas_set_clip(mg_canvas *c, double x, double y, double w, double h);
MG_API void mg_canvas_reset_clip(mg_canvas *c);

/* Filled rectangle with its top-left corner at (x, y); w or h <= 0 draws nothing. */
MG_API void mg_canvas_fill_rect(mg_canvas *c, double x, double y, double w, double h, uint32_t rgb);
/* The same, blended over what is there with opacity alpha in [0, 1]. */
MG_API void mg_canvas_blend_rect(mg_canvas *c, double x, double y, double w, double h, uint32_t rgb,
                          double alpha);
/* Outline of thickness t drawn inside the rectangle. */
MG_API void mg_canvas_stroke_rect(mg_canvas *c, double x, double y, double w, double h, double t,
                           uint32_t rgb);
/* Anti-aliased line of the given thickness with round ends. */
MG_API void mg_canvas_line(mg_canvas *c, double x0, double y0, double x1, double y1, double thickness,
                    uint32_t rgb);
/* Connected line through n points with round joins; a non-finite coordinate breaks it into
 * separate pieces. Overlapping segments do not darken each other's edges. */
MG_API void mg_canvas_polyline(mg_canvas *c, const double *x, const double *y, int n, double thickness,
                        uint32_t rgb);
MG_API void mg_canvas_fill_circle(mg_canvas *c, double cx, double cy, double r, uint32_t rgb);

/* ---- text: a built-in bitmap font (printable ASCII; other bytes draw as a box) ----
 * At scale 1 a line is 13 px tall (capitals 9 px); integer scales stay crisp, fractional ones are
 * anti-aliased. '\n' starts a new line. */
typedef struct mg_text_style {
    double scale; /* 0 means 1 */
    uint32_t rgb;
    double align_x; /* anchor within the text box: 0 = left, 0.5 = centre, 1 = right */
    double align_y; /* 0 = top, 0.5 = middle of the capitals, 1 = bottom */
    bool bold;
    bool vertical; /* rotated 90 degrees counter-clockwise (reads bottom to top) */
} mg_text_style;

/* Text with its top-left corner at (x, y). */
MG_API void mg_canvas_text(mg_canvas *c, double x, double y, const char *text, double scale, uint32_t rgb);
/* Text anchored at (x, y) as the style says; a vertical text box is rotated with the text, and the
 * anchor fractions then refer to the rotated box as it appears on the canvas. */
MG_API void mg_canvas_text_ex(mg_canvas *c, double x, double y, const char *text,
                       const mg_text_style *style);
/* Size of the (unrotated) text box in pixels: the widest line, and the lines' total height. */
MG_API double mg_text_width(const char *text, double scale, bool bold);
MG_API double mg_text_height(const char *text, double scale);

/* Writes the canvas as an 8-bit RGB PNG, atomically (see the top of this file). */
MG_API mg_status mg_canvas_save_png(const mg_canvas *c, const char *path);

/* Reads an image file (PNG, or anything else stb_image decodes) into a new canvas, *out, that the
 * caller frees; used to check charts and to draw over saved images. MG_ERR_IO when the file cannot
 * be opened, MG_ERR_FORMAT when it is not a decodable image of at most 16384 x 16384; *out is
 * NULL on failure. */
MG_API mg_status mg_canvas_load_png(const char *path, mg_canvas **out);

/* ---- charts ---- */

/* Series colours, distinct and colour-blind tolerant; i wraps around after 10. */
MG_API uint32_t mg_plot_color(int i);

typedef enum mg_colormap {
    MG_CMAP_VIRIDIS = 0, /* perceptually uniform, dark blue to yellow: magnitudes */
    MG_CMAP_DIVERGING,   /* blue - white - red, centred on 0: signed values */
} mg_colormap;

/* Options; a zero-initialised struct (or NULL) gives the defaults. Fields a chart type does not
 * use are ignored by it. */
typedef struct mg_plot_opts {
    const char *title, *xlabel, *ylabel; /* NULL or "" for none */
    int width, height;                   /* pixels; 0 = 800 x 500; each 200..16384 */
    bool log_y;   /* lines: log10 value axis; values <= 0 are gaps. Not for bars or heatmaps. */
    bool y_fixed; /* lines, bars: show [y_min, y_max] instead of fitting the data */
    double y_min, y_max;
    /* heatmap */
    mg_colormap colormap;
    bool v_fixed; /* map [v_min, v_max] to the colour map instead of the data's range */
    double v_min, v_max;
    const char *value_label;       /* title of the colour bar */
    const char *const *row_labels; /* rows entries, or NULL for numeric row indices */
    const char *const *col_labels; /* cols entries, or NULL for numeric column indices */
    bool square_cells;             /* keep cells square (attention maps) instead of filling */
    /* bars */
    bool bar_values; /* print each value above its bar when it fits */
} mg_plot_opts;

typedef struct mg_plot_series {
    const char *label; /* legend entry; NULL or "" for none */
    const double *x;   /* n values, or NULL for 0, 1, ..., n-1 */
    const double *y;   /* n values; NaN or infinite values leave a gap */
    int n;             /* >= 0 */
} mg_plot_series;

/* Line chart of n_series >= 1 series, each in mg_plot_color(i). Isolated points are drawn as dots;
 * series may differ in length and x range. */
MG_API mg_status mg_plot_lines(const char *path, const mg_plot_opts *opts, const mg_plot_series *series,
                        int n_series);

/* Heatmap of a rows x cols row-major matrix, row 0 at the top, with a colour bar. NaN and
 * infinite cells are grey; values outside a fixed range take the colour of its nearer end. A matrix
 * larger than the plot area is shown by area-averaging its cells. */
MG_API mg_status mg_plot_heatmap(const char *path, const mg_plot_opts *opts, const float *values, int rows,
                          int cols);
/* The same heatmap as a panel of a larger figure: drawn onto dst with its top-left corner at (x, y)
 * instead of saved; `name` stands for the path in messages. */
MG_API mg_status mg_plot_heatmap_onto(mg_canvas *dst, int x, int y, const char *name,
                               const mg_plot_opts *opts, const float *values, int rows, int cols);

/* Grouped bar chart: n_groups groups along x, n_series bars in each, values row-major
 * [n_groups][n_series]; a NaN value leaves its bar out. series_labels may be NULL (no legend). */
MG_API mg_status mg_plot_bars(const char *path, const mg_plot_opts *opts, const char *const *groups,
                       int n_groups, const char *const *series_labels, int n_series,
                       const double *values);

/* ---- axis ticks (public so that they can be tested and reused) ---- */

#define MG_PLOT_MAX_TICKS 24

typedef struct mg_plot_ticks {
    double lo, hi; /* the axis range */
    double step;   /* linear: distance between ticks; log: decades between ticks (0: 1-2-5) */
    int n;
    double v[MG_PLOT_MAX_TICKS]; /* ascending, lo <= v[i] <= hi */
    bool log;
} mg_plot_ticks;

/* Ticks at multiples of a "nice" step (1, 2 or 5 x 10^k) giving about `target` (2..20) intervals,
 * with the range widened outwards to whole steps so that it covers [lo, hi]. lo > hi is swapped; a
 * zero-width range is widened around its value (values closer to 0 than 1e-290 count as 0).
 * MG_ERR_INVALID for non-finite input or a range wider than about 1e300. */
MG_API mg_status mg_plot_nice_ticks(double lo, double hi, int target, mg_plot_ticks *out);

/* Log-axis ticks for 1e-300 <= lo <= hi <= 1e300: at powers of ten (every k-th decade when there
 * are many), or at 1, 2, 5 x 10^k when the range spans less than about two decades. The range is
 * widened to the outermost ticks. */
MG_API mg_status mg_plot_log_ticks(double lo, double hi, int target, mg_plot_ticks *out);

/* Label for tick value v of the axis t: the step's decimals ("0.25", "-0.50", "1500"); on an axis
 * reaching 10000 or more, values from 1000 up get a suffix ("5k", "1.5M"); steps below 1e-4 and
 * values of 1e15 or more use a short scientific form ("2e-5"). */
MG_API void mg_plot_tick_label(const mg_plot_ticks *t, double v, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
