/* simd_avx512.h: the SIMD vocabulary (simd.h lists it) on AVX-512F: 16 floats in a zmm register,
 * tails through mask registers. Units that include it are compiled with -mavx512f -mavx2 -mfma
 * (meson.build); without those flags MGK_HAVE_ISA is 0 and the unit only reports the path absent.
 *
 * To add an operation: define it here, in simd_avx2.h and in simd_generic.h (both widths) with the
 * same name and the same result bits wherever the ISAs can agree, and list it in simd.h. To add a
 * kernel family or an ISA: see simd.h. */
#ifndef MG_KERNELS_SIMD_AVX512_H
#define MG_KERNELS_SIMD_AVX512_H

#include "simd.h"

#define MGK_ISA_NAME avx512
#define MGK_ISA_ID MG_ISA_AVX512

#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#define MGK_HAVE_ISA 1
#define MGK_HAVE_SCALEF 1
#include <immintrin.h>

typedef __m512 mgk_v;
#define MGK_W 16

static inline __mmask16 v_mask_(int64_t n) {
    return (__mmask16)((1u << n) - 1u);
}

static inline mgk_v v_zero(void) {
    return _mm512_setzero_ps();
}
static inline mgk_v v_set1(float f) {
    return _mm512_set1_ps(f);
}
static inline mgk_v v_load(const float *p) {
    return _mm512_loadu_ps(p);
}
static inline void v_store(float *p, mgk_v x) {
    _mm512_storeu_ps(p, x);
}
static inline mgk_v v_load_n(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps(v_mask_(n), p);
}
static inline mgk_v v_load_n_fill(const float *p, int64_t n, float f) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(f), v_mask_(n), p);
}
static inline void v_store_n(float *p, mgk_v x, int64_t n) {
    _mm512_mask_storeu_ps(p, v_mask_(n), x);
}
static inline mgk_v v_keep_n(mgk_v x, int64_t n) {
    return _mm512_maskz_mov_ps(v_mask_(n), x);
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return _mm512_add_ps(a, b);
}
static inline mgk_v v_sub(mgk_v a, mgk_v b) {
    return _mm512_sub_ps(a, b);
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return _mm512_mul_ps(a, b);
}
static inline mgk_v v_div(mgk_v a, mgk_v b) {
    return _mm512_div_ps(a, b);
}
static inline mgk_v v_sqrt(mgk_v a) {
    return _mm512_sqrt_ps(a);
}
static inline mgk_v v_abs(mgk_v a) {
    return _mm512_abs_ps(a);
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm512_fmadd_ps(a, b, c);
}
static inline mgk_v v_fnma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm512_fnmadd_ps(a, b, c);
}
static inline mgk_v v_max(mgk_v a, mgk_v b) {
    return _mm512_max_ps(a, b);
}
static inline mgk_v v_min(mgk_v a, mgk_v b) {
    return _mm512_min_ps(a, b);
}
static inline mgk_v v_gt_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, t, _CMP_GT_OQ), b, a);
}
static inline mgk_v v_eq_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, t, _CMP_EQ_OQ), b, a);
}
/* Halving, 256 then 128 bits, then (0 + 2) + (1 + 3): the order of GCC's _mm512_reduce_add_ps,
 * spelt out so that it does not depend on the compiler. */
static inline float v_hsum(mgk_v x) {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(x),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float v_hmax(mgk_v x) {
    return _mm512_reduce_max_ps(x);
}
static inline mgk_v v_round(mgk_v x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline mgk_v v_pow2(mgk_v n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
static inline mgk_v v_scalef(mgk_v x, mgk_v n) {
    return _mm512_scalef_ps(x, n);
}

/* The first n (<= 16) lanes of x rounded to bf16 as mg_f32_to_bf16 rounds (to nearest, ties to
 * even; a NaN stays a NaN, made quiet), stored at p. */
static inline void v_store_bf16_n(mg_bf16 *p, mgk_v x, int64_t n) {
    const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i q = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    _mm512_mask_cvtepi32_storeu_epi16(p, v_mask_(n), q);
}

/* 16 x 16: pairs within 128-bit lanes (unpack), then quads (shuffle), then the 4 x 4 arrangement of
 * 128-bit lanes in two rounds of shuffle_f32x4. */
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
        const mgk_v v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        const mgk_v v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        const mgk_v v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const mgk_v v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[c + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[c + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

#else
#define MGK_HAVE_ISA 0
#endif

#endif
