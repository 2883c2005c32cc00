/* bgemm_pack.h: the packing of the bf16 GEMM (layouts in bgemm_internal.h), plain C included by
 * each path's unit, which defines before it BG_MR, BG_NR, BG_KALIGN, BG_A_TILED and BG_NAME(x)
 * (the unit's suffix on x). Packing is O(m kc + kc n) next to the O(m n kc) product. */
#include "bgemm_internal.h"

#include <string.h>

static inline int64_t bg_pairs(int64_t kc) {
    return (kc + BG_KALIGN - 1) / BG_KALIGN * BG_KALIGN / 2;
}

static inline uint32_t bg_pair(mg_bf16 lo, mg_bf16 hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

static inline int64_t bg_a_index(int64_t r, int64_t p) {
#if BG_A_TILED
    return (p / 16) * (BG_MR * 16) + r * 16 + p % 16;
#else
    return p * BG_MR + r;
#endif
}

#ifndef BG_PACK_UNUSED /* a unit with packing of its own keeps only the helpers */
static void BG_NAME(pack_a)(bool ta, const mg_bf16 *A, int64_t lda, int64_t m, int64_t kc,
                            uint32_t *dst) {
    const int64_t kp = bg_pairs(kc), full = kc / 2;
    for (int64_t i = 0; i < m; i += BG_MR) {
        uint32_t *d = dst + i * kp;
        const int64_t mm = m - i < BG_MR ? m - i : BG_MR;
        if (mm < BG_MR || full < kp) memset(d, 0, (size_t)(BG_MR * kp) * sizeof *d);
        if (!ta) {
            for (int64_t r = 0; r < mm; r++) {
                const mg_bf16 *s = A + (i + r) * lda;
                for (int64_t p = 0; p < full; p++) d[bg_a_index(r, p)] = bg_pair(s[2 * p], s[2 * p + 1]);
                if (kc & 1) d[bg_a_index(r, full)] = bg_pair(s[kc - 1], 0);
            }
        } else { /* op(A)(r, k) = A[k*lda + r]: row k holds every r contiguous */
            for (int64_t p = 0; p < full; p++) {
                const mg_bf16 *s0 = A + 2 * p * lda + i, *s1 = s0 + lda;
                for (int64_t r = 0; r < mm; r++) d[bg_a_index(r, p)] = bg_pair(s0[r], s1[r]);
            }
            if (kc & 1) {
                const mg_bf16 *s0 = A + (kc - 1) * lda + i;
                for (int64_t r = 0; r < mm; r++) d[bg_a_index(r, full)] = bg_pair(s0[r], 0);
            }
        }
    }
}

static void BG_NAME(pack_b)(bool tb, const mg_bf16 *B, int64_t ldb, int64_t kc, int64_t n,
                            uint32_t *dst) {
    const int64_t kp = bg_pairs(kc), full = kc / 2;
    for (int64_t j = 0; j < n; j += BG_NR) {
        uint32_t *d = dst + j * kp;
        const int64_t nn = n - j < BG_NR ? n - j : BG_NR;
        if (nn < BG_NR || full < kp) memset(d, 0, (size_t)(BG_NR * kp) * sizeof *d);
        if (!tb) { /* op(B)(k, c) = B[k*ldb + c]: interleave two rows */
            for (int64_t p = 0; p < full; p++) {
                const mg_bf16 *s0 = B + 2 * p * ldb + j, *s1 = s0 + ldb;
                uint32_t *dp = d + p * BG_NR;
                for (int64_t c = 0; c < nn; c++) dp[c] = bg_pair(s0[c], s1[c]);
            }
            if (kc & 1) {
                const mg_bf16 *s0 = B + (kc - 1) * ldb + j;
                uint32_t *dp = d + full * BG_NR;
                for (int64_t c = 0; c < nn; c++) dp[c] = bg_pair(s0[c], 0);
            }
        } else { /* op(B)(k, c) = B[c*ldb + k]: each pair is one word of row c */
            for (int64_t c = 0; c < nn; c++) {
                const mg_bf16 *s = B + (j + c) * ldb;
                for (int64_t p = 0; p < full; p++) d[p * BG_NR + c] = bg_pair(s[2 * p], s[2 * p + 1]);
                if (kc & 1) d[full * BG_NR + c] = bg_pair(s[kc - 1], 0);
            }
        }
    }
}
#endif
