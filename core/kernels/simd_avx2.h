/* simd_avx2.h: the SIMD vocabulary (simd.h lists it) on AVX2 + FMA: 8 floats in a ymm register,
 * tails through vmaskmov. Units that include it are compiled with -mavx2 -mfma -mno-avx512f
 * (meson.build), so forcing this path on an AVX-512 machine runs what an AVX2-only CPU would, even
 * in a -march=native build; without the flags MGK_HAVE_ISA is 0 and the unit only reports the path
 * absent.
 *
 * To add an operation: define it here, in simd_avx512.h and in simd_generic.h (both widths) with
 * the same name and the same result bits wherever the ISAs can agree, and list it in simd.h. To add
 * a kernel family or an ISA: see simd.h. */
#ifndef MG_KERNELS_SIMD_AVX2_H
#define MG_KERNELS_SIMD_AVX2_H

#include "simd.h"

#define MGK_ISA_NAME avx2
#define MGK_ISA_ID MG_ISA_AVX2

#if defined(__AVX2__) && defined(__FMA__)
#define MGK_HAVE_ISA 1
#define MGK_HAVE_SCALEF 0
#include <immintrin.h>
#include <string.h>

typedef __m256 mgk_v;
#define MGK_W 8

static inline __m256i v_mask_(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline mgk_v v_zero(void) {
    return _mm256_setzero_ps();
}
static inline mgk_v v_set1(float f) {
    return _mm256_set1_ps(f);
}
static inline mgk_v v_load(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline void v_store(float *p, mgk_v x) {
    _mm256_storeu_ps(p, x);
}
/* vmaskmov does not fault on the masked-off lanes, so a tail never reads past the buffer. */
static inline mgk_v v_load_n(const float *p, int64_t n) {
    return _mm256_maskload_ps(p, v_mask_(n));
}
static inline mgk_v v_load_n_fill(const float *p, int64_t n, float f) {
    const __m256i m = v_mask_(n);
    return _mm256_blendv_ps(_mm256_set1_ps(f), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void v_store_n(float *p, mgk_v x, int64_t n) {
    _mm256_maskstore_ps(p, v_mask_(n), x);
}
static inline mgk_v v_keep_n(mgk_v x, int64_t n) {
    return _mm256_and_ps(x, _mm256_castsi256_ps(v_mask_(n)));
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return _mm256_add_ps(a, b);
}
static inline mgk_v v_sub(mgk_v a, mgk_v b) {
    return _mm256_sub_ps(a, b);
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return _mm256_mul_ps(a, b);
}
static inline mgk_v v_div(mgk_v a, mgk_v b) {
    return _mm256_div_ps(a, b);
}
static inline mgk_v v_sqrt(mgk_v a) {
    return _mm256_sqrt_ps(a);
}
static inline mgk_v v_abs(mgk_v a) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm256_fmadd_ps(a, b, c);
}
static inline mgk_v v_fnma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm256_fnmadd_ps(a, b, c);
}
static inline mgk_v v_max(mgk_v a, mgk_v b) {
    return _mm256_max_ps(a, b);
}
static inline mgk_v v_min(mgk_v a, mgk_v b) {
    return _mm256_min_ps(a, b);
}
static inline mgk_v v_gt_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, t, _CMP_GT_OQ));
}
static inline mgk_v v_eq_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, t, _CMP_EQ_OQ));
}
/* Halves, then (0 + 2) + (1 + 3): the same order as the AVX-512 path's last steps. */
static inline float v_hsum(mgk_v x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float v_hmax(mgk_v x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline mgk_v v_round(mgk_v x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline mgk_v v_pow2(mgk_v n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}

/* The first n (<= 8) lanes of x rounded to bf16 as mg_f32_to_bf16 rounds (to nearest, ties to
 * even; a NaN stays a NaN, made quiet), stored at p. */
static inline void v_store_bf16_n(mg_bf16 *p, mgk_v x, int64_t n) {
    const __m256i u = _mm256_castps_si256(x), hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i q = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    /* values below 2^16: the signed saturation of packus keeps them; lanes 0-3 and 4-7 together */
    const __m128i w = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(q, q), 0x08));
    if (n >= 8) {
        _mm_storeu_si128((__m128i *)p, w);
    } else {
        mg_bf16 t[8];
        _mm_storeu_si128((__m128i *)t, w);
        memcpy(p, t, (size_t)n * sizeof *p);
    }
}

/* 8 x 8: pairs (unpack), quads (shuffle) within 128-bit lanes, then the 128-bit lanes swapped. */
static inline void v_transpose(mgk_v r[8]) {
    mgk_v t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

#else
#define MGK_HAVE_ISA 0
#endif

#endif
