/* bf16 GEMM, the portable path: the arithmetic of VDPBF16PS in plain C, for CPUs without bf16
 * units (and so that every machine runs the bf16 tests). Per element and pair p:
 *   s = fma(a[2p+1], b[2p+1], s), flushed to zero if denormal; then the same with a[2p], b[2p],
 * denormal inputs read as zero. The product of two bf16 values (8 significant bits each) is exact
 * in double, and so is its sum with a float32 unless the two are more than 2^29 apart, in which
 * case the smaller is below half a float32 ulp of the larger: float(double(s) + double product) is
 * therefore the once-rounded fused multiply-add, without fmaf's libm call. */
#include "minigrad/kernels.h"

#include <math.h>
#include <string.h>

#define BG_MR 4
#define BG_NR 16
#define BG_KALIGN 2
#define BG_A_TILED 0
#define BG_NAME(x) x##_emulated
#include "bgemm_pack.h"

static inline double bg_in(uint32_t half) { /* one bf16 (the low 16 bits) as a double, DAZ */
    if ((half & 0x7f80u) == 0) half &= 0x8000u; /* zero exponent: denormal or zero -> signed zero */
    const uint32_t u = half << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

static inline float bg_ftz(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void block_emulated(int64_t m, int64_t n, int64_t kp, const uint32_t *pa, const uint32_t *pb,
                           bool acc, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i += BG_MR) {
        const uint32_t *a = pa + i * kp;
        for (int64_t j = 0; j < n; j += BG_NR) {
            const uint32_t *b = pb + j * kp;
            const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
            const int nn = n - j < BG_NR ? (int)(n - j) : BG_NR;
            float s[BG_MR][BG_NR];
            for (int r = 0; r < BG_MR; r++)
                for (int c = 0; c < BG_NR; c++)
                    s[r][c] = acc && r < mm && c < nn ? bg_ftz(C[(i + r) * ldc + j + c]) : 0.0f;
            for (int64_t p = 0; p < kp; p++) {
                double bl[BG_NR], bh[BG_NR];
                for (int c = 0; c < BG_NR; c++) {
                    bl[c] = bg_in(b[p * BG_NR + c] & 0xffffu);
                    bh[c] = bg_in(b[p * BG_NR + c] >> 16);
                }
                for (int r = 0; r < BG_MR; r++) {
                    const double al = bg_in(a[p * BG_MR + r] & 0xffffu), ah = bg_in(a[p * BG_MR + r] >> 16);
                    for (int c = 0; c < BG_NR; c++) {
                        const float t = bg_ftz((float)((double)s[r][c] + ah * bh[c]));
                        s[r][c] = bg_ftz((float)((double)t + al * bl[c]));
                    }
                }
            }
            for (int r = 0; r < mm; r++) memcpy(C + (i + r) * ldc + j, s[r], (size_t)nn * sizeof(float));
        }
    }
}

/* Against a pre-packed B (bgemm_internal.h): the arithmetic of block_emulated with A's pairs read in
 * place, all of K in one run; BG_MR rows by one 16-column panel at a time. */
static void packed_emulated(int64_t m, int64_t n, int64_t K, const mg_bf16 *A, int64_t lda,
                            const uint32_t *pb, bool acc, float *C, int64_t ldc) {
    enum { P = MGK_BGEMM_PANEL };
    const int64_t kp = (K + 1) / 2;
    for (int64_t j = 0; j < n; j += P) {
        const uint32_t *b = pb + j * kp;
        const int nn = n - j < P ? (int)(n - j) : P;
        for (int64_t i = 0; i < m; i += BG_MR) {
            const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
            float s[BG_MR][P];
            for (int r = 0; r < mm; r++)
                for (int c = 0; c < P; c++) s[r][c] = acc && c < nn ? bg_ftz(C[(i + r) * ldc + j + c]) : 0.0f;
            for (int64_t p = 0; p < kp; p++) {
                double bl[P], bh[P];
                for (int c = 0; c < P; c++) {
                    bl[c] = bg_in(b[p * P + c] & 0xffffu);
                    bh[c] = bg_in(b[p * P + c] >> 16);
                }
                for (int r = 0; r < mm; r++) {
                    const mg_bf16 *a = A + (i + r) * lda + 2 * p;
                    const double al = bg_in(a[0]), ah = 2 * p + 1 < K ? bg_in(a[1]) : 0.0;
                    for (int c = 0; c < P; c++) {
                        const float t = bg_ftz((float)((double)s[r][c] + ah * bh[c]));
                        s[r][c] = bg_ftz((float)((double)t + al * bl[c]));
                    }
                }
            }
            for (int r = 0; r < mm; r++) memcpy(C + (i + r) * ldc + j, s[r], (size_t)nn * sizeof(float));
        }
    }
}

const mgk_bgemm_impl *mgk_bgemm_emulated(void) {
    static const mgk_bgemm_impl impl = {
        .path = MG_BF16_EMULATED,
        .mr = BG_MR,
        .nr = BG_NR,
        .kalign = BG_KALIGN,
        .kc = 256,
        .mc = 256,
        .nc = 512,
        .a_tiled = BG_A_TILED,
        .pack_a = pack_a_emulated,
        .pack_b = pack_b_emulated,
        .block = block_emulated,
        .packed = packed_emulated,
    };
    return &impl;
}
