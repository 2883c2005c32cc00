/* attention_tmpl.h: the tile kernels of fused attention (attention.c has the drivers), written
 * once over the SIMD vocabulary (simd.h) and compiled once per path as attention_ISA.c. The unit
 * includes its path's vocabulary, then defines AT_MR and AT_NV (the register tile of the small
 * matrix products: AT_MR rows, 4 or 6, by AT_NV vectors, 2 or 4) and includes this file, which
 * defines the getter MGK_FN(mgk_attention) of the path's table (attention_internal.h).
 *
 * Tiles are held transposed, keys by queries: st[c * AT_BR + r] is the logit of query i0 + r for
 * key j0 + c. The softmax then runs down columns, so the running max and sum of MGK_W query rows
 * sit in one vector and no horizontal reduction is needed; and S^T = K Q^T takes K straight from
 * memory, so only the query tile (packed once per item) is ever transposed.
 */
#include "attention_internal.h"
#include "isa.h"

#include <math.h>
#include <string.h>

#ifndef AT_BF16
#define AT_BF16 0
#endif

#if MGK_HAVE_ISA && (!AT_BF16 || defined(__AVX512BF16__))

#if AT_MR == 6
#define AT_ROWS(X, nv) X(1, nv) X(2, nv) X(3, nv) X(4, nv) X(5, nv) X(6, nv)
#elif AT_MR == 4
#define AT_ROWS(X, nv) X(1, nv) X(2, nv) X(3, nv) X(4, nv)
#else
#error "AT_MR must be 4 or 6"
#endif
/* X(mr, nv) for every row count 1..AT_MR and vector count 1..AT_NV */
#if AT_NV == 4
#define AT_MK_CASES(X) AT_ROWS(X, 1) AT_ROWS(X, 2) AT_ROWS(X, 3) AT_ROWS(X, 4)
#elif AT_NV == 2
#define AT_MK_CASES(X) AT_ROWS(X, 1) AT_ROWS(X, 2)
#else
#error "AT_NV must be 2 or 4"
#endif

/* e^x: x = n ln2 + r, |r| <= ln2/2 (ln2 split in two so n * ln2_hi is exact), e^r by a degree-7
 * polynomial (Cephes' expf coefficients), scaled by 2^n. Where the ISA has vscalefps it does the
 * scaling and also flushes e^-120 and below (masked logits) to exact 0; elsewhere 2^n is built in
 * the exponent field, so arguments below -87 are zeroed explicitly. v_max and v_min pass a NaN x
 * through, so NaN stays NaN. */
static inline mgk_v MGK_FN(exp)(mgk_v x0) {
#if MGK_HAVE_SCALEF
    const mgk_v x = v_min(v_set1(88.5f), v_max(v_set1(-120.0f), x0));
#else
    const mgk_v lo = v_set1(-87.0f);
    const mgk_v x = v_min(v_set1(88.0f), v_max(lo, x0));
#endif
    const mgk_v n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    mgk_v r = v_fnma(n, v_set1(0.693359375f), x);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    mgk_v p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
#if MGK_HAVE_SCALEF
    return v_scalef(p, n);
#else
    return v_gt_sel(lo, x0, v_zero(), v_mul(p, v_pow2(n)));
#endif
}

/* dst[d][r] = src[r][d] (D x AT_BR), zero in the columns from m up to a multiple of MGK_W. */
static void MGK_FN(pack_tile)(const float *src, int64_t m, int64_t D, float *dst) {
    for (int64_t d0 = 0; d0 < D; d0 += MGK_W) {
        const int64_t dw = at_min(MGK_W, D - d0);
        for (int64_t r0 = 0; r0 < m; r0 += MGK_W) {
            mgk_v x[MGK_W];
            for (int i = 0; i < MGK_W; i++)
                x[i] = r0 + i < m ? v_load_n(src + (r0 + i) * D + d0, dw) : v_zero();
            v_transpose(x);
            for (int64_t c = 0; c < dw; c++) v_store(dst + (d0 + c) * AT_BR + r0, x[c]);
        }
    }
}

#if !AT_BF16
/* The small matrix products on float32 operands (attention_mk.h): mk, mk_any, gemm_rs, gemm. */
#define AT_MK_ELEM float
#define AT_MK_BVEC mgk_v
#define AT_MK_LOAD_B(p) v_load(p)
#define AT_MK_BCAST_A(x) v_set1(x)
#define AT_MK_MAC(a, b, c) v_fma(a, b, c)
#define AT_MK_PAIRS 0
#define AT_MK_NAME(n) n
#include "attention_mk.h"

/* The query side of tile qt of head bh, for backward (see at_qpack_layout in attention.c). */
static void MGK_FN(pack_query_tile)(const at_job *J, int64_t bh, int64_t qt, float *pk) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, dp = J->dp, Dv = D / MGK_W * MGK_W;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), row0 = bh * Tq + i0;
    const float *q = J->q + row0 * D, *dO = J->dO + row0 * D, *o = J->oin + row0 * D;
    MGK_FN(pack_tile)(q, m, D, pk + J->ql.qt + qt * J->qtw);
    MGK_FN(pack_tile)(dO, m, D, pk + J->ql.dot + qt * J->qtw);
    if (J->pad) {
        at_pad_rows(q, m, D, dp, pk + J->ql.qp + qt * AT_BR * dp);
        at_pad_rows(dO, m, D, dp, pk + J->ql.dop + qt * AT_BR * dp);
    }
    float *lse = pk + J->ql.lse + qt * AT_BR, *di = pk + J->ql.di + qt * AT_BR;
    for (int64_t r = 0; r < m; r++) {
        const float l = J->lse_in[row0 + r];
        lse[r] = l == -INFINITY ? INFINITY : l;
        const float *x = dO + r * D, *y = o + r * D;
        mgk_v acc = v_zero();
        for (int64_t d = 0; d < Dv; d += MGK_W) acc = v_fma(v_load(x + d), v_load(y + d), acc);
        float s = v_hsum(acc);
        for (int64_t d = Dv; d < D; d++) s += x[d] * y[d];
        di[r] = s;
    }
    for (int64_t r = m; r < AT_BR; r++) lse[r] = di[r] = 0.0f;
}

#endif

/* Scaled products (the product that makes them applies the scale as it stores them) -> logits:
 * the bias callback on each query's visible keys, the bias rows, the causal mask. */
static void MGK_FN(logits)(const mg_attn_desc *a, float *st, int64_t bh, int64_t i0, int64_t m,
                           int64_t j0, int64_t nc, float *tmp) {
    if (a->bias) {
        const int64_t h = bh % a->H;
        for (int64_t r = 0; r < m; r++) {
            const int64_t qpos = a->q_pos0 + i0 + r, n = at_nvis(a, qpos, j0, nc);
            if (n <= 0) continue;
            for (int64_t c = 0; c < n; c++) tmp[c] = st[c * AT_BR + r];
            a->bias(a->bias_user, h, qpos, j0, n, tmp);
            for (int64_t c = 0; c < n; c++) st[c * AT_BR + r] = tmp[c];
        }
    }
    if (a->bias_data) {
        const int64_t Tk = a->Tk;
        const float *b = a->bias_data + (bh / a->H) * a->bias_bstride + (bh % a->H) * a->bias_hstride +
                         i0 * Tk + j0;
        for (int64_t c = 0; c < nc; c++)
            for (int64_t r = 0; r < m; r++) st[c * AT_BR + r] += b[r * Tk + c];
    }
    if (a->causal) /* key j0 + c is hidden from the queries before position j0 + c */
        for (int64_t c = 0; c < nc; c++) {
            const int64_t lim = j0 + c - (a->q_pos0 + i0);
            for (int64_t r = 0; r < lim && r < m; r++) st[c * AT_BR + r] = -INFINITY;
        }
}

/* The maxima of a tile's logits (st, nc keys) down its columns 0 .. mp: mx[v] for the queries
 * v*W .. v*W+W-1. The nv vectors go side by side, nv chains of maxima instead of one after
 * another (each chain waits on its last max); the order within a column, and so the result, is
 * the same. */
MGK_ALWAYS_INLINE void MGK_FN(col_max_n)(const float *st, int64_t nc, const int nv, mgk_v *mx) {
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) mx[v] = v_set1(-INFINITY);
    for (int64_t c = 0; c < nc; c++)
#pragma GCC unroll 16
        for (int v = 0; v < nv; v++) mx[v] = v_max(mx[v], v_load(st + c * AT_BR + v * MGK_W));
}

static void MGK_FN(col_max)(const float *st, int64_t nc, int64_t mp, mgk_v *mx) {
    if (mp == AT_BR) MGK_FN(col_max_n)(st, nc, AT_BR / MGK_W, mx); /* a whole tile: unrolled */
    else MGK_FN(col_max_n)(st, nc, (int)(mp / MGK_W), mx);
}

/* The online softmax's running max for W columns of a tile whose new maxima are mx (col_max): the
 * new max goes to mv (the W running maxima), *alpha = exp(old max - new), and the return value is
 * the max to exponentiate the tile against. A column that has seen no visible key yet keeps max
 * -inf: it exponentiates against 0 instead, so its probabilities come out 0 rather than NaN. */
static inline mgk_v MGK_FN(online_max)(mgk_v mx, float *mv, mgk_v *alpha) {
    const mgk_v mo = v_load(mv), mn = v_max(mo, mx);
    const mgk_v mu = v_eq_sel(mn, v_set1(-INFINITY), v_zero(), mn);
    *alpha = MGK_FN(exp)(v_sub(mo, mu));
    v_store(mv, mn);
    return mu;
}

/* Forward's end for rows i0 .. i0+m-1 of head bh: o = O / l, and lse = m + log l (-inf for a
 * row that saw no key). */
static void MGK_FN(fwd_finish)(const at_job *J, int64_t bh, int64_t i0, int64_t m, const float *O,
                               const float *mv, const float *lv) {
    const int64_t D = J->a->D, Tq = J->a->Tq, DP = J->dp;
    float *o = J->o + (bh * Tq + i0) * D;
    for (int64_t r = 0; r < m; r++) {
        const float l = lv[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t d = 0; d < D; d++) o[r * D + d] = O[r * DP + d] * inv;
        if (J->lse) J->lse[bh * Tq + i0 + r] = l > 0.0f ? mv[r] + logf(l) : -INFINITY;
    }
}

/* Backward's P^T = exp(logits - lse) in place in st (lse is +inf for a row that saw no key, so P
 * is 0 there). */
static void MGK_FN(probs)(const at_pair *p, float *st, int64_t mp) {
    const int64_t nc = p->nc;
    for (int64_t v = 0; v < mp; v += MGK_W) {
        const mgk_v L = v_load(p->lse + v); /* +inf for a row that saw no key: P = 0 there */
        for (int64_t c = 0; c < nc; c++)
            v_store(st + c * AT_BR + v, MGK_FN(exp)(v_sub(v_load(st + c * AT_BR + v), L)));
    }
}

/* Backward's dS^T = P^T * (dP^T - D_i) * scale in place of P^T in st, dP^T in dpt; with db,
 * dL/dlogits = P * (dP - D_i) (before the scale) is added to the pair's rows of it too. */
static void MGK_FN(ds_tile)(const mg_attn_desc *a, const at_pair *p, float *st, const float *dpt,
                            int64_t mp) {
    const int64_t m = p->m, nc = p->nc;
    const mgk_v sc = v_set1(a->scale);
    if (p->db) { /* dL/dlogits = P * (dP - D_i), then scaled for dQ and dK as below */
        const int64_t Tk = a->Tk;
        for (int64_t v = 0; v < mp; v += MGK_W) {
            const mgk_v Di = v_load(p->di + v);
            for (int64_t c = 0; c < nc; c++) {
                const mgk_v pv = v_load(st + c * AT_BR + v), dp = v_load(dpt + c * AT_BR + v);
                v_store(st + c * AT_BR + v, v_mul(pv, v_sub(dp, Di)));
            }
        }
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < nc; c++) p->db[r * Tk + c] += st[c * AT_BR + r];
        for (int64_t c = 0; c < nc; c++)
            for (int64_t v = 0; v < mp; v += MGK_W)
                v_store(st + c * AT_BR + v, v_mul(v_load(st + c * AT_BR + v), sc));
    } else {
        for (int64_t v = 0; v < mp; v += MGK_W) {
            const mgk_v Di = v_load(p->di + v);
            for (int64_t c = 0; c < nc; c++) {
                const mgk_v pv = v_load(st + c * AT_BR + v), dp = v_load(dpt + c * AT_BR + v);
                v_store(st + c * AT_BR + v, v_mul(v_mul(pv, v_sub(dp, Di)), sc));
            }
        }
    }
}

#if !AT_BF16
/* Logits of one query for keys j0 .. j0+nc-1 (rows of kj), into s[0..nc). MGK_W keys at a time:
 * each key's dot product runs in MGK_W lanes over d (one chain per lane, d increasing), the MGK_W
 * keys side by side so that their loads are in flight together; then a transpose and halving
 * sums the lanes of all of them at once, in the order of v_hsum on the AVX paths. A decoding step
 * reads each key and value once from beyond L2, so the loads decide its speed: the next MGK_W
 * keys (up to nk, the keys readable from kj) and this group's values (the npf rows of vj, which
 * the P V product reads next) are prefetched. */
MGK_ALWAYS_INLINE void MGK_FN(few_dots_d)(int64_t nc, const int64_t D, const float *q,
                                          const float *kj, int64_t nk, const float *vj,
                                          int64_t npf, float *s) {
    const int64_t Dv = D / MGK_W * MGK_W;
    for (int64_t g = 0; g < nc; g += MGK_W) {
        const int64_t gw = at_min(MGK_W, nc - g);
        for (int64_t i = g; i < at_min(g + MGK_W, npf); i++)
            for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(vj + i * D + d);
        for (int64_t i = g + MGK_W; i < at_min(g + 2 * MGK_W, nk); i++)
            for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(kj + i * D + d);
        const float *kr[MGK_W]; /* past gw: the last key again, its sum not stored */
        for (int i = 0; i < MGK_W; i++) kr[i] = kj + (g + at_min(i, gw - 1)) * D;
        mgk_v acc[MGK_W];
#pragma GCC unroll 16
        for (int i = 0; i < MGK_W; i++) acc[i] = v_zero();
        for (int64_t d = 0; d < Dv; d += MGK_W) {
            const mgk_v qd = v_load(q + d);
#pragma GCC unroll 16
            for (int i = 0; i < MGK_W; i++) acc[i] = v_fma(qd, v_load(kr[i] + d), acc[i]);
        }
        v_transpose(acc);
#pragma GCC unroll 8
        for (int w = MGK_W / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
            for (int i = 0; i < w; i++) acc[i] = v_add(acc[i], acc[i + w]);
        v_store_n(s + g, acc[0], gw);
        for (int64_t i = 0; i < gw && Dv < D; i++) {
            float t = s[g + i];
            for (int64_t d = Dv; d < D; d++) t += q[d] * kr[i][d];
            s[g + i] = t;
        }
    }
}

/* few_dots_d with the common head sizes known to the compiler (offsets and loops unrolled). */
static void MGK_FN(few_dots)(int64_t nc, int64_t D, const float *q, const float *kj, int64_t nk,
                             const float *vj, int64_t npf, float *s) {
    switch (D) {
    case 32: MGK_FN(few_dots_d)(nc, 32, q, kj, nk, vj, npf, s); return;
    case 64: MGK_FN(few_dots_d)(nc, 64, q, kj, nk, vj, npf, s); return;
    case 128: MGK_FN(few_dots_d)(nc, 128, q, kj, nk, vj, npf, s); return;
    default: MGK_FN(few_dots_d)(nc, D, q, kj, nk, vj, npf, s); return;
    }
}

/* Forward for the m <= AT_FEW_QUERIES queries from i0 of head bh (decoding: one query against a
 * long cache). The tile layout of fwd_item would leave all but m lanes of every vector idle, so
 * here the logits of each query are a row (st + r * AT_BC, keys along the vector) and the online
 * softmax runs along it. */
static void MGK_FN(fwd_few)(const at_job *J, int64_t bh, int64_t i0, int64_t m, float *ws) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, DP = J->dp, Dn = at_round_up(D, MGK_W);
    const float *q = J->q + (bh * Tq + i0) * D, *kb = J->k + bh * at_kv_stride(a),
                *vb = J->v + bh * at_kv_stride(a);
    float *st = ws + J->fl.st, *O = ws + J->fl.o, *mv = ws + J->fl.m, *lv = ws + J->fl.l,
          *al = ws + J->fl.al, *vp = ws + J->fl.vp;
    memset(O, 0, (size_t)(m * DP) * sizeof(float));
    for (int64_t r = 0; r < m; r++) mv[r] = -INFINITY, lv[r] = 0.0f;
    const int64_t kend = at_kend(a, i0, m), h = bh % a->H;
    const float *bias = a->bias_data ? a->bias_data + (bh / a->H) * a->bias_bstride +
                                           h * a->bias_hstride + i0 * a->Tk
                                     : NULL;
    const mgk_v sc = v_set1(a->scale), ninf = v_set1(-INFINITY);
    for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
        const int64_t nc = at_min(AT_BC, kend - j0), ncv = at_round_up(nc, MGK_W);
        const float *kj = kb + j0 * D;
        for (int64_t r = 0; r < m; r++) {
            float *s = st + r * AT_BC;
            const int64_t qpos = a->q_pos0 + i0 + r, n = at_nvis(a, qpos, j0, nc);
            MGK_FN(few_dots)(nc, D, q + r * D, kj, kend - j0, vb + j0 * D, r == 0 ? nc : 0, s);
            for (int64_t c = 0; c < nc; c += MGK_W) {
                const int64_t w = at_min(MGK_W, nc - c);
                v_store_n(s + c, v_mul(v_load_n(s + c, w), sc), w);
            }
            if (a->bias && n > 0) a->bias(a->bias_user, h, qpos, j0, n, s);
            if (bias)
                for (int64_t c = 0; c < nc; c++) s[c] += bias[r * a->Tk + j0 + c];
            for (int64_t c = n; c < ncv; c++) s[c] = -INFINITY; /* hidden keys, lane padding */
            /* online softmax along the row, as online_max does down a tile's columns */
            mgk_v mx = ninf;
            for (int64_t c = 0; c < ncv; c += MGK_W) mx = v_max(mx, v_load(s + c));
            const float mo = mv[r], mn = fmaxf(mo, v_hmax(mx)), mu = mn == -INFINITY ? 0.0f : mn;
            const mgk_v muv = v_set1(mu);
            mgk_v sum = v_zero();
            for (int64_t c = 0; c < ncv; c += MGK_W) {
                const mgk_v p = MGK_FN(exp)(v_sub(v_load(s + c), muv));
                v_store(s + c, p);
                sum = v_add(sum, p);
            }
            const float alpha = v_hmax(MGK_FN(exp)(v_set1(mo - mu)));
            mv[r] = mn, lv[r] = lv[r] * alpha + v_hsum(sum), al[r] = alpha;
        }
        const float *vj = vb + j0 * D;
        int64_t ldv = D;
        if (J->pad) at_pad_rows(vj, nc, D, DP, vp), vj = vp, ldv = DP;
        MGK_FN(gemm_rs)(m, Dn, nc, st, AT_BC, 1, vj, ldv, O, DP, true, al, 0, 0, NULL);
    }
    MGK_FN(fwd_finish)(J, bh, i0, m, O, mv, lv);
}

/* Forward for query tile qt of head bh: online softmax over the visible key tiles. */
static void MGK_FN(fwd_item)(const at_job *J, int64_t bh, int64_t qt, float *ws) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, DP = J->dp, Dn = at_round_up(D, MGK_W);
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), mp = at_round_up(m, MGK_W);
    const float *q = J->q + (bh * Tq + i0) * D, *kb = J->k + bh * at_kv_stride(a),
                *vb = J->v + bh * at_kv_stride(a);
    float *qt_ = ws + J->fl.qt, *st = ws + J->fl.st, *O = ws + J->fl.o, *mv = ws + J->fl.m,
          *lv = ws + J->fl.l, *al = ws + J->fl.al, *vp = ws + J->fl.vp, *tmp = ws + J->fl.tmp;
    if (m <= AT_FEW_QUERIES) {
        MGK_FN(fwd_few)(J, bh, i0, m, ws);
        return;
    }
    MGK_FN(pack_tile)(q, m, D, qt_);
    memset(O, 0, (size_t)(m * DP) * sizeof(float));
    for (int64_t r = 0; r < mp; r++) mv[r] = -INFINITY, lv[r] = 0.0f;
    const int64_t kend = at_kend(a, i0, m);
    for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
        const int64_t nc = at_min(AT_BC, kend - j0);
        const float *kj = kb + j0 * D;
        /* key j0 + c is visible to query i0 + r iff r >= c + delta */
        const int64_t delta = j0 - a->q_pos0 - i0;
        const int band = a->causal ? AT_COLS_FROM : 0;
        MGK_FN(gemm_scaled)(nc, mp, D, kj, D, 1, qt_, AT_BR, st, AT_BR, a->scale, band, delta);
        MGK_FN(logits)(a, st, bh, i0, m, j0, nc, tmp);
        mgk_v mx[AT_BR / MGK_W];
        MGK_FN(col_max)(st, nc, mp, mx);
        for (int64_t v = 0; v < mp; v += MGK_W) {
            mgk_v alpha;
            const mgk_v mu = MGK_FN(online_max)(mx[v / MGK_W], mv + v, &alpha);
            mgk_v sum = v_zero();
            for (int64_t c = 0; c < nc; c++) {
                const mgk_v p = MGK_FN(exp)(v_sub(v_load(st + c * AT_BR + v), mu));
                v_store(st + c * AT_BR + v, p);
                sum = v_add(sum, p);
            }
            v_store(lv + v, v_fma(v_load(lv + v), alpha, sum));
            v_store(al + v, alpha);
        }
        const float *vj = vb + j0 * D;
        int64_t ldv = D;
        if (J->pad) at_pad_rows(vj, nc, D, DP, vp), vj = vp, ldv = DP;
        MGK_FN(gemm_rs)(m, Dn, nc, st, 1, AT_BR, vj, ldv, O, DP, true, al, band ? AT_K_TO : 0,
                        -delta, NULL);
    }
    MGK_FN(fwd_finish)(J, bh, i0, m, O, mv, lv);
}

/* One (query tile, key tile) pair of backward: recompute P^T from the logits and lse, then
 *   dV_j += P^T dO_i,  dP^T = V_j dO_i^T,  dS^T = P^T * (dP^T - D_i) * scale,
 *   dK_j += dS^T Q_i,  dQ_i += dS K_j. */
static void MGK_FN(bwd_pair)(const at_job *J, const at_pair *p) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, DP = J->dp, Dn = at_round_up(D, MGK_W);
    const int64_t m = p->m, mp = at_round_up(m, MGK_W), nc = p->nc;
    float *st = p->st, *dpt = p->dpt;
    const int64_t delta =
        p->j0 - a->q_pos0 - p->i0; /* key c visible to query r iff r >= c + delta */
    const int cols = a->causal ? AT_COLS_FROM : 0, kfrom = a->causal ? AT_K_FROM : 0;
    MGK_FN(gemm_scaled)(nc, mp, D, p->kj, D, 1, p->qt, AT_BR, st, AT_BR, a->scale, cols, delta);
    MGK_FN(logits)(a, st, p->bh, p->i0, m, p->j0, nc, p->tmp);
    MGK_FN(probs)(p, st, mp);
    if (p->dv) MGK_FN(gemm)(nc, Dn, m, st, AT_BR, 1, p->dop, p->ldq, p->dv, DP, true, kfrom, delta);
    if (!p->dk && !p->dq && !p->db) return;
    MGK_FN(gemm)(nc, mp, D, p->vj, D, 1, p->dot, AT_BR, dpt, AT_BR, false, cols, delta);
    MGK_FN(ds_tile)(a, p, st, dpt, mp);
    if (p->dk) MGK_FN(gemm)(nc, Dn, m, st, AT_BR, 1, p->qp, p->ldq, p->dk, DP, true, kfrom, delta);
    if (p->dq)
        MGK_FN(gemm)(m, Dn, nc, st, 1, AT_BR, p->kp, p->ldk, p->dq, DP, true,
                     a->causal ? AT_K_TO : 0, -delta);
}

const mgk_attention_impl *MGK_FN(mgk_attention)(void) {
    static const mgk_attention_impl impl = {MGK_FN(fwd_item), MGK_FN(bwd_pair),
                                            MGK_FN(pack_query_tile), NULL};
    return &impl;
}

#else
#include "attention_bf16_tmpl.h"
#endif

#else
const mgk_attention_impl *MGK_FN(mgk_attention)(void) {
    return NULL;
}
#endif
