/* 2-d max and average pooling over NCHW, as PyTorch's F.max_pool2d / F.avg_pool2d with
 * ceil_mode=False (and count_include_pad=True for the average).
 *
 * Max: forward keeps, per output, the flat index (within its (n, c) plane) of the first maximum of
 * its window in row-major order (a NaN counts as the maximum, as in PyTorch, the last NaN when
 * several); backward adds dy to
 * that pixel. With padding <= kernel/2 every window holds at least one pixel.
 * Average: y = window sum / (KH*KW), padding counted as zeros; backward spreads dy / (KH*KW).
 * One (n, c) plane per task in both directions: bit-identical for any thread count. */
#include "internal.h"

typedef struct pool_geom {
    int64_t planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
} pool_geom;

static void max_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const pool_geom *g = n->saved[1];
    const int32_t *arg = n->saved[0];
    const float *dy = n->out->grad;
    const int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
    MG_PAR_FOR(g->planes * OHW > 32768, p, g->planes, {
        for (int64_t j = 0; j < OHW; j++) {
            int32_t a = arg[p * OHW + j];
            if (a >= 0) dx[p * HW + a] += dy[p * OHW + j];
        }
    });
}

static void avg_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const pool_geom *g = n->saved[1];
    const float *dy = n->out->grad;
    const float inv = 1.0f / (float)(g->kh * g->kw);
    const int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
    MG_PAR_FOR(g->planes * OHW > 32768, p, g->planes, {
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float v = dy[p * OHW + oh * g->OW + ow] * inv;
                int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
                for (int64_t i = h0 < 0 ? 0 : h0; i < h0 + g->kh && i < g->H; i++)
                    for (int64_t j = w0 < 0 ? 0 : w0; j < w0 + g->kw && j < g->W; j++)
                        dx[p * HW + i * g->W + j] += v;
            }
    });
}

const mg_op_def mg_op_def_max_pool2d = {"mg_max_pool2d", max_backward};
const mg_op_def mg_op_def_avg_pool2d = {"mg_avg_pool2d", avg_backward};

static mg_tensor *pool(mg_ctx *ctx, mg_tensor *x, const mg_pool2d_opts *opts, bool is_max) {
    const mg_op_def *def = is_max ? &mg_op_def_max_pool2d : &mg_op_def_avg_pool2d;
    const char *op = def->name;
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, op, "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim != 4) {
        mg_ctx_fail(ctx, "%s: x%s must be 4-d (N,C,H,W)", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (!opts) {
        mg_ctx_fail(ctx, "%s: x%s: options with a kernel size are required", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    pool_geom g = {0};
    g.kh = opts->kernel[0], g.kw = opts->kernel[1];
    g.sh = opts->stride[0] ? opts->stride[0] : g.kh, g.sw = opts->stride[1] ? opts->stride[1] : g.kw;
    g.ph = opts->padding[0], g.pw = opts->padding[1];
    if (g.kh < 1 || g.kw < 1 || g.kh > INT32_MAX || g.kw > INT32_MAX || g.sh < 1 || g.sw < 1 || g.sh > INT32_MAX ||
        g.sw > INT32_MAX) {
        mg_ctx_fail(ctx, "%s: kernel (%lld,%lld) and stride (%lld,%lld) must be in [1, %d] (stride 0 means the kernel)",
                    op, (long long)opts->kernel[0], (long long)opts->kernel[1], (long long)opts->stride[0],
                    (long long)opts->stride[1], INT32_MAX);
        return mg_ctx_dummy(ctx);
    }
    if (g.ph < 0 || g.pw < 0 || 2 * g.ph > g.kh || 2 * g.pw > g.kw) {
        mg_ctx_fail(ctx, "%s: padding (%lld,%lld) must be >= 0 and at most half of kernel (%lld,%lld)", op,
                    (long long)g.ph, (long long)g.pw, (long long)g.kh, (long long)g.kw);
        return mg_ctx_dummy(ctx);
    }
    g.H = x->shape[2], g.W = x->shape[3], g.planes = x->shape[0] * x->shape[1];
    int64_t sh = g.H + 2 * g.ph - g.kh, sw = g.W + 2 * g.pw - g.kw;
    if (sh < 0 || sw < 0) {
        mg_ctx_fail(ctx, "%s: x%s is smaller than kernel (%lld,%lld) with padding (%lld,%lld)", op, MG_SHAPE(x),
                    (long long)g.kh, (long long)g.kw, (long long)g.ph, (long long)g.pw);
        return mg_ctx_dummy(ctx);
    }
    if (is_max && g.H * g.W > INT32_MAX) {
        mg_ctx_fail(ctx, "%s: x%s: a plane of more than %d pixels is not supported", op, MG_SHAPE(x), INT32_MAX);
        return mg_ctx_dummy(ctx);
    }
    g.OH = sh / g.sh + 1, g.OW = sw / g.sw + 1;
    mg_tensor *y = mg_op_output(ctx, op, 4, (int64_t[]){x->shape[0], x->shape[1], g.OH, g.OW});
    if (!mg_ctx_ok(ctx)) return y;
    pool_geom *gs = mg_ctx_alloc(ctx, sizeof *gs, "pool geometry");
    int32_t *arg = is_max ? mg_ctx_alloc(ctx, (size_t)(y->numel ? y->numel : 1) * sizeof(int32_t), "max_pool2d indices") : NULL;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    *gs = g;
    const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
    const float *X = x->data;
    float *Y = y->data;
    const float inv = 1.0f / (float)(g.kh * g.kw);
    const bool fast2x2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
    MG_PAR_FOR(y->numel * g.kh * g.kw > 32768, p, g.planes, {
        const float *xp = X + p * HW;
        float *yp = Y + p * OHW;
        int32_t *ap = is_max ? arg + p * OHW : NULL;
        if (is_max && fast2x2) {
            for (int64_t oh = 0; oh < g.OH; oh++) {
                const float *r0 = xp + 2 * oh * g.W, *r1 = r0 + g.W;
                float *yr = yp + oh * g.OW;
                int32_t *ar = ap + oh * g.OW;
                const int32_t base = (int32_t)(2 * oh * g.W), w = (int32_t)g.W;
                for (int64_t ow = 0; ow < g.OW; ow++) {
                    float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
                    int32_t ia = base + 2 * (int32_t)ow;
                    bool tb = (b > a) | (b != b);
                    float m = tb ? b : a;
                    int32_t im = tb ? ia + 1 : ia;
                    bool tc = (c > m) | (c != c);
                    m = tc ? c : m, im = tc ? ia + w : im;
                    bool td = (d > m) | (d != d);
                    m = td ? d : m, im = td ? ia + w + 1 : im;
                    yr[ow] = m;
                    ar[ow] = im;
                }
            }
            continue;
        }
        for (int64_t oh = 0; oh < g.OH; oh++) {
            const int64_t h0 = oh * g.sh - g.ph;
            const int64_t i0 = h0 < 0 ? 0 : h0, i1 = h0 + g.kh < g.H ? h0 + g.kh : g.H;
            for (int64_t ow = 0; ow < g.OW; ow++) {
                const int64_t w0 = ow * g.sw - g.pw;
                const int64_t j0 = w0 < 0 ? 0 : w0, j1 = w0 + g.kw < g.W ? w0 + g.kw : g.W;
                if (is_max) {
                    /* the first maximum in row-major order; a NaN wins (the last one). Selects
                     * rather than branches: the comparisons of random data are unpredictable. */
                    int32_t at = (int32_t)(i0 * g.W + j0);
                    float best = xp[at];
                    for (int64_t i = i0; i < i1; i++) {
                        const float *r = xp + i * g.W;
                        for (int64_t j = j0; j < j1; j++) {
                            float v = r[j];
                            bool take = (v > best) | (v != v);
                            best = take ? v : best;
                            at = take ? (int32_t)(i * g.W + j) : at;
                        }
                    }
                    yp[oh * g.OW + ow] = best;
                    ap[oh * g.OW + ow] = (int32_t)at;
                } else {
                    float sum = 0.0f;
                    for (int64_t i = i0; i < i1; i++) {
                        const float *r = xp + i * g.W;
                        for (int64_t j = j0; j < j1; j++) sum += r[j];
                    }
                    yp[oh * g.OW + ow] = sum * inv;
                }
            }
        }
    });
    mg_node *n = mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    if (n) n->saved[0] = arg, n->saved[1] = gs;
    return y;
}

mg_tensor *mg_max_pool2d(mg_ctx *ctx, mg_tensor *x, const mg_pool2d_opts *opts) { return pool(ctx, x, opts, true); }
mg_tensor *mg_avg_pool2d(mg_ctx *ctx, mg_tensor *x, const mg_pool2d_opts *opts) { return pool(ctx, x, opts, false); }
