/* AVX-512 GEMM kernels: 8 x 32 micro-tile (16 zmm accumulators, two B vectors per k). Built with
 * -mavx512f -mfma (core/kernels/meson.build); without them the getter reports the path as absent.
 * Block sizes were tuned on AMD Zen 5 (48 KiB L1d, 1 MiB L2 per core): the 8 x kc A panel sits in
 * L1, the kc x nc B block in L2. */
#include "gemm_internal.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>

typedef __m512 mgk_v;
#define MGK_VLEN 16
#define MGK_MR 8
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 2048
#define MGK_NC 256
#define MGK_SMALL_M 4
#define MGK_ISA MG_ISA_AVX512
#define MGK_GETTER mg_gemm_avx512_impl

static inline mgk_v v_zero(void) {
    return _mm512_setzero_ps();
}
static inline mgk_v v_load(const float *p) {
    return _mm512_loadu_ps(p);
}
static inline void v_store(float *p, mgk_v x) {
    _mm512_storeu_ps(p, x);
}
static inline mgk_v v_set1(float x) {
    return _mm512_set1_ps(x);
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm512_fmadd_ps(a, b, c);
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return _mm512_add_ps(a, b);
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return _mm512_mul_ps(a, b);
}
static inline __mmask16 v_mask(int n) {
    return (__mmask16)((1u << n) - 1u);
}
/* Masked loads suppress faults on the masked-off lanes, so reading past the end of a row is safe.
 */
static inline mgk_v v_load_n(const float *p, int n) {
    return _mm512_maskz_loadu_ps(v_mask(n), p);
}
static inline void v_store_n(float *p, mgk_v x, int n) {
    _mm512_mask_storeu_ps(p, v_mask(n), x);
}
static inline float v_sum(mgk_v x) {
    return _mm512_reduce_add_ps(x);
}

/* 16 x 16 transpose: pairs within 128-bit lanes, then quads, then 128-bit lanes twice. */
static inline void v_transpose(mgk_v r[16]) {
    mgk_v t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    /* u[4g + c] holds columns c, c+4, c+8, c+12 of rows 4g..4g+3, one column per 128-bit lane. */
    for (int c = 0; c < 4; c++) {
        mgk_v v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        mgk_v v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        mgk_v v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        mgk_v v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[c + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[c + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

/* Packs an 8-row x 16-k block of row-major A (rows lda apart) into 128 floats, k-major: output
 * vector q holds k = 2q and 2q + 1, eight rows each. Half the shuffles of a 16 x 16 transpose with
 * eight zero rows, and full-vector stores. */
static inline void pack_a_block(const float *s, int64_t lda, mgk_v va, float *d) {
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
#define MGK_PACK_A_BLOCK pack_a_block

#include "gemm_tmpl.h"

#else
const mg_gemm_impl *mg_gemm_avx512_impl(void) {
    return NULL;
}
#endif
