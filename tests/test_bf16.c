/* bf16 kernels: the conversions, and mg_bgemm on every bf16 path against mg_bgemm_ref, the plain
 * loops that emulate the instructions' rounding exactly: VDPBF16PS (AVX512-BF16) and TDPBF16PS
 * (AMX) both read denormal inputs as zero, add each product of a pair onto the float32 sum with one
 * rounding to nearest even, and flush a denormal sum to zero; VDPBF16PS adds the odd element of a
 * pair first, TDPBF16PS the even one. The portable emulation follows VDPBF16PS. Comparisons are
 * exact (==, NaN matching NaN): only the sign of a zero may differ, where padding adds a +0
 * product. A path this machine lacks is reported skipped by name on stderr ("# NAME skipped:
 * no AMX on this CPU"), its case left out of the suite. */
#include "test_util.h"
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/rng.h"
#include "minigrad/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

START_TEST(f32_to_bf16_rounds_to_nearest_even) {
    ck_assert_uint_eq(mg_f32_to_bf16_1(1.0f), 0x3f80);
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x3f808000u)), 0x3f80); /* tie, even below */
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x3f818000u)), 0x3f82); /* tie, even above */
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x3f808001u)), 0x3f81); /* just above the tie */
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x3f807fffu)), 0x3f80); /* just below */
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x3fffffffu)), 0x4000); /* carry into the exponent */
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    ck_assert_uint_eq(mg_f32_to_bf16_1(-INFINITY), 0xff80);
    ck_assert_uint_eq(mg_f32_to_bf16_1(bits_f(0x00018000u)), 0x0002); /* denormals round too */
    ck_assert_uint_eq(mg_f32_to_bf16_1(-0.0f), 0x8000);
    const mg_bf16 nan = mg_f32_to_bf16_1(bits_f(0x7f800001u)); /* payload only in the low bits */
    ck_assert(isnan(mg_bf16_to_f32_1(nan)));
    ck_assert_float_eq(mg_bf16_to_f32_1(0xc040), -3.0f);
    /* the array form (on the float32 path's vectors, in parallel pieces) agrees with the scalar one
     * on every pattern of a stride, on every path, and on short arrays (vector tails) */
    enum { n = 1 << 17 };
    float *x = malloc(n * sizeof *x);
    mg_bf16 *y = malloc(n * sizeof *y);
    float *z = malloc(n * sizeof *z);
    ck_assert(x && y && z);
    for (uint32_t i = 0; i < n; i++) x[i] = bits_f(i * 32749u + (i << 16) * 3u);
    static const mg_isa isas[] = {MG_ISA_GENERIC, MG_ISA_AVX2, MG_ISA_AVX512};
    for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
        if (!mg_isa_force(isas[s])) continue;
        for (int64_t len = 0; len <= 40; len++) {
            memset(y, 0xa5, 48 * sizeof *y);
            mg_f32_to_bf16(len, x + 3, y);
            for (int64_t i = 0; i < len; i++) ck_assert_uint_eq(y[i], mg_f32_to_bf16_1(x[3 + i]));
            ck_assert_uint_eq(y[len], 0xa5a5); /* nothing written past the end */
        }
        mg_f32_to_bf16(n, x, y);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_msg(y[i] == mg_f32_to_bf16_1(x[i]), "%s: value %u: %04x, want %04x",
                          mg_isa_name(isas[s]), i, (unsigned)y[i], (unsigned)mg_f32_to_bf16_1(x[i]));
    }
    tu_restore_detected_isa();
    mg_bf16_to_f32(n, y, z);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, z + i, sizeof u);
        ck_assert_uint_eq(u, (uint32_t)y[i] << 16);
    }
    free(x);
    free(y);
    free(z);
}
END_TEST

static bool same_value(float a, float b) {
    return a == b || (isnan(a) && isnan(b));
}

/* One product on the active path against the path's reference; returns the result (malloc'ed). */
static float *check_shape(mg_bf16_path path, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          bool acc, uint64_t seed) {
    const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    const int64_t ra = ta ? K : M, rb = tb ? N : K;
    mg_bf16 *A = tu_bf16_fill((size_t)(ra * lda), seed), *B = tu_bf16_fill((size_t)(rb * ldb), seed + 1);
    float *C = malloc((size_t)(M * ldc) * sizeof *C), *R = malloc((size_t)(M * ldc) * sizeof *R);
    ck_assert(C && R);
    mg_rng r = mg_rng_make(seed + 2);
    for (int64_t i = 0; i < M * ldc; i++) C[i] = R[i] = acc ? mg_rng_range(&r, -1.0f, 1.0f) : NAN;
    if (acc && M * ldc > 3) C[3] = R[3] = 1e-39f; /* a denormal start reads as zero */
    mg_bgemm(ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
    mg_bgemm_ref(path, ta, tb, M, N, K, A, lda, B, ldb, acc, R, ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            const float c = C[i * ldc + j], e = R[i * ldc + j];
            ck_assert_msg(same_value(c, e),
                          "%s ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d: C[%lld,%lld] = %a, the "
                          "reference %a",
                          mg_bf16_path_name(path), ta, tb, (long long)M, (long long)N, (long long)K,
                          acc, (long long)i, (long long)j, c, e);
        }
    free(A);
    free(B);
    free(R);
    return C;
}

static const int64_t shapes[][3] = {{1, 1, 1},    {1, 5, 3},     {3, 5, 7},      {2, 31, 64},
                                    {17, 33, 31}, {37, 45, 129}, {13, 70, 600},  {65, 97, 1100},
                                    {33, 32, 32}, {48, 64, 1030}};

static void path_matches_reference(mg_bf16_path path) {
    ck_assert(mg_bf16_path_force(path));
    ck_assert_int_eq(mg_bf16_path_active(), path);
    uint64_t seed = 100;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                if (acc && s % 2 && t % 2) continue; /* keep it short: most combinations */
                free(check_shape(path, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                                 acc, seed += 3));
            }
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

START_TEST(bgemm_emulated_matches_reference) {
    path_matches_reference(MG_BF16_EMULATED);
}
END_TEST

START_TEST(bgemm_avx512bf16_matches_reference) {
    path_matches_reference(MG_BF16_AVX512);
}
END_TEST

START_TEST(bgemm_amx_matches_reference) {
    path_matches_reference(MG_BF16_AMX);
}
END_TEST

/* The emulation is VDPBF16PS's arithmetic: the two agree bit for bit on the same inputs. */
START_TEST(bgemm_emulation_equals_avx512bf16) {
    const int64_t M = 29, N = 75, K = 777;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 7), *B = tu_bf16_fill((size_t)(K * N), 8);
    float *C1 = malloc((size_t)(M * N) * sizeof *C1), *C2 = malloc((size_t)(M * N) * sizeof *C2);
    ck_assert(C1 && C2);
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
    mg_bgemm(false, false, M, N, K, A, K, B, N, false, C1, N);
    ck_assert(mg_bf16_path_force(MG_BF16_AVX512));
    mg_bgemm(false, false, M, N, K, A, K, B, N, false, C2, N);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
    ck_assert_int_eq(memcmp(C1, C2, (size_t)(M * N) * sizeof *C1), 0);
    free(A);
    free(B);
    free(C1);
    free(C2);
}
END_TEST

/* Bit-identical whatever the thread count, on every path this machine has. */
START_TEST(bgemm_same_bits_for_any_thread_count) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
    const int64_t M = 150, N = 190, K = 1300;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 11), *B = tu_bf16_fill((size_t)(N * K), 12);
    float *C1 = malloc((size_t)(M * N) * sizeof *C1), *C2 = malloc((size_t)(M * N) * sizeof *C2);
    ck_assert(C1 && C2);
    int tested = 0;
    for (int p = MG_BF16_EMULATED; p <= MG_BF16_AMX; p++) {
        if (!mg_bf16_path_force((mg_bf16_path)p)) continue;
        omp_set_num_threads(1);
        mg_bgemm(false, true, M, N, K, A, K, B, K, false, C1, N);
        for (int nt = 2; nt <= 5; nt += 3) {
            omp_set_num_threads(nt);
            mg_bgemm(false, true, M, N, K, A, K, B, K, false, C2, N);
            ck_assert_msg(memcmp(C1, C2, (size_t)(M * N) * sizeof *C1) == 0, "%s: %d threads differ",
                          mg_bf16_path_name((mg_bf16_path)p), nt);
        }
        tested++;
    }
    omp_set_num_threads(before);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
    ck_assert_int_ge(tested, 1);
    free(A);
    free(B);
    free(C1);
    free(C2);
#endif
}
END_TEST

/* mg_bgemm_bias against filling C's rows with the bias and accumulating, bit for bit, on the
 * active path: the four forms, the shapes given, each at its thread count; a NULL bias is the plain
 * product. */
typedef struct {
    int64_t M, N, K;
    int threads;
} bias_shape;

static void bias_matches(const bias_shape *cases, size_t n, uint64_t seed) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
#endif
    const char *path = mg_bf16_path_name(mg_bf16_path_active());
    for (size_t s = 0; s < n; s++)
        for (int t = 0; t < 4; t++) {
            const bool ta = t & 1, tb = t >> 1;
            const int64_t M = cases[s].M, N = cases[s].N, K = cases[s].K;
            const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 3, ldc = N + 2;
            mg_bf16 *A = tu_bf16_fill((size_t)((ta ? K : M) * lda), seed += 3);
            mg_bf16 *B = tu_bf16_fill((size_t)((tb ? N : K) * ldb), seed + 1);
            float *bias = malloc((size_t)N * sizeof *bias), *C = malloc((size_t)(M * ldc) * sizeof *C),
                  *R = malloc((size_t)(M * ldc) * sizeof *R);
            ck_assert(bias && C && R);
            mg_rng r = mg_rng_make(seed + 2);
            for (int64_t j = 0; j < N; j++) bias[j] = mg_rng_range(&r, -2.0f, 2.0f);
            bias[0] = 1e-39f; /* a denormal start reads as zero either way */
            if (N > 1) bias[1] = -0.0f;
            for (int with = 0; with < 2; with++) {
                for (int64_t i = 0; i < M * ldc; i++) R[i] = C[i] = -7.0f; /* C's old values must not count */
                for (int64_t i = 0; i < M; i++)
                    if (with) memcpy(R + i * ldc, bias, (size_t)N * sizeof *R);
#ifdef _OPENMP
                omp_set_num_threads(1);
#endif
                mg_bgemm(ta, tb, M, N, K, A, lda, B, ldb, with, R, ldc);
#ifdef _OPENMP
                omp_set_num_threads(cases[s].threads);
#endif
                mg_bgemm_bias(ta, tb, M, N, K, A, lda, B, ldb, with ? bias : NULL, C, ldc);
#ifdef _OPENMP
                omp_set_num_threads(before);
#endif
                for (int64_t i = 0; i < M * ldc; i++)
                    ck_assert_msg(memcmp(&C[i], &R[i], sizeof C[i]) == 0,
                                  "%s ta=%d tb=%d %lldx%lldx%lld, %d threads, bias=%d: C[%lld] = %a, filled "
                                  "and accumulated %a",
                                  path, ta, tb, (long long)M, (long long)N, (long long)K, cases[s].threads,
                                  with, (long long)i, C[i], R[i]);
            }
            free(A);
            free(B);
            free(bias);
            free(C);
            free(R);
        }
}

/* On every path this machine has: shapes past whole tiles and K slices, over more than one row
 * block (M > 1536) and more than one column block (N > 256) with the work split among 3 threads;
 * then the AMX kernel on the tile model (slow: small shapes, past its 512-column block and its
 * 1024-value K slice). */
START_TEST(bgemm_bias_equals_filling_then_accumulating) {
    static const bias_shape plain[] = {{1, 5, 3, 1},     {13, 70, 600, 3},  {37, 45, 1100, 1},
                                       {1601, 33, 40, 1}, {200, 300, 600, 3}, {2000, 40, 130, 3}};
    static const bias_shape model_shapes[] = {{37, 530, 70, 3}, {45, 40, 1100, 1}, {70, 33, 64, 2}};
    int tested = 0;
    for (int p = MG_BF16_EMULATED; p <= MG_BF16_AMX; p++) {
        if (!mg_bf16_path_force((mg_bf16_path)p)) continue;
        tested++;
        bias_matches(plain, sizeof plain / sizeof *plain, 500 + 100 * (uint64_t)p);
    }
    mg_bf16_amx_emulation(true);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    bias_matches(model_shapes, sizeof model_shapes / sizeof *model_shapes, 900);
    mg_bf16_amx_emulation(false);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
    ck_assert_int_ge(tested, 1);
}
END_TEST

/* ---- the emulation's vector kernels ----
 * The emulated path runs on the vector kernels of the active float32 path (AVX-512F, AVX2 + FMA)
 * and on the plain C on the portable one. Each vector kernel gives the plain C's bits (a NaN
 * matching any NaN) on odd shapes (M, N and K past whole tiles, K odd, K = 1, several K slices), the
 * four transposition forms, with and without accumulation, on 1 and 2 threads, on model-scale values
 * and on values whose products and sums underflow (and are flushed), with signed zeros, denormals,
 * huge values, infinities and NaN, from starting values in C of the same kinds. */

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static bool same_bits_or_nan(float a, float b) {
    return f_bits(a) == f_bits(b) || (isnan(a) && isnan(b));
}

/* Starting values for accumulation: model-scale or about 2^-120, with signed zeros and denormals. */
static void fill_start(float *C, int64_t n, uint64_t seed, bool tiny) {
    mg_rng r = mg_rng_make(seed);
    for (int64_t i = 0; i < n; i++) {
        const float v = mg_rng_range(&r, -1.0f, 1.0f);
        C[i] = i % 7 == 3 ? -0.0f : i % 11 == 5 ? v * 1e-39f : i % 13 == 7 ? 0.0f : tiny ? v * 0x1p-120f : v;
    }
}

/* mg_bgemm on the emulated path with the float32 path isa active, from C's copy of C0. */
static float *emu_run(mg_isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const mg_bf16 *A,
                      int64_t lda, const mg_bf16 *B, int64_t ldb, bool acc, const float *C0, int64_t ldc) {
    ck_assert(mg_isa_force(isa));
    float *C = malloc((size_t)(M * ldc) * sizeof *C);
    ck_assert_ptr_nonnull(C);
    memcpy(C, C0, (size_t)(M * ldc) * sizeof *C);
    mg_bgemm(ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
    return C;
}

static void emu_kernel_matches_plain_c(mg_isa isa) {
    static const int64_t emu_shapes[][3] = {{1, 1, 1},    {1, 5, 3},     {3, 5, 7},     {7, 33, 1},
                                            {9, 31, 2},   {8, 32, 64},   {4, 16, 16},   {17, 33, 31},
                                            {13, 70, 255}, {37, 45, 129}, {100, 50, 513}, {65, 97, 1100}};
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
#ifdef _OPENMP
    const int before = omp_get_max_threads();
#endif
    uint64_t seed = 700;
    for (size_t s = 0; s < sizeof emu_shapes / sizeof *emu_shapes; s++)
        for (int tiny = 0; tiny < 2; tiny++)
            for (int t = 0; t < 4; t++)
                for (int acc = 0; acc < 2; acc++) {
                    const int64_t M = emu_shapes[s][0], N = emu_shapes[s][1], K = emu_shapes[s][2];
                    const bool ta = t & 1, tb = t >> 1;
                    const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 3, ldc = N + 2;
                    const size_t na = (size_t)((ta ? K : M) * lda), nb = (size_t)((tb ? N : K) * ldb);
                    seed += 3;
                    mg_bf16 *A = tiny ? tu_bf16_fill_tiny(na, seed) : tu_bf16_fill(na, seed);
                    mg_bf16 *B = tiny ? tu_bf16_fill_tiny(nb, seed + 1) : tu_bf16_fill(nb, seed + 1);
                    float *C0 = malloc((size_t)(M * ldc) * sizeof *C0);
                    ck_assert_ptr_nonnull(C0);
                    fill_start(C0, M * ldc, seed + 2, tiny);
                    for (int nt = 1; nt <= 2; nt++) {
#ifdef _OPENMP
                        omp_set_num_threads(nt);
#else
                        if (nt > 1) break;
#endif
                        float *P = emu_run(MG_ISA_GENERIC, ta, tb, M, N, K, A, lda, B, ldb, acc, C0, ldc);
                        float *V = emu_run(isa, ta, tb, M, N, K, A, lda, B, ldb, acc, C0, ldc);
                        for (int64_t i = 0; i < M * ldc; i++)
                            if (!same_bits_or_nan(V[i], P[i]))
                                ck_abort_msg("emulated on %s, %s values, ta=%d tb=%d M=%lld N=%lld K=%lld "
                                             "acc=%d, %d threads: C[%lld,%lld] = %a (0x%08x), the plain C %a (0x%08x)",
                                             mg_isa_name(isa), tiny ? "tiny" : "model-scale", ta, tb,
                                             (long long)M, (long long)N, (long long)K, acc, nt,
                                             (long long)(i / ldc), (long long)(i % ldc), (double)V[i],
                                             (unsigned)f_bits(V[i]), (double)P[i], (unsigned)f_bits(P[i]));
                        free(P);
                        free(V);
                    }
                    free(A);
                    free(B);
                    free(C0);
                }
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
    ck_assert(mg_isa_force(mg_isa_detected()));
}

START_TEST(bgemm_emulated_avx512_matches_plain_c) {
    emu_kernel_matches_plain_c(MG_ISA_AVX512);
}
END_TEST

START_TEST(bgemm_emulated_avx2_matches_plain_c) {
    emu_kernel_matches_plain_c(MG_ISA_AVX2);
}
END_TEST

/* The kernels' float32 sums stay within the bound of K float32 additions of the float64 product
 * of the same bf16 values, a check on the reference itself. */
START_TEST(bgemm_close_to_float64) {
    const int64_t M = 9, N = 21, K = 513;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 21), *B = tu_bf16_fill((size_t)(K * N), 22);
    float *C = malloc((size_t)(M * N) * sizeof *C);
    ck_assert_ptr_nonnull(C);
    mg_bgemm(false, false, M, N, K, A, K, B, N, false, C, N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double e = 0.0, s = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const double a = mg_bf16_to_f32_1(A[i * K + k]), b = mg_bf16_to_f32_1(B[k * N + j]);
                e += a * b;
                s += fabs(a * b);
            }
            ck_assert_msg(fabs(C[i * N + j] - e) <= (double)(K + 2) * FLT_EPSILON * s + 1e-30,
                          "C[%lld,%lld] = %g, float64 %g", (long long)i, (long long)j, C[i * N + j], e);
        }
    free(A);
    free(B);
    free(C);
}
END_TEST

Suite *bf16_suite(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("bf16");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, NULL, tu_restore_bf16_path);
    tcase_add_checked_fixture(tc, NULL, tu_restore_detected_isa);
    tcase_add_test(tc, f32_to_bf16_rounds_to_nearest_even);
    tcase_add_test(tc, bgemm_emulated_matches_reference);
    tu_add_bf16_path_case(tc, MG_BF16_AVX512, bgemm_avx512bf16_matches_reference,
                  "bgemm_avx512bf16_matches_reference", "no AVX512-BF16 on this CPU");
    tu_add_bf16_path_case(tc, MG_BF16_AMX, bgemm_amx_matches_reference, "bgemm_amx_matches_reference",
                  mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU" : "the build left the AMX path out");
    tu_add_bf16_path_case(tc, MG_BF16_AVX512, bgemm_emulation_equals_avx512bf16,
                  "bgemm_emulation_equals_avx512bf16", "no AVX512-BF16 on this CPU");
    tu_add_isa_case(tc, MG_ISA_AVX512, bgemm_emulated_avx512_matches_plain_c,
                    "bgemm_emulated_avx512_matches_plain_c");
    tu_add_isa_case(tc, MG_ISA_AVX2, bgemm_emulated_avx2_matches_plain_c, "bgemm_emulated_avx2_matches_plain_c");
    tcase_add_test(tc, bgemm_same_bits_for_any_thread_count);
    tcase_add_test(tc, bgemm_bias_equals_filling_then_accumulating);
    tcase_add_test(tc, bgemm_close_to_float64);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_suite)
