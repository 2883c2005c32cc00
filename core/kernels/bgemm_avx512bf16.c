/* bf16 GEMM on AVX512-BF16: VDPBF16PS adds the two products of a bf16 pair onto each float32 lane
 * (the odd one first, each a fused multiply-add, denormals in and out flushed, round to nearest
 * even). Micro-tile BG_MR rows x 32 columns: per pair p, two vectors of B (16 columns' pairs each)
 * and one broadcast word of A per row feed 2 * BG_MR accumulators. Built with -mavx512bf16
 * (meson.build); without it the getter returns NULL. */
#include "minigrad/kernels.h"

#define BG_MR 12
#define BG_NR 32
#define BG_KALIGN 2
#define BG_A_TILED 0
#define BG_NAME(x) x##_avx512bf16
#define BG_PACK_UNUSED 1

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
#include "bgemm_pack.h"

#include <immintrin.h>

/* ---- packing with vectors (the layouts and results of bgemm_pack.h's loops) ---- */

static inline __mmask16 mask16(int64_t n) {
    return (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
}

/* cnt <= 32 values of two rows s0, s1 (the k = 2p and 2p + 1 of each column) -> cnt pair words. */
static inline void interleave_rows(const mg_bf16 *s0, const mg_bf16 *s1, int64_t cnt, uint32_t *d) {
    const __mmask32 m = (__mmask32)(cnt >= 32 ? 0xffffffffu : (1u << cnt) - 1u);
    const __m512i x0 = _mm512_maskz_loadu_epi16(m, s0), x1 = _mm512_maskz_loadu_epi16(m, s1);
    _Alignas(64) static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38,
                                                     7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44,
                                                     13, 45, 14, 46, 15, 47};
    const __m512i il = _mm512_load_si512(lo_idx), ih = _mm512_add_epi16(il, _mm512_set1_epi16(16));
    _mm512_mask_storeu_epi32(d, mask16(cnt), _mm512_permutex2var_epi16(x0, il, x1));
    if (cnt > 16) _mm512_mask_storeu_epi32(d + 16, mask16(cnt - 16), _mm512_permutex2var_epi16(x0, ih, x1));
}

/* 16 x 16 words in place: element j of r[i] becomes element i of r[j]. */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4g + c] now holds, in 128-bit lane l, column 4l + c of rows 4g .. 4g + 3 */
    for (int c = 0; c < 4; c++) {
        const __m512i a = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), b = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        const __m512i e = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88), f = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_i32x4(a, e, 0x88);      /* column c */
        t[8 + c] = _mm512_shuffle_i32x4(a, e, 0xdd);  /* column 8 + c */
        t[4 + c] = _mm512_shuffle_i32x4(b, f, 0x88);  /* column 4 + c */
        t[12 + c] = _mm512_shuffle_i32x4(b, f, 0xdd); /* column 12 + c */
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* rows (<= 16) runs of np (<= 16) pair words, run q at src + q*ld bf16 -> np outputs of `rows`
 * words, output pp at dst + pp*ldd. */
static inline void transpose_pairs(const mg_bf16 *src, int64_t ld, int rows, int np, uint32_t *dst,
                                   int64_t ldd) {
    __m512i r[16];
    for (int q = 0; q < 16; q++)
        r[q] = q < rows ? _mm512_maskz_loadu_epi32(mask16(np), src + q * ld) : _mm512_setzero_si512();
    transpose16(r);
    for (int pp = 0; pp < np; pp++) _mm512_mask_storeu_epi32(dst + pp * ldd, mask16(rows), r[pp]);
}

/* Pairs of A's rows that the transposed packing deals out to all the panels before it moves on. */
enum { TA_PAIR_BLOCK = 8 };

static void pack_a_vec(bool ta, const mg_bf16 *A, int64_t lda, int64_t m, int64_t kc, uint32_t *dst) {
    const int64_t kp = bg_pairs(kc), full = kc / 2;
    for (int64_t i = 0; i < m; i += BG_MR) {
        uint32_t *d = dst + i * kp;
        const int64_t mm = m - i < BG_MR ? m - i : BG_MR;
        if (mm < BG_MR || full < kp) memset(d, 0, (size_t)(BG_MR * kp) * sizeof *d);
        if (ta) {
            if (kc & 1)
                for (int64_t r = 0; r < mm; r++) d[full * BG_MR + r] = bg_pair(A[(kc - 1) * lda + i + r], 0);
        } else {
            for (int64_t p = 0; p < full; p += 16)
                transpose_pairs(A + i * lda + 2 * p, lda, (int)mm, (int)(full - p < 16 ? full - p : 16),
                                d + p * BG_MR, BG_MR);
            if (kc & 1)
                for (int64_t r = 0; r < mm; r++) d[full * BG_MR + r] = bg_pair(A[(i + r) * lda + kc - 1], 0);
        }
    }
    if (!ta) return;
    /* op(A) stored K x M: a pair word interleaves two rows of A. The rows are walked a block of
     * pairs at a time, each block dealt out to every panel while it is in cache; panel by panel
     * over all of kc reread each row's cache lines once per panel, a power of two apart, and the
     * packing took a fifth of a 2048 x 4096 @ 4096 x 512 product (1 thread; 12% faster now). */
    for (int64_t p0 = 0; p0 < full; p0 += TA_PAIR_BLOCK) {
        const int64_t p1 = p0 + TA_PAIR_BLOCK < full ? p0 + TA_PAIR_BLOCK : full;
        for (int64_t i = 0; i < m; i += BG_MR) {
            uint32_t *d = dst + i * kp;
            const int64_t mm = m - i < BG_MR ? m - i : BG_MR;
            for (int64_t p = p0; p < p1; p++)
                interleave_rows(A + 2 * p * lda + i, A + (2 * p + 1) * lda + i, mm, d + p * BG_MR);
        }
    }
}

static void pack_b_vec(bool tb, const mg_bf16 *B, int64_t ldb, int64_t kc, int64_t n, uint32_t *dst) {
    const int64_t kp = bg_pairs(kc), full = kc / 2;
    for (int64_t j = 0; j < n; j += BG_NR) {
        uint32_t *d = dst + j * kp;
        const int64_t nn = n - j < BG_NR ? n - j : BG_NR;
        if (nn < BG_NR || full < kp) memset(d, 0, (size_t)(BG_NR * kp) * sizeof *d);
        if (!tb) {
            for (int64_t p = 0; p < full; p++)
                interleave_rows(B + 2 * p * ldb + j, B + (2 * p + 1) * ldb + j, nn, d + p * BG_NR);
            if (kc & 1)
                for (int64_t c = 0; c < nn; c++) d[full * BG_NR + c] = bg_pair(B[(kc - 1) * ldb + j + c], 0);
        } else {
            for (int64_t cg = 0; cg < nn; cg += 16)
                for (int64_t p = 0; p < full; p += 16)
                    transpose_pairs(B + (j + cg) * ldb + 2 * p, ldb, (int)(nn - cg < 16 ? nn - cg : 16),
                                    (int)(full - p < 16 ? full - p : 16), d + p * BG_NR + cg, BG_NR);
            if (kc & 1)
                for (int64_t c = 0; c < nn; c++) d[full * BG_NR + c] = bg_pair(B[(j + c) * ldb + kc - 1], 0);
        }
    }
}

/* One pair step of an MR-row micro-tile: s[i] += (the word of row i, broadcast) . (B's 32 columns). */
static inline __attribute__((always_inline)) void micro_step(const int MR, __m512 s[BG_MR][2],
                                                             const uint32_t w[BG_MR],
                                                             const uint32_t *restrict b) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)w[i]);
        s[i][0] = _mm512_dpbf16_ps(s[i][0], ai, b0);
        s[i][1] = _mm512_dpbf16_ps(s[i][1], ai, b1);
    }
}

/* T[0:MR, 0:32] = (acc ? T : 0) + (the first MR rows of A) @ b-panel, T at t with row stride ldt,
 * or with bias (32 floats, acc false) bias in every row + the product, each sum starting from its
 * column's bias as it would from a C filled with it:
 * C itself, or a stack tile where the tile sticks out of C. A is the packed panel a (kp pairs,
 * BG_MR words a pair), or with in_place the mm rows at ar (row stride lda, kc values: the pairs
 * read where they lie, an odd kc's last value paired with a zero as the packing does; rows from mm
 * to MR read row 0 again). MR < BG_MR serves the last row panel of a block: only the rows it has
 * are computed (a panel of 4 rows costs a third of a whole one, not all of it). */
static inline __attribute__((always_inline)) void micro(const int MR, int64_t kp, const uint32_t *restrict a,
                                                        bool in_place, const mg_bf16 *restrict ar,
                                                        int64_t lda, int64_t kc, int mm,
                                                        const uint32_t *restrict b, bool acc,
                                                        const float *restrict bias,
                                                        float *restrict t, int64_t ldt) {
    __m512 s[BG_MR][2];
    const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        s[i][0] = acc ? _mm512_loadu_ps(t + i * ldt) : b0;
        s[i][1] = acc ? _mm512_loadu_ps(t + i * ldt + 16) : b1;
    }
    uint32_t w[BG_MR];
    if (!in_place) {
        for (int64_t p = 0; p < kp; p++) {
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) w[i] = a[i];
            micro_step(MR, s, w, b);
            a += BG_MR;
            b += BG_NR;
        }
    } else {
        const int64_t full = kc / 2;
        for (int64_t p = 0; p < full; p++) {
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) memcpy(&w[i], ar + (i < mm ? i : 0) * lda + 2 * p, sizeof w[i]);
            micro_step(MR, s, w, b);
            b += BG_NR;
        }
        if (kc & 1) {
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) w[i] = ar[(i < mm ? i : 0) * lda + kc - 1];
            micro_step(MR, s, w, b);
        }
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(t + i * ldt, s[i][0]);
        _mm512_storeu_ps(t + i * ldt + 16, s[i][1]);
    }
}

/* The micro-tiles as functions of their own, one per row count, never inlined into the block
 * loops: there, with the loops' pointers live, GCC 12 spilled one of B's vectors to the stack at
 * every pair. */
#define MICRO(MR)                                                                                    \
    static __attribute__((noinline)) void micro_pk_##MR(int64_t kp, const uint32_t *a, const uint32_t *b, \
                                                        bool acc, float *t, int64_t ldt) {          \
        micro(MR, kp, a, false, NULL, 0, 0, MR, b, acc, NULL, t, ldt);                               \
    }                                                                                                \
    static __attribute__((noinline)) void micro_rm_##MR(int64_t kc, const mg_bf16 *ar, int64_t lda,  \
                                                        int mm, const uint32_t *b, bool acc,         \
                                                        const float *bias, float *t, int64_t ldt) {  \
        if (mm == MR) /* the same call twice: with mm a constant the row offsets fold away */      \
            micro(MR, (kc + 1) / 2, NULL, true, ar, lda, kc, MR, b, acc, bias, t, ldt);              \
        else                                                                                         \
            micro(MR, (kc + 1) / 2, NULL, true, ar, lda, kc, mm, b, acc, bias, t, ldt);              \
    }
MICRO(4)
MICRO(8)
MICRO(12)
#undef MICRO

/* C[0:mm, 0:nn] = (acc ? C : 0) + A @ b-panel, A packed at a or (a NULL) read in place at ar: the
 * rows in whole groups of 4, through a stack tile where the group or the 32 columns stick out of
 * C (the rows past mm are computed there and dropped). With bias (in place only; acc false): the
 * bias of the nn columns in every row + the product. */
static void micro_tile(int64_t kp, const uint32_t *a, const mg_bf16 *ar, int64_t lda, int64_t kc,
                       const uint32_t *b, bool acc, const float *bias, float *c, int64_t ldc,
                       int mm, int nn) {
    const int mr = (mm + 3) / 4 * 4;
    const bool edge = mm < mr || nn < BG_NR;
    _Alignas(64) float tile[BG_MR][BG_NR];
    float *t = c;
    int64_t ldt = ldc;
    if (edge) {
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < BG_NR; j++)
                tile[i][j] = j >= nn ? 0.0f : bias ? bias[j] : (acc && i < mm ? c[i * ldc + j] : 0.0f);
        t = &tile[0][0], ldt = BG_NR, acc = true, bias = NULL;
    }
    if (a) {
        if (mr == 4) micro_pk_4(kp, a, b, acc, t, ldt);
        else if (mr == 8) micro_pk_8(kp, a, b, acc, t, ldt);
        else micro_pk_12(kp, a, b, acc, t, ldt);
    } else {
        if (mr == 4) micro_rm_4(kc, ar, lda, mm, b, acc, bias, t, ldt);
        else if (mr == 8) micro_rm_8(kc, ar, lda, mm, b, acc, bias, t, ldt);
        else micro_rm_12(kc, ar, lda, mm, b, acc, bias, t, ldt);
    }
    if (edge)
        for (int i = 0; i < mm; i++)
            for (int j = 0; j < nn; j++) c[i * ldc + j] = tile[i][j];
}

static void block_avx512bf16(int64_t m, int64_t n, int64_t kp, const uint32_t *pa,
                             const uint32_t *pb, bool acc, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i += BG_MR) {
        const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
        for (int64_t j = 0; j < n; j += BG_NR) {
            const int nn = n - j < BG_NR ? (int)(n - j) : BG_NR;
            micro_tile(kp, pa + i * kp, NULL, 0, 0, pb + j * kp, acc, NULL, C + i * ldc + j, ldc, mm, nn);
        }
    }
}

/* block_avx512bf16 with A read in place, and the bias as the sums' start where given. */
static void block_rm_avx512bf16(int64_t m, int64_t n, int64_t kc, const mg_bf16 *A, int64_t lda,
                                const uint32_t *pb, const float *bias, bool acc, float *C,
                                int64_t ldc) {
    const int64_t kp = bg_pairs(kc);
    for (int64_t i = 0; i < m; i += BG_MR) {
        const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
        for (int64_t j = 0; j < n; j += BG_NR) {
            const int nn = n - j < BG_NR ? (int)(n - j) : BG_NR;
            micro_tile(kp, NULL, A + i * lda, lda, kc, pb + j * kp, acc, bias ? bias + j : NULL,
                       C + i * ldc + j, ldc, mm, nn);
        }
    }
}

/* ---- against a pre-packed B (bgemm_internal.h): products of few rows ----
 *
 * A tile of MR rows (1 to 4) by G panels of 16 columns: per pair p, G vectors of B (one cache line
 * each), one broadcast word of A per row read in place, MR * G accumulators; all of K in one run,
 * the odd K's last pair completed by a zero as the packing pads B. MR * G + G + 1 <= 32 zmm. */
static inline __attribute__((always_inline)) void packed_tile(const int MR, const int G, int64_t K,
                                                              const mg_bf16 *restrict A, int64_t lda,
                                                              const uint32_t *restrict pb, bool acc,
                                                              float *restrict C, int64_t ldc, int64_t nn) {
    enum { P = MGK_BGEMM_PANEL };
    const int64_t kp = (K + 1) / 2, full = K / 2;
    __mmask16 mk[8];
    __m512 s[4][8];
    _Pragma("GCC unroll 8") for (int q = 0; q < G; q++) mk[q] = mask16(nn - q * P);
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8") for (int q = 0; q < G; q++)
            s[r][q] = acc ? _mm512_maskz_loadu_ps(mk[q], C + r * ldc + q * P) : _mm512_setzero_ps();
    for (int64_t p = 0; p < full; p++) {
        __m512bh b[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < G; q++)
            b[q] = (__m512bh)_mm512_loadu_si512(pb + q * P * kp + p * P);
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
            uint32_t w;
            memcpy(&w, A + r * lda + 2 * p, sizeof w);
            const __m512bh a = (__m512bh)_mm512_set1_epi32((int)w);
            _Pragma("GCC unroll 8") for (int q = 0; q < G; q++) s[r][q] = _mm512_dpbf16_ps(s[r][q], a, b[q]);
        }
    }
    if (K & 1) {
        __m512bh b[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < G; q++)
            b[q] = (__m512bh)_mm512_loadu_si512(pb + q * P * kp + full * P);
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[r * lda + K - 1]);
            _Pragma("GCC unroll 8") for (int q = 0; q < G; q++) s[r][q] = _mm512_dpbf16_ps(s[r][q], a, b[q]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 8") for (int q = 0; q < G; q++)
            _mm512_mask_storeu_ps(C + r * ldc + q * P, mk[q], s[r][q]);
}

#define PACKED_TILE(MR, G)                                                                          \
    static void packed_tile_##MR##_##G(int64_t K, const mg_bf16 *A, int64_t lda, const uint32_t *pb, \
                                       bool acc, float *C, int64_t ldc, int64_t nn) {                \
        packed_tile(MR, G, K, A, lda, pb, acc, C, ldc, nn);                                         \
    }
PACKED_TILE(1, 8)
PACKED_TILE(2, 8)
PACKED_TILE(1, 4)
PACKED_TILE(2, 4)
PACKED_TILE(3, 4)
PACKED_TILE(4, 4)
PACKED_TILE(1, 1)
PACKED_TILE(2, 1)
PACKED_TILE(3, 1)
PACKED_TILE(4, 1)
#undef PACKED_TILE

typedef void (*packed_tile_fn)(int64_t K, const mg_bf16 *A, int64_t lda, const uint32_t *pb, bool acc,
                               float *C, int64_t ldc, int64_t nn);

/* Columns in groups of G panels (8 for one or two rows, else 4), then single panels; rows in blocks
 * of 4 within a group, so a group's panels are read once per block of rows. */
static void packed_avx512bf16(int64_t m, int64_t n, int64_t K, const mg_bf16 *A, int64_t lda,
                              const uint32_t *pb, bool acc, float *C, int64_t ldc) {
    enum { P = MGK_BGEMM_PANEL };
    static const packed_tile_fn by8[2] = {packed_tile_1_8, packed_tile_2_8};
    static const packed_tile_fn by4[4] = {packed_tile_1_4, packed_tile_2_4, packed_tile_3_4, packed_tile_4_4};
    static const packed_tile_fn by1[4] = {packed_tile_1_1, packed_tile_2_1, packed_tile_3_1, packed_tile_4_1};
    const int64_t kp = (K + 1) / 2;
    const int g = m <= 2 ? 8 : 4;
    for (int64_t j = 0; j < n;) {
        const bool grp = n - j > (int64_t)(g - 1) * P; /* g panels, the last possibly partial */
        const int64_t w = grp ? (int64_t)g * P : P, nn = n - j < w ? n - j : w;
        for (int64_t i = 0; i < m; i += 4) {
            const int mm = m - i < 4 ? (int)(m - i) : 4;
            const packed_tile_fn f = !grp ? by1[mm - 1] : g == 8 ? by8[mm - 1] : by4[mm - 1];
            f(K, A + i * lda, lda, pb + j * kp, acc, C + i * ldc + j, ldc, nn);
        }
        j += nn;
    }
}

const mgk_bgemm_impl *mgk_bgemm_avx512bf16(void) {
    static const mgk_bgemm_impl impl = {
        .path = MG_BF16_AVX512,
        .mr = BG_MR,
        .nr = BG_NR,
        .kalign = BG_KALIGN,
        .kc = 512,
        .mc = 1536,
        .nc = 256,
        .a_tiled = BG_A_TILED,
        .pack_a = pack_a_vec,
        .pack_b = pack_b_vec,
        .block = block_avx512bf16,
        .block_rm = block_rm_avx512bf16,
        .packed = packed_avx512bf16,
    };
    return &impl;
}
#else
const mgk_bgemm_impl *mgk_bgemm_avx512bf16(void) { return NULL; }
#endif
