/* gemm_tmpl.h: GEMM packing, register micro-kernel and small-M kernel, written once over the SIMD
 * vocabulary (simd.h) and compiled once per path as gemm_ISA.c.
 *
 * The including unit includes its path's vocabulary and then defines, before this header:
 *   MGK_MR, MGK_NV (the micro-tile is MGK_MR rows by MGK_NV vectors; MGK_MR <= MGK_W),
 *   MGK_KC, MGK_MC, MGK_NC (cache blocks), MGK_SMALL_M (M at or below it is not packed, up to 4),
 *   and optionally MGK_PACK_A_BLOCK(s, lda, va, d): a hand-written packing of a full
 *   MGK_MR x MGK_W block of row-major A, scaled by va, into d (the layout of pack_a below).
 * It defines the getter MGK_FN(mgk_gemm) of the path's mg_gemm_impl.
 * See gemm_internal.h for the packed layouts and the determinism argument.
 */
#include "gemm_internal.h"
#include "isa.h"

#include <stddef.h>

#if MGK_HAVE_ISA

#define MGK_NR (MGK_W * MGK_NV)
/* Rows of a transposed A packed at a time where its rows are a page or more apart (pack_a). */
#define MGK_TA_KB 16

#if MGK_MR > MGK_W
#error "pack_a transposes MGK_W rows at a time: MGK_MR must not exceed MGK_W"
#endif

static inline int64_t mgk_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* ---- packing ---- */

static void MGK_FN(pack_a)(bool ta, const float *A, int64_t lda, int64_t m, int64_t kc, float alpha,
                           float *dst) {
    const mgk_v va = v_set1(alpha);
    if (ta) {
        /* op(A) is stored K x M: each k is one contiguous run of mm floats, loaded as a (partial)
         * vector whose zero lanes pad the last panel. Panel by panel keeps the writes sequential
         * (dealing whole rows out to all panels was slower: the writes, a power of two apart,
         * fight over L1 sets). But where the rows are a page or more apart (M >= 1024), a panel's
         * walk down kc rows touches kc pages and as many cache lines in a few L1 sets, and the
         * next panel, which reads the other halves of those lines, finds them gone: there
         * MGK_TA_KB rows at a time go to every panel while they are in L1 (1 thread, 1024 x 4096
         * by 4096 x 256: 176 -> 195 GFLOP/s on Zen 5). The same values land in the same places. */
        const int64_t kb = lda * (int64_t)sizeof(float) >= 4096 ? MGK_TA_KB : kc;
        for (int64_t k0 = 0; k0 < kc; k0 += kb) {
            const int64_t kn = mgk_min(kb, kc - k0);
            for (int64_t i = 0; i < m; i += MGK_MR) {
                const int mm = (int)mgk_min(MGK_MR, m - i);
                const float *s = A + i + k0 * lda;
                float *d = dst + i * kc + k0 * MGK_MR;
                for (int64_t k = 0; k < kn; k++) {
#if MGK_MR == MGK_W
                    const mgk_v x = mm == MGK_MR ? v_load(s + k * lda) : v_load_n(s + k * lda, mm);
                    v_store(d + k * MGK_MR, v_mul(va, x));
#else
                    v_store_n(d + k * MGK_MR, v_mul(va, v_load_n(s + k * lda, mm)), MGK_MR);
#endif
                }
            }
        }
        return;
    }
    for (int64_t i = 0; i < m; i += MGK_MR) {
        const int mm = (int)mgk_min(MGK_MR, m - i);
        float *d = dst + i * kc;
        /* Rows of A are contiguous in k: transpose MGK_W x MGK_W blocks in registers. */
        const float *s = A + i * lda;
        int64_t k = 0;
#ifdef MGK_PACK_A_BLOCK
        if (mm == MGK_MR)
            for (; k + MGK_W <= kc; k += MGK_W) MGK_PACK_A_BLOCK(s + k, lda, va, d + k * MGK_MR);
#endif
        for (; k + MGK_W <= kc; k += MGK_W) {
            mgk_v t[MGK_W];
            MGK_UNROLL for (int r = 0; r < MGK_W; r++) t[r] =
                r < mm ? v_mul(va, v_load(s + r * lda + k)) : v_zero();
            v_transpose(t);
            MGK_UNROLL for (int q = 0; q < MGK_W; q++) {
#if MGK_MR == MGK_W
                v_store(d + (k + q) * MGK_MR, t[q]);
#else
                v_store_n(d + (k + q) * MGK_MR, t[q], MGK_MR);
#endif
            }
        }
        for (; k < kc; k++) {
            float *dk = d + k * MGK_MR;
            int r = 0;
            for (; r < mm; r++) dk[r] = alpha * s[r * lda + k];
            for (; r < MGK_MR; r++) dk[r] = 0.0f;
        }
    }
}

static void MGK_FN(pack_b)(bool tb, const float *B, int64_t ldb, int64_t kc, int64_t n,
                           float *dst) {
    for (int64_t j = 0; j < n; j += MGK_NR) {
        const int nn = (int)mgk_min(MGK_NR, n - j);
        float *d = dst + j * kc;
        if (!tb) {
            const float *s = B + j;
            if (nn == MGK_NR) {
                for (int64_t k = 0; k < kc; k++)
                    MGK_UNROLL for (int v = 0; v < MGK_NV; v++)
                        v_store(d + k * MGK_NR + v * MGK_W, v_load(s + k * ldb + v * MGK_W));
                continue;
            }
            for (int64_t k = 0; k < kc; k++) {
                for (int v = 0; v < MGK_NV; v++) {
                    const int cnt = nn - v * MGK_W;
                    const float *sv = s + k * ldb + v * MGK_W;
                    mgk_v x = cnt >= MGK_W ? v_load(sv) : cnt > 0 ? v_load_n(sv, cnt) : v_zero();
                    v_store(d + k * MGK_NR + v * MGK_W, x);
                }
            }
            continue;
        }
        /* op(B) column j + c is row j + c of the stored N x K matrix: transpose in registers. */
        const float *s = B + j * ldb;
        int64_t k = 0;
        for (; k + MGK_W <= kc; k += MGK_W) {
            for (int v = 0; v < MGK_NV; v++) {
                mgk_v t[MGK_W];
                const int c0 = v * MGK_W;
                MGK_UNROLL for (int r = 0; r < MGK_W; r++) t[r] =
                    c0 + r < nn ? v_load(s + (c0 + r) * ldb + k) : v_zero();
                v_transpose(t);
                MGK_UNROLL for (int q = 0; q < MGK_W; q++) v_store(d + (k + q) * MGK_NR + c0, t[q]);
            }
        }
        for (; k < kc; k++) {
            float *dk = d + k * MGK_NR;
            int c = 0;
            for (; c < nn; c++) dk[c] = s[c * ldb + k];
            for (; c < MGK_NR; c++) dk[c] = 0.0f;
        }
    }
}

/* ---- register micro-kernel ---- */

/* C[0:mm, 0:nn] = a-panel @ b-panel + beta * C, or with bias (the nn columns' bias; beta is then
 * not used) bias + a-panel @ b-panel in every row: the bits of C filled with the bias and beta 1.
 * The full MGK_MR x MGK_NR tile is always computed (packing zero-pads), so an element's arithmetic
 * does not depend on where the tile edge falls. The accumulators go through a stack tile before
 * the C update: keeping that (branchy) update out of the k-loop's register allocation stops GCC
 * from spilling a B vector inside the loop. */
MGK_ALWAYS_INLINE void MGK_FN(micro)(int64_t kc, const float *restrict a, const float *restrict b,
                                     const float *restrict bias, float beta, float *restrict c,
                                     int64_t ldc, int mm, int nn) {
    _Alignas(64) float tile[MGK_MR][MGK_NR];
    /* C is usually out in L3 (it is revisited once per K slice): start fetching it now so the
     * update after the k-loop does not wait. */
    MGK_UNROLL for (int i = 0; i < MGK_MR; i++) {
        if (i >= mm) break;
        MGK_UNROLL for (int q = 0; q < MGK_NR; q += 16) __builtin_prefetch(c + i * ldc + q, 1, 3);
    }
    {
        mgk_v acc[MGK_MR][MGK_NV];
        MGK_UNROLL for (int i = 0; i < MGK_MR; i++) MGK_UNROLL for (int v = 0; v < MGK_NV; v++)
            acc[i][v] = v_zero();
        for (int64_t k = 0; k < kc; k++) {
            mgk_v bv[MGK_NV];
            MGK_UNROLL for (int v = 0; v < MGK_NV; v++) bv[v] = v_load(b + v * MGK_W);
            MGK_UNROLL for (int i = 0; i < MGK_MR; i++) {
                const mgk_v ai = v_set1(a[i]);
                MGK_UNROLL for (int v = 0; v < MGK_NV; v++) acc[i][v] = v_fma(ai, bv[v], acc[i][v]);
            }
            a += MGK_MR;
            b += MGK_NR;
        }
        MGK_UNROLL for (int i = 0; i < MGK_MR; i++) MGK_UNROLL for (int v = 0; v < MGK_NV; v++)
            v_store(tile[i] + v * MGK_W, acc[i][v]);
    }
    const mgk_v vb = v_set1(beta);
    for (int i = 0; i < mm; i++) {
        float *ci = c + i * ldc;
        for (int v = 0; v < MGK_NV; v++) {
            const int cnt = nn - v * MGK_W;
            if (cnt <= 0) break;
            float *p = ci + v * MGK_W;
            mgk_v x = v_load(tile[i] + v * MGK_W);
            if (cnt >= MGK_W) {
                if (bias)
                    x = v_add(v_load(bias + v * MGK_W), x);
                else if (beta == 1.0f)
                    x = v_add(v_load(p), x);
                else if (beta != 0.0f)
                    x = v_fma(vb, v_load(p), x);
                v_store(p, x);
            } else {
                if (bias)
                    x = v_add(v_load_n(bias + v * MGK_W, cnt), x);
                else if (beta == 1.0f)
                    x = v_add(v_load_n(p, cnt), x);
                else if (beta != 0.0f)
                    x = v_fma(vb, v_load_n(p, cnt), x);
                v_store_n(p, x, cnt);
            }
        }
    }
}

static void MGK_FN(block)(int64_t m, int64_t n, int64_t kc, const float *pa, const float *pb,
                          const float *bias, float beta, float *C, int64_t ldc) {
    /* The a-panel (MGK_MR x kc) stays in L1 while the b-panels of the L2-resident B block stream
     * past it. */
    for (int64_t i = 0; i < m; i += MGK_MR) {
        const int mm = (int)mgk_min(MGK_MR, m - i);
        for (int64_t j = 0; j < n; j += MGK_NR) {
            const int nn = (int)mgk_min(MGK_NR, n - j);
            MGK_FN(micro)(kc, pa + i * kc, pb + j * kc, bias ? bias + j : NULL, beta,
                          C + i * ldc + j, ldc, mm, nn);
        }
    }
}

/* ---- small M (decode steps, GEMV): no packing ---- */

/* Columns per stripe of the row-streaming kernel for m = 1 (an 8 KB L1-resident buffer; m rows
 * get 1/m of it). A whole weight row of the models here fits, so B streams from memory in order. */
#define MGK_SMALL_W 2048
#define MGK_SMALL_RB 4 /* vectors of a stripe narrow enough to accumulate in registers */
/* MGK_SMALL_KB (the path may define it): rows of B added to a wide stripe per pass over it, for
 * m = 1. 1: one row at a time, as the AVX2 path runs fastest here (Zen 5, a decoding token of
 * textgen's shapes: 125-135 us against 139-153 with 4 rows); AVX-512 8 rows (166-181 -> 137-140),
 * the portable path 4 (241 -> 169). */
#ifndef MGK_SMALL_KB
#define MGK_SMALL_KB 1
#endif
#define MGK_DOT_J 4    /* columns per group of the dot-product kernel */

/* acc[i][0 .. wf + tail) += the kb rows of B at bp (row stride ldb, a stripe of wf + tail columns)
 * times A's columns p .. p+kb-1 of row i: per element kb multiply-adds in k order, one after
 * another, so the bits do not depend on kb. */
MGK_ALWAYS_INLINE void MGK_FN(small_rows_pass)(const int m, const int kb, const float *A,
                                               int64_t lda, int64_t p, const float *bp, int64_t ldb,
                                               float *const *acc, int64_t wf, int tail) {
    mgk_v ai[MGK_SMALL_M][MGK_SMALL_KB];
    MGK_UNROLL for (int i = 0; i < m; i++) MGK_UNROLL for (int q = 0; q < kb; q++)
        ai[i][q] = v_set1(A[i * lda + p + q]);
    for (int64_t c = 0; c < wf; c += MGK_W) {
        mgk_v bv[MGK_SMALL_KB];
        MGK_UNROLL for (int q = 0; q < kb; q++) bv[q] = v_load(bp + q * ldb + c);
        MGK_UNROLL for (int i = 0; i < m; i++) {
            mgk_v x = v_load(acc[i] + c);
            MGK_UNROLL for (int q = 0; q < kb; q++) x = v_fma(ai[i][q], bv[q], x);
            v_store(acc[i] + c, x);
        }
    }
    if (tail) {
        mgk_v bv[MGK_SMALL_KB];
        MGK_UNROLL for (int q = 0; q < kb; q++) bv[q] = v_load_n(bp + q * ldb + wf, tail);
        MGK_UNROLL for (int i = 0; i < m; i++) {
            mgk_v x = v_load(acc[i] + wf);
            MGK_UNROLL for (int q = 0; q < kb; q++) x = v_fma(ai[i][q], bv[q], x);
            v_store(acc[i] + wf, x);
        }
    }
}

/* op(B) not transposed: stream B row by row (contiguous, prefetch-friendly) into an L1-resident
 * accumulator stripe; each element still sums over k in order. */
MGK_ALWAYS_INLINE void MGK_FN(small_rows)(const int m, int64_t n, int64_t k, float alpha,
                                          const float *A, int64_t lda, const float *B, int64_t ldb,
                                          float beta, float *C, int64_t ldc) {
    /* m rows of accumulators share one 8 KB L1-resident buffer: the stripe narrows as m grows */
    _Alignas(64) float buf[MGK_SMALL_W];
    const int64_t sw = (MGK_SMALL_W / m) / 64 * 64;
    float *acc[MGK_SMALL_M];
    MGK_UNROLL for (int i = 0; i < m; i++) acc[i] = buf + i * sw;
    for (int64_t j = 0; j < n; j += sw) {
        const int64_t w = mgk_min(sw, n - j);
        const int64_t wf = w / MGK_W * MGK_W;
        const int tail = (int)(w - wf);
        if (w <= MGK_SMALL_RB * MGK_W) {
            /* A narrow stripe (attention's P V in a decode step: N = head size) has too few
             * independent sums to hide the FMA and store-forwarding latency of the buffer: keep
             * them in registers. Same operations per element, so the same bits. */
            mgk_v r[MGK_SMALL_M][MGK_SMALL_RB];
            const int nv = (int)((w + MGK_W - 1) / MGK_W);
            MGK_UNROLL for (int i = 0; i < m; i++) MGK_UNROLL for (int v = 0; v < MGK_SMALL_RB; v++)
                r[i][v] = v_zero();
            for (int64_t p = 0; p < k; p++) {
                const float *bp = B + p * ldb + j;
                mgk_v ai[MGK_SMALL_M];
                MGK_UNROLL for (int i = 0; i < m; i++) ai[i] = v_set1(A[i * lda + p]);
                MGK_UNROLL for (int v = 0; v < MGK_SMALL_RB; v++) {
                    if (v >= nv) break;
                    const int cnt = (int)mgk_min(MGK_W, w - v * MGK_W);
                    const mgk_v bv =
                        cnt == MGK_W ? v_load(bp + v * MGK_W) : v_load_n(bp + v * MGK_W, cnt);
                    MGK_UNROLL for (int i = 0; i < m; i++) r[i][v] = v_fma(ai[i], bv, r[i][v]);
                }
            }
            MGK_UNROLL for (int i = 0; i < m; i++) MGK_UNROLL for (int v = 0; v < MGK_SMALL_RB; v++)
                v_store(acc[i] + v * MGK_W, r[i][v]);
        } else {
            for (int i = 0; i < m; i++)
                for (int64_t c = 0; c < w; c += MGK_W) v_store(acc[i] + c, v_zero());
            /* kb rows of B per pass over the stripe (MGK_SMALL_KB for one row of A, fewer for more,
             * so that A's broadcasts stay in registers): the buffer is loaded and stored 1/kb as
             * often, and kb rows of B stream at once; the rows left over one at a time. */
            const int kb0 = m == 1 ? MGK_SMALL_KB : m == 2 ? MGK_SMALL_KB / 2 : MGK_SMALL_KB / 4;
            const int kb = kb0 > 1 ? kb0 : 1;
            int64_t p = 0;
            for (; p + kb <= k; p += kb)
                MGK_FN(small_rows_pass)(m, kb, A, lda, p, B + p * ldb + j, ldb, acc, wf, tail);
            for (; p < k; p++)
                MGK_FN(small_rows_pass)(m, 1, A, lda, p, B + p * ldb + j, ldb, acc, wf, tail);
        }
        const mgk_v valpha = v_set1(alpha), vbeta = v_set1(beta);
        for (int i = 0; i < m; i++) {
            float *ci = C + i * ldc + j;
            for (int64_t c = 0; c < w; c += MGK_W) {
                const int cnt = (int)mgk_min(MGK_W, w - c);
                mgk_v x = v_mul(valpha, v_load(acc[i] + c));
                if (cnt == MGK_W) {
                    if (beta != 0.0f) x = v_fma(vbeta, v_load(ci + c), x);
                    v_store(ci + c, x);
                } else {
                    if (beta != 0.0f) x = v_fma(vbeta, v_load_n(ci + c, cnt), x);
                    v_store_n(ci + c, x, cnt);
                }
            }
        }
    }
}

/* op(B) transposed (B stored N x K): each element is a dot product of two contiguous rows. */
MGK_ALWAYS_INLINE void MGK_FN(small_dots)(const int m, int64_t n, int64_t k, float alpha,
                                          const float *A, int64_t lda, const float *B, int64_t ldb,
                                          float beta, float *C, int64_t ldc) {
    const int64_t kf = k / MGK_W * MGK_W;
    const int tail = (int)(k - kf);
    for (int64_t j = 0; j < n; j += MGK_DOT_J) {
        const int jn = (int)mgk_min(MGK_DOT_J, n - j);
        const float *bj = B + j * ldb;
        mgk_v acc[MGK_SMALL_M][MGK_DOT_J];
        MGK_UNROLL for (int i = 0; i < m; i++) MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++)
            acc[i][q] = v_zero();
        for (int64_t p = 0; p < kf; p += MGK_W) {
            mgk_v bv[MGK_DOT_J];
            MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++) bv[q] =
                q < jn ? v_load(bj + q * ldb + p) : v_zero();
            MGK_UNROLL for (int i = 0; i < m; i++) {
                const mgk_v av = v_load(A + i * lda + p);
                MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++) acc[i][q] =
                    v_fma(av, bv[q], acc[i][q]);
            }
        }
        if (tail) {
            mgk_v bv[MGK_DOT_J];
            MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++) bv[q] =
                q < jn ? v_load_n(bj + q * ldb + kf, tail) : v_zero();
            MGK_UNROLL for (int i = 0; i < m; i++) {
                const mgk_v av = v_load_n(A + i * lda + kf, tail);
                MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++) acc[i][q] =
                    v_fma(av, bv[q], acc[i][q]);
            }
        }
        MGK_UNROLL for (int i = 0; i < m; i++) MGK_UNROLL for (int q = 0; q < MGK_DOT_J; q++) {
            if (q >= jn) break;
            float *c = C + i * ldc + j + q;
            const float x = alpha * v_hsum(acc[i][q]);
            *c = beta == 0.0f ? x : x + beta * *c;
        }
    }
}

/* The driver hands op(A) already materialised row-major (ta is false here). */
static void MGK_FN(small)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                          float *C, int64_t ldc) {
    (void)ta;
    switch (m) {
#define MGK_SMALL_CASE(M)                                                                          \
    case M:                                                                                        \
        if (tb)                                                                                    \
            MGK_FN(small_dots)(M, n, k, alpha, A, lda, B, ldb, beta, C, ldc);                      \
        else                                                                                       \
            MGK_FN(small_rows)(M, n, k, alpha, A, lda, B, ldb, beta, C, ldc);                      \
        break;
        MGK_SMALL_CASE(1)
#if MGK_SMALL_M >= 2
        MGK_SMALL_CASE(2)
#endif
#if MGK_SMALL_M >= 3
        MGK_SMALL_CASE(3)
#endif
#if MGK_SMALL_M >= 4
        MGK_SMALL_CASE(4)
#endif
#if MGK_SMALL_M > 4
#error "MGK_SMALL_M above 4 needs more cases"
#endif
#undef MGK_SMALL_CASE
    default:
        break;
    }
}

const mg_gemm_impl *MGK_FN(mgk_gemm)(void) {
    static const mg_gemm_impl impl = {
        .isa = MGK_ISA_ID,
        .mr = MGK_MR,
        .nr = MGK_NR,
        .kc = MGK_KC,
        .mc = MGK_MC,
        .nc = MGK_NC,
        .small_m = MGK_SMALL_M,
        .pack_a = MGK_FN(pack_a),
        .pack_b = MGK_FN(pack_b),
        .block = MGK_FN(block),
        .small = MGK_FN(small),
    };
    return &impl;
}

#else
const mg_gemm_impl *MGK_FN(mgk_gemm)(void) {
    return NULL;
}
#endif
