/* The piano roll of a piece: what `music sample` draws beside the .mid it writes. */
#include "music_model.h"

#include "minigrad/plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define COL_PROMPT 0x4F74A6u
#define COL_CONT 0xE0701Cu
#define COL_TEXT 0x222222u
#define COL_GRID 0xC8C8C8u

static bool is_black_key(int pitch) {
    int k = pitch % 12;
    return k == 1 || k == 3 || k == 6 || k == 8 || k == 10;
}

static void text(mg_canvas *c, double x, double y, const char *s, double ax, double ay,
                 bool vertical, bool bold) {
    mg_text_style st = {.scale = 1,
                        .rgb = COL_TEXT,
                        .align_x = ax,
                        .align_y = ay,
                        .vertical = vertical,
                        .bold = bold};
    mg_canvas_text_ex(c, x, y, s, &st);
}

mg_status music_pianoroll(const char *path, const music_notes *notes, const music_pianoroll_opts *o) {
    music_pianoroll_opts d = {0};
    if (!o) o = &d;
    int W = o->width ? o->width : 1200, H = o->height ? o->height : 600;
    if (W < 300 || W > 8192 || H < 300 || H > 8192)
        return mg_set_error(MG_ERR_INVALID, "%s: piano roll size %d x %d is outside 300..8192",
                            path, W, H);
    /* the pitch range: the notes' own, padded, at least two octaves */
    int lo = 128, hi = -1;
    double tmax = o->prompt_end > 0 ? o->prompt_end : 0;
    for (size_t i = 0; i < notes->n; i++) {
        const music_note *n = &notes->v[i];
        lo = n->pitch < lo ? n->pitch : lo;
        hi = n->pitch > hi ? n->pitch : hi;
        tmax = n->off > tmax ? n->off : tmax;
    }
    if (hi < 0) lo = 60, hi = 72;
    lo -= 2, hi += 2;
    while (hi - lo < 24) lo--, hi++;
    lo = lo < 0 ? 0 : lo, hi = hi > 127 ? 127 : hi;
    if (!(tmax > 0)) tmax = 1;
    mg_plot_ticks tx;
    mg_status st = mg_plot_nice_ticks(0, tmax, W / 110 < 4 ? 4 : W / 110, &tx);
    if (st) return st;

    mg_canvas *c = mg_canvas_new(W, H, 0xFFFFFF);
    if (!c) return mg_set_error(MG_ERR_NOMEM, "%s: no memory for a %d x %d piano roll", path, W, H);
    const double L = 64, R = W - 16.0, T = 44, B = H - 46.0;
    const double rows = hi - lo + 1, rh = (B - T) / rows;
    const double xs = (R - L) / (tx.hi - tx.lo);
#define X(t) (L + ((t)-tx.lo) * xs)
#define Y(p) (B - ((p)-lo + 1) * rh)

    /* keyboard rows, and a line and a label at every C */
    for (int p = lo; p <= hi; p++)
        mg_canvas_fill_rect(c, L, Y(p), R - L, rh, is_black_key(p) ? 0xEDEFF2u : 0xFBFBFBu);
    for (int p = lo; p <= hi; p++)
        if (p % 12 == 0) {
            char s[8];
            snprintf(s, sizeof s, "C%d", p / 12 - 1);
            mg_canvas_fill_rect(c, L, Y(p) + rh - 1, R - L, 1, COL_GRID);
            text(c, L - 6, Y(p) + rh / 2, s, 1, 0.5, false, false);
        }
    /* time grid and tick labels */
    for (int i = 0; i < tx.n; i++) {
        char s[32];
        double x = X(tx.v[i]);
        mg_canvas_fill_rect(c, floor(x), T, 1, B - T, 0xE2E2E2u);
        mg_canvas_fill_rect(c, floor(x), B, 1, 5, COL_TEXT);
        mg_plot_tick_label(&tx, tx.v[i], s, sizeof s);
        text(c, x, B + 8, s, 0.5, 0, false, false);
    }
    text(c, (L + R) / 2, H - 6.0, "time (s)", 0.5, 1, false, false);
    text(c, 12, (T + B) / 2, "pitch", 0.5, 0.5, true, false);

    /* the prompt's span, shaded, with its end marked */
    bool prompt = o->prompt_end > 0;
    mg_canvas_set_clip(c, L, T, R - L, B - T);
    if (prompt) {
        double xe = X(o->prompt_end);
        mg_canvas_blend_rect(c, L, T, xe - L, B - T, COL_PROMPT, 0.07);
        for (double y = T; y < B; y += 8) mg_canvas_fill_rect(c, floor(xe), y, 2, 4, 0x333333u);
    }
    /* notes: opacity from velocity, a solid onset edge so repeated notes stay apart */
    for (size_t i = 0; i < notes->n; i++) {
        const music_note *n = &notes->v[i];
        if (n->pitch < lo || n->pitch > hi) continue;
        uint32_t col = prompt && n->on < o->prompt_end ? COL_PROMPT : COL_CONT;
        double x0 = X(n->on), x1 = X(n->off), y = Y(n->pitch) + 0.5;
        if (x1 - x0 < 2) x1 = x0 + 2;
        double a = 0.25 + 0.75 * (double)n->velocity / 127.0;
        mg_canvas_blend_rect(c, x0, y, x1 - x0, rh - 1, col, a);
        mg_canvas_fill_rect(c, x0, y, 1.5, rh - 1, col);
    }
    mg_canvas_reset_clip(c);
    mg_canvas_stroke_rect(c, L - 1, T - 1, R - L + 2, B - T + 2, 1, 0x888888u);

    /* title and legend */
    if (o->title && o->title[0]) text(c, L, 8, o->title, 0, 0, false, true);
    double lx = R;
    const char *labels[3] = {"opacity = velocity", "continuation", prompt ? "prompt" : NULL};
    uint32_t cols[3] = {0, COL_CONT, COL_PROMPT};
    for (int k = 0; k < 3; k++) {
        if (!labels[k]) continue;
        double w = mg_text_width(labels[k], 1, false);
        text(c, lx, 30, labels[k], 1, 0.5, false, false);
        lx -= w + 6;
        if (k > 0) {
            mg_canvas_fill_rect(c, lx - 14, 25, 14, 10, cols[k]);
            lx -= 14 + 16;
        } else {
            lx -= 10;
        }
    }
    if (prompt) {
        double xe = X(o->prompt_end);
        text(c, xe - 4, T + 4, "prompt", 1, 0, false, false);
        text(c, xe + 6, T + 4, "continuation", 0, 0, false, false);
    }
#undef X
#undef Y
    st = mg_canvas_save_png(c, path);
    mg_canvas_free(c);
    return st;
}
