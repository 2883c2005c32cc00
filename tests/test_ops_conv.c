/* Convolution, pooling and ReLU: forward and backward against float64 references on odd shapes
 * (size-1 dims, stride 2, dilation 2, groups, padding, non-square, causal conv1d), bit-identical
 * results for 1 and 3 threads, and the exact error message for every bad shape or argument.
 *
 * Tolerance for conv values: the rounding bound of a sum of K products computed in any order,
 * (K + 4) FLT_EPSILON sum |a b| over the terms that form the element (K the number of terms). */
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Option structs below leave trailing fields to their zero defaults on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* ---- the float64 reference ---- */

typedef struct {
    int64_t N, C, H, W, O, KH, KW, sh, sw, ph_lo, ph_hi, pw_lo, pw_hi, dh, dw, G;
} rgeom;

static int64_t rg_oh(const rgeom *g) { return (g->H + g->ph_lo + g->ph_hi - g->dh * (g->KH - 1) - 1) / g->sh + 1; }
static int64_t rg_ow(const rgeom *g) { return (g->W + g->pw_lo + g->pw_hi - g->dw * (g->KW - 1) - 1) / g->sw + 1; }

/* y, |terms| (for the bound), and with dy given, dx, dw, db (all double, zeroed here). */
static void ref_conv(const rgeom *g, const float *x, const float *w, const float *b, double *y, double *yabs,
                     int64_t *nterms, const float *dy, double *dx, double *dw, double *db) {
    const int64_t OH = rg_oh(g), OW = rg_ow(g), Cg = g->C / g->G, Og = g->O / g->G;
    if (dy) {
        memset(dx, 0, sizeof(double) * (size_t)(g->N * g->C * g->H * g->W));
        memset(dw, 0, sizeof(double) * (size_t)(g->O * Cg * g->KH * g->KW));
        memset(db, 0, sizeof(double) * (size_t)g->O);
    }
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t yi = ((n * g->O + o) * OH + oh) * OW + ow;
                    double s = b ? b[o] : 0.0, sa = b ? fabs(b[o]) : 0.0;
                    double gy = dy ? dy[yi] : 0.0;
                    int64_t gi = o / Og;
                    for (int64_t cc = 0; cc < Cg; cc++)
                        for (int64_t ki = 0; ki < g->KH; ki++)
                            for (int64_t kj = 0; kj < g->KW; kj++) {
                                int64_t ih = oh * g->sh - g->ph_lo + ki * g->dh, iw = ow * g->sw - g->pw_lo + kj * g->dw;
                                if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) continue;
                                int64_t c = gi * Cg + cc;
                                int64_t xi = ((n * g->C + c) * g->H + ih) * g->W + iw;
                                int64_t wi = ((o * Cg + cc) * g->KH + ki) * g->KW + kj;
                                s += (double)x[xi] * w[wi];
                                sa += fabs((double)x[xi] * w[wi]);
                                if (dy) {
                                    dx[xi] += (double)w[wi] * gy;
                                    dw[wi] += (double)x[xi] * gy;
                                }
                            }
                    y[yi] = s;
                    yabs[yi] = sa;
                    if (dy && b) db[o] += gy;
                }
    *nterms = Cg * g->KH * g->KW + 1;
}

static float *rand_buf(mg_rng *r, int64_t n) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++) p[i] = mg_rng_range(r, -1.0f, 1.0f);
    return p;
}

static void expect_close(const char *what, const float *got, const double *want, double tol_each, const double *scale,
                         int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double tol = tol_each * (scale ? scale[i] : 1.0) + 1e-30;
        ck_assert_msg(fabs(got[i] - want[i]) <= tol, "%s [%lld]: %.9g, want %.9g (tolerance %.3g)", what, (long long)i,
                      (double)got[i], want[i], tol);
    }
}

typedef struct {
    const char *name;
    bool one_d, causal, bias;
    int64_t N, C, H, W, O, KH, KW; /* conv1d: H = KH = 1 */
    int64_t stride[2], padding[2], dilation[2], groups;
} conv_case;

static const conv_case conv_cases[] = {
    {"2d plain 3x3", false, false, true, 2, 3, 9, 9, 8, 3, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"2d pad 1 non-square", false, false, true, 3, 2, 5, 8, 4, 3, 2, {1, 1}, {1, 1}, {1, 1}, 1},
    {"2d stride 2 dilation 2 groups 2 pad 2", false, false, true, 2, 4, 11, 7, 6, 3, 2, {2, 2}, {2, 2}, {2, 2}, 2},
    {"2d stride (2,1) padding (0,3) dilation (1,3)", false, false, false, 1, 5, 6, 9, 3, 2, 3, {2, 1}, {0, 3}, {1, 3}, 1},
    {"2d size-1 everything", false, false, false, 1, 1, 1, 1, 1, 1, 1, {0, 0}, {0, 0}, {0, 0}, 0},
    {"2d depthwise (groups = C)", false, false, true, 2, 4, 6, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4},
    {"2d many channels (GEMM tiles)", false, false, true, 3, 19, 13, 11, 33, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
    {"2d kernel = input", false, false, true, 2, 3, 4, 5, 2, 4, 5, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d plain", true, false, true, 2, 3, 1, 10, 5, 1, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d stride 2 pad 2 dilation 2 groups 3", true, false, true, 3, 6, 1, 13, 9, 1, 3, {0, 2}, {0, 2}, {0, 2}, 3},
    {"1d causal", true, true, true, 2, 3, 1, 8, 4, 1, 3, {0, 0}, {0, 0}, {0, 0}, 0},
    {"1d causal dilation 3 stride 2", true, true, false, 1, 2, 1, 11, 2, 1, 4, {0, 2}, {0, 0}, {0, 3}, 2},
    {"1d length 1 kernel 1", true, false, true, 4, 1, 1, 1, 3, 1, 1, {0, 0}, {0, 0}, {0, 0}, 0},
};
enum { N_CONV = sizeof conv_cases / sizeof conv_cases[0] };

static rgeom case_geom(const conv_case *c) {
    rgeom g = {c->N, c->C, c->H, c->W, c->O, c->KH, c->KW};
    g.G = c->groups ? c->groups : 1;
    g.sh = c->stride[0] ? c->stride[0] : 1, g.sw = c->stride[1] ? c->stride[1] : 1;
    g.dh = c->dilation[0] ? c->dilation[0] : 1, g.dw = c->dilation[1] ? c->dilation[1] : 1;
    g.ph_lo = g.ph_hi = c->padding[0];
    g.pw_lo = g.pw_hi = c->padding[1];
    if (c->causal) g.pw_lo = (c->KW - 1) * g.dw, g.pw_hi = 0;
    return g;
}

static mg_tensor *run_conv(mg_ctx *ctx, const conv_case *c, mg_tensor *x, mg_tensor *w, mg_tensor *b) {
    if (c->one_d) {
        mg_conv1d_opts o = {c->stride[1], c->padding[1], c->dilation[1], c->groups, c->causal};
        return mg_conv1d(ctx, x, w, b, &o);
    }
    mg_conv2d_opts o = {{c->stride[0], c->stride[1]}, {c->padding[0], c->padding[1]},
                        {c->dilation[0], c->dilation[1]}, c->groups};
    return mg_conv2d(ctx, x, w, b, &o);
}

/* Forward and the three gradients of one case against the reference. */
START_TEST(conv_matches_reference) {
    const conv_case *c = &conv_cases[_i];
    rgeom g = case_geom(c);
    const int64_t OH = rg_oh(&g), OW = rg_ow(&g), Cg = c->C / g.G;
    const int64_t nx = c->N * c->C * c->H * c->W, nw = c->O * Cg * c->KH * c->KW, ny = c->N * c->O * OH * OW;
    mg_rng r = mg_rng_make(40 + (uint64_t)_i);
    float *xv = rand_buf(&r, nx), *wv = rand_buf(&r, nw), *bv = rand_buf(&r, c->O), *dyv = rand_buf(&r, ny);
    double *y = malloc(sizeof(double) * (size_t)ny), *ya = malloc(sizeof(double) * (size_t)ny);
    double *dx = malloc(sizeof(double) * (size_t)nx), *dw = malloc(sizeof(double) * (size_t)nw),
           *db = malloc(sizeof(double) * (size_t)c->O);
    int64_t K;
    ref_conv(&g, xv, wv, c->bias ? bv : NULL, y, ya, &K, dyv, dx, dw, db);

    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x, *w, *b = NULL;
    if (c->one_d) {
        x = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){c->N, c->C, c->W}, xv);
        w = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){c->O, Cg, c->KW}, wv);
    } else {
        x = mg_tensor_wrap(ctx, MG_F32, 4, (int64_t[]){c->N, c->C, c->H, c->W}, xv);
        w = mg_tensor_wrap(ctx, MG_F32, 4, (int64_t[]){c->O, Cg, c->KH, c->KW}, wv);
    }
    if (c->bias) b = mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){c->O}, bv);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor_set_requires_grad(w, true);
    if (b) mg_tensor_set_requires_grad(b, true);
    mg_tensor *out = run_conv(ctx, c, x, w, b);
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    if (c->one_d) {
        ck_assert_int_eq(out->ndim, 3);
        ck_assert_int_eq(out->shape[2], OW);
        if (c->causal && g.sw == 1) ck_assert_int_eq(OW, c->W); /* causal keeps the length */
    } else {
        ck_assert_int_eq(out->ndim, 4);
        ck_assert_int_eq(out->shape[2], OH);
        ck_assert_int_eq(out->shape[3], OW);
    }
    ck_assert_int_eq(out->shape[0], c->N);
    ck_assert_int_eq(out->shape[1], c->O);
    ck_assert_int_eq(out->numel, ny);
    expect_close(c->name, out->data, y, (double)(K + 4) * FLT_EPSILON, ya, ny);
    mg_tensor *R = mg_tensor_wrap(ctx, MG_F32, out->ndim, out->shape, dyv);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, out, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    /* gradients: sums of at most N*OH*OW*O terms of size <= 1 */
    double tol = (double)(c->N * OH * OW * c->O + 4) * FLT_EPSILON * 4;
    expect_close("dx", x->grad, dx, tol, NULL, nx);
    expect_close("dw", w->grad, dw, tol, NULL, nw);
    if (b) expect_close("db", b->grad, db, tol, NULL, c->O);
    mg_ctx_free(ctx);
    free(xv), free(wv), free(bv), free(dyv), free(y), free(ya), free(dx), free(dw), free(db);
}
END_TEST

/* ---- pools ---- */

typedef struct {
    const char *name;
    int64_t N, C, H, W, kernel[2], stride[2], padding[2];
} pool_case;

static const pool_case pool_cases[] = {
    {"2x2 even", 2, 3, 6, 8, {2, 2}, {0, 0}, {0, 0}},
    {"2x2 odd input drops the last row", 1, 2, 7, 5, {2, 2}, {0, 0}, {0, 0}},
    {"3x3 stride 2 pad 1", 2, 2, 7, 6, {3, 3}, {2, 2}, {1, 1}},
    {"(3,2) stride (1,2) pad (1,0)", 1, 3, 5, 6, {3, 2}, {1, 2}, {1, 0}},
    {"1x1 on size-1 dims", 3, 1, 1, 1, {1, 1}, {0, 0}, {0, 0}},
    {"kernel = input", 2, 2, 3, 4, {3, 4}, {0, 0}, {0, 0}},
};
enum { N_POOL = sizeof pool_cases / sizeof pool_cases[0] };

START_TEST(pools_match_reference) {
    const pool_case *c = &pool_cases[_i];
    const int64_t kh = c->kernel[0], kw = c->kernel[1], sh = c->stride[0] ? c->stride[0] : kh,
                  sw = c->stride[1] ? c->stride[1] : kw, ph = c->padding[0], pw = c->padding[1];
    const int64_t OH = (c->H + 2 * ph - kh) / sh + 1, OW = (c->W + 2 * pw - kw) / sw + 1;
    const int64_t nx = c->N * c->C * c->H * c->W, ny = c->N * c->C * OH * OW, P = c->N * c->C;
    mg_rng r = mg_rng_make(70 + (uint64_t)_i);
    float *xv = rand_buf(&r, nx), *dyv = rand_buf(&r, ny);
    double *ymax = calloc((size_t)ny, sizeof(double)), *yavg = calloc((size_t)ny, sizeof(double));
    double *dmax = calloc((size_t)nx, sizeof(double)), *davg = calloc((size_t)nx, sizeof(double));
    for (int64_t p = 0; p < P; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t o = (p * OH + oh) * OW + ow, at = -1;
                double best = -INFINITY, s = 0.0;
                for (int64_t i = oh * sh - ph; i < oh * sh - ph + kh; i++)
                    for (int64_t j = ow * sw - pw; j < ow * sw - pw + kw; j++) {
                        if (i < 0 || i >= c->H || j < 0 || j >= c->W) continue;
                        int64_t xi = (p * c->H + i) * c->W + j;
                        s += xv[xi];
                        if (xv[xi] > best) best = xv[xi], at = xi;
                    }
                ymax[o] = best, yavg[o] = s / (double)(kh * kw);
                dmax[at] += dyv[o];
                for (int64_t i = oh * sh - ph; i < oh * sh - ph + kh; i++)
                    for (int64_t j = ow * sw - pw; j < ow * sw - pw + kw; j++)
                        if (i >= 0 && i < c->H && j >= 0 && j < c->W)
                            davg[(p * c->H + i) * c->W + j] += dyv[o] / (double)(kh * kw);
            }
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 4, (int64_t[]){c->N, c->C, c->H, c->W}, xv);
    mg_tensor_set_requires_grad(x, true);
    mg_pool2d_opts o = {{kh, kw}, {c->stride[0], c->stride[1]}, {ph, pw}};
    mg_tensor *a = mg_max_pool2d(ctx, x, &o), *v = mg_avg_pool2d(ctx, x, &o);
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    ck_assert_int_eq(a->shape[2], OH);
    ck_assert_int_eq(a->shape[3], OW);
    ck_assert_int_eq(v->numel, ny);
    expect_close("max_pool2d", a->data, ymax, 0.0, NULL, ny); /* exact: a max is one of the values */
    expect_close("avg_pool2d", v->data, yavg, (double)(kh * kw + 4) * FLT_EPSILON, NULL, ny);
    mg_tensor *R = mg_tensor_wrap(ctx, MG_F32, 4, a->shape, dyv);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, a, R)));
    expect_close("max_pool2d dx", x->grad, dmax, 64 * FLT_EPSILON, NULL, nx);
    memset(x->grad, 0, (size_t)nx * sizeof(float));
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, v, R)));
    expect_close("avg_pool2d dx", x->grad, davg, 64 * FLT_EPSILON, NULL, nx);
    mg_ctx_free(ctx);
    free(xv), free(dyv), free(ymax), free(yavg), free(dmax), free(davg);
}
END_TEST

START_TEST(relu_values_and_gradient) {
    mg_ctx *ctx = mg_ctx_new(0);
    float xv[] = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.5f, -1e-30f};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 3}, xv);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *y = mg_relu(ctx, x);
    const float want[] = {0, 0, 0, 1e-30f, 3.5f, 0}, dwant[] = {0, 0, 0, 1, 1, 0};
    for (int i = 0; i < 6; i++) ck_assert_float_eq(y->data[i], want[i]);
    ck_assert_int_eq(y->ndim, 2);
    mg_backward(ctx, mg_sum(ctx, y));
    for (int i = 0; i < 6; i++) ck_assert_float_eq(x->grad[i], dwant[i]);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- thread counts ---- */

/* y, dx, dw, db of a strided grouped conv + max pool + relu chain, with `threads` threads. */
static void chain_run(int threads, float *out, int64_t *n_out) {
    mg_set_num_threads(threads);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(9);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){8, 4, 31, 29});
    mg_tensor *w = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){16, 2, 3, 3});
    mg_tensor *b = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){16});
    mg_tensor *t[] = {x, w, b};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < t[k]->numel; i++) t[k]->data[i] = mg_rng_range(&r, -1.0f, 1.0f);
        mg_tensor_set_requires_grad(t[k], true);
    }
    mg_conv2d_opts o = {{1, 2}, {1, 1}, {1, 2}, 2};
    mg_tensor *y = mg_relu(ctx, mg_conv2d(ctx, x, w, b, &o));
    y = mg_avg_pool2d(ctx, mg_max_pool2d(ctx, y, &(mg_pool2d_opts){{2, 2}}), &(mg_pool2d_opts){{3, 3}, {1, 1}, {1, 1}});
    mg_tensor *l = mg_mean(ctx, mg_mul(ctx, y, y));
    mg_backward(ctx, l);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    int64_t k = 0;
    mg_tensor *all[] = {y, x, w, b};
    for (int a = 0; a < 4; a++)
        for (int64_t i = 0; i < all[a]->numel; i++) out[k++] = a ? all[a]->grad[i] : all[a]->data[i];
    *n_out = k;
    mg_ctx_free(ctx);
}

START_TEST(bit_identical_for_any_thread_count) {
    int keep = mg_get_num_threads();
    enum { CAP = 1 << 16 };
    float *a = malloc(CAP * sizeof(float)), *b = malloc(CAP * sizeof(float));
    int64_t na, nb;
    chain_run(1, a, &na);
    chain_run(3, b, &nb);
    mg_set_num_threads(keep);
    ck_assert_int_eq(na, nb);
    ck_assert_int_le(na, CAP);
    ck_assert_msg(memcmp(a, b, (size_t)na * sizeof(float)) == 0, "results differ between 1 and 3 threads");
    free(a), free(b);
}
END_TEST

/* ---- errors ---- */

static mg_tensor *zeros(mg_ctx *ctx, int ndim, const int64_t *shape) { return mg_zeros(ctx, ndim, shape); }
#define T(...) zeros(ctx, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

START_TEST(every_bad_argument_has_its_message) {
    static const char *const expect[] = {
        "mg_conv2d: weight(8,3,3,3) needs x with 3 channels, got x(2,4,9,9)",
        "mg_conv2d: weight(8,3,3,3) with groups 2 needs x with 6 channels, got x(2,3,9,9)",
        "mg_conv2d: weight(7,3,3,3): 7 out channels are not divisible by groups 2",
        "mg_conv2d: x(2,3,9) must be 4-d (N,C,H,W)",
        "mg_conv2d: weight(8,3,3) must be 4-d (out,in/groups,kh,kw)",
        "mg_conv2d: bias(5) must be (8) for weight(8,3,3,3)",
        "mg_conv2d: groups -1 must be >= 1 (0 means 1)",
        "mg_conv2d: stride (-1,1), padding (0,0), dilation (1,1): stride and dilation must be in [1, 2147483647] (0 means 1), padding in [0, 2147483647]",
        "mg_conv2d: stride (1,1), padding (0,-2), dilation (1,1)",
        "mg_conv2d: stride (1,1), padding (0,0), dilation (1,-3)",
        "mg_conv2d: stride (1,1), padding (4611686018427387904,0), dilation (1,1)",
        "mg_conv2d: x(1,3,2,9) is smaller than weight(8,3,3,3)'s kernel with padding (0,0), dilation (1,1)",
        "mg_conv2d: x(1,3,5,9) is smaller than weight(8,3,3,3)'s kernel with padding (0,0), dilation (3,1)",
        "mg_conv2d: x(2,3,9,9) must be float32 (got int32 ids)",
        "mg_conv2d: weight(8,3,3,3) must be float32 (got int32 ids)",
        "mg_conv2d: bias(8) must be float32 (got int32 ids)",
        "mg_conv1d: weight(4,3,3) needs x with 3 channels, got x(2,5,10)",
        "mg_conv1d: x(2,3,10,1) must be 3-d (N,C,L)",
        "mg_conv1d: weight(4,3,3,1) must be 3-d (out,in/groups,k)",
        "mg_conv1d: causal pads (k-1)*dilation on the left itself: padding must be 0, got 1",
        "mg_conv1d: x(2,3,2) is shorter than weight(4,3,3)'s kernel with padding 0, dilation 1",
        "mg_conv1d: stride 1, padding 0, dilation -2",
        "mg_conv1d: bias(4,1) must be (4) for weight(4,3,3)",
        "mg_conv1d: x(2,3,10) must be float32 (got int32 ids)",
        "mg_max_pool2d: x(2,3,9) must be 4-d (N,C,H,W)",
        "mg_max_pool2d: x(2,3,4,4): options with a kernel size are required",
        "mg_max_pool2d: kernel (0,2) and stride (0,0) must be in [1, 2147483647] (stride 0 means the kernel)",
        "mg_avg_pool2d: kernel (2,2) and stride (-1,0) must be in [1, 2147483647] (stride 0 means the kernel)",
        "mg_max_pool2d: padding (2,0) must be >= 0 and at most half of kernel (3,3)",
        "mg_avg_pool2d: padding (0,-1) must be >= 0 and at most half of kernel (2,2)",
        "mg_avg_pool2d: x(1,1,1,4) is smaller than kernel (2,2) with padding (0,0)",
        "mg_max_pool2d: x(1,1,4,4) must be float32 (got int32 ids)",
        "mg_relu: x(3) must be float32 (got int32 ids)",
    };
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        tu_trap c;
        mg_ctx *ctx = tu_trapping_ctx(&c, 0);
        mg_tensor *w = T(8, 3, 3, 3), *i32 = mg_tensor_new(ctx, MG_I32, 4, (int64_t[]){2, 3, 9, 9});
        memset(i32->i32, 0, (size_t)i32->numel * sizeof(int32_t));
        mg_tensor *w1 = T(4, 3, 3), *x1 = T(2, 3, 10);
        mg_tensor *y = NULL;
        switch (k) {
        case 0: y = mg_conv2d(ctx, T(2, 4, 9, 9), w, NULL, NULL); break;
        case 1: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.groups = 2}); break;
        case 2: y = mg_conv2d(ctx, T(2, 6, 9, 9), T(7, 3, 3, 3), NULL, &(mg_conv2d_opts){.groups = 2}); break;
        case 3: y = mg_conv2d(ctx, T(2, 3, 9), w, NULL, NULL); break;
        case 4: y = mg_conv2d(ctx, T(2, 3, 9, 9), T(8, 3, 3), NULL, NULL); break;
        case 5: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, T(5), NULL); break;
        case 6: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.groups = -1}); break;
        case 7: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.stride = {-1, 1}}); break;
        case 8: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.padding = {0, -2}}); break;
        case 9: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.dilation = {1, -3}}); break;
        case 10: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, NULL, &(mg_conv2d_opts){.padding = {INT64_C(1) << 62}}); break;
        case 11: y = mg_conv2d(ctx, T(1, 3, 2, 9), w, NULL, NULL); break;
        case 12: y = mg_conv2d(ctx, T(1, 3, 5, 9), w, NULL, &(mg_conv2d_opts){.dilation = {3, 1}}); break;
        case 13: y = mg_conv2d(ctx, i32, w, NULL, NULL); break;
        case 14: y = mg_conv2d(ctx, T(2, 3, 9, 9), mg_tensor_new(ctx, MG_I32, 4, (int64_t[]){8, 3, 3, 3}), NULL, NULL); break;
        case 15: y = mg_conv2d(ctx, T(2, 3, 9, 9), w, mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){8}), NULL); break;
        case 16: y = mg_conv1d(ctx, T(2, 5, 10), w1, NULL, NULL); break;
        case 17: y = mg_conv1d(ctx, T(2, 3, 10, 1), w1, NULL, NULL); break;
        case 18: y = mg_conv1d(ctx, x1, T(4, 3, 3, 1), NULL, NULL); break;
        case 19: y = mg_conv1d(ctx, x1, w1, NULL, &(mg_conv1d_opts){.padding = 1, .causal = true}); break;
        case 20: y = mg_conv1d(ctx, T(2, 3, 2), w1, NULL, NULL); break;
        case 21: y = mg_conv1d(ctx, x1, w1, NULL, &(mg_conv1d_opts){.dilation = -2}); break;
        case 22: y = mg_conv1d(ctx, x1, w1, T(4, 1), NULL); break;
        case 23: y = mg_conv1d(ctx, mg_tensor_new(ctx, MG_I32, 3, (int64_t[]){2, 3, 10}), w1, NULL, NULL); break;
        case 24: y = mg_max_pool2d(ctx, T(2, 3, 9), &(mg_pool2d_opts){{2, 2}}); break;
        case 25: y = mg_max_pool2d(ctx, T(2, 3, 4, 4), NULL); break;
        case 26: y = mg_max_pool2d(ctx, T(2, 3, 4, 4), &(mg_pool2d_opts){{0, 2}}); break;
        case 27: y = mg_avg_pool2d(ctx, T(2, 3, 4, 4), &(mg_pool2d_opts){{2, 2}, {-1, 0}}); break;
        case 28: y = mg_max_pool2d(ctx, T(2, 3, 4, 4), &(mg_pool2d_opts){{3, 3}, {0, 0}, {2, 0}}); break;
        case 29: y = mg_avg_pool2d(ctx, T(2, 3, 4, 4), &(mg_pool2d_opts){{2, 2}, {0, 0}, {0, -1}}); break;
        case 30: y = mg_avg_pool2d(ctx, T(1, 1, 1, 4), &(mg_pool2d_opts){{2, 2}}); break;
        case 31: y = mg_max_pool2d(ctx, mg_tensor_new(ctx, MG_I32, 4, (int64_t[]){1, 1, 4, 4}), &(mg_pool2d_opts){{2, 2}}); break;
        case 32: y = mg_relu(ctx, mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){3})); break;
        default: ck_abort_msg("no call for case %zu", k);
        }
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(c.calls, 1);
        ck_assert_msg(strncmp(c.msg, expect[k], strlen(expect[k])) == 0, "case %zu: message\n  '%s'\nwant\n  '%s'", k,
                      c.msg, expect[k]);
        mg_ctx_free(ctx);
    }
}
END_TEST

/* A failed context makes the ops harmless no-ops. */
START_TEST(failed_context_is_sticky) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *bad = mg_conv2d(ctx, T(2, 4, 9, 9), T(8, 3, 3, 3), NULL, NULL);
    mg_tensor *y = mg_max_pool2d(ctx, mg_relu(ctx, bad), &(mg_pool2d_opts){{2, 2}});
    y = mg_conv1d(ctx, y, T(1, 1, 1), NULL, NULL);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_free(ctx);
}
END_TEST

static Suite *conv_suite(void) {
    Suite *s = suite_create("ops_conv");
    TCase *tc = tcase_create("conv");
    tcase_add_loop_test(tc, conv_matches_reference, 0, N_CONV);
    tcase_add_loop_test(tc, pools_match_reference, 0, N_POOL);
    tcase_add_test(tc, relu_values_and_gradient);
    tcase_add_test(tc, bit_identical_for_any_thread_count);
    tcase_add_test(tc, every_bad_argument_has_its_message);
    tcase_add_test(tc, failed_context_is_sticky);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(conv_suite)
