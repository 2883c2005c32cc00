/* Convolution over NCHW (mg_conv2d) and NCL (mg_conv1d, run as a 2-d convolution of height 1),
 * with stride, zero padding (per side, so conv1d's causal left padding is the same code),
 * dilation and groups, as PyTorch's F.conv2d / F.conv1d.
 *
 * im2col + GEMM over the whole batch. The column matrix `col` has one row per (input channel,
 * kernel tap), row c*KH*KW + ki*KW + kj, and one column per output position of every image,
 * column n*OH*OW + oh*OW + ow (NP = N*OH*OW columns); group g owns rows [g*Cg*KK, (g+1)*Cg*KK).
 *   forward:  y[n, group g] = W_g (Og, Cg*KK) @ col_g[:, image n]    (batched GEMM, one per image)
 *   backward: dYt (O, NP) = dy with its batch moved next to the positions (a copy),
 *             dW_g += dYt_g @ col_g^T       (one GEMM whose inner dimension is NP: the sum over the
 *                                            batch runs inside the GEMM, in a fixed order)
 *             db[o] += sum of row o of dYt   (double, in order)
 *             dcol_g = W_g^T @ dYt_g, then col2im adds each column entry back to its input pixel
 *                                           (one (image, channel) plane per task)
 * The GEMMs split over output tiles only and im2col / col2im write disjoint planes, so every
 * result is bit-identical for any thread count. col is kept for backward (arena memory
 * C*KH*KW*NP floats per call; without a node to record, the scratch for the call only); dYt and
 * dcol live in the context's scratch (mg_ctx_scratch_alloc) during the backward only.
 *
 * In bf16 precision (mg_ctx_set_precision) the three products run on mg_bgemm with bf16 operands,
 * accumulating in float32: x is rounded once (then im2col copies bf16 values, so col is the
 * rounded columns, kept for dW at half the bytes and no float col; x's copy is scratch), W's
 * per-step copy (mg_bf16_operand), dy rounded once (scratch) and moved into dYt's layout for both
 * of its products. y
 * starts from the bias (float32) and the forward product accumulates onto it; the bias gradient
 * sums the float32 dy in the same order as in fp32; dcol and col2im stay float32. The forward
 * products run one (image, group) per task, each on one thread when there are enough tasks;
 * mg_bgemm's sums depend on the shapes only, so bf16 is bit-identical for any thread count too.
 * fp32 precision runs exactly the float32 code above.
 */
#include "internal.h"
#include "minigrad/checked.h"
#include "minigrad/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct conv_geom {
    int64_t N, C, H, W;        /* input */
    int64_t O, KH, KW, G;      /* weight (O, C/G, KH, KW), groups */
    int64_t OH, OW;            /* output */
    int64_t sh, sw, dh, dw;    /* stride, dilation */
    int64_t ph, pw;            /* zero padding before the first row / column (after: implied by OH, OW) */
} conv_geom;

static inline int64_t conv_ohw(const conv_geom *g) { return g->OH * g->OW; }

/* The output columns ow in [lo, hi) read an input column inside [0, W) for tap kj. */
static void valid_range(int64_t out, int64_t in, int64_t s, int64_t p, int64_t offset, int64_t *lo,
                        int64_t *hi) {
    /* i = o*s - p + offset must be in [0, in) */
    int64_t a = p - offset; /* o*s >= a */
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t b = in + p - offset; /* o*s < b */
    int64_t h = b <= 0 ? 0 : (b + s - 1) / s;
    if (l > out) l = out;
    if (h > out) h = out;
    if (h < l) h = l;
    *lo = l, *hi = h;
}

/* col from x, for float and bf16 elements alike (a zero is all-zero bits in both). */
#define CONV_IM2COL(NAME, T)                                                                       \
    static void NAME(const conv_geom *g, const T *x, T *col) {                                     \
        const int64_t KK = g->KH * g->KW, OHW = conv_ohw(g), NP = g->N * OHW;                      \
        _Pragma("omp parallel for collapse(2) schedule(static) if (g->N * g->C * KK * OHW > 32768)") \
        for (int64_t n = 0; n < g->N; n++)                                                         \
            for (int64_t c = 0; c < g->C; c++) {                                                   \
                const T *xp = x + (n * g->C + c) * g->H * g->W;                                    \
                for (int64_t ki = 0; ki < g->KH; ki++)                                             \
                    for (int64_t kj = 0; kj < g->KW; kj++) {                                       \
                        T *dst = col + (c * KK + ki * g->KW + kj) * NP + n * OHW;                  \
                        int64_t lo, hi;                                                            \
                        valid_range(g->OW, g->W, g->sw, g->pw, kj * g->dw, &lo, &hi);              \
                        for (int64_t oh = 0; oh < g->OH; oh++, dst += g->OW) {                     \
                            int64_t ih = oh * g->sh - g->ph + ki * g->dh;                          \
                            if (ih < 0 || ih >= g->H) {                                            \
                                memset(dst, 0, (size_t)g->OW * sizeof(T));                         \
                                continue;                                                          \
                            }                                                                      \
                            const T *src = xp + ih * g->W - g->pw + kj * g->dw;                    \
                            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;                       \
                            if (g->sw == 1)                                                        \
                                memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(T));         \
                            else                                                                   \
                                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw];    \
                            for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0;                   \
                        }                                                                          \
                    }                                                                              \
            }                                                                                      \
    }

CONV_IM2COL(im2col, float)
CONV_IM2COL(im2col_bf16, mg_bf16)

/* dx += the columns of dcol, each added to the input pixel it was read from. */
static void col2im(const conv_geom *g, const float *dcol, float *dx) {
    const int64_t KK = g->KH * g->KW, OHW = conv_ohw(g), NP = g->N * OHW;
#pragma omp parallel for collapse(2) schedule(static) if (g->N * g->C * KK * OHW > 32768)
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++) {
            float *xp = dx + (n * g->C + c) * g->H * g->W;
            for (int64_t ki = 0; ki < g->KH; ki++)
                for (int64_t kj = 0; kj < g->KW; kj++) {
                    const float *src = dcol + (c * KK + ki * g->KW + kj) * NP + n * OHW;
                    int64_t lo, hi;
                    valid_range(g->OW, g->W, g->sw, g->pw, kj * g->dw, &lo, &hi);
                    for (int64_t oh = 0; oh < g->OH; oh++, src += g->OW) {
                        int64_t ih = oh * g->sh - g->ph + ki * g->dh;
                        if (ih < 0 || ih >= g->H) continue;
                        float *dst = xp + ih * g->W - g->pw + kj * g->dw;
                        if (g->sw == 1)
                            for (int64_t ow = lo; ow < hi; ow++) dst[ow] += src[ow];
                        else
                            for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->sw] += src[ow];
                    }
                }
        }
}

/* db[o] += the sum of channel o of dy over the batch and the positions, in double, image by image:
 * the order of row o of dYt. */
static void bias_grad(const conv_geom *g, const float *dy, float *db) {
    const int64_t OHW = conv_ohw(g);
    MG_PAR_FOR(g->O * g->N * OHW > 65536, o, g->O, {
        double s = 0.0;
        for (int64_t i = 0; i < g->N; i++) {
            const float *r = dy + (i * g->O + o) * OHW;
            for (int64_t j = 0; j < OHW; j++) s += r[j];
        }
        db[o] += (float)s;
    });
}

/* bf16 backward: saved[2] the bf16 col, saved[3] W's bf16 copy. */
static void conv_backward_bf16(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const conv_geom *g = n->saved[1];
    const mg_bf16 *colb = n->saved[2], *wb = n->saved[3];
    const float *dy = n->out->grad;
    const int64_t OHW = conv_ohw(g), NP = g->N * OHW, Cg = g->C / g->G, Og = g->O / g->G;
    const int64_t KG = Cg * g->KH * g->KW;
    if (b && mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        bias_grad(g, dy, db);
    }
    const bool need_dw = mg_requires_grad(w), need_dx = mg_requires_grad(x);
    if (!need_dw && !need_dx) return;
    const mg_bf16 *dyb = mg_bf16_scratch(ctx, dy, g->O * NP, "conv backward dy in bf16");
    mg_bf16 *dytb = mg_ctx_scratch_alloc(ctx, (size_t)(g->O * NP) * sizeof(mg_bf16), "conv backward dy^T in bf16");
    if (!dyb || !dytb) return;
#pragma omp parallel for collapse(2) schedule(static) if (g->O * NP > 65536)
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t i = 0; i < g->N; i++)
            memcpy(dytb + o * NP + i * OHW, dyb + (i * g->O + o) * OHW, (size_t)OHW * sizeof(mg_bf16));
    if (need_dw) {
        float *dw = mg_grad(ctx, w);
        if (!dw) return;
        for (int64_t gi = 0; gi < g->G; gi++)
            mg_bgemm(false, true, Og, KG, NP, dytb + gi * Og * NP, NP, colb + gi * KG * NP, NP, true,
                     dw + gi * Og * KG, KG);
    }
    if (need_dx) {
        float *dx = mg_grad(ctx, x);
        if (!dx) return;
        float *dcol = mg_ctx_scratch_alloc(ctx, (size_t)(g->C * g->KH * g->KW * NP) * sizeof(float), "conv backward dcol");
        if (!dcol) return;
        for (int64_t gi = 0; gi < g->G; gi++)
            mg_bgemm(true, false, KG, NP, Og, wb + gi * Og * KG, KG, dytb + gi * Og * NP, NP, false,
                     dcol + gi * KG * NP, NP);
        col2im(g, dcol, dx);
    }
}

static void conv_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const conv_geom *g = n->saved[1];
    if (n->saved[2]) {
        conv_backward_bf16(ctx, n);
        return;
    }
    const float *col = n->saved[0], *dy = n->out->grad;
    const int64_t OHW = conv_ohw(g), NP = g->N * OHW, Cg = g->C / g->G, Og = g->O / g->G;
    const int64_t KG = Cg * g->KH * g->KW; /* rows of one group's col */
    float *dyt = mg_ctx_scratch_alloc(ctx, (size_t)(g->O * NP) * sizeof(float), "conv backward dy^T");
    if (!dyt) return;
#pragma omp parallel for collapse(2) schedule(static) if (g->O * NP > 65536)
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t i = 0; i < g->N; i++)
            memcpy(dyt + o * NP + i * OHW, dy + (i * g->O + o) * OHW, (size_t)OHW * sizeof(float));
    if (b && mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        MG_PAR_FOR(g->O * NP > 65536, o, g->O, {
            double s = 0.0;
            const float *r = dyt + o * NP;
            for (int64_t j = 0; j < NP; j++) s += r[j];
            db[o] += (float)s;
        });
    }
    if (mg_requires_grad(w)) {
        float *dw = mg_grad(ctx, w);
        if (!dw) return;
        for (int64_t gi = 0; gi < g->G; gi++)
            mg_sgemm(false, true, Og, KG, NP, 1.0f, dyt + gi * Og * NP, NP, col + gi * KG * NP, NP, 1.0f,
                     dw + gi * Og * KG, KG);
    }
    if (mg_requires_grad(x)) {
        float *dx = mg_grad(ctx, x);
        if (!dx) return;
        float *dcol = mg_ctx_scratch_alloc(ctx, (size_t)(g->C * g->KH * g->KW * NP) * sizeof(float), "conv backward dcol");
        if (!dcol) return;
        for (int64_t gi = 0; gi < g->G; gi++)
            mg_sgemm(true, false, KG, NP, Og, 1.0f, w->data + gi * Og * KG, KG, dyt + gi * Og * NP, NP, 0.0f,
                     dcol + gi * KG * NP, NP);
        col2im(g, dcol, dx);
    }
}

const mg_op_def mg_op_def_conv2d = {"mg_conv2d", conv_backward};
const mg_op_def mg_op_def_conv1d = {"mg_conv1d", conv_backward};

/* Parameter limits: anything larger is refused before it can overflow the size arithmetic. */
#define CONV_MAX_ARG INT32_MAX

/* Validates everything but the spatial sizes and fills the channel fields of g; the caller has
 * checked the ranks. `xs`, `ws` are the shapes as the user sees them (for messages). */
static bool conv_check_channels(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *w,
                                const mg_tensor *b, int64_t groups, conv_geom *g) {
    if (groups < 1 || groups > CONV_MAX_ARG) {
        mg_ctx_fail(ctx, "%s: groups %lld must be >= 1 (0 means 1)", op, (long long)groups);
        return false;
    }
    g->G = groups;
    g->O = w->shape[0];
    if (g->O % groups) {
        mg_ctx_fail(ctx, "%s: weight%s: %lld out channels are not divisible by groups %lld", op, MG_SHAPE(w),
                    (long long)g->O, (long long)groups);
        return false;
    }
    if (x->shape[1] != w->shape[1] * groups) {
        if (groups == 1)
            mg_ctx_fail(ctx, "%s: weight%s needs x with %lld channels, got x%s", op, MG_SHAPE(w),
                        (long long)w->shape[1], MG_SHAPE(x));
        else
            mg_ctx_fail(ctx, "%s: weight%s with groups %lld needs x with %lld channels, got x%s", op, MG_SHAPE(w),
                        (long long)groups, (long long)(w->shape[1] * groups), MG_SHAPE(x));
        return false;
    }
    if (b && (b->ndim != 1 || b->shape[0] != g->O)) {
        mg_ctx_fail(ctx, "%s: bias%s must be (%lld) for weight%s", op, MG_SHAPE(b), (long long)g->O, MG_SHAPE(w));
        return false;
    }
    g->N = x->shape[0], g->C = x->shape[1];
    return true;
}

/* Output size along one axis, or -1 when the padded input is shorter than the dilated kernel. */
static int64_t out_size(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t s, int64_t d) {
    int64_t span = in + pad_lo + pad_hi - d * (k - 1) - 1;
    return span < 0 ? -1 : span / s + 1;
}

/* y[image i, group gi] (+)= W_g @ col_g[:, image i] on mg_bgemm, one (image, group) per task: on
 * one thread each when there are enough tasks to share out, else each product uses every thread.
 * Either way an element's sum is the same, so the bits do not depend on the thread count. */
static void conv_forward_bf16(const conv_geom *g, const mg_bf16 *wb, const mg_bf16 *colb, bool accumulate,
                              float *y) {
    const int64_t OHW = conv_ohw(g), NP = g->N * OHW, Og = g->O / g->G, KG = g->C / g->G * g->KH * g->KW;
    const int64_t tasks = g->N * g->G;
#ifdef _OPENMP
    const int nt = omp_get_max_threads();
#else
    const int nt = 1;
#endif
    const bool per_task = nt > 1 && tasks > 1 && (tasks % nt == 0 || tasks >= 4 * (int64_t)nt);
    MG_PAR_FOR_NT(per_task ? nt : 1, (dynamic, 1), t, tasks, {
        const int64_t i = t / g->G, gi = t % g->G;
        mg_bgemm(false, false, Og, OHW, KG, wb + gi * Og * KG, KG, colb + gi * KG * NP + i * OHW, NP, accumulate,
                 y + (i * g->O + gi * Og) * OHW, OHW);
    });
}

/* Runs the convolution described by g (spatial fields filled) and records the node. */
static mg_tensor *conv_run(mg_ctx *ctx, const mg_op_def *def, mg_tensor *x, mg_tensor *w, mg_tensor *b,
                           const conv_geom *gin, int ndim, const int64_t *yshape) {
    int64_t KK = gin->KH * gin->KW, OHW = gin->OH * gin->OW, rows, np, cells;
    size_t bytes;
    if (mg_ckd_mul_i64(&rows, gin->C, KK) || mg_ckd_mul_i64(&np, gin->N, OHW) ||
        mg_ckd_mul_i64(&cells, rows, np) || mg_ckd_bytes(&bytes, cells, sizeof(float))) {
        mg_ctx_fail(ctx, "%s: x%s with weight%s: the column buffer (%lld x %lld x %lld floats) is too large",
                    def->name, MG_SHAPE(x), MG_SHAPE(w), (long long)rows, (long long)gin->N, (long long)OHW);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, def->name, ndim, yshape);
    if (!mg_ctx_ok(ctx)) return y;
    conv_geom *g = mg_ctx_alloc(ctx, sizeof *g, "conv geometry");
    const bool bf16 = mg_use_bf16(ctx);
    /* The column buffer is kept for dW when a node will be recorded, else it lives in the scratch
     * for this call only, as x's bf16 copy always does (im2col reads it once). */
    const bool keep = mg_will_record(ctx, 3, (mg_tensor *[]){x, w, b});
    const size_t mark = mg_ctx_scratch_mark(ctx);
    float *col = NULL;
    mg_bf16 *colb = NULL, *xb = NULL;
    const mg_bf16 *wb = NULL;
    if (!bf16)
        col = keep ? mg_ctx_alloc(ctx, bytes ? bytes : sizeof(float), "conv column buffer")
                   : mg_ctx_scratch_alloc(ctx, bytes ? bytes : sizeof(float), "conv column buffer");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    *g = *gin;
    if (y->numel == 0) {
        mg_ctx_scratch_release(ctx, mark);
        return y;
    }
    if (bf16) {
        char what[3][64];
        snprintf(what[0], sizeof what[0], "%s: x in bf16", def->name);
        snprintf(what[1], sizeof what[1], "%s: the bf16 column buffer", def->name);
        snprintf(what[2], sizeof what[2], "%s: weight in bf16", def->name);
        const size_t cbytes = (size_t)(cells ? cells : 1) * sizeof(mg_bf16);
        colb = keep ? mg_ctx_alloc(ctx, cbytes, what[1]) : mg_ctx_scratch_alloc(ctx, cbytes, what[1]);
        xb = mg_bf16_scratch(ctx, x->data, x->numel, what[0]);
        wb = mg_bf16_operand(ctx, w, what[2]);
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
        im2col_bf16(g, xb, colb);
    } else
        im2col(g, x->data, col);
    const int64_t Cg = g->C / g->G, Og = g->O / g->G, KG = Cg * KK, NP = g->N * OHW;
    if (b) {
        float *Y = y->data;
#pragma omp parallel for collapse(2) schedule(static) if (y->numel > 65536)
        for (int64_t i = 0; i < g->N; i++)
            for (int64_t o = 0; o < g->O; o++) {
                float v = b->data[o], *r = Y + (i * g->O + o) * OHW;
                for (int64_t p = 0; p < OHW; p++) r[p] = v;
            }
    }
    if (bf16)
        conv_forward_bf16(g, wb, colb, b != NULL, y->data);
    else
        for (int64_t gi = 0; gi < g->G; gi++)
            mg_sgemm_batched(g->N, false, false, Og, OHW, KG, 1.0f, w->data + gi * Og * KG, KG, 0,
                             col + gi * KG * NP, NP, OHW, b ? 1.0f : 0.0f, y->data + gi * Og * OHW, OHW,
                             g->O * OHW);
    mg_ctx_scratch_release(ctx, mark); /* x's bf16 copy; col or colb too when not kept */
    mg_node *n = mg_op_record(ctx, def, y, 3, (mg_tensor *[]){x, w, b});
    if (n) n->saved[0] = col, n->saved[1] = g, n->saved[2] = colb, n->saved[3] = (void *)wb;
    return y;
}

static bool conv_dtypes(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *w, const mg_tensor *b) {
    return mg_expect_f32(ctx, op, "x", x) && mg_expect_f32(ctx, op, "weight", w) &&
           (!b || mg_expect_f32(ctx, op, "bias", b));
}

static bool arg_ok(int64_t v, int64_t lo) { return v >= lo && v <= CONV_MAX_ARG; }

mg_tensor *mg_conv2d(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias, const mg_conv2d_opts *opts) {
    static const char op[] = "mg_conv2d";
    MG_BAIL_IF_FAILED(ctx);
    if (!conv_dtypes(ctx, op, x, weight, bias)) return mg_ctx_dummy(ctx);
    if (x->ndim != 4) {
        mg_ctx_fail(ctx, "%s: x%s must be 4-d (N,C,H,W)", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (weight->ndim != 4) {
        mg_ctx_fail(ctx, "%s: weight%s must be 4-d (out,in/groups,kh,kw)", op, MG_SHAPE(weight));
        return mg_ctx_dummy(ctx);
    }
    mg_conv2d_opts o = {0};
    if (opts) o = *opts;
    int64_t s[2], p[2], d[2];
    for (int i = 0; i < 2; i++) {
        s[i] = o.stride[i] ? o.stride[i] : 1;
        d[i] = o.dilation[i] ? o.dilation[i] : 1;
        p[i] = o.padding[i];
    }
    if (!arg_ok(s[0], 1) || !arg_ok(s[1], 1) || !arg_ok(d[0], 1) || !arg_ok(d[1], 1) || !arg_ok(p[0], 0) ||
        !arg_ok(p[1], 0)) {
        mg_ctx_fail(ctx,
                    "%s: stride (%lld,%lld), padding (%lld,%lld), dilation (%lld,%lld): stride and dilation must "
                    "be in [1, %d] (0 means 1), padding in [0, %d]",
                    op, (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1], (long long)d[0],
                    (long long)d[1], CONV_MAX_ARG, CONV_MAX_ARG);
        return mg_ctx_dummy(ctx);
    }
    conv_geom g = {0};
    if (!conv_check_channels(ctx, op, x, weight, bias, o.groups ? o.groups : 1, &g)) return mg_ctx_dummy(ctx);
    g.H = x->shape[2], g.W = x->shape[3], g.KH = weight->shape[2], g.KW = weight->shape[3];
    g.sh = s[0], g.sw = s[1], g.dh = d[0], g.dw = d[1], g.ph = p[0], g.pw = p[1];
    g.OH = out_size(g.H, p[0], p[0], g.KH, s[0], d[0]);
    g.OW = out_size(g.W, p[1], p[1], g.KW, s[1], d[1]);
    if (g.OH < 1 || g.OW < 1) {
        mg_ctx_fail(ctx, "%s: x%s is smaller than weight%s's kernel with padding (%lld,%lld), dilation (%lld,%lld)",
                    op, MG_SHAPE(x), MG_SHAPE(weight), (long long)p[0], (long long)p[1], (long long)d[0],
                    (long long)d[1]);
        return mg_ctx_dummy(ctx);
    }
    return conv_run(ctx, &mg_op_def_conv2d, x, weight, bias, &g, 4, (int64_t[]){g.N, g.O, g.OH, g.OW});
}

mg_tensor *mg_conv1d(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias, const mg_conv1d_opts *opts) {
    static const char op[] = "mg_conv1d";
    MG_BAIL_IF_FAILED(ctx);
    if (!conv_dtypes(ctx, op, x, weight, bias)) return mg_ctx_dummy(ctx);
    if (x->ndim != 3) {
        mg_ctx_fail(ctx, "%s: x%s must be 3-d (N,C,L)", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (weight->ndim != 3) {
        mg_ctx_fail(ctx, "%s: weight%s must be 3-d (out,in/groups,k)", op, MG_SHAPE(weight));
        return mg_ctx_dummy(ctx);
    }
    mg_conv1d_opts o = {0};
    if (opts) o = *opts;
    int64_t s = o.stride ? o.stride : 1, d = o.dilation ? o.dilation : 1, p = o.padding;
    if (!arg_ok(s, 1) || !arg_ok(d, 1) || !arg_ok(p, 0)) {
        mg_ctx_fail(ctx,
                    "%s: stride %lld, padding %lld, dilation %lld: stride and dilation must be in [1, %d] (0 means "
                    "1), padding in [0, %d]",
                    op, (long long)s, (long long)p, (long long)d, CONV_MAX_ARG, CONV_MAX_ARG);
        return mg_ctx_dummy(ctx);
    }
    if (o.causal && p != 0) {
        mg_ctx_fail(ctx, "%s: causal pads (k-1)*dilation on the left itself: padding must be 0, got %lld", op,
                    (long long)p);
        return mg_ctx_dummy(ctx);
    }
    conv_geom g = {0};
    if (!conv_check_channels(ctx, op, x, weight, bias, o.groups ? o.groups : 1, &g)) return mg_ctx_dummy(ctx);
    g.H = 1, g.W = x->shape[2], g.KH = 1, g.KW = weight->shape[2];
    g.sh = 1, g.sw = s, g.dh = 1, g.dw = d, g.ph = 0;
    int64_t lo = o.causal ? (g.KW - 1) * d : p, hi = o.causal ? 0 : p;
    g.pw = lo;
    g.OH = 1;
    g.OW = out_size(g.W, lo, hi, g.KW, s, d);
    if (g.OW < 1) {
        mg_ctx_fail(ctx, "%s: x%s is shorter than weight%s's kernel with padding %lld, dilation %lld", op,
                    MG_SHAPE(x), MG_SHAPE(weight), (long long)p, (long long)d);
        return mg_ctx_dummy(ctx);
    }
    return conv_run(ctx, &mg_op_def_conv1d, x, weight, bias, &g, 3, (int64_t[]){g.N, g.O, g.OW});
}
