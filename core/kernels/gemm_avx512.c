/* AVX-512 GEMM kernels (gemm_tmpl.h over simd_avx512.h): 8 x 32 micro-tile (16 zmm accumulators,
 * two B vectors per k). Block sizes were tuned on AMD Zen 5 (48 KiB L1d, 1 MiB L2 per core): the
 * 8 x kc A panel sits in L1, the kc x nc B block in L2. */
#include "simd_avx512.h"

#define MGK_MR 8
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 2048
#define MGK_NC 256
#define MGK_SMALL_M 4
#define MGK_SMALL_KB 8

#if MGK_HAVE_ISA
/* Packs an 8-row x 16-k block of row-major A (rows lda apart) into 128 floats, k-major: output
 * vector q holds k = 2q and 2q + 1, eight rows each. Half the shuffles of a 16 x 16 transpose with
 * eight zero rows, and full-vector stores. */
static inline void pack_a_block_avx512(const float *s, int64_t lda, mgk_v va, float *d) {
    mgk_v r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm512_mul_ps(va, _mm512_loadu_ps(s + i * lda));
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    /* u[c] (rows 0-3) and u[4 + c] (rows 4-7) hold column k = 4l + c in 128-bit lane l. */
    for (int c = 0; c < 4; c += 2) {
        const mgk_v a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        const mgk_v b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        const mgk_v e = _mm512_shuffle_f32x4(u[c + 1], u[5 + c], 0x88);
        const mgk_v f = _mm512_shuffle_f32x4(u[c + 1], u[5 + c], 0xDD);
        _mm512_storeu_ps(d + (c + 0) * 8, _mm512_shuffle_f32x4(a, e, 0x88));  /* k = c, c+1 */
        _mm512_storeu_ps(d + (c + 8) * 8, _mm512_shuffle_f32x4(a, e, 0xDD));  /* k = c+8, c+9 */
        _mm512_storeu_ps(d + (c + 4) * 8, _mm512_shuffle_f32x4(b, f, 0x88));  /* k = c+4, c+5 */
        _mm512_storeu_ps(d + (c + 12) * 8, _mm512_shuffle_f32x4(b, f, 0xDD)); /* k = c+12, c+13 */
    }
}
#define MGK_PACK_A_BLOCK pack_a_block_avx512
#endif

#include "gemm_tmpl.h"
