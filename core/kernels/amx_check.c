/* The AMX path's start-up check (isa.h, mgk_amx_check): before isa.c lets the AMX kernels do a
 * process's bf16 products, they compute a few small products whose answers are known, and the
 * path is used only if those come out right.
 *
 * Why: the tile kernels are tested bit for bit on a software model of the instructions
 * (amx_emu.c) on every machine, but the instructions, the tile configuration and the operand
 * layouts meet only on an AMX CPU. A mistake there (a tile read with the wrong stride, a pair
 * layout the unit reads differently, a configuration the CPU takes otherwise) would train every
 * model on wrong products without a word. The check turns that into a warning and the AVX512-BF16
 * products, at the cost of a few milliseconds once per process.
 *
 * What: every form the AMX path runs. The GEMM in all four transpositions on odd shapes (partial
 * 32 x 32 blocks through the kernel's edge tile, an odd K over three K groups of 32 values, the
 * last partial), accumulating onto a C that holds values; and the attention's tile product, with
 * and without accumulating, on 32-row and 16-row blocks and 32- and 16-column ones.
 * Each element is compared with the reference loops within a bound set by the sizes of its terms
 * (1e-4 of the sum of the absolute products and of C): tight enough for any wrong operand, loose
 * enough that a unit whose rounding differs from the one the SDM describes still passes (that is
 * the tests' business, not a reason to give up the unit). */
#include "attention_internal.h"
#include "bgemm_internal.h"
#include "isa.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CM = 35, CN = 37, CK = 75 };  /* the GEMM's shape */
enum { TM = 48, TN = 48, TKP = 32 }; /* the tile product's: m, n, pairs of K */

/* bf16 test values: signs, exponents 2^-6 .. 2^6 and mantissas varied, about 2% exact zeros and
 * 1% denormals (read as zero by the unit). */
static mg_bf16 value(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    const uint32_t r = *s >> 8;
    if (r % 61 == 0) return 0;
    if (r % 97 == 0) return 0x0003;
    const uint32_t sign = (r & 1u) << 15, exp = 127u - 6u + (r >> 1) % 13u, man = (r >> 5) & 0x7fu;
    return (mg_bf16)(sign | exp << 7 | man);
}

static float f32(mg_bf16 x) {
    const uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return fpclassify(f) == FP_SUBNORMAL ? 0.0f : f;
}

/* mag[i*N + j] = sum over k of |A(i, k) B(k, j)|, A (M x K row-major, lda), B (K x N, row-major ldb):
 * the size of an element's terms, which sets how far it may be off. */
static void magnitudes(int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda, const mg_bf16 *B,
                       int64_t ldb, double *mag) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double m = 0.0;
            for (int64_t k = 0; k < K; k++) m += fabs((double)f32(A[i * lda + k]) * f32(B[k * ldb + j]));
            mag[i * N + j] = m;
        }
}

/* got[i*N + j] against want: |got - want| <= 1e-4 * (|c0| + mag) + 1e-30 (c0 NULL: mag alone). */
static bool close_enough(int64_t M, int64_t N, const double *mag, const float *c0, const float *got,
                         const float *want, char *why, size_t why_len, const char *what) {
    for (int64_t i = 0; i < M * N; i++) {
        const double g = got[i], w = want[i], bound = 1e-4 * ((c0 ? fabs(c0[i]) : 0.0) + mag[i]) + 1e-30;
        if (!(fabs(g - w) <= bound)) {
            snprintf(why, why_len, "%s: element (%lld, %lld) is %.9g, expected %.9g", what, (long long)(i / N),
                     (long long)(i % N), g, w);
            return false;
        }
    }
    return true;
}

static bool check_gemm(const mgk_bgemm_impl *im, unsigned forms, char *why, size_t why_len) {
    static mg_bf16 a[CM * CK], b[CK * CN], at[CK * CM], bt[CN * CK];
    static float c0[CM * CN], got[CM * CN], want[CM * CN];
    static double mag[CM * CN];
    uint32_t s = 12345u;
    for (int i = 0; i < CM * CK; i++) a[i] = value(&s);
    for (int i = 0; i < CK * CN; i++) b[i] = value(&s);
    for (int i = 0; i < CM * CN; i++) c0[i] = f32(value(&s));
    for (int i = 0; i < CM; i++) /* the same operands stored the other way round */
        for (int k = 0; k < CK; k++) at[k * CM + i] = a[i * CK + k];
    for (int k = 0; k < CK; k++)
        for (int j = 0; j < CN; j++) bt[j * CK + k] = b[k * CN + j];
    mgk_bgemm_ref_loops(im->path, false, false, CM, CN, CK, a, CK, b, CN, true,
                        memcpy(want, c0, sizeof want), CN);
    magnitudes(CM, CN, CK, a, CK, b, CN, mag);
    for (int form = 0; form < 4; form++) {
        if (!(forms >> form & 1u)) continue;
        const bool ta = form & 1, tb = form & 2;
        memcpy(got, c0, sizeof got);
        mgk_bgemm_run_impl(im, ta, tb, CM, CN, CK, ta ? at : a, ta ? CM : CK, tb ? bt : b,
                           tb ? CK : CN, true, got, CN);
        static const char *const names[4] = {"matrix product A B", "matrix product A^T B",
                                             "matrix product A B^T", "matrix product A^T B^T"};
        if (!close_enough(CM, CN, mag, c0, got, want, why, why_len, names[form]))
            return false;
    }
    return true;
}

static bool check_tiles(mgk_attn_tile_product tiles, char *why, size_t why_len) {
    enum { K = 2 * TKP };
    static mg_bf16 a[TM * K], b[K * TN];
    static uint32_t bw[TKP * TN]; /* B's pairs interleaved per column, as the tile unit reads B */
    static float c0[TM * TN], got[TM * TN], want[TM * TN];
    static double mag[TM * TN];
    uint32_t s = 777u;
    for (int i = 0; i < TM * K; i++) a[i] = value(&s);
    for (int i = 0; i < K * TN; i++) b[i] = value(&s);
    for (int i = 0; i < TM * TN; i++) c0[i] = f32(value(&s));
    for (int p = 0; p < TKP; p++)
        for (int j = 0; j < TN; j++)
            bw[p * TN + j] = (uint32_t)b[2 * p * TN + j] | (uint32_t)b[(2 * p + 1) * TN + j] << 16;
    uint32_t aw[TM * TKP]; /* A's rows as words: two neighbouring values of K each */
    memcpy(aw, a, sizeof aw);
    magnitudes(TM, TN, K, a, K, b, TN, mag);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(want, c0, sizeof want);
        mgk_bgemm_ref_loops(MG_BF16_AMX, false, false, TM, TN, K, a, K, b, TN, acc, want, TN);
        memcpy(got, c0, sizeof got);
        tiles(TM, TN, TKP, aw, TKP, bw, TN, got, TN, acc, 0, 0);
        if (!close_enough(TM, TN, mag, acc ? c0 : NULL, got, want, why, why_len,
                          acc ? "attention tile product, accumulating" : "attention tile product"))
            return false;
    }
    return true;
}

/* The operands and results live in static buffers (70 KB, off the stack): one check at a time. */
static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;

bool mgk_amx_check(const mgk_bgemm_impl *gemm, unsigned gemm_forms, mgk_attn_tile_product tiles,
                   char *why, size_t why_len) {
    pthread_mutex_lock(&one_at_a_time);
    const bool ok = (!gemm || check_gemm(gemm, gemm_forms, why, why_len)) &&
                    (!tiles || check_tiles(tiles, why, why_len));
    pthread_mutex_unlock(&one_at_a_time);
    return ok;
}
