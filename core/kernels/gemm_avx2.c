/* AVX2 + FMA GEMM kernels: 6 x 16 micro-tile (12 ymm accumulators of the 16 registers). Built with
 * -mavx2 -mfma -mno-avx512f so that forcing this path on an AVX-512 machine tests what an AVX2-only
 * CPU would run; without the flags the getter reports the path as absent. */
#include "gemm_internal.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

typedef __m256 mgk_v;
#define MGK_VLEN 8
#define MGK_MR 6
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 1536
#define MGK_NC 256
#define MGK_SMALL_M 2
#define MGK_ISA MG_ISA_AVX2
#define MGK_GETTER mg_gemm_avx2_impl

static inline mgk_v v_zero(void) {
    return _mm256_setzero_ps();
}
static inline mgk_v v_load(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline void v_store(float *p, mgk_v x) {
    _mm256_storeu_ps(p, x);
}
static inline mgk_v v_set1(float x) {
    return _mm256_set1_ps(x);
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return _mm256_fmadd_ps(a, b, c);
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return _mm256_add_ps(a, b);
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return _mm256_mul_ps(a, b);
}
static inline __m256i v_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* vmaskmov suppresses faults on the masked-off lanes. */
static inline mgk_v v_load_n(const float *p, int n) {
    return _mm256_maskload_ps(p, v_mask(n));
}
static inline void v_store_n(float *p, mgk_v x, int n) {
    _mm256_maskstore_ps(p, v_mask(n), x);
}
static inline float v_sum(mgk_v x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

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

#include "gemm_tmpl.h"

#else
const mg_gemm_impl *mg_gemm_avx2_impl(void) {
    return NULL;
}
#endif
