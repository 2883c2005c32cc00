/* mg_conv1d / mg_conv2d in bf16 precision (mg_ctx_set_precision):
 *  - forward and the three gradients are bit for bit a reference built here: x, W and dy rounded to
 *    bf16 (round to nearest even), the column matrix laid out by plain loops, every product by
 *    mg_bgemm_ref (the instructions' arithmetic in plain loops) for the path under test, y starting
 *    from the float32 bias, dx scattered back in (tap, row, column) order, db summed in double from
 *    the float32 dy; on odd shapes with stride, padding, dilation, groups and causal conv1d, on
 *    every bf16 path the CPU has (others reported skipped by name);
 *  - the same results within float32 accumulation of a float64 convolution of the rounded operands:
 *    |got - exact| <= (terms + 2) FLT_EPSILON sum |terms| per element;
 *  - a parameter's bf16 copy is made again after mg_ctx_reset (the next step sees the new weights);
 *  - bit-identical for 1, 2 and 3 threads;
 *  - fp32 precision (explicit, or set back after bf16) is bit for bit the float32 im2col + sgemm
 *    products the op ran before bf16 existed, and differs from bf16;
 *  - bad arguments in a bf16 context give the fp32 messages, an exhausted arena names the bf16
 *    buffer, and nothing crashes. */
#include "test_util.h"
#include "minigrad/core.h"
#include "minigrad/testing.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Option structs below leave trailing fields to their zero defaults on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
    const char *name;
    bool one_d, causal, bias;
    int64_t N, C, H, W, O, KH, KW; /* conv1d: H = KH = 1 */
    int64_t stride[2], padding[2], dilation[2], groups;
} ccase;

static const ccase cases[] = {
    {"2d plain 3x3", false, false, true, 2, 3, 9, 9, 8, 3, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"2d pad 1 non-square kernel", false, false, true, 3, 2, 5, 8, 4, 3, 2, {1, 1}, {1, 1}, {1, 1}, 1},
    {"2d stride 2 dilation 2 groups 2 pad 2", false, false, true, 2, 4, 11, 7, 6, 3, 2, {2, 2}, {2, 2}, {2, 2}, 2},
    {"2d stride (2,1) padding (0,3) dilation (1,3) no bias", false, false, false, 1, 5, 6, 9, 3, 2, 3, {2, 1}, {0, 3},
     {1, 3}, 1},
    {"2d size-1 everything", false, false, false, 1, 1, 1, 1, 1, 1, 1, {0, 0}, {0, 0}, {0, 0}, 0},
    {"2d depthwise (groups = C)", false, false, true, 2, 4, 6, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4},
    {"2d 19 -> 33 channels (several tiles)", false, false, true, 3, 19, 13, 11, 33, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
    {"2d batch 4 of 20x20, 8 -> 24 channels, groups 2", false, false, true, 4, 8, 20, 19, 24, 3, 3, {1, 1}, {1, 1},
     {1, 1}, 2},
    {"2d odd K (C 1, 3x3) as fashion_mnist's first layer", false, false, true, 5, 1, 28, 28, 32, 3, 3, {1, 1},
     {1, 1}, {1, 1}, 1},
    {"1d plain", true, false, true, 2, 3, 1, 10, 5, 1, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d stride 2 pad 2 dilation 2 groups 3", true, false, true, 3, 6, 1, 13, 9, 1, 3, {0, 2}, {0, 2}, {0, 2}, 3},
    {"1d causal", true, true, true, 2, 3, 1, 8, 4, 1, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d causal dilation 3 stride 2 groups 2", true, true, false, 1, 2, 1, 11, 2, 1, 4, {0, 2}, {0, 0}, {0, 3}, 2},
    {"1d length 1 kernel 1", true, false, true, 4, 1, 1, 1, 3, 1, 1, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d 17 -> 23 channels, length 101, kernel 5", true, false, true, 3, 17, 1, 101, 23, 1, 5, {0, 1}, {0, 2},
     {0, 1}, 1},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* ---- geometry and the reference ---- */

typedef struct {
    int64_t N, C, H, W, O, KH, KW, G, sh, sw, dh, dw, ph, pw, OH, OW; /* ph, pw: padding before */
    int64_t Cg, Og, KK, KG, OHW, NP, nx, nw, ny;
} geom;

static geom case_geom(const ccase *c) {
    geom g = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH, .KW = c->KW};
    g.G = c->groups ? c->groups : 1;
    g.sh = c->stride[0] ? c->stride[0] : 1, g.sw = c->stride[1] ? c->stride[1] : 1;
    g.dh = c->dilation[0] ? c->dilation[0] : 1, g.dw = c->dilation[1] ? c->dilation[1] : 1;
    g.ph = c->padding[0], g.pw = c->padding[1];
    int64_t pw_hi = g.pw;
    if (c->causal) g.pw = (c->KW - 1) * g.dw, pw_hi = 0;
    g.OH = (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1;
    g.OW = (g.W + g.pw + pw_hi - g.dw * (g.KW - 1) - 1) / g.sw + 1;
    g.Cg = g.C / g.G, g.Og = g.O / g.G, g.KK = g.KH * g.KW, g.KG = g.Cg * g.KK;
    g.OHW = g.OH * g.OW, g.NP = g.N * g.OHW;
    g.nx = g.N * g.C * g.H * g.W, g.nw = g.O * g.Cg * g.KK, g.ny = g.N * g.O * g.OHW;
    return g;
}

/* The input element read by column matrix entry (row c*KK + ki*KW + kj, column n*OHW + oh*OW + ow),
 * or -1 for padding. */
static int64_t tap_source(const geom *g, int64_t n, int64_t c, int64_t ki, int64_t kj, int64_t oh, int64_t ow) {
    const int64_t ih = oh * g->sh - g->ph + ki * g->dh, iw = ow * g->sw - g->pw + kj * g->dw;
    if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) return -1;
    return ((n * g->C + c) * g->H + ih) * g->W + iw;
}

#define FOR_TAPS(g)                                                                                \
    for (int64_t n = 0; n < (g)->N; n++)                                                           \
        for (int64_t c = 0; c < (g)->C; c++)                                                       \
            for (int64_t ki = 0; ki < (g)->KH; ki++)                                               \
                for (int64_t kj = 0; kj < (g)->KW; kj++)                                           \
                    for (int64_t oh = 0; oh < (g)->OH; oh++)                                       \
                        for (int64_t ow = 0; ow < (g)->OW; ow++)

static int64_t col_index(const geom *g, int64_t n, int64_t c, int64_t ki, int64_t kj, int64_t oh, int64_t ow) {
    return (c * g->KK + ki * g->KW + kj) * g->NP + n * g->OHW + oh * g->OW + ow;
}

typedef struct {
    float *y, *dx, *dw, *db;
} result;

static void result_alloc(result *r, const geom *g) {
    r->y = calloc((size_t)g->ny, sizeof(float));
    r->dx = calloc((size_t)g->nx, sizeof(float));
    r->dw = calloc((size_t)g->nw, sizeof(float));
    r->db = calloc((size_t)g->O, sizeof(float));
    ck_assert(r->y && r->dx && r->dw && r->db);
}

static void result_free(result *r) { free(r->y), free(r->dx), free(r->dw), free(r->db); }

typedef struct {
    float *x, *w, *b, *dy; /* float32 inputs; b NULL without bias */
} inputs;

/* The path mg_bgemm takes for a product of M rows when `path` is active: with AMX, products of
 * fewer than 16 rows go to AVX512-BF16 when the CPU has it (docs/bf16.md). */
static mg_bf16_path path_for(mg_bf16_path path, int64_t M) {
    return path == MG_BF16_AMX && M < 16 && mg_bf16_path_available(MG_BF16_AVX512) ? MG_BF16_AVX512 : path;
}

static mg_bf16 *bf16_of(const float *x, int64_t n) {
    mg_bf16 *b = malloc((size_t)(n ? n : 1) * sizeof *b);
    ck_assert_ptr_nonnull(b);
    for (int64_t i = 0; i < n; i++) b[i] = mg_f32_to_bf16_1(x[i]);
    return b;
}

/* db[o] = the sum of channel o of dy over the images and positions, in double, image by image. */
static void ref_bias_grad(const geom *g, const float *dy, float *db) {
    for (int64_t o = 0; o < g->O; o++) {
        double s = 0.0;
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t p = 0; p < g->OHW; p++) s += dy[(n * g->O + o) * g->OHW + p];
        db[o] = (float)s;
    }
}

/* The bf16 recipe on `path`. */
static void ref_bf16(const geom *g, const inputs *in, mg_bf16_path path, result *r) {
    mg_bf16 *xb = bf16_of(in->x, g->nx), *wb = bf16_of(in->w, g->nw);
    mg_bf16 *col = calloc((size_t)(g->C * g->KK * g->NP), sizeof *col);
    mg_bf16 *dyt = malloc((size_t)(g->O * g->NP) * sizeof *dyt);
    float *dcol = malloc((size_t)(g->C * g->KK * g->NP) * sizeof *dcol);
    ck_assert(col && dyt && dcol);
    FOR_TAPS(g) {
        const int64_t s = tap_source(g, n, c, ki, kj, oh, ow);
        col[col_index(g, n, c, ki, kj, oh, ow)] = s < 0 ? 0 : xb[s];
    }
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t gi = 0; gi < g->G; gi++) {
            float *yb = r->y + (n * g->O + gi * g->Og) * g->OHW;
            for (int64_t o = 0; o < g->Og; o++)
                for (int64_t p = 0; p < g->OHW; p++) yb[o * g->OHW + p] = in->b ? in->b[gi * g->Og + o] : 0.0f;
            mg_bgemm_ref(path_for(path, g->Og), false, false, g->Og, g->OHW, g->KG, wb + gi * g->Og * g->KG, g->KG,
                         col + gi * g->KG * g->NP + n * g->OHW, g->NP, in->b != NULL, yb, g->OHW);
        }
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t p = 0; p < g->OHW; p++)
                dyt[o * g->NP + n * g->OHW + p] = mg_f32_to_bf16_1(in->dy[(n * g->O + o) * g->OHW + p]);
    for (int64_t gi = 0; gi < g->G; gi++) {
        mg_bgemm_ref(path_for(path, g->Og), false, true, g->Og, g->KG, g->NP, dyt + gi * g->Og * g->NP, g->NP,
                     col + gi * g->KG * g->NP, g->NP, false, r->dw + gi * g->Og * g->KG, g->KG);
        mg_bgemm_ref(path_for(path, g->KG), true, false, g->KG, g->NP, g->Og, wb + gi * g->Og * g->KG, g->KG,
                     dyt + gi * g->Og * g->NP, g->NP, false, dcol + gi * g->KG * g->NP, g->NP);
    }
    memset(r->dx, 0, (size_t)g->nx * sizeof(float));
    FOR_TAPS(g) {
        const int64_t s = tap_source(g, n, c, ki, kj, oh, ow);
        if (s >= 0) r->dx[s] += dcol[col_index(g, n, c, ki, kj, oh, ow)];
    }
    if (in->b) ref_bias_grad(g, in->dy, r->db);
    free(xb), free(wb), free(col), free(dyt), free(dcol);
}

/* The float32 products conv.c runs in fp32 precision: im2col, y by a batched sgemm per group
 * onto the bias, dW += dYt col^T, dcol = W^T dYt, col2im. */
static void ref_fp32(const geom *g, const inputs *in, result *r) {
    float *col = calloc((size_t)(g->C * g->KK * g->NP), sizeof *col);
    float *dyt = malloc((size_t)(g->O * g->NP) * sizeof *dyt);
    float *dcol = malloc((size_t)(g->C * g->KK * g->NP) * sizeof *dcol);
    ck_assert(col && dyt && dcol);
    FOR_TAPS(g) {
        const int64_t s = tap_source(g, n, c, ki, kj, oh, ow);
        col[col_index(g, n, c, ki, kj, oh, ow)] = s < 0 ? 0.0f : in->x[s];
    }
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++)
            for (int64_t p = 0; p < g->OHW; p++) r->y[(n * g->O + o) * g->OHW + p] = in->b ? in->b[o] : 0.0f;
    for (int64_t gi = 0; gi < g->G; gi++)
        mg_sgemm_batched(g->N, false, false, g->Og, g->OHW, g->KG, 1.0f, in->w + gi * g->Og * g->KG, g->KG, 0,
                         col + gi * g->KG * g->NP, g->NP, g->OHW, in->b ? 1.0f : 0.0f, r->y + gi * g->Og * g->OHW,
                         g->OHW, g->O * g->OHW);
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t n = 0; n < g->N; n++)
            memcpy(dyt + o * g->NP + n * g->OHW, in->dy + (n * g->O + o) * g->OHW, (size_t)g->OHW * sizeof(float));
    memset(r->dw, 0, (size_t)g->nw * sizeof(float));
    for (int64_t gi = 0; gi < g->G; gi++) {
        mg_sgemm(false, true, g->Og, g->KG, g->NP, 1.0f, dyt + gi * g->Og * g->NP, g->NP, col + gi * g->KG * g->NP,
                 g->NP, 1.0f, r->dw + gi * g->Og * g->KG, g->KG);
        mg_sgemm(true, false, g->KG, g->NP, g->Og, 1.0f, in->w + gi * g->Og * g->KG, g->KG, dyt + gi * g->Og * g->NP,
                 g->NP, 0.0f, dcol + gi * g->KG * g->NP, g->NP);
    }
    memset(r->dx, 0, (size_t)g->nx * sizeof(float));
    FOR_TAPS(g) {
        const int64_t s = tap_source(g, n, c, ki, kj, oh, ow);
        if (s >= 0) r->dx[s] += dcol[col_index(g, n, c, ki, kj, oh, ow)];
    }
    if (in->b) ref_bias_grad(g, in->dy, r->db);
    free(col), free(dyt), free(dcol);
}

/* ---- the op ---- */

typedef struct {
    mg_params *P;
    mg_tensor *x, *w, *b, *dy;
    inputs in;
} model;

static void model_make(model *m, const ccase *c, const geom *g, uint64_t seed) {
    m->P = mg_params_new();
    const int64_t xs4[] = {c->N, c->C, c->H, c->W}, ws4[] = {c->O, g->Cg, c->KH, c->KW};
    const int64_t xs3[] = {c->N, c->C, c->W}, ws3[] = {c->O, g->Cg, c->KW};
    const int64_t ys4[] = {c->N, c->O, g->OH, g->OW}, ys3[] = {c->N, c->O, g->OW};
    const int nd = c->one_d ? 3 : 4;
    m->x = mg_params_add(m->P, "x", nd, c->one_d ? xs3 : xs4, mg_init_uniform(-1, 1), 0);
    m->w = mg_params_add(m->P, "w", nd, c->one_d ? ws3 : ws4, mg_init_uniform(-1, 1), 0);
    m->b = c->bias ? mg_params_add(m->P, "b", 1, (int64_t[]){c->O}, mg_init_uniform(-1, 1), 0) : NULL;
    m->dy = mg_params_add(m->P, "dy", nd, c->one_d ? ys3 : ys4, mg_init_uniform(-1, 1), MG_FROZEN);
    mg_rng rng = mg_rng_make(seed);
    ck_assert_int_eq(mg_params_alloc(m->P, &rng), MG_OK);
    m->in = (inputs){m->x->data, m->w->data, m->b ? m->b->data : NULL, m->dy->data};
}

static mg_tensor *conv(mg_ctx *ctx, const ccase *c, mg_tensor *x, mg_tensor *w, mg_tensor *b) {
    if (c->one_d) {
        mg_conv1d_opts o = {c->stride[1], c->padding[1], c->dilation[1], c->groups, c->causal};
        return mg_conv1d(ctx, x, w, b, &o);
    }
    mg_conv2d_opts o = {{c->stride[0], c->stride[1]}, {c->padding[0], c->padding[1]},
                        {c->dilation[0], c->dilation[1]}, c->groups};
    return mg_conv2d(ctx, x, w, b, &o);
}

/* y and the gradients of sum(y * dy) (so y's gradient is dy exactly) in a context of `precision`. */
static void run_op(model *m, const ccase *c, const geom *g, mg_ctx *ctx, result *r) {
    mg_params_zero_grad(m->P);
    mg_tensor *y = conv(ctx, c, m->x, m->w, m->b);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, m->dy)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    ck_assert_int_eq(y->numel, g->ny);
    memcpy(r->y, y->data, (size_t)g->ny * sizeof(float));
    memcpy(r->dx, m->x->grad, (size_t)g->nx * sizeof(float));
    memcpy(r->dw, m->w->grad, (size_t)g->nw * sizeof(float));
    if (m->b) memcpy(r->db, m->b->grad, (size_t)g->O * sizeof(float));
}

static void run_in(model *m, const ccase *c, const geom *g, mg_precision precision, result *r) {
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    mg_ctx_set_precision(ctx, precision);
    run_op(m, c, g, ctx, r);
    mg_ctx_free(ctx);
}

static void expect_bits(const ccase *c, const char *ctxt, const char *what, const float *got, const float *want,
                        int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(got + i, want + i, sizeof(float)) == 0, "%s, %s: %s[%lld] = %a, expected %a", c->name,
                      ctxt, what, (long long)i, got[i], want[i]);
}

static void expect_same_result(const ccase *c, const geom *g, const char *ctxt, const result *a, const result *b) {
    expect_bits(c, ctxt, "y", a->y, b->y, g->ny);
    expect_bits(c, ctxt, "dx", a->dx, b->dx, g->nx);
    expect_bits(c, ctxt, "dW", a->dw, b->dw, g->nw);
    if (c->bias) expect_bits(c, ctxt, "db", a->db, b->db, g->O);
}

/* |got - exact| <= (terms + 2) FLT_EPSILON sum |terms|, with the exact float64 convolution of the
 * bf16-rounded x, W, dy (the bias and db exact in float32 / double). */
static void expect_close_to_float64(const ccase *c, const geom *g, const inputs *in, const result *r) {
    double *e = calloc((size_t)(g->ny + g->nx + g->nw), sizeof *e), *s = calloc((size_t)(g->ny + g->nx + g->nw), sizeof *s);
    int64_t *t = calloc((size_t)(g->ny + g->nx + g->nw), sizeof *t);
    ck_assert(e && s && t);
    double *ey = e, *ex = e + g->ny, *ew = ex + g->nx, *sy = s, *sx = s + g->ny, *sw = sx + g->nx;
    int64_t *ty = t, *tx = t + g->ny, *tw = tx + g->nx;
#define RB(v) ((double)mg_bf16_to_f32_1(mg_f32_to_bf16_1(v)))
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    const int64_t yi = ((n * g->O + o) * g->OH + oh) * g->OW + ow, gi = o / g->Og;
                    if (in->b) ey[yi] = in->b[o], sy[yi] = fabs(in->b[o]), ty[yi] = 1;
                    const double dy = RB(in->dy[yi]);
                    for (int64_t cc = 0; cc < g->Cg; cc++)
                        for (int64_t ki = 0; ki < g->KH; ki++)
                            for (int64_t kj = 0; kj < g->KW; kj++) {
                                const int64_t xi = tap_source(g, n, gi * g->Cg + cc, ki, kj, oh, ow);
                                if (xi < 0) continue;
                                const int64_t wi = ((o * g->Cg + cc) * g->KH + ki) * g->KW + kj;
                                const double xv = RB(in->x[xi]), wv = RB(in->w[wi]);
                                ey[yi] += xv * wv, sy[yi] += fabs(xv * wv), ty[yi]++;
                                ex[xi] += wv * dy, sx[xi] += fabs(wv * dy), tx[xi]++;
                                ew[wi] += xv * dy, sw[wi] += fabs(xv * dy), tw[wi]++;
                            }
                }
#undef RB
    const float *got[3] = {r->y, r->dx, r->dw};
    const int64_t len[3] = {g->ny, g->nx, g->nw};
    const char *names[3] = {"y", "dx", "dW"};
    int64_t off = 0;
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < len[k]; i++) {
            const double tol = (double)(t[off + i] + 2) * FLT_EPSILON * s[off + i];
            ck_assert_msg(fabs(got[k][i] - e[off + i]) <= tol, "%s: %s[%lld] = %.9g, float64 %.9g (tolerance %.3g)",
                          c->name, names[k], (long long)i, (double)got[k][i], e[off + i], tol);
        }
        off += len[k];
    }
    free(e), free(s), free(t);
}


static void bf16_matches_reference(mg_bf16_path path, int i) {
    const ccase *c = &cases[i];
    const geom g = case_geom(c);
    ck_assert(mg_bf16_path_force(path));
    model m;
    model_make(&m, c, &g, 100 + (uint64_t)i);
    result got, want;
    result_alloc(&got, &g), result_alloc(&want, &g);
    run_in(&m, c, &g, MG_PRECISION_BF16, &got);
    ref_bf16(&g, &m.in, path, &want);
    expect_same_result(c, &g, mg_bf16_path_name(path), &got, &want);
    expect_close_to_float64(c, &g, &m.in, &got);
    result_free(&got), result_free(&want);
    mg_params_free(m.P);
}

START_TEST(conv_bf16_emulated_matches_reference) { bf16_matches_reference(MG_BF16_EMULATED, _i); }
END_TEST
START_TEST(conv_bf16_avx512bf16_matches_reference) { bf16_matches_reference(MG_BF16_AVX512, _i); }
END_TEST
START_TEST(conv_bf16_amx_matches_reference) { bf16_matches_reference(MG_BF16_AMX, _i); }
END_TEST

/* A parameter's bf16 copy lasts one step: after an update and mg_ctx_reset the op sees the new W. */
START_TEST(conv_bf16_weight_copy_renewed_after_reset) {
    const ccase *c = &cases[2];
    const geom g = case_geom(c);
    model m;
    model_make(&m, c, &g, 7);
    result got, want;
    result_alloc(&got, &g), result_alloc(&want, &g);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    run_op(&m, c, &g, ctx, &got);
    for (int64_t i = 0; i < g.nw; i++) m.w->data[i] += 0.25f;
    mg_ctx_reset(ctx);
    run_op(&m, c, &g, ctx, &got);
    ref_bf16(&g, &m.in, mg_bf16_path_active(), &want);
    expect_same_result(c, &g, "the second step", &got, &want);
    mg_ctx_free(ctx);
    result_free(&got), result_free(&want);
    mg_params_free(m.P);
}
END_TEST

START_TEST(conv_bf16_same_bits_on_1_2_3_threads) {
    const int keep = mg_get_num_threads();
    for (int i = 0; i < N_CASES; i++) {
        const ccase *c = &cases[i];
        const geom g = case_geom(c);
        model m;
        model_make(&m, c, &g, 200 + (uint64_t)i);
        result one, more;
        result_alloc(&one, &g), result_alloc(&more, &g);
        mg_set_num_threads(1);
        run_in(&m, c, &g, MG_PRECISION_BF16, &one);
        for (int nt = 2; nt <= 3; nt++) {
            mg_set_num_threads(nt);
            run_in(&m, c, &g, MG_PRECISION_BF16, &more);
            char what[32];
            snprintf(what, sizeof what, "%d threads against 1", nt);
            expect_same_result(c, &g, what, &more, &one);
        }
        result_free(&one), result_free(&more);
        mg_params_free(m.P);
    }
    mg_set_num_threads(keep);
}
END_TEST

/* fp32 precision: the float32 products, bit for bit, whether set explicitly, left at the default or
 * set back after bf16; and bf16 gives other bits. */
START_TEST(conv_fp32_precision_unchanged) {
    const ccase *c = &cases[_i];
    const geom g = case_geom(c);
    model m;
    model_make(&m, c, &g, 300 + (uint64_t)_i);
    result want, got;
    result_alloc(&want, &g), result_alloc(&got, &g);
    ref_fp32(&g, &m.in, &want);
    run_in(&m, c, &g, MG_PRECISION_FP32, &got);
    expect_same_result(c, &g, "fp32 set explicitly", &got, &want);
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_int_eq(mg_ctx_precision(ctx), MG_PRECISION_FP32);
    run_op(&m, c, &g, ctx, &got);
    expect_same_result(c, &g, "the default precision", &got, &want);
    mg_ctx_reset(ctx);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    run_op(&m, c, &g, ctx, &got);
    if (g.KG > 1 || c->bias) /* a product of one term of bf16 values can round back to the float32 one */
        ck_assert_msg(memcmp(got.y, want.y, (size_t)g.ny * sizeof(float)) != 0, "%s: bf16 gave fp32's y", c->name);
    mg_ctx_reset(ctx);
    mg_ctx_set_precision(ctx, MG_PRECISION_FP32);
    run_op(&m, c, &g, ctx, &got);
    expect_same_result(c, &g, "fp32 after bf16", &got, &want);
    mg_ctx_free(ctx);
    result_free(&want), result_free(&got);
    mg_params_free(m.P);
}
END_TEST

/* ---- errors ---- */

static mg_tensor *zeros(mg_ctx *ctx, int ndim, const int64_t *shape) { return mg_zeros(ctx, ndim, shape); }
#define T(...) zeros(ctx, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* Each bad call's message in a bf16 context is the one fp32 gives. */
START_TEST(conv_bf16_bad_arguments_have_the_fp32_messages) {
    enum { CALLS = 8 };
    char msg[2][CALLS][1024];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < CALLS; k++) {
            tu_trap trap;
            mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
            mg_ctx_set_precision(ctx, p ? MG_PRECISION_BF16 : MG_PRECISION_FP32);
            mg_tensor *w = T(8, 3, 3, 3), *w1 = T(4, 3, 3), *y = NULL;
            switch (k) {
            case 0: y = mg_conv2d(ctx, T(2, 4, 9, 9), w, NULL, NULL); break;
            case 1: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, T(5), NULL); break;
            case 2: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.groups = 2}); break;
            case 3: y = mg_conv2d(ctx, T(1, 3, 2, 9), w, NULL, NULL); break;
            case 4: y = mg_conv2d(ctx, mg_tensor_new(ctx, MG_I32, 4, (int64_t[]){2, 3, 9, 9}), w, NULL, NULL); break;
            case 5: y = mg_conv1d(ctx, T(2, 3, 10), w1, NULL, &(mg_conv1d_opts){.padding = 1, .causal = true}); break;
            case 6: y = mg_conv1d(ctx, T(2, 3, 2), w1, NULL, NULL); break;
            case 7: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.padding = {INT64_C(1) << 62}}); break;
            default: ck_abort_msg("no call for case %d", k);
            }
            ck_assert_ptr_nonnull(y);
            ck_assert_int_eq(trap.calls, 1);
            snprintf(msg[p][k], sizeof msg[p][k], "%s", trap.msg);
            ck_assert_msg(strncmp(trap.msg, "mg_conv", 7) == 0, "case %d: '%s'", k, trap.msg);
            mg_ctx_free(ctx);
        }
    for (int k = 0; k < CALLS; k++)
        ck_assert_msg(strcmp(msg[0][k], msg[1][k]) == 0, "case %d: fp32 says\n  '%s'\nbf16 says\n  '%s'", k,
                      msg[0][k], msg[1][k]);
}
END_TEST

/* A fixed arena too small for the bf16 buffers fails with a message naming the buffer; the failed
 * context stays harmless (backward and further ops do nothing). */
START_TEST(conv_bf16_arena_exhausted_names_the_buffer) {
    static const char *const want[] = {"mg_conv2d: x in bf16", "mg_conv2d: the bf16 column buffer",
                                       "mg_conv2d: weight in bf16", "conv backward dy in bf16",
                                       "conv backward dy^T in bf16"};
    enum { NW = sizeof want / sizeof want[0] };
    bool seen[NW] = {false};
    /* grow the arena until the op gets through forward and backward; each failure on the way names
     * the buffer that did not fit */
    for (size_t cap = 4096; cap < ((size_t)1 << 24); cap += 256) {
        tu_trap trap;
        mg_ctx *ctx = tu_trapping_ctx(&trap, cap);
        mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
        mg_tensor *x = mg_zeros(ctx, 4, (int64_t[]){4, 8, 12, 12});
        mg_tensor *w = mg_zeros(ctx, 4, (int64_t[]){16, 8, 3, 3});
        if (!mg_ctx_ok(ctx)) {
            mg_ctx_free(ctx);
            continue;
        }
        mg_tensor_set_requires_grad(x, true);
        mg_tensor_set_requires_grad(w, true);
        mg_tensor *y = mg_conv2d(ctx, x, w, NULL, &(mg_conv2d_opts){.padding = {1, 1}});
        y = mg_relu(ctx, y);
        mg_backward(ctx, mg_sum(ctx, y));
        const bool ok = mg_ctx_ok(ctx);
        if (!ok) {
            ck_assert_int_eq(trap.calls, 1);
            for (int k = 0; k < NW; k++)
                if (strstr(trap.msg, want[k])) seen[k] = true;
        }
        mg_ctx_free(ctx);
        if (ok) break;
    }
    for (int k = 0; k < NW; k++) ck_assert_msg(seen[k], "no failure named '%s'", want[k]);
}
END_TEST

static Suite *bf16_conv_suite(void) {
    Suite *s = suite_create("bf16_conv");
    TCase *tc = tcase_create("bf16_conv");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, NULL, tu_restore_bf16_path);
    tcase_add_loop_test(tc, conv_bf16_emulated_matches_reference, 0, N_CASES);
    if (mg_bf16_path_available(MG_BF16_AVX512))
        tcase_add_loop_test(tc, conv_bf16_avx512bf16_matches_reference, 0, N_CASES);
    else
        fprintf(stderr, "# conv_bf16_avx512bf16_matches_reference skipped: no AVX512-BF16 on this CPU\n");
    if (mg_bf16_path_available(MG_BF16_AMX))
        tcase_add_loop_test(tc, conv_bf16_amx_matches_reference, 0, N_CASES);
    else
        fprintf(stderr, "# conv_bf16_amx_matches_reference skipped: %s\n",
                mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU" : "the build left the AMX path out");
    tcase_add_test(tc, conv_bf16_weight_copy_renewed_after_reset);
    tcase_add_test(tc, conv_bf16_same_bits_on_1_2_3_threads);
    tcase_add_loop_test(tc, conv_fp32_precision_unchanged, 0, N_CASES);
    tcase_add_test(tc, conv_bf16_bad_arguments_have_the_fp32_messages);
    tcase_add_test(tc, conv_bf16_arena_exhausted_names_the_buffer);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_conv_suite)
