/* bf16 GEMM, the emulated path on AVX-512F (bgemm_emu_vec_tmpl.h), for CPUs with AVX-512 but no
 * AVX512-BF16 (Skylake-X, Cascade Lake, Ice Lake): VDPBF16PS's arithmetic on float32 FMAs, the bits
 * of bgemm_emulated.c's plain C. Micro-tile 8 rows x 32 columns: 16 zmm accumulators, the two
 * widened halves of two B vectors and of one broadcast A word; the flushes take a test into a mask
 * register and a masked AND each. Built with -mavx512f and without -mavx512bf16 (meson.build); without
 * AVX-512F the getter returns NULL. */
#include "simd_avx512.h"

#define BG_MR 8
#define BG_NR 32
#define BG_KALIGN 2
#define BG_A_TILED 0
#define BG_NAME(x) x##_emu_avx512
#define EV_NV 2
#define EV_PG_ONE 8
#define EV_PG 4
#define EV_KC 256
#define EV_MC 512
#define EV_NC 256

#if MGK_HAVE_ISA
typedef __m512i mgk_vi;

static inline mgk_vi ev_words(const uint32_t *p) {
    return _mm512_loadu_si512(p);
}
static inline void ev_store_words(uint32_t *p, mgk_vi x) {
    _mm512_storeu_si512(p, x);
}
static inline mgk_vi ev_bcast(uint32_t w) {
    return _mm512_set1_epi32((int)w);
}
/* x & c in the lanes of k, x elsewhere: a masked VPTERNLOGD whose one reading of x is the operand it
 * overwrites, so that the compiler needs no copy of x (as it makes for a masked VPANDD) */
static inline mgk_vi and_where(mgk_vi x, __mmask16 k, int c) {
    const __m512i v = _mm512_set1_epi32(c);
    return _mm512_mask_ternarylogic_epi32(x, k, v, v, 0xc0); /* A & B: 0xf0 & 0xcc */
}
static inline mgk_vi ev_daz(mgk_vi x) {
    x = and_where(x, _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f80)), (int)0xffff8000u);
    return and_where(x, _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000)), (int)0x8000ffffu);
}
static inline mgk_v ev_lo(mgk_vi x) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
}
static inline mgk_v ev_hi(mgk_vi x) {
    return _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
}
static inline mgk_v ev_ftz(mgk_v v) {
    const __m512i x = _mm512_castps_si512(v);
    const __mmask16 k = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000));
    return _mm512_castsi512_ps(and_where(x, k, (int)0x80000000u));
}
#endif

#include "bgemm_emu_vec_tmpl.h"
