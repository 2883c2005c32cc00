/* bgemm_emu_vec_tmpl.h: the emulated bf16 path (bgemm_emulated.c's arithmetic, the same bits) on
 * float32 vectors, for CPUs without bf16 units. Included by one unit per float32 SIMD path
 * (bgemm_emulated_avx512.c, bgemm_emulated_avx2.c), each a static library of its own with only that
 * path's flags (meson.build); isa.c runs the emulated path on the kernels of the active float32 path
 * (mg_isa_active), and on bgemm_emulated.c's plain C on the portable one.
 *
 * A bf16 value widened to float32 (the pair word shifted up 16 bits for the even element, its low
 * half cleared for the odd one) is exact, so one float32 vector FMA of two of them onto a float32
 * sum is the reference's once-rounded fused multiply-add. The rest of VDPBF16PS is done with
 * integer masks, not with MXCSR's DAZ and FTZ bits (the library leaves MXCSR alone, and x86's
 * underflow test is not the instruction's): a bf16 input with a zero exponent reads as a zero of its
 * sign, and every sum with a zero exponent becomes a zero of its sign, after each of the two FMAs of
 * a pair. Per lane and pair: t = ftz(fma(a_hi, b_hi, s)); s = ftz(fma(a_lo, b_lo, t)).
 *
 * The packing is bgemm_pack.h's, followed by one pass that applies DAZ to the packed words, so the
 * micro-kernel only widens them; the pre-packed B (and A, read in place there) are flushed as read.
 *
 * The unit includes its vocabulary (simd_ISA.h) and defines before this header:
 *   BG_MR, BG_NR, BG_KALIGN (2), BG_A_TILED (0), BG_NAME(x)  for bgemm_pack.h; BG_NR = EV_NV * MGK_W
 *   EV_NV                   vectors across the micro-tile
 *   EV_PG_ONE, EV_PG        16-column panels per tile of the pre-packed product: for one row, and
 *                           for blocks of up to 4 rows
 *   EV_KC, EV_MC, EV_NC     cache blocks (values of K, rows, columns)
 * and, where MGK_HAVE_ISA, the operations on vectors of MGK_W pair words:
 *   mgk_vi                  the vector type
 *   ev_words(p), ev_store_words(p, x)   unaligned load and store
 *   ev_bcast(w)             w in every lane
 *   ev_daz(x)               each bf16 half with a zero exponent replaced by the zero of its sign
 *   ev_lo(x), ev_hi(x)      the even (low) and the odd (high) halves widened to float32
 *   ev_ftz(v)               each float32 lane with a zero exponent replaced by the zero of its sign
 */
#include "bgemm_internal.h"

#if MGK_HAVE_ISA
#include "bgemm_pack.h"

#include <string.h>

/* ev_daz on one word, for what the vectors leave over. */
static inline uint32_t ev_daz1(uint32_t w) {
    if ((w & 0x7f80u) == 0) w &= 0xffff8000u;
    if ((w & 0x7f800000u) == 0) w &= 0x8000ffffu;
    return w;
}

static void daz_words(uint32_t *d, int64_t n) {
    int64_t i = 0;
    for (; i + MGK_W <= n; i += MGK_W) ev_store_words(d + i, ev_daz(ev_words(d + i)));
    for (; i < n; i++) d[i] = ev_daz1(d[i]);
}

static void pack_a_daz(bool ta, const mg_bf16 *A, int64_t lda, int64_t m, int64_t kc, uint32_t *dst) {
    BG_NAME(pack_a)(ta, A, lda, m, kc, dst);
    daz_words(dst, (m + BG_MR - 1) / BG_MR * BG_MR * bg_pairs(kc));
}

static void pack_b_daz(bool tb, const mg_bf16 *B, int64_t ldb, int64_t kc, int64_t n, uint32_t *dst) {
    BG_NAME(pack_b)(tb, B, ldb, kc, n, dst);
    daz_words(dst, (n + BG_NR - 1) / BG_NR * BG_NR * bg_pairs(kc));
}

/* The two FMAs of one pair, each flushed. */
static inline __attribute__((always_inline)) mgk_v pair_step(mgk_v s, mgk_v ah, mgk_v bh, mgk_v al, mgk_v bl) {
    return ev_ftz(v_fma(al, bl, ev_ftz(v_fma(ah, bh, s))));
}

/* C[0:mm, 0:nn] = (acc ? C : 0) + the packed A panel a @ the packed B panel b, kp pairs (both
 * flushed by the packing). The full tile is always computed (the packing zero-pads), through a
 * stack tile where it sticks out of C. */
static inline __attribute__((always_inline)) void micro(int64_t kp, const uint32_t *restrict a,
                                                        const uint32_t *restrict b, bool acc,
                                                        float *restrict c, int64_t ldc, int mm, int nn) {
    _Alignas(64) float tile[BG_MR][BG_NR];
    const bool edge = mm < BG_MR || nn < BG_NR;
    float *t = edge ? &tile[0][0] : c;
    const int64_t ldt = edge ? BG_NR : ldc;
    if (edge)
        for (int i = 0; i < BG_MR; i++)
            for (int j = 0; j < BG_NR; j++) tile[i][j] = acc && i < mm && j < nn ? c[i * ldc + j] : 0.0f;
    mgk_v s[BG_MR][EV_NV];
    _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < EV_NV; v++)
            s[i][v] = acc || edge ? ev_ftz(v_load(t + i * ldt + v * MGK_W)) : v_zero();
    for (int64_t p = 0; p < kp; p++) {
        mgk_v bl[EV_NV], bh[EV_NV];
        _Pragma("GCC unroll 4") for (int v = 0; v < EV_NV; v++) {
            const mgk_vi w = ev_words(b + v * MGK_W);
            bl[v] = ev_lo(w);
            bh[v] = ev_hi(w);
        }
        _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++) {
            const mgk_vi w = ev_bcast(a[i]);
            const mgk_v al = ev_lo(w), ah = ev_hi(w);
            _Pragma("GCC unroll 4") for (int v = 0; v < EV_NV; v++)
                s[i][v] = pair_step(s[i][v], ah, bh[v], al, bl[v]);
        }
        a += BG_MR;
        b += BG_NR;
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < EV_NV; v++) v_store(t + i * ldt + v * MGK_W, s[i][v]);
    if (edge)
        for (int i = 0; i < mm; i++)
            for (int j = 0; j < nn; j++) c[i * ldc + j] = tile[i][j];
}

static void block_emu(int64_t m, int64_t n, int64_t kp, const uint32_t *pa, const uint32_t *pb, bool acc,
                      float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i += BG_MR) {
        const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
        for (int64_t j = 0; j < n; j += BG_NR) {
            const int nn = n - j < BG_NR ? (int)(n - j) : BG_NR;
            micro(kp, pa + i * kp, pb + j * kp, acc, C + i * ldc + j, ldc, mm, nn);
        }
    }
}

/* ---- against a pre-packed B (bgemm_internal.h): products of few rows ----
 *
 * A tile of MR rows (1 to 4) by G panels of 16 columns, all of K in one run: per pair, each row's
 * word read in place, flushed and broadcast, each panel's vectors flushed and widened once for all
 * rows; an odd K's last value completed by a zero, as the packing pads B. The lanes past nn are
 * neither read nor written in C. */
enum {
    EV_P = MGK_BGEMM_PANEL,           /* columns per panel */
    EV_PV = MGK_BGEMM_PANEL / MGK_W,  /* vectors per panel */
    EV_PMAX = EV_PG_ONE > EV_PG ? EV_PG_ONE : EV_PG
};

static inline __attribute__((always_inline)) void packed_step(const int MR, const int G,
                                                              mgk_v s[4][EV_PMAX * EV_PV], const uint32_t w[4],
                                                              const uint32_t *restrict b, int64_t kp) {
    mgk_v al[4], ah[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
        const mgk_vi x = ev_daz(ev_bcast(w[r]));
        al[r] = ev_lo(x);
        ah[r] = ev_hi(x);
    }
    _Pragma("GCC unroll 8") for (int q = 0; q < G; q++)
        _Pragma("GCC unroll 4") for (int h = 0; h < EV_PV; h++) {
            const mgk_vi x = ev_daz(ev_words(b + q * EV_P * kp + h * MGK_W));
            const mgk_v bl = ev_lo(x), bh = ev_hi(x);
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
                s[r][q * EV_PV + h] = pair_step(s[r][q * EV_PV + h], ah[r], bh, al[r], bl);
        }
}

static inline __attribute__((always_inline)) void packed_tile(const int MR, const int G, int64_t K,
                                                              const mg_bf16 *restrict A, int64_t lda,
                                                              const uint32_t *restrict pb, bool acc,
                                                              float *restrict C, int64_t ldc, int64_t nn) {
    const int64_t kp = (K + 1) / 2, full = K / 2;
    int64_t cnt[EV_PMAX * EV_PV]; /* lanes of each vector inside C */
    mgk_v s[4][EV_PMAX * EV_PV];
    _Pragma("GCC unroll 16") for (int x = 0; x < G * EV_PV; x++) {
        const int64_t left = nn - (int64_t)x * MGK_W;
        cnt[x] = left < 0 ? 0 : left > MGK_W ? MGK_W : left;
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 16") for (int x = 0; x < G * EV_PV; x++)
            s[r][x] = acc ? ev_ftz(v_load_n(C + r * ldc + x * MGK_W, cnt[x])) : v_zero();
    uint32_t w[4];
    for (int64_t p = 0; p < full; p++) {
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) memcpy(&w[r], A + r * lda + 2 * p, sizeof w[r]);
        packed_step(MR, G, s, w, pb + p * EV_P, kp);
    }
    if (K & 1) {
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) w[r] = A[r * lda + K - 1];
        packed_step(MR, G, s, w, pb + full * EV_P, kp);
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 16") for (int x = 0; x < G * EV_PV; x++)
            v_store_n(C + r * ldc + x * MGK_W, s[r][x], cnt[x]);
}

#define EV_PACKED_TILE(kind, MR, G)                                                                 \
    static void packed_##kind##_##MR(int64_t K, const mg_bf16 *A, int64_t lda, const uint32_t *pb,    \
                                     bool acc, float *C, int64_t ldc, int64_t nn) {                  \
        packed_tile(MR, G, K, A, lda, pb, acc, C, ldc, nn);                                         \
    }
EV_PACKED_TILE(one, 1, EV_PG_ONE)
EV_PACKED_TILE(group, 1, EV_PG)
EV_PACKED_TILE(group, 2, EV_PG)
EV_PACKED_TILE(group, 3, EV_PG)
EV_PACKED_TILE(group, 4, EV_PG)
EV_PACKED_TILE(single, 1, 1)
EV_PACKED_TILE(single, 2, 1)
EV_PACKED_TILE(single, 3, 1)
EV_PACKED_TILE(single, 4, 1)
#undef EV_PACKED_TILE

typedef void (*packed_tile_fn)(int64_t K, const mg_bf16 *A, int64_t lda, const uint32_t *pb, bool acc,
                               float *C, int64_t ldc, int64_t nn);

/* Columns in groups of G panels (EV_PG_ONE for one row, else EV_PG), then single panels; rows in
 * blocks of 4 within a group, so that a group's panels are read once per block of rows. */
static void packed_emu(int64_t m, int64_t n, int64_t K, const mg_bf16 *A, int64_t lda, const uint32_t *pb,
                       bool acc, float *C, int64_t ldc) {
    static const packed_tile_fn group[4] = {packed_group_1, packed_group_2, packed_group_3, packed_group_4};
    static const packed_tile_fn single[4] = {packed_single_1, packed_single_2, packed_single_3,
                                             packed_single_4};
    const int64_t kp = (K + 1) / 2;
    const int g = m == 1 ? EV_PG_ONE : EV_PG;
    for (int64_t j = 0; j < n;) {
        const bool grp = n - j > (int64_t)(g - 1) * EV_P; /* g panels, the last possibly partial */
        const int64_t wd = grp ? (int64_t)g * EV_P : EV_P, nn = n - j < wd ? n - j : wd;
        for (int64_t i = 0; i < m; i += 4) {
            const int mm = m - i < 4 ? (int)(m - i) : 4;
            const packed_tile_fn f = !grp ? single[mm - 1] : m == 1 ? packed_one_1 : group[mm - 1];
            f(K, A + i * lda, lda, pb + j * kp, acc, C + i * ldc + j, ldc, nn);
        }
        j += nn;
    }
}

const mgk_bgemm_impl *MGK_FN(mgk_bgemm_emulated)(void) {
    static const mgk_bgemm_impl impl = {
        .path = MG_BF16_EMULATED,
        .mr = BG_MR,
        .nr = BG_NR,
        .kalign = BG_KALIGN,
        .kc = EV_KC,
        .mc = EV_MC,
        .nc = EV_NC,
        .a_tiled = BG_A_TILED,
        .pack_a = pack_a_daz,
        .pack_b = pack_b_daz,
        .block = block_emu,
        .packed = packed_emu,
    };
    return &impl;
}
#else
const mgk_bgemm_impl *MGK_FN(mgk_bgemm_emulated)(void) {
    return NULL;
}
#endif
