/* rowops_tmpl.h: the row/elementwise kernels written once over a small vector vocabulary, included
 * by rowops.c once per SIMD path (no include guard on purpose). The includer defines these, and
 * the template #undefs them all at its end:
 *
 *   V, VL                   vector type and lane count (VL 1: the portable scalar path)
 *   RO(name)                the path's name for a function (name_avx512, ...)
 *   v_zero() v_set1(f) v_load(p) v_store(p, x)
 *   v_load_n(p, n)          lanes [0, n) from p, the rest 0 (never touches memory past p + n)
 *   v_load_n_fill(p, n, f)  lanes [0, n) from p, the rest f
 *   v_store_n(p, x, n)      lanes [0, n) to p
 *   v_keep_n(x, n)          lanes >= n set to 0
 *   v_add v_sub v_mul v_div v_sqrt v_abs
 *   v_fma(a, b, c)          a * b + c (fused where the path has FMA)
 *   v_fnma(a, b, c)         c - a * b
 *   v_max(a, b) v_min(a, b) lanewise, returning b where either is NaN (x86 max/min semantics)
 *   v_hsum(x) v_hmax(x)     horizontal sum / max, in a fixed order
 *   v_round(x)              to the nearest integer (ties to even), |x| < 2^22
 *   v_pow2(n)               2^n for integral n in [-126, 127]
 *   v_gt_sel(x, t, a, b)    lanewise x > t ? a : b (b where x or t is NaN)
 *
 * Every function handles a whole row (or an element range) with the same vector code for the
 * tail (masked), so an element's result does not depend on where a thread's range starts: that and
 * sums in an order fixed by the row length are what make results thread-count invariant.
 * Functions stay static: each path is a separate set, reached only through rowops.c's table.
 */

/* e^x: x = n ln2 + r, |r| <= ln2/2 (ln2 split in two so n * ln2_hi is exact), e^r by its degree-7
 * Taylor polynomial (truncation < 1e-8 relative), scaled by 2^n through the exponent bits.
 * Inputs above 88 give +inf, below -87 give 0, NaN stays NaN. */
static inline V RO(exp)(V x) {
    const V lo = v_set1(-87.0f), hi = v_set1(88.0f);
    const V xc = v_min(hi, v_max(lo, x)); /* NaN passes through both */
    const V n = v_round(v_mul(xc, v_set1(1.44269504088896341f)));
    V r = v_fnma(n, v_set1(0.693359375f), xc);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    V p = v_set1(1.0f / 5040.0f);
    p = v_fma(p, r, v_set1(1.0f / 720.0f));
    p = v_fma(p, r, v_set1(1.0f / 120.0f));
    p = v_fma(p, r, v_set1(1.0f / 24.0f));
    p = v_fma(p, r, v_set1(1.0f / 6.0f));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    p = v_fma(p, r, v_set1(1.0f));
    V e = v_mul(p, v_pow2(n));
    e = v_gt_sel(x, hi, v_set1(INFINITY), e);
    return v_gt_sel(lo, x, v_zero(), e);
}

static inline float RO(row_sum)(const float *p, int64_t n) {
    V a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
    int64_t j = 0;
    for (; j + 4 * VL <= n; j += 4 * VL) {
        a0 = v_add(a0, v_load(p + j));
        a1 = v_add(a1, v_load(p + j + VL));
        a2 = v_add(a2, v_load(p + j + 2 * VL));
        a3 = v_add(a3, v_load(p + j + 3 * VL));
    }
    for (; j + VL <= n; j += VL) a0 = v_add(a0, v_load(p + j));
    if (j < n) a1 = v_add(a1, v_load_n(p + j, n - j));
    return v_hsum(v_add(v_add(a0, a1), v_add(a2, a3)));
}

static inline float RO(row_max)(const float *p, int64_t n) {
    V a0 = v_set1(-INFINITY), a1 = a0;
    int64_t j = 0;
    for (; j + 2 * VL <= n; j += 2 * VL) {
        a0 = v_max(a0, v_load(p + j));
        a1 = v_max(a1, v_load(p + j + VL));
    }
    for (; j + VL <= n; j += VL) a0 = v_max(a0, v_load(p + j));
    if (j < n) a1 = v_max(a1, v_load_n_fill(p + j, n - j, -INFINITY));
    return v_hmax(v_max(a0, a1));
}

/* ---- LayerNorm ------------------------------------------------------------------------------- */

static void RO(ln_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                       const float *b, float eps, float *y, float *mean, float *rstd) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        /* First guess of the mean in float, then the sums of d = x - m0 and d^2: d is exact when x
         * and m0 are close (a large offset), so mean = m0 + mean(d) is good to an ulp or so and the
         * variance never cancels. */
        const float m0 = RO(row_sum)(xr, C) / (float)C;
        const V vm0 = v_set1(m0);
        V s1a = v_zero(), s1b = v_zero(), s2a = v_zero(), s2b = v_zero();
        int64_t j = 0;
        for (; j + 2 * VL <= C; j += 2 * VL) {
            const V d0 = v_sub(v_load(xr + j), vm0), d1 = v_sub(v_load(xr + j + VL), vm0);
            s1a = v_add(s1a, d0);
            s1b = v_add(s1b, d1);
            s2a = v_fma(d0, d0, s2a);
            s2b = v_fma(d1, d1, s2b);
        }
        for (; j + VL <= C; j += VL) {
            const V d = v_sub(v_load(xr + j), vm0);
            s1a = v_add(s1a, d);
            s2a = v_fma(d, d, s2a);
        }
        if (j < C) {
            const V d = v_keep_n(v_sub(v_load_n(xr + j, C - j), vm0), C - j);
            s1b = v_add(s1b, d);
            s2b = v_fma(d, d, s2b);
        }
        const double dm = (double)v_hsum(v_add(s1a, s1b)) / (double)C;
        double var = (double)v_hsum(v_add(s2a, s2b)) / (double)C - dm * dm;
        if (var < 0.0) var = 0.0;
        const float m = (float)((double)m0 + dm), s = (float)(1.0 / sqrt(var + (double)eps));
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
        const V vm = v_set1(m), vs = v_set1(s);
        for (j = 0; j + VL <= C; j += VL) {
            V h = v_mul(v_sub(v_load(xr + j), vm), vs);
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
            V h = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
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
static void RO(ln_bwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                       const float *mean, const float *rstd, const float *dy, float *dx, float *pw,
                       float *pb) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C, *gr = dy + r * C;
        const V vm = v_set1(mean[r]), vs = v_set1(rstd[r]);
        /* dy's tail lanes load as 0, so g and g * xhat vanish there without a mask. */
        V sga = v_zero(), sgb = v_zero(), sxa = v_zero(), sxb = v_zero();
        int64_t j = 0;
        for (; j + VL <= C; j += VL) {
            const V d = v_load(gr + j), xh = v_mul(v_sub(v_load(xr + j), vm), vs);
            const V g = w ? v_mul(d, v_load(w + j)) : d;
            if (pw) {
                v_store(pw + j, v_fma(d, xh, v_load(pw + j)));
                v_store(pb + j, v_add(v_load(pb + j), d));
            }
            sga = v_add(sga, g);
            sxa = v_fma(g, xh, sxa);
        }
        if (j < C) {
            const int64_t k = C - j;
            const V d = v_load_n(gr + j, k), xh = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
            const V g = w ? v_mul(d, v_load_n(w + j, k)) : d;
            if (pw) {
                v_store_n(pw + j, v_fma(d, xh, v_load_n(pw + j, k)), k);
                v_store_n(pb + j, v_add(v_load_n(pb + j, k), d), k);
            }
            sgb = v_add(sgb, g);
            sxb = v_fma(g, xh, sxb);
        }
        if (!dx) continue;
        const V a = v_set1(v_hsum(v_add(sga, sgb)) / (float)C);
        const V c = v_set1(v_hsum(v_add(sxa, sxb)) / (float)C);
        float *dr = dx + r * C;
        for (j = 0; j + VL <= C; j += VL) {
            const V d = v_load(gr + j), xh = v_mul(v_sub(v_load(xr + j), vm), vs);
            const V g = w ? v_mul(d, v_load(w + j)) : d;
            v_store(dr + j, v_fma(vs, v_fnma(xh, c, v_sub(g, a)), v_load(dr + j)));
        }
        if (j < C) {
            const int64_t k = C - j;
            const V d = v_load_n(gr + j, k), xh = v_mul(v_sub(v_load_n(xr + j, k), vm), vs);
            const V g = w ? v_mul(d, v_load_n(w + j, k)) : d;
            v_store_n(dr + j, v_fma(vs, v_fnma(xh, c, v_sub(g, a)), v_load_n(dr + j, k)), k);
        }
    }
}

/* ---- GELU ------------------------------------------------------------------------------------ */

/* tanh form through 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)): one exp, no cancellation for x < 0. */
static inline V RO(gelu_sig)(V x) {
    const V u =
        v_mul(v_mul(v_set1(RO_GELU_S), x), v_fma(v_set1(RO_GELU_C), v_mul(x, x), v_set1(1.0f)));
    const V e = RO(exp)(v_mul(v_set1(-2.0f), u));
    return v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
}
static inline V RO(gelu_tanh)(V x) {
    return v_mul(x, RO(gelu_sig)(x));
}
/* d/dx = sig + 2 x sig (1 - sig) S (1 + 3 C x^2), since 1 - tanh^2 = 4 sig (1 - sig). */
static inline V RO(gelu_tanh_grad)(V x) {
    const V sig = RO(gelu_sig)(x);
    const V k = v_mul(v_mul(v_set1(2.0f * RO_GELU_S), x), v_mul(sig, v_sub(v_set1(1.0f), sig)));
    return v_fma(k, v_fma(v_set1(3.0f * RO_GELU_C), v_mul(x, x), v_set1(1.0f)), sig);
}

/* erf form: 1 + erf(x / sqrt 2) as q = P(t) e^(-z^2) for x < 0 and 2 - q otherwise, z = |x|/sqrt 2,
 * t = 1 / (1 + p z) (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7); ez = e^(-z^2) for the grad. */
static inline V RO(gelu_erf_1p)(V x, V *ez) {
    const V z = v_mul(v_abs(x), v_set1(0.70710678118654752f));
    const V t = v_div(v_set1(1.0f), v_fma(v_set1(0.3275911f), z, v_set1(1.0f)));
    V p = v_set1(1.061405429f);
    p = v_fma(p, t, v_set1(-1.453152027f));
    p = v_fma(p, t, v_set1(1.421413741f));
    p = v_fma(p, t, v_set1(-0.284496736f));
    p = v_fma(p, t, v_set1(0.254829592f));
    p = v_mul(p, t);
    *ez = RO(exp)(v_mul(v_sub(v_zero(), z), z));
    const V q = v_mul(p, *ez);
    return v_gt_sel(v_zero(), x, q, v_sub(v_set1(2.0f), q));
}
static inline V RO(gelu_erf)(V x) {
    V ez;
    return v_mul(v_mul(v_set1(0.5f), x), RO(gelu_erf_1p)(x, &ez));
}
static inline V RO(gelu_erf_grad)(V x) {
    V ez;
    const V h = RO(gelu_erf_1p)(x, &ez);
    return v_fma(v_set1(0.5f), h, v_mul(v_mul(x, ez), v_set1(0.3989422804014327f)));
}

static void RO(gelu_fwd)(int kind, int64_t n, const float *x, float *y) {
    int64_t i = 0;
    if (kind == MG_GELU_ERF) {
        for (; i + VL <= n; i += VL) v_store(y + i, RO(gelu_erf)(v_load(x + i)));
        if (i < n) v_store_n(y + i, RO(gelu_erf)(v_load_n(x + i, n - i)), n - i);
    } else {
        for (; i + VL <= n; i += VL) v_store(y + i, RO(gelu_tanh)(v_load(x + i)));
        if (i < n) v_store_n(y + i, RO(gelu_tanh)(v_load_n(x + i, n - i)), n - i);
    }
}

static void RO(gelu_bwd)(int kind, int64_t n, const float *x, const float *dy, float *dx) {
    int64_t i = 0;
    if (kind == MG_GELU_ERF) {
        for (; i + VL <= n; i += VL)
            v_store(dx + i,
                    v_fma(v_load(dy + i), RO(gelu_erf_grad)(v_load(x + i)), v_load(dx + i)));
        if (i < n) {
            const int64_t k = n - i;
            const V g = RO(gelu_erf_grad)(v_load_n(x + i, k));
            v_store_n(dx + i, v_fma(v_load_n(dy + i, k), g, v_load_n(dx + i, k)), k);
        }
    } else {
        for (; i + VL <= n; i += VL)
            v_store(dx + i,
                    v_fma(v_load(dy + i), RO(gelu_tanh_grad)(v_load(x + i)), v_load(dx + i)));
        if (i < n) {
            const int64_t k = n - i;
            const V g = RO(gelu_tanh_grad)(v_load_n(x + i, k));
            v_store_n(dx + i, v_fma(v_load_n(dy + i, k), g, v_load_n(dx + i, k)), k);
        }
    }
}

/* ---- adds ------------------------------------------------------------------------------------ */

static void RO(add2)(int64_t n, const float *a, const float *b, float *c) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) v_store(c + i, v_add(v_load(a + i), v_load(b + i)));
    if (i < n) v_store_n(c + i, v_add(v_load_n(a + i, n - i), v_load_n(b + i, n - i)), n - i);
}

/* y = x + (h + b): the same two roundings as a bias add followed by a residual add. b NULL: x + h.
 */
static void RO(add3)(int64_t n, const float *x, const float *h, const float *b, float *y) {
    if (!b) {
        RO(add2)(n, x, h, y);
        return;
    }
    int64_t i = 0;
    for (; i + VL <= n; i += VL)
        v_store(y + i, v_add(v_load(x + i), v_add(v_load(h + i), v_load(b + i))));
    if (i < n) {
        const int64_t k = n - i;
        v_store_n(y + i, v_add(v_load_n(x + i, k), v_add(v_load_n(h + i, k), v_load_n(b + i, k))),
                  k);
    }
}

static void RO(acc)(int64_t n, float *dst, const float *src) {
    RO(add2)(n, dst, src, dst);
}

/* ---- softmax and cross-entropy --------------------------------------------------------------- */

/* Writes e^(x - mx) to y (when y is given) and returns their sum; tail lanes load as -inf (e = 0).
 */
static inline float RO(exp_sum)(const float *x, float mx, float *y, int64_t C) {
    const V vmx = v_set1(mx);
    V s0 = v_zero(), s1 = v_zero();
    int64_t j = 0;
    for (; j + 2 * VL <= C; j += 2 * VL) {
        const V e0 = RO(exp)(v_sub(v_load(x + j), vmx)),
                e1 = RO(exp)(v_sub(v_load(x + j + VL), vmx));
        if (y) v_store(y + j, e0), v_store(y + j + VL, e1);
        s0 = v_add(s0, e0);
        s1 = v_add(s1, e1);
    }
    for (; j + VL <= C; j += VL) {
        const V e = RO(exp)(v_sub(v_load(x + j), vmx));
        if (y) v_store(y + j, e);
        s0 = v_add(s0, e);
    }
    if (j < C) {
        const V e = RO(exp)(v_sub(v_load_n_fill(x + j, C - j, -INFINITY), vmx));
        if (y) v_store_n(y + j, e, C - j);
        s1 = v_add(s1, e);
    }
    return v_hsum(v_add(s0, s1));
}

static void RO(softmax_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, float *y) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mx = RO(row_max)(xr, C);
        if (mx == -INFINITY) {
            /* Every entry masked: a row of zeros, not NaN. A max can drop a NaN, though, so a row
             * of -inf and NaN is told apart by its sum; its NaN then flows through exp. */
            mx = RO(row_sum)(xr, C);
            if (mx == -INFINITY) {
                memset(yr, 0, (size_t)C * sizeof(float));
                continue;
            }
        }
        const V inv = v_set1(1.0f / RO(exp_sum)(xr, mx, yr, C));
        int64_t j = 0;
        for (; j + VL <= C; j += VL) v_store(yr + j, v_mul(v_load(yr + j), inv));
        if (j < C) v_store_n(yr + j, v_mul(v_load_n(yr + j, C - j), inv), C - j);
    }
}

static void RO(softmax_bwd)(int64_t r0, int64_t r1, int64_t C, const float *y, const float *dy,
                            float *dx) {
    for (int64_t r = r0; r < r1; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float *dr = dx + r * C;
        V s0 = v_zero(), s1 = v_zero();
        int64_t j = 0;
        for (; j + 2 * VL <= C; j += 2 * VL) {
            s0 = v_fma(v_load(gr + j), v_load(yr + j), s0);
            s1 = v_fma(v_load(gr + j + VL), v_load(yr + j + VL), s1);
        }
        for (; j + VL <= C; j += VL) s0 = v_fma(v_load(gr + j), v_load(yr + j), s0);
        if (j < C) s1 = v_fma(v_load_n(gr + j, C - j), v_load_n(yr + j, C - j), s1);
        const V dot = v_set1(v_hsum(v_add(s0, s1)));
        for (j = 0; j + VL <= C; j += VL)
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

static void RO(xent_fwd)(int64_t r0, int64_t r1, int64_t V_, const float *x, const int32_t *t,
                         int32_t ignore, float *mx, float *ls, double *loss) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * V_;
        const float m = RO(row_max)(xr, V_);
        const float l = logf(RO(exp_sum)(xr, m, NULL, V_));
        mx[r] = m;
        ls[r] = l;
        loss[r] = t[r] == ignore ? 0.0 : ((double)m - (double)xr[t[r]]) + (double)l;
    }
}

static void RO(xent_bwd)(int64_t r0, int64_t r1, int64_t V_, const float *x, const int32_t *t,
                         int32_t ignore, const float *mx, const float *ls, float g, float *dx) {
    const V vg = v_set1(g);
    for (int64_t r = r0; r < r1; r++) {
        if (t[r] == ignore) continue;
        const float *xr = x + r * V_;
        float *dr = dx + r * V_;
        const V vm = v_set1(mx[r]), vl = v_set1(ls[r]);
        int64_t j = 0;
        for (; j + VL <= V_; j += VL) {
            const V p = RO(exp)(v_sub(v_sub(v_load(xr + j), vm), vl));
            v_store(dr + j, v_fma(vg, p, v_load(dr + j)));
        }
        if (j < V_) {
            const int64_t k = V_ - j;
            const V p = RO(exp)(v_sub(v_sub(v_load_n(xr + j, k), vm), vl));
            v_store_n(dr + j, v_fma(vg, p, v_load_n(dr + j, k)), k);
        }
        dr[t[r]] -= g;
    }
}

/* ---- optimizer updates: the reference's operations in its order, no fused multiply-add ------- */

static void RO(adamw)(int64_t n, float *w, const float *g, float *m, float *v,
                      const mg_adamw_hyper *h) {
    const V b1 = v_set1(h->beta1), c1 = v_set1(1.0f - h->beta1);
    const V b2 = v_set1(h->beta2), c2 = v_set1(1.0f - h->beta2);
    const V bc1 = v_set1(h->bc1), bc2 = v_set1(h->bc2), eps = v_set1(h->eps);
    const V lr = v_set1(h->lr), wd = v_set1(h->weight_decay);
    for (int64_t i = 0; i < n; i += VL) {
        const int64_t k = n - i < VL ? n - i : VL;
        const V gi = k == VL ? v_load(g + i) : v_load_n(g + i, k);
        V mi = k == VL ? v_load(m + i) : v_load_n(m + i, k);
        V vi = k == VL ? v_load(v + i) : v_load_n(v + i, k);
        V wi = k == VL ? v_load(w + i) : v_load_n(w + i, k);
        mi = v_add(v_mul(b1, mi), v_mul(c1, gi));
        vi = v_add(v_mul(b2, vi), v_mul(v_mul(c2, gi), gi));
        const V mh = v_div(mi, bc1), vh = v_div(vi, bc2);
        wi = v_sub(wi, v_mul(lr, v_add(v_div(mh, v_add(v_sqrt(vh), eps)), v_mul(wd, wi))));
        if (k == VL) {
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

static void RO(sgd)(int64_t n, float *w, const float *g, float *buf, float lr, float mu,
                    float wdecay, bool first) {
    const bool keep = mu != 0.0f && !first;
    const V vmu = v_set1(mu), vwd = v_set1(wdecay), vlr = v_set1(lr);
    for (int64_t i = 0; i < n; i += VL) {
        const int64_t k = n - i < VL ? n - i : VL;
        const V gi = k == VL ? v_load(g + i) : v_load_n(g + i, k);
        V wi = k == VL ? v_load(w + i) : v_load_n(w + i, k);
        const V d = v_add(gi, v_mul(vwd, wi));
        V bi = d;
        if (keep) bi = v_add(v_mul(vmu, k == VL ? v_load(buf + i) : v_load_n(buf + i, k)), d);
        wi = v_sub(wi, v_mul(vlr, bi));
        if (k == VL) {
            v_store(buf + i, bi);
            v_store(w + i, wi);
        } else {
            v_store_n(buf + i, bi, k);
            v_store_n(w + i, wi, k);
        }
    }
}

/* The path's table. */
static const ro_impl RO(impl) = {
    .ln_fwd = RO(ln_fwd),
    .ln_bwd = RO(ln_bwd),
    .gelu_fwd = RO(gelu_fwd),
    .gelu_bwd = RO(gelu_bwd),
    .add2 = RO(add2),
    .add3 = RO(add3),
    .acc = RO(acc),
    .softmax_fwd = RO(softmax_fwd),
    .softmax_bwd = RO(softmax_bwd),
    .xent_fwd = RO(xent_fwd),
    .xent_bwd = RO(xent_bwd),
    .adamw = RO(adamw),
    .sgd = RO(sgd),
};

/* The instantiation is done: its parameters go, so the next ISA can define them afresh. */
#undef V
#undef VL
#undef RO
#undef v_zero
#undef v_set1
#undef v_load
#undef v_store
#undef v_load_n
#undef v_load_n_fill
#undef v_store_n
#undef v_keep_n
#undef v_add
#undef v_sub
#undef v_mul
#undef v_div
#undef v_sqrt
#undef v_abs
#undef v_fma
#undef v_fnma
#undef v_max
#undef v_min
#undef v_hsum
#undef v_hmax
#undef v_round
#undef v_pow2
#undef v_gt_sel
