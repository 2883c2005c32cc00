/* rowops_tmpl.h: the row and elementwise kernels, written once over the SIMD vocabulary (simd.h)
 * and compiled once per path: rowops_ISA.c includes the path's vocabulary, then this file. The
 * portable path uses the vocabulary at width 1 (plain float), so its sums are the scalar loops'.
 * The result is the getter MGK_FN(mgk_rowops) (mgk_rowops_avx512, ...) of the path's table, the
 * kernels behind it static; see rowops_internal.h for what each does.
 */
#include "isa.h"
#include "rowops_internal.h"

#include <math.h>
#include <string.h>

#if MGK_HAVE_ISA

/* e^x: x = n ln2 + r, |r| <= ln2/2 (ln2 split in two so n * ln2_hi is exact), e^r by its degree-7
 * Taylor polynomial (truncation < 1e-8 relative), scaled by 2^n through the exponent bits.
 * Inputs above 88 give +inf, below -87 give 0, NaN stays NaN. */
static inline mgk_v MGK_FN(exp)(mgk_v x) {
    const mgk_v lo = v_set1(-87.0f), hi = v_set1(88.0f);
    const mgk_v xc = v_min(hi, v_max(lo, x)); /* NaN passes through both */
    const mgk_v n = v_round(v_mul(xc, v_set1(1.44269504088896341f)));
    mgk_v r = v_fnma(n, v_set1(0.693359375f), xc);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    mgk_v p = v_set1(1.0f / 5040.0f);
    p = v_fma(p, r, v_set1(1.0f / 720.0f));
    p = v_fma(p, r, v_set1(1.0f / 120.0f));
    p = v_fma(p, r, v_set1(1.0f / 24.0f));
    p = v_fma(p, r, v_set1(1.0f / 6.0f));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    p = v_fma(p, r, v_set1(1.0f));
    mgk_v e = v_mul(p, v_pow2(n));
    e = v_gt_sel(x, hi, v_set1(INFINITY), e);
    return v_gt_sel(lo, x, v_zero(), e);
}

static inline float MGK_FN(row_sum)(const float *p, int64_t n) {
    mgk_v a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
    int64_t j = 0;
    for (; j + 4 * MGK_W <= n; j += 4 * MGK_W) {
        a0 = v_add(a0, v_load(p + j));
        a1 = v_add(a1, v_load(p + j + MGK_W));
        a2 = v_add(a2, v_load(p + j + 2 * MGK_W));
        a3 = v_add(a3, v_load(p + j + 3 * MGK_W));
    }
    for (; j + MGK_W <= n; j += MGK_W) a0 = v_add(a0, v_load(p + j));
    if (j < n) a1 = v_add(a1, v_load_n(p + j, n - j));
    return v_hsum(v_add(v_add(a0, a1), v_add(a2, a3)));
}

static inline float MGK_FN(row_max)(const float *p, int64_t n) {
    mgk_v a0 = v_set1(-INFINITY), a1 = a0;
    int64_t j = 0;
    for (; j + 2 * MGK_W <= n; j += 2 * MGK_W) {
        a0 = v_max(a0, v_load(p + j));
        a1 = v_max(a1, v_load(p + j + MGK_W));
    }
    for (; j + MGK_W <= n; j += MGK_W) a0 = v_max(a0, v_load(p + j));
    if (j < n) a1 = v_max(a1, v_load_n_fill(p + j, n - j, -INFINITY));
    return v_hmax(v_max(a0, a1));
}

/* ---- LayerNorm ------------------------------------------------------------------------------- */

static void MGK_FN(ln_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                           const float *b, float eps, float *y, float *mean, float *rstd) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        /* First guess of the mean in float, then the sums of d = x - m0 and d^2: d is exact when x
         * and m0 are close (a large offset), so mean = m0 + mean(d) is good to an ulp or so and the
         * variance never cancels. */
        const float m0 = MGK_FN(row_sum)(xr, C) / (float)C;
        const mgk_v vm0 = v_set1(m0);
        mgk_v s1a = v_zero(), s1b = v_zero(), s2a = v_zero(), s2b = v_zero();
        int64_t j = 0;
        for (; j + 2 * MGK_W <= C; j += 2 * MGK_W) {
            const mgk_v d0 = v_sub(v_load(xr + j), vm0), d1 = v_sub(v_load(xr + j + MGK_W), vm0);
            s1a = v_add(s1a, d0);
            s1b = v_add(s1b, d1);
            s2a = v_fma(d0, d0, s2a);
            s2b = v_fma(d1, d1, s2b);
        }
        for (; j + MGK_W <= C; j += MGK_W) {
            const mgk_v d = v_sub(v_load(xr + j), vm0);
            s1a = v_add(s1a, d);
            s2a = v_fma(d, d, s2a);
        }
        if (j < C) {
            const mgk_v d = v_keep_n(v_sub(v_load_n(xr + j, C - j), vm0), C - j);
            s1b = v_add(s1b, d);
            s2b = v_fma(d, d, s2b);
        }
        const double dm = (double)v_hsum(v_add(s1a, s1b)) / (double)C;
        double var = (double)v_hsum(v_add(s2a, s2b)) / (double)C - dm * dm;
        if (var < 0.0) var = 0.0;
        const float m = (float)((double)m0 + dm), s = (float)(1.0 / sqrt(var + (double)eps));
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
        const mgk_v vm = v_set1(m), vs = v_set1(s);
        for (j = 0; j + MGK_W <= C; j += MGK_W) {
            mgk_v h = v_mul(v_sub(v_load(xr + j), vm), vs);
            if (w && b)
                h = v_fma(h, v_load(w + j), v_load(b + j));
            else if (w)
                h = v_mul(h, v_load(w + j));
            else if (b)
                h = v_add(h, v_load(b + j));
            v_store(yr + j, h);
        }
        if (j < C) {
            const int64_t k = C - j;
            mgk_v h = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
            if (w && b)
                h = v_fma(h, v_load_n(w + j, k), v_load_n(b + j, k));
            else if (w)
                h = v_mul(h, v_load_n(w + j, k));
            else if (b)
                h = v_add(h, v_load_n(b + j, k));
            v_store_n(yr + j, h, k);
        }
    }
}

/* Rows [r0, r1): dx += ..., and when pw is given pw += dy * xhat, pb += dy (the chunk's partials).
 */
static void MGK_FN(ln_bwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *dy, float *dx,
                           float *pw, float *pb) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C, *gr = dy + r * C;
        const mgk_v vm = v_set1(mean[r]), vs = v_set1(rstd[r]);
        /* dy's tail lanes load as 0, so g and g * xhat vanish there without a mask. */
        mgk_v sga = v_zero(), sgb = v_zero(), sxa = v_zero(), sxb = v_zero();
        int64_t j = 0;
        for (; j + MGK_W <= C; j += MGK_W) {
            const mgk_v d = v_load(gr + j), xh = v_mul(v_sub(v_load(xr + j), vm), vs);
            const mgk_v g = w ? v_mul(d, v_load(w + j)) : d;
            if (pw) {
                v_store(pw + j, v_fma(d, xh, v_load(pw + j)));
                v_store(pb + j, v_add(v_load(pb + j), d));
            }
            sga = v_add(sga, g);
            sxa = v_fma(g, xh, sxa);
        }
        if (j < C) {
            const int64_t k = C - j;
            const mgk_v d = v_load_n(gr + j, k), xh = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
            const mgk_v g = w ? v_mul(d, v_load_n(w + j, k)) : d;
            if (pw) {
                v_store_n(pw + j, v_fma(d, xh, v_load_n(pw + j, k)), k);
                v_store_n(pb + j, v_add(v_load_n(pb + j, k), d), k);
            }
            sgb = v_add(sgb, g);
            sxb = v_fma(g, xh, sxb);
        }
        if (!dx) continue;
        const mgk_v a = v_set1(v_hsum(v_add(sga, sgb)) / (float)C);
        const mgk_v c = v_set1(v_hsum(v_add(sxa, sxb)) / (float)C);
        float *dr = dx + r * C;
        for (j = 0; j + MGK_W <= C; j += MGK_W) {
            const mgk_v d = v_load(gr + j), xh = v_mul(v_sub(v_load(xr + j), vm), vs);
            const mgk_v g = w ? v_mul(d, v_load(w + j)) : d;
            v_store(dr + j, v_fma(vs, v_fnma(xh, c, v_sub(g, a)), v_load(dr + j)));
        }
        if (j < C) {
            const int64_t k = C - j;
            const mgk_v d = v_load_n(gr + j, k), xh = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
            const mgk_v g = w ? v_mul(d, v_load_n(w + j, k)) : d;
            v_store_n(dr + j, v_fma(vs, v_fnma(xh, c, v_sub(g, a)), v_load_n(dr + j, k)), k);
        }
    }
}

/* ---- GELU ------------------------------------------------------------------------------------ */

/* tanh form through 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)): one exp, no cancellation for x < 0. */
static inline mgk_v MGK_FN(gelu_sig)(mgk_v x) {
    const mgk_v u =
        v_mul(v_mul(v_set1(RO_GELU_S), x), v_fma(v_set1(RO_GELU_C), v_mul(x, x), v_set1(1.0f)));
    const mgk_v e = MGK_FN(exp)(v_mul(v_set1(-2.0f), u));
    return v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
}
static inline mgk_v MGK_FN(gelu_tanh)(mgk_v x) {
    return v_mul(x, MGK_FN(gelu_sig)(x));
}
/* d/dx = sig + 2 x sig (1 - sig) S (1 + 3 C x^2), since 1 - tanh^2 = 4 sig (1 - sig). */
static inline mgk_v MGK_FN(gelu_tanh_grad)(mgk_v x) {
    const mgk_v sig = MGK_FN(gelu_sig)(x);
    const mgk_v k = v_mul(v_mul(v_set1(2.0f * RO_GELU_S), x), v_mul(sig, v_sub(v_set1(1.0f), sig)));
    return v_fma(k, v_fma(v_set1(3.0f * RO_GELU_C), v_mul(x, x), v_set1(1.0f)), sig);
}

/* erf form: 1 + erf(x / sqrt 2) as q = P(t) e^(-z^2) for x < 0 and 2 - q otherwise, z = |x|/sqrt 2,
 * t = 1 / (1 + p z) (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7); ez = e^(-z^2) for the grad. */
static inline mgk_v MGK_FN(gelu_erf_1p)(mgk_v x, mgk_v *ez) {
    const mgk_v z = v_mul(v_abs(x), v_set1(0.70710678118654752f));
    const mgk_v t = v_div(v_set1(1.0f), v_fma(v_set1(0.3275911f), z, v_set1(1.0f)));
    mgk_v p = v_set1(1.061405429f);
    p = v_fma(p, t, v_set1(-1.453152027f));
    p = v_fma(p, t, v_set1(1.421413741f));
    p = v_fma(p, t, v_set1(-0.284496736f));
    p = v_fma(p, t, v_set1(0.254829592f));
    p = v_mul(p, t);
    *ez = MGK_FN(exp)(v_mul(v_sub(v_zero(), z), z));
    const mgk_v q = v_mul(p, *ez);
    return v_gt_sel(v_zero(), x, q, v_sub(v_set1(2.0f), q));
}
static inline mgk_v MGK_FN(gelu_erf)(mgk_v x) {
    mgk_v ez;
    return v_mul(v_mul(v_set1(0.5f), x), MGK_FN(gelu_erf_1p)(x, &ez));
}
static inline mgk_v MGK_FN(gelu_erf_grad)(mgk_v x) {
    mgk_v ez;
    const mgk_v h = MGK_FN(gelu_erf_1p)(x, &ez);
    return v_fma(v_set1(0.5f), h, v_mul(v_mul(x, ez), v_set1(0.3989422804014327f)));
}

static void MGK_FN(gelu_fwd)(int kind, int64_t n, const float *x, float *y) {
    int64_t i = 0;
    if (kind == MG_GELU_ERF) {
        for (; i + MGK_W <= n; i += MGK_W) v_store(y + i, MGK_FN(gelu_erf)(v_load(x + i)));
        if (i < n) v_store_n(y + i, MGK_FN(gelu_erf)(v_load_n(x + i, n - i)), n - i);
    } else {
        for (; i + MGK_W <= n; i += MGK_W) v_store(y + i, MGK_FN(gelu_tanh)(v_load(x + i)));
        if (i < n) v_store_n(y + i, MGK_FN(gelu_tanh)(v_load_n(x + i, n - i)), n - i);
    }
}

/* dx = fma(dy, gelu'(x), dx), dx read as +0 where fresh (the same bits as on a zeroed dx) */
static inline mgk_v MGK_FN(gelu_grad_any)(int kind, mgk_v x) {
    return kind == MG_GELU_ERF ? MGK_FN(gelu_erf_grad)(x) : MGK_FN(gelu_tanh_grad)(x);
}

static inline __attribute__((always_inline)) void MGK_FN(gelu_bwd_k)(int kind, int64_t n, const float *x,
                                                                      const float *dy, float *dx, bool fresh) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W)
        v_store(dx + i, v_fma(v_load(dy + i), MGK_FN(gelu_grad_any)(kind, v_load(x + i)),
                              fresh ? v_zero() : v_load(dx + i)));
    if (i < n) {
        const int64_t k = n - i;
        const mgk_v g = MGK_FN(gelu_grad_any)(kind, v_load_n(x + i, k));
        v_store_n(dx + i, v_fma(v_load_n(dy + i, k), g, fresh ? v_zero() : v_load_n(dx + i, k)), k);
    }
}

static void MGK_FN(gelu_bwd)(int kind, int64_t n, const float *x, const float *dy, float *dx, bool fresh) {
    if (kind == MG_GELU_ERF) {
        if (fresh)
            MGK_FN(gelu_bwd_k)(MG_GELU_ERF, n, x, dy, dx, true);
        else
            MGK_FN(gelu_bwd_k)(MG_GELU_ERF, n, x, dy, dx, false);
    } else {
        if (fresh)
            MGK_FN(gelu_bwd_k)(MG_GELU_TANH, n, x, dy, dx, true);
        else
            MGK_FN(gelu_bwd_k)(MG_GELU_TANH, n, x, dy, dx, false);
    }
}

/* ---- adds ------------------------------------------------------------------------------------ */

static void MGK_FN(add2)(int64_t n, const float *a, const float *b, float *c) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W) v_store(c + i, v_add(v_load(a + i), v_load(b + i)));
    if (i < n) v_store_n(c + i, v_add(v_load_n(a + i, n - i), v_load_n(b + i, n - i)), n - i);
}

/* y = x + (h + b): the same two roundings as a bias add followed by a residual add. b NULL: x + h.
 */
static void MGK_FN(add3)(int64_t n, const float *x, const float *h, const float *b, float *y) {
    if (!b) {
        MGK_FN(add2)(n, x, h, y);
        return;
    }
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W)
        v_store(y + i, v_add(v_load(x + i), v_add(v_load(h + i), v_load(b + i))));
    if (i < n) {
        const int64_t k = n - i;
        v_store_n(y + i, v_add(v_load_n(x + i, k), v_add(v_load_n(h + i, k), v_load_n(b + i, k))),
                  k);
    }
}

static void MGK_FN(acc)(int64_t n, float *dst, const float *src) {
    MGK_FN(add2)(n, dst, src, dst);
}

static void MGK_FN(acc_bf16)(int64_t n, float *dst, const float *src, mg_bf16 *b) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W) {
        const mgk_v x = v_load(src + i);
        v_store(dst + i, v_add(v_load(dst + i), x));
        v_store_bf16_n(b + i, x, MGK_W);
    }
    if (i < n) {
        const mgk_v x = v_load_n(src + i, n - i);
        v_store_n(dst + i, v_add(v_load_n(dst + i, n - i), x), n - i);
        v_store_bf16_n(b + i, x, n - i);
    }
}

static void MGK_FN(to_bf16)(int64_t n, const float *src, mg_bf16 *dst) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W) v_store_bf16_n(dst + i, v_load(src + i), MGK_W);
    if (i < n) v_store_bf16_n(dst + i, v_load_n(src + i, n - i), n - i);
}

static void MGK_FN(acc_fresh)(int64_t n, float *dst, const float *src) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W) v_store(dst + i, v_add(v_zero(), v_load(src + i)));
    if (i < n) v_store_n(dst + i, v_add(v_zero(), v_load_n(src + i, n - i)), n - i);
}

/* ---- softmax and cross-entropy --------------------------------------------------------------- */

/* Writes e^(x - mx) to y (when y is given) and returns their sum; tail lanes load as -inf (e = 0).
 */
static inline float MGK_FN(exp_sum)(const float *x, float mx, float *y, int64_t C) {
    const mgk_v vmx = v_set1(mx);
    mgk_v s0 = v_zero(), s1 = v_zero();
    int64_t j = 0;
    for (; j + 2 * MGK_W <= C; j += 2 * MGK_W) {
        const mgk_v e0 = MGK_FN(exp)(v_sub(v_load(x + j), vmx)),
                    e1 = MGK_FN(exp)(v_sub(v_load(x + j + MGK_W), vmx));
        if (y) v_store(y + j, e0), v_store(y + j + MGK_W, e1);
        s0 = v_add(s0, e0);
        s1 = v_add(s1, e1);
    }
    for (; j + MGK_W <= C; j += MGK_W) {
        const mgk_v e = MGK_FN(exp)(v_sub(v_load(x + j), vmx));
        if (y) v_store(y + j, e);
        s0 = v_add(s0, e);
    }
    if (j < C) {
        const mgk_v e = MGK_FN(exp)(v_sub(v_load_n_fill(x + j, C - j, -INFINITY), vmx));
        if (y) v_store_n(y + j, e, C - j);
        s1 = v_add(s1, e);
    }
    return v_hsum(v_add(s0, s1));
}

static void MGK_FN(softmax_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, float *y) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mx = MGK_FN(row_max)(xr, C);
        if (mx == -INFINITY) {
            /* Every entry masked: a row of zeros, not NaN. A max can drop a NaN, though, so a row
             * of -inf and NaN is told apart by its sum; its NaN then flows through exp. */
            mx = MGK_FN(row_sum)(xr, C);
            if (mx == -INFINITY) {
                memset(yr, 0, (size_t)C * sizeof(float));
                continue;
            }
        }
        const mgk_v inv = v_set1(1.0f / MGK_FN(exp_sum)(xr, mx, yr, C));
        int64_t j = 0;
        for (; j + MGK_W <= C; j += MGK_W) v_store(yr + j, v_mul(v_load(yr + j), inv));
        if (j < C) v_store_n(yr + j, v_mul(v_load_n(yr + j, C - j), inv), C - j);
    }
}

static void MGK_FN(softmax_bwd)(int64_t r0, int64_t r1, int64_t C, const float *y, const float *dy,
                                float *dx) {
    for (int64_t r = r0; r < r1; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float *dr = dx + r * C;
        mgk_v s0 = v_zero(), s1 = v_zero();
        int64_t j = 0;
        for (; j + 2 * MGK_W <= C; j += 2 * MGK_W) {
            s0 = v_fma(v_load(gr + j), v_load(yr + j), s0);
            s1 = v_fma(v_load(gr + j + MGK_W), v_load(yr + j + MGK_W), s1);
        }
        for (; j + MGK_W <= C; j += MGK_W) s0 = v_fma(v_load(gr + j), v_load(yr + j), s0);
        if (j < C) s1 = v_fma(v_load_n(gr + j, C - j), v_load_n(yr + j, C - j), s1);
        const mgk_v dot = v_set1(v_hsum(v_add(s0, s1)));
        for (j = 0; j + MGK_W <= C; j += MGK_W)
            v_store(dr + j, v_fma(v_load(yr + j), v_sub(v_load(gr + j), dot), v_load(dr + j)));
        if (j < C) {
            const int64_t k = C - j;
            v_store_n(
                dr + j,
                v_fma(v_load_n(yr + j, k), v_sub(v_load_n(gr + j, k), dot), v_load_n(dr + j, k)),
                k);
        }
    }
}

static void MGK_FN(xent_fwd)(int64_t r0, int64_t r1, int64_t V_, const float *x, const int32_t *t,
                             int32_t ignore, float *mx, float *ls, double *loss) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * V_;
        const float m = MGK_FN(row_max)(xr, V_);
        const float l = logf(MGK_FN(exp_sum)(xr, m, NULL, V_));
        mx[r] = m;
        ls[r] = l;
        loss[r] = t[r] == ignore ? 0.0 : ((double)m - (double)xr[t[r]]) + (double)l;
    }
}

static void MGK_FN(xent_bwd)(int64_t r0, int64_t r1, int64_t V_, const float *x, const int32_t *t,
                             int32_t ignore, const float *mx, const float *ls, float g, float *dx) {
    const mgk_v vg = v_set1(g);
    for (int64_t r = r0; r < r1; r++) {
        if (t[r] == ignore) continue;
        const float *xr = x + r * V_;
        float *dr = dx + r * V_;
        const mgk_v vm = v_set1(mx[r]), vl = v_set1(ls[r]);
        int64_t j = 0;
        for (; j + MGK_W <= V_; j += MGK_W) {
            const mgk_v p = MGK_FN(exp)(v_sub(v_sub(v_load(xr + j), vm), vl));
            v_store(dr + j, v_fma(vg, p, v_load(dr + j)));
        }
        if (j < V_) {
            const int64_t k = V_ - j;
            const mgk_v p = MGK_FN(exp)(v_sub(v_sub(v_load_n(xr + j, k), vm), vl));
            v_store_n(dr + j, v_fma(vg, p, v_load_n(dr + j, k)), k);
        }
        dr[t[r]] -= g;
    }
}

/* ---- optimizer updates: the reference's operations in its order, no fused multiply-add ------- */

static void MGK_FN(adamw)(int64_t n, float *w, const float *g, float *m, float *v,
                          const mg_adamw_hyper *h) {
    const mgk_v b1 = v_set1(h->beta1), c1 = v_set1(1.0f - h->beta1);
    const mgk_v b2 = v_set1(h->beta2), c2 = v_set1(1.0f - h->beta2);
    const mgk_v bc1 = v_set1(h->bc1), bc2 = v_set1(h->bc2), eps = v_set1(h->eps);
    const mgk_v lr = v_set1(h->lr), wd = v_set1(h->weight_decay);
    for (int64_t i = 0; i < n; i += MGK_W) {
        const int64_t k = n - i < MGK_W ? n - i : MGK_W;
        const mgk_v gi = k == MGK_W ? v_load(g + i) : v_load_n(g + i, k);
        mgk_v mi = k == MGK_W ? v_load(m + i) : v_load_n(m + i, k);
        mgk_v vi = k == MGK_W ? v_load(v + i) : v_load_n(v + i, k);
        mgk_v wi = k == MGK_W ? v_load(w + i) : v_load_n(w + i, k);
        mi = v_add(v_mul(b1, mi), v_mul(c1, gi));
        vi = v_add(v_mul(b2, vi), v_mul(v_mul(c2, gi), gi));
        const mgk_v mh = v_div(mi, bc1), vh = v_div(vi, bc2);
        wi = v_sub(wi, v_mul(lr, v_add(v_div(mh, v_add(v_sqrt(vh), eps)), v_mul(wd, wi))));
        if (k == MGK_W) {
            v_store(m + i, mi);
            v_store(v + i, vi);
            v_store(w + i, wi);
        } else {
            v_store_n(m + i, mi, k);
            v_store_n(v + i, vi, k);
            v_store_n(w + i, wi, k);
        }
    }
}

static void MGK_FN(sgd)(int64_t n, float *w, const float *g, float *buf, float lr, float mu,
                        float wdecay, bool first) {
    const bool keep = mu != 0.0f && !first;
    const mgk_v vmu = v_set1(mu), vwd = v_set1(wdecay), vlr = v_set1(lr);
    for (int64_t i = 0; i < n; i += MGK_W) {
        const int64_t k = n - i < MGK_W ? n - i : MGK_W;
        const mgk_v gi = k == MGK_W ? v_load(g + i) : v_load_n(g + i, k);
        mgk_v wi = k == MGK_W ? v_load(w + i) : v_load_n(w + i, k);
        const mgk_v d = v_add(gi, v_mul(vwd, wi));
        mgk_v bi = d;
        if (keep) bi = v_add(v_mul(vmu, k == MGK_W ? v_load(buf + i) : v_load_n(buf + i, k)), d);
        wi = v_sub(wi, v_mul(vlr, bi));
        if (k == MGK_W) {
            v_store(buf + i, bi);
            v_store(w + i, wi);
        } else {
            v_store_n(buf + i, bi, k);
            v_store_n(w + i, wi, k);
        }
    }
}

const mgk_rowops_impl *MGK_FN(mgk_rowops)(void) {
    static const mgk_rowops_impl impl = {
        .ln_fwd = MGK_FN(ln_fwd),
        .ln_bwd = MGK_FN(ln_bwd),
        .gelu_fwd = MGK_FN(gelu_fwd),
        .gelu_bwd = MGK_FN(gelu_bwd),
        .add2 = MGK_FN(add2),
        .add3 = MGK_FN(add3),
        .acc = MGK_FN(acc),
        .acc_fresh = MGK_FN(acc_fresh),
        .acc_bf16 = MGK_FN(acc_bf16),
        .to_bf16 = MGK_FN(to_bf16),
        .softmax_fwd = MGK_FN(softmax_fwd),
        .softmax_bwd = MGK_FN(softmax_bwd),
        .xent_fwd = MGK_FN(xent_fwd),
        .xent_bwd = MGK_FN(xent_bwd),
        .adamw = MGK_FN(adamw),
        .sgd = MGK_FN(sgd),
    };
    return &impl;
}

#else
const mgk_rowops_impl *MGK_FN(mgk_rowops)(void) {
    return NULL;
}
#endif
