/* bf16 GEMM, the emulated path on AVX2 + FMA (bgemm_emu_vec_tmpl.h), for CPUs without AVX-512:
 * VDPBF16PS's arithmetic on float32 FMAs, the bits of bgemm_emulated.c's plain C. Micro-tile 4 rows
 * x 16 columns: 8 ymm accumulators, the two widened halves of two B vectors and of one broadcast A
 * word; a flush is an AND, a compare, an OR and an AND, its constants read from memory. Built with
 * -mavx2 -mfma -mno-avx512f (meson.build), so it holds no EVEX encoding; without them the getter
 * returns NULL. */
#include "simd_avx2.h"

#define BG_MR 4
#define BG_NR 16
#define BG_KALIGN 2
#define BG_A_TILED 0
#define BG_NAME(x) x##_emu_avx2
#define EV_NV 2
#define EV_PG_ONE 2
#define EV_PG 1
#define EV_KC 256
#define EV_MC 512
#define EV_NC 256

#if MGK_HAVE_ISA
typedef __m256i mgk_vi;

static inline mgk_vi ev_words(const uint32_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline void ev_store_words(uint32_t *p, mgk_vi x) {
    _mm256_storeu_si256((__m256i *)p, x);
}
static inline mgk_vi ev_bcast(uint32_t w) {
    return _mm256_set1_epi32((int)w);
}
/* per 16-bit half: the lanes whose exponent is zero keep only their sign bit */
static inline mgk_vi ev_daz(mgk_vi x) {
    const __m256i e = _mm256_and_si256(x, _mm256_set1_epi16(0x7f80));
    const __m256i z = _mm256_cmpeq_epi16(e, _mm256_setzero_si256());
    return _mm256_andnot_si256(_mm256_and_si256(z, _mm256_set1_epi16(0x7fff)), x);
}
static inline mgk_v ev_lo(mgk_vi x) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}
static inline mgk_v ev_hi(mgk_vi x) {
    return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}
/* |x| > the largest denormal (as integers) keeps every bit, else only the sign */
static inline mgk_v ev_ftz(mgk_v v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i big = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x007fffff));
    return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_or_si256(big, _mm256_set1_epi32((int)0x80000000u))));
}
#endif

#include "bgemm_emu_vec_tmpl.h"
