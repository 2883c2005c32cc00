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

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include "bgemm_pack.h"

#include <immintrin.h>

/* C[0:mm, 0:nn] = (acc ? C : 0) + a-panel @ b-panel; the full tile is always computed (packing
 * zero-pads), through a stack tile where it sticks out of C. */
static inline __attribute__((always_inline)) void micro(int64_t kp, const uint32_t *restrict a,
                                                        const uint32_t *restrict b, bool acc,
                                                        float *restrict c, int64_t ldc, int mm,
                                                        int nn) {
    _Alignas(64) float tile[BG_MR][BG_NR];
    const bool edge = mm < BG_MR || nn < BG_NR;
    float *t = edge ? &tile[0][0] : c;
    const int64_t ldt = edge ? BG_NR : ldc;
    if (edge)
        for (int i = 0; i < BG_MR; i++)
            for (int j = 0; j < BG_NR; j++) tile[i][j] = acc && i < mm && j < nn ? c[i * ldc + j] : 0.0f;
    __m512 s[BG_MR][2];
    _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++) {
        s[i][0] = acc || edge ? _mm512_loadu_ps(t + i * ldt) : _mm512_setzero_ps();
        s[i][1] = acc || edge ? _mm512_loadu_ps(t + i * ldt + 16) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
        _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            s[i][0] = _mm512_dpbf16_ps(s[i][0], ai, b0);
            s[i][1] = _mm512_dpbf16_ps(s[i][1], ai, b1);
        }
        a += BG_MR;
        b += BG_NR;
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < BG_MR; i++) {
        _mm512_storeu_ps(t + i * ldt, s[i][0]);
        _mm512_storeu_ps(t + i * ldt + 16, s[i][1]);
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
            micro(kp, pa + i * kp, pb + j * kp, acc, C + i * ldc + j, ldc, mm, nn);
        }
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
        .pack_a = pack_a_avx512bf16,
        .pack_b = pack_b_avx512bf16,
        .block = block_avx512bf16,
    };
    return &impl;
}
#else
const mgk_bgemm_impl *mgk_bgemm_avx512bf16(void) { return NULL; }
#endif
