/* mg_sgemm and mg_sgemm_batched against the plain-loop reference mg_sgemm_ref, on every SIMD path
 * this machine supports, plus the thread-count invariance docs/style.md promises.
 *
 * Tolerance, stated once: the fast and reference results each sum K products (plus the alpha and
 * beta roundings) in float, so each is within gamma_{K+4} * S of the exact value, where
 * S = |alpha| |op(A)| |op(B)| + |beta| |C| is the same product on absolute values. We therefore
 * require |fast - ref| <= (K + 4) * FLT_EPSILON * S elementwise (S itself computed with the
 * reference on |A|, |B|, |C|). Thread invariance is checked bit for bit with memcmp.
 *
 * Tests force each SIMD path in turn (mg_isa_force, process-wide); a checked teardown on every
 * TCase (tu_restore_detected_isa) puts the detected path back after each test and fails the test
 * if it cannot.
 */
#include "test_util.h"
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/testing.h"
#include "minigrad/rng.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PAD_SENTINEL 12345.0f

static const mg_isa all_isas[] = {MG_ISA_GENERIC, MG_ISA_AVX2, MG_ISA_AVX512};

static float *fill_new(size_t n, uint64_t seed) {
    float *p = mg_aligned_alloc(n * sizeof(float));
    ck_assert_ptr_nonnull(p);
    mg_rng r = mg_rng_make(seed);
    for (size_t i = 0; i < n; i++) p[i] = mg_rng_range(&r, -1.0f, 1.0f);
    return p;
}

static float *abs_copy(const float *p, size_t n) {
    float *q = mg_aligned_alloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(q);
    for (size_t i = 0; i < n; i++) q[i] = fabsf(p[i]);
    return q;
}

/* One GEMM problem with its inputs, the reference answer and the error bound per element. */
typedef struct problem {
    bool ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0; /* C0: C on entry (NaN in the used part when beta == 0) */
    float *ref, *bound;
    size_t na, nb, nc;
} problem;

static problem problem_make(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad,
                            float alpha, float beta, uint64_t seed) {
    problem p = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta};
    p.lda = (ta ? M : K) + pad;
    p.ldb = (tb ? K : N) + pad;
    p.ldc = N + pad;
    p.na = (size_t)((ta ? K : M) * p.lda);
    p.nb = (size_t)((tb ? N : K) * p.ldb);
    p.nc = (size_t)(M * p.ldc);
    p.A = fill_new(p.na ? p.na : 1, seed);
    p.B = fill_new(p.nb ? p.nb : 1, seed + 1);
    p.C0 = fill_new(p.nc ? p.nc : 1, seed + 2);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < p.ldc; j++)
            if (j >= N)
                p.C0[i * p.ldc + j] = PAD_SENTINEL;
            else if (beta == 0.0f)
                p.C0[i * p.ldc + j] = NAN;
    p.ref = mg_aligned_alloc((p.nc ? p.nc : 1) * sizeof(float));
    p.bound = mg_aligned_alloc((p.nc ? p.nc : 1) * sizeof(float));
    ck_assert(p.ref && p.bound);
    memcpy(p.ref, p.C0, p.nc * sizeof(float));
    mg_sgemm_ref(ta, tb, M, N, K, alpha, p.A, p.lda, p.B, p.ldb, beta, p.ref, p.ldc);
    float *aa = abs_copy(p.A, p.na), *ab = abs_copy(p.B, p.nb), *ac = abs_copy(p.C0, p.nc);
    mg_sgemm_ref(ta, tb, M, N, K, fabsf(alpha), aa, p.lda, ab, p.ldb, fabsf(beta), ac, p.ldc);
    for (size_t i = 0; i < p.nc; i++) p.bound[i] = (float)(K + 4) * FLT_EPSILON * ac[i];
    mg_aligned_free(aa);
    mg_aligned_free(ab);
    mg_aligned_free(ac);
    return p;
}

static void problem_free(problem *p) {
    mg_aligned_free(p->A);
    mg_aligned_free(p->B);
    mg_aligned_free(p->C0);
    mg_aligned_free(p->ref);
    mg_aligned_free(p->bound);
}

/* Checks C (computed from p->C0) against the reference; padding columns must be untouched. Check
 * records every assertion it sees, so elements are compared in plain C and only a failure is
 * reported through it. */
static void problem_check(const problem *p, const float *C, const char *what) {
    for (int64_t i = 0; i < p->M; i++) {
        for (int64_t j = 0; j < p->ldc; j++) {
            const size_t at = (size_t)(i * p->ldc + j);
            if (j >= p->N) {
                if (C[at] != PAD_SENTINEL)
                    ck_abort_msg("%s: %s%s M=%lld N=%lld K=%lld: padding C[%lld,%lld] overwritten",
                                 what, p->ta ? "T" : "N", p->tb ? "T" : "N", (long long)p->M,
                                 (long long)p->N, (long long)p->K, (long long)i, (long long)j);
                continue;
            }
            const float d = fabsf(C[at] - p->ref[at]);
            if (!(isfinite(C[at]) && d <= p->bound[at]))
                ck_abort_msg("%s: %s%s M=%lld N=%lld K=%lld alpha=%g beta=%g ld+%lld: C[%lld,%lld] "
                             "= %.9g, reference %.9g, |diff| %.3g > bound %.3g",
                             what, p->ta ? "T" : "N", p->tb ? "T" : "N", (long long)p->M,
                             (long long)p->N, (long long)p->K, (double)p->alpha, (double)p->beta,
                             (long long)(p->ldc - p->N), (long long)i, (long long)j, (double)C[at],
                             (double)p->ref[at], (double)d, (double)p->bound[at]);
        }
    }
}

static float *problem_run(const problem *p) {
    float *C = mg_aligned_alloc((p->nc ? p->nc : 1) * sizeof(float));
    ck_assert_ptr_nonnull(C);
    memcpy(C, p->C0, p->nc * sizeof(float));
    mg_sgemm(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, C,
             p->ldc);
    return C;
}

/* Runs the problem on every supported path and checks each. */
static int check_all_paths(const problem *p) {
    const mg_isa before = mg_isa_active();
    int paths = 0;
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++) {
        if (!mg_isa_force(all_isas[i])) continue;
        paths++;
        float *C = problem_run(p);
        problem_check(p, C, mg_isa_name(all_isas[i]));
        mg_aligned_free(C);
    }
    ck_assert(mg_isa_force(before));
    return paths;
}

/* ---- dispatch ---- */

START_TEST(isa_dispatch) {
    const mg_isa best = mg_isa_detected();
    ck_assert_int_eq(mg_isa_active(), best);
    ck_assert_str_eq(mg_isa_name(MG_ISA_GENERIC), "generic");
    ck_assert_str_eq(mg_isa_name(MG_ISA_AVX2), "avx2");
    ck_assert_str_eq(mg_isa_name(MG_ISA_AVX512), "avx512");
    ck_assert_str_eq(mg_isa_name((mg_isa)42), "unknown");
    /* The portable path is always there; nothing past the detected best is. */
    ck_assert(mg_isa_force(MG_ISA_GENERIC));
    ck_assert_int_eq(mg_isa_active(), MG_ISA_GENERIC);
    for (int isa = (int)best + 1; isa <= (int)MG_ISA_AVX512; isa++) {
        ck_assert(!mg_isa_force((mg_isa)isa));
        ck_assert_int_eq(mg_isa_active(), MG_ISA_GENERIC); /* unchanged by the refusal */
    }
    ck_assert(!mg_isa_force((mg_isa)-1));
    ck_assert(!mg_isa_force((mg_isa)3));
    ck_assert_int_eq(mg_isa_active(), MG_ISA_GENERIC);
    ck_assert(mg_isa_force(best));
    ck_assert_int_eq(mg_isa_active(), best);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    /* On x86-64 the build always carries the SIMD paths: the CPU alone decides. */
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    ck_assert_int_eq(best, __builtin_cpu_supports("avx512f") ? MG_ISA_AVX512
                           : avx2                            ? MG_ISA_AVX2
                                                             : MG_ISA_GENERIC);
#endif
    printf("# detected path: %s\n", mg_isa_name(best));
}
END_TEST

/* ---- correctness ---- */

static const float alphas[] = {1.0f, -0.75f, 2.5f};
static const float betas[] = {0.0f, 1.0f, 0.5f};
static const int64_t pads[] = {0, 3, 16};

/* Odd sizes around the vector widths (4, 8, 16), the micro-tiles (4x8, 6x16, 8x32) and the small-M
 * threshold; alpha, beta and padding cycle with the case number. */
START_TEST(odd_shapes_all_variants) {
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 9, 17, 65, 129};
    static const int64_t Ns[] = {1, 3, 17, 33, 63, 65, 129};
    static const int64_t Ks[] = {0, 1, 3, 17, 63, 65, 129};
    const int variant = _i; /* ta = bit 1, tb = bit 0 */
    int n = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; c++, n++) {
                problem p = problem_make(variant & 2, variant & 1, Ms[a], Ns[b], Ks[c], pads[n % 3],
                                         alphas[(n / 3) % 3], betas[n % 3],
                                         (uint64_t)n * 7 + (uint64_t)variant);
                ck_assert_int_ge(check_all_paths(&p), 1);
                problem_free(&p);
            }
}
END_TEST

/* Sizes that cross every cache block (K > kc = 256, M > mc <= 2048, N > nc <= 512 on all paths),
 * so several K slices accumulate into C and every edge tile appears. One thread, so that M is not
 * split below mc. Each problem is long in one direction only, to keep the reference cheap. */
START_TEST(large_shapes_cross_blocks) {
    static const struct {
        int64_t M, N, K;
        float alpha, beta;
    } shapes[] = {
        {2061, 13, 301, 0.5f, 1.0f}, {21, 531, 300, 1.0f, 0.0f}, {45, 70, 777, -1.0f, 0.5f}};
    const int variant = _i;
    const int saved = mg_get_num_threads();
    mg_set_num_threads(1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p = problem_make(variant & 2, variant & 1, shapes[s].M, shapes[s].N, shapes[s].K,
                                 (int64_t)s * 4, shapes[s].alpha, shapes[s].beta,
                                 100 + 10 * (uint64_t)s + (uint64_t)variant);
        check_all_paths(&p);
        problem_free(&p);
    }
    mg_set_num_threads(saved);
}
END_TEST

/* M <= 4 takes the unpacked path: long rows (several 256-column stripes), K tails. */
START_TEST(small_m_long_rows) {
    const int variant = _i;
    int n = 0;
    for (int64_t M = 1; M <= 5; M++)
        for (int64_t N = 255; N <= 1100; N += 845)
            for (int64_t K = 70; K <= 301; K += 231, n++) {
                problem p = problem_make(variant & 2, variant & 1, M, N, K, pads[n % 3],
                                         alphas[n % 3], betas[(n / 2) % 3], 300 + (uint64_t)n);
                check_all_paths(&p);
                problem_free(&p);
            }
}
END_TEST

/* mg_sgemm_bias is filling C's rows with the bias and calling mg_sgemm with alpha = beta = 1: the
 * same bits on every ISA path, in the four forms, through the packed path (several K slices, row
 * blocks and column blocks, split among 3 threads), the few-row path, the split of K for decoding
 * (M <= 4, K > 256, N >= 256), K == 0 and the reference loops; a NULL bias is the plain product. */
START_TEST(bias_equals_filling_then_accumulating) {
    static const int64_t shapes[][4] = {/* M, N, K, threads */
                                        {2061, 13, 301, 3}, {37, 70, 600, 1}, {3, 300, 700, 3},
                                        {2, 33, 5, 1},      {9, 17, 0, 1},    {65, 129, 65, 1},
                                        {130, 600, 100, 3}};
    const int saved = mg_get_num_threads();
    int tested = 0;
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++) {
        if (!mg_isa_force(all_isas[i])) continue;
        tested++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int v = 0; v < 4; v++) {
                const bool ta = v & 2, tb = v & 1;
                const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
                float *A = fill_new((size_t)((ta ? K : M) * lda + 1), 40 + s),
                      *B = fill_new((size_t)((tb ? N : K) * ldb + 1), 50 + s),
                      *bias = fill_new((size_t)N, 60 + s);
                bias[0] = -0.0f;
                float *C = malloc((size_t)(M * ldc) * sizeof *C), *R = malloc((size_t)(M * ldc) * sizeof *R);
                ck_assert(C && R);
                for (int with = 0; with < 2; with++)
                    for (int ref = 0; ref < 2; ref++) {
                        for (int64_t e = 0; e < M * ldc; e++) C[e] = R[e] = -3.0f; /* old C must not count */
                        for (int64_t r = 0; r < M; r++)
                            if (with) memcpy(R + r * ldc, bias, (size_t)N * sizeof *R);
                        mg_set_num_threads(1);
                        mg_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, with ? 1.0f : 0.0f, R, ldc);
                        mg_set_num_threads((int)shapes[s][3]);
                        mg_sgemm_set_reference(ref);
                        mg_sgemm_bias(ta, tb, M, N, K, A, lda, B, ldb, with ? bias : NULL, C, ldc);
                        mg_sgemm_set_reference(false);
                        if (ref) { /* the reference loops: compare with themselves filled */
                            for (int64_t e = 0; e < M * ldc; e++) R[e] = -3.0f;
                            for (int64_t r = 0; r < M; r++)
                                if (with) memcpy(R + r * ldc, bias, (size_t)N * sizeof *R);
                            mg_sgemm_ref(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, with ? 1.0f : 0.0f, R, ldc);
                        }
                        for (int64_t e = 0; e < M * ldc; e++)
                            ck_assert_msg(memcmp(&C[e], &R[e], sizeof C[e]) == 0,
                                          "%s ta=%d tb=%d %lldx%lldx%lld bias=%d reference=%d: C[%lld] = "
                                          "%a, filled and accumulated %a",
                                          mg_isa_name(all_isas[i]), ta, tb, (long long)M, (long long)N,
                                          (long long)K, with, ref, (long long)e, C[e], R[e]);
                    }
                free(A);
                free(B);
                free(bias);
                free(C);
                free(R);
            }
    }
    mg_set_num_threads(saved);
    ck_assert_int_ge(tested, 1);
}
END_TEST

/* BLAS semantics: with K == 0 or alpha == 0, C = beta C and A, B are not read (NULL here). */
START_TEST(k_zero_and_alpha_zero) {
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++) {
        if (!mg_isa_force(all_isas[i])) continue;
        float C[3 * 5];
        for (int k = 0; k < 2; k++) {
            const int64_t K = k ? 7 : 0;
            const float alpha = k ? 0.0f : 1.0f;
            for (int j = 0; j < 15; j++) C[j] = NAN;
            mg_sgemm(false, false, 3, 4, K, alpha, NULL, K, NULL, 4, 0.0f, C, 5);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 4; c++) ck_assert_float_eq(C[r * 5 + c], 0.0f);
            ck_assert(isnan(C[4]) && isnan(C[9]) && isnan(C[14])); /* padding untouched */
            for (int j = 0; j < 15; j++) C[j] = (float)j;
            mg_sgemm(true, true, 3, 4, K, alpha, NULL, 3, NULL, K, 1.0f, C, 5);
            for (int j = 0; j < 15; j++) ck_assert_float_eq(C[j], (float)j);
            mg_sgemm(false, true, 3, 4, K, alpha, NULL, K, NULL, K, -0.5f, C, 5);
            for (int j = 0; j < 15; j++)
                ck_assert_float_eq(C[j], j % 5 == 4 ? (float)j : -0.5f * (float)j);
        }
        /* Empty outputs write nothing. */
        float D[4] = {1, 2, 3, 4};
        mg_sgemm(false, false, 0, 4, 3, 1.0f, NULL, 3, NULL, 4, 0.0f, D, 4);
        mg_sgemm(false, false, 1, 0, 3, 1.0f, NULL, 3, NULL, 4, 0.0f, D, 4);
        mg_sgemm_batched(0, false, false, 1, 4, 3, 1.0f, NULL, 3, 0, NULL, 4, 0, 0.0f, D, 4, 4);
        for (int j = 0; j < 4; j++) ck_assert_float_eq(D[j], (float)(j + 1));
    }
}
END_TEST

/* ---- threads ---- */

static float *run_threads(int threads, const problem *p) {
    mg_set_num_threads(threads);
    return problem_run(p);
}

/* The same bits for 1, 2 and 3 threads (3 oversubscribes 2 cores and splits differently), on the
 * packed path (each form) and the small-M path, decoding's M = 1 included. Every shape has enough
 * flops for the driver to use 3 threads (packed: > 12M; small M: > 0.75M) while idle threads spin;
 * under OMP_WAIT_POLICY=passive (the test run's setting; loop 1) small products stay on fewer
 * threads, so loop 0 runs with the variable unset. */
START_TEST(thread_count_invariance) {
    if (_i == 0) unsetenv("OMP_WAIT_POLICY");
    else setenv("OMP_WAIT_POLICY", "passive", 1);
    static const struct {
        bool ta, tb;
        int64_t M, N, K;
    } shapes[] = {
        {false, false, 301, 203, 700}, {true, false, 257, 190, 1100}, {false, true, 300, 260, 333},
        {true, true, 129, 300, 517},   {false, false, 3, 4100, 700},  {false, true, 4, 3000, 701},
        {false, false, 1, 1500, 300},  {false, true, 1, 700, 777},
        /* small M, B not transposed, K past one 256-row chunk: the K-split decode path (a last
         * chunk of 1 row; op(A) transposed) */
        {false, false, 4, 1000, 513},  {true, false, 2, 900, 600},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p = problem_make(shapes[s].ta, shapes[s].tb, shapes[s].M, shapes[s].N, shapes[s].K,
                                 1, 0.75f, s % 2 ? 1.0f : 0.0f, 400 + s);
        for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++) {
            if (!mg_isa_force(all_isas[i])) continue;
            float *c1 = run_threads(1, &p);
            problem_check(&p, c1, mg_isa_name(all_isas[i]));
            for (int t = 2; t <= 3; t++) {
                float *ct = run_threads(t, &p);
                ck_assert_msg(memcmp(c1, ct, p.nc * sizeof(float)) == 0,
                              "%s: shape %zu: %d threads differ from 1 thread",
                              mg_isa_name(all_isas[i]), s, t);
                mg_aligned_free(ct);
            }
            mg_aligned_free(c1);
        }
        problem_free(&p);
    }
}
END_TEST

/* Called from inside a parallel region, each call runs on its caller and still gives the
 * single-threaded bits. */
START_TEST(inside_parallel_region) {
#ifdef _OPENMP
    problem p = problem_make(false, true, 200, 150, 300, 2, 1.0f, 0.0f, 500);
    mg_set_num_threads(1);
    float *c1 = problem_run(&p);
    problem_check(&p, c1, "1 thread");
    mg_set_num_threads(2);
    float *cs[2] = {NULL, NULL};
    int inside[2] = {0, 0}, team = 0;
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
        inside[t] = omp_in_parallel();
        cs[t] = mg_aligned_alloc(p.nc * sizeof(float));
        if (cs[t]) {
            memcpy(cs[t], p.C0, p.nc * sizeof(float));
            mg_sgemm(p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.A, p.lda, p.B, p.ldb, p.beta, cs[t],
                     p.ldc);
        }
#pragma omp single
        team = omp_get_num_threads();
    }
    for (int t = 0; t < team; t++) {
        ck_assert_ptr_nonnull(cs[t]);
        ck_assert(inside[t] || team == 1);
        ck_assert_msg(memcmp(c1, cs[t], p.nc * sizeof(float)) == 0,
                      "call from thread %d of a parallel region differs", t);
        mg_aligned_free(cs[t]);
    }
    mg_aligned_free(c1);
    problem_free(&p);
#else
    printf("# inside_parallel_region: built without OpenMP, nothing to check\n");
#endif
}
END_TEST

/* ---- batched ---- */

/* Each matrix of a batch equals one mg_sgemm_ref call; stride 0 shares A or B. Batches of 3 (split
 * per matrix across threads or not, depending on size), 4 and 9 cover both scheduling choices. */
static void check_batched(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          bool share_a, bool share_b, float beta) {
    const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    const int64_t sa = share_a ? 0 : (ta ? K : M) * lda, sb = share_b ? 0 : (tb ? N : K) * ldb;
    const int64_t sc = M * ldc + 5; /* a gap between matrices of C must stay untouched */
    const size_t na = (size_t)(sa ? sa * batch : (ta ? K : M) * lda);
    const size_t nb = (size_t)(sb ? sb * batch : (tb ? N : K) * ldb);
    const size_t nc = (size_t)(sc * batch);
    float *A = fill_new(na, 600), *B = fill_new(nb, 601), *C0 = fill_new(nc, 602);
    float *C = mg_aligned_alloc(nc * sizeof(float));
    ck_assert_ptr_nonnull(C);
    memcpy(C, C0, nc * sizeof(float));
    mg_sgemm_batched(batch, ta, tb, M, N, K, 0.5f, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    for (int64_t b = 0; b < batch; b++) {
        problem p = {.ta = ta,
                     .tb = tb,
                     .M = M,
                     .N = N,
                     .K = K,
                     .lda = lda,
                     .ldb = ldb,
                     .ldc = ldc,
                     .alpha = 0.5f,
                     .beta = beta};
        p.A = A + b * sa;
        p.B = B + b * sb;
        p.nc = (size_t)(M * ldc);
        p.ref = mg_aligned_alloc(p.nc * sizeof(float));
        p.bound = mg_aligned_alloc(p.nc * sizeof(float));
        float *ac = mg_aligned_alloc(p.nc * sizeof(float));
        ck_assert(p.ref && p.bound && ac);
        memcpy(p.ref, C0 + b * sc, p.nc * sizeof(float));
        mg_sgemm_ref(ta, tb, M, N, K, 0.5f, p.A, lda, p.B, ldb, beta, p.ref, ldc);
        float *aa = abs_copy(p.A, (size_t)((ta ? K : M) * lda));
        float *ab = abs_copy(p.B, (size_t)((tb ? N : K) * ldb));
        for (size_t i = 0; i < p.nc; i++) ac[i] = fabsf(C0[b * sc + (int64_t)i]);
        mg_sgemm_ref(ta, tb, M, N, K, 0.5f, aa, lda, ab, ldb, fabsf(beta), ac, ldc);
        for (size_t i = 0; i < p.nc; i++) p.bound[i] = (float)(K + 4) * FLT_EPSILON * ac[i];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                const int64_t at = i * ldc + j;
                /* padding columns keep C0's values */
                const bool ok = j >= N ? C[b * sc + at] == C0[b * sc + at]
                                       : fabsf(C[b * sc + at] - p.ref[at]) <= p.bound[at];
                if (!ok)
                    ck_abort_msg("batched %lld x %s%s M=%lld N=%lld K=%lld share %d%d: matrix "
                                 "%lld C[%lld,%lld] = %g, expected %g",
                                 (long long)batch, ta ? "T" : "N", tb ? "T" : "N", (long long)M,
                                 (long long)N, (long long)K, share_a, share_b, (long long)b,
                                 (long long)i, (long long)j, (double)C[b * sc + at],
                                 j >= N ? (double)C0[b * sc + at] : (double)p.ref[at]);
            }
        for (int64_t g = M * ldc; g < sc; g++)
            if (C[b * sc + g] != C0[b * sc + g])
                ck_abort_msg("batched: matrix %lld: gap element %lld after C overwritten",
                             (long long)b, (long long)g);
        mg_aligned_free(aa);
        mg_aligned_free(ab);
        mg_aligned_free(ac);
        mg_aligned_free(p.ref);
        mg_aligned_free(p.bound);
    }
    mg_aligned_free(A);
    mg_aligned_free(B);
    mg_aligned_free(C0);
    mg_aligned_free(C);
}

START_TEST(batched_matches_reference) {
    for (size_t i = 0; i < sizeof all_isas / sizeof all_isas[0]; i++) {
        if (!mg_isa_force(all_isas[i])) continue;
        check_batched(4, false, true, 65, 70, 33, false, false, 0.0f);    /* attention scores */
        check_batched(9, false, false, 70, 33, 65, false, false, 1.0f);   /* context */
        check_batched(3, true, false, 300, 260, 200, false, false, 0.0f); /* big: split each */
        check_batched(5, false, true, 1, 300, 64, false, false, 0.0f);    /* decode step */
        check_batched(5, false, false, 3, 64, 300, false, false, 1.0f);
        check_batched(6, false, false, 17, 19, 23, true, false, 0.0f); /* shared A */
        check_batched(6, true, true, 17, 19, 23, false, true, 1.0f);   /* shared B */
        check_batched(3, false, true, 20, 21, 22, true, true, 0.0f);   /* both shared */
        check_batched(1, true, false, 33, 17, 9, false, false, 0.0f);
    }
}
END_TEST

/* A C stride of 0 accumulates every product into one matrix, in batch order. */
START_TEST(batched_shared_c_accumulates) {
    const int64_t batch = 4, M = 9, N = 13, K = 11;
    float *A = fill_new((size_t)(batch * M * K), 700), *B = fill_new((size_t)(K * N), 701);
    float C[9 * 13], R[9 * 13];
    for (int i = 0; i < M * N; i++) C[i] = R[i] = (float)i * 0.01f;
    mg_sgemm_batched(batch, false, false, M, N, K, 1.0f, A, K, M * K, B, N, 0, 1.0f, C, N, 0);
    for (int64_t b = 0; b < batch; b++)
        mg_sgemm_ref(false, false, M, N, K, 1.0f, A + b * M * K, K, B, N, 1.0f, R, N);
    for (int i = 0; i < M * N; i++) /* S <= 4*11*1 + 1.17 < 48 */
        if (!(fabsf(C[i] - R[i]) <= (float)(batch * K + 4) * FLT_EPSILON * 48.0f))
            ck_abort_msg("C[%d] = %g, reference %g", i, (double)C[i], (double)R[i]);
    mg_aligned_free(A);
    mg_aligned_free(B);
}
END_TEST

START_TEST(batched_thread_count_invariance) {
    const int64_t batch = 5, M = 130, N = 140, K = 64;
    float *A = fill_new((size_t)(batch * M * K), 800), *B = fill_new((size_t)(batch * N * K), 801);
    const size_t nc = (size_t)(batch * M * N);
    float *C1 = mg_aligned_alloc(nc * sizeof(float)), *C2 = mg_aligned_alloc(nc * sizeof(float));
    ck_assert(C1 && C2);
    const int saved = mg_get_num_threads();
    mg_set_num_threads(1);
    mg_sgemm_batched(batch, false, true, M, N, K, 1.0f, A, K, M * K, B, K, N * K, 0.0f, C1, N,
                     M * N);
    for (int t = 2; t <= 3; t++) {
        mg_set_num_threads(t);
        mg_sgemm_batched(batch, false, true, M, N, K, 1.0f, A, K, M * K, B, K, N * K, 0.0f, C2, N,
                         M * N);
        ck_assert_msg(memcmp(C1, C2, nc * sizeof(float)) == 0, "%d threads differ", t);
    }
    /* and each matrix equals the lone call */
    mg_sgemm(false, true, M, N, K, 1.0f, A + 3 * M * K, K, B + 3 * N * K, K, 0.0f, C2, N);
    ck_assert(memcmp(C1 + 3 * M * N, C2, (size_t)(M * N) * sizeof(float)) == 0);
    mg_set_num_threads(saved);
    mg_aligned_free(A);
    mg_aligned_free(B);
    mg_aligned_free(C1);
    mg_aligned_free(C2);
}
END_TEST

/* The threads TCase changes OMP_WAIT_POLICY and the thread count; its checked fixture puts both
 * back after each test, even one that failed (under CK_FORK=no the next test shares the process). */
static char saved_policy[64];
static bool had_policy;
static int saved_threads;

static void save_thread_settings(void) {
    const char *p = getenv("OMP_WAIT_POLICY");
    had_policy = p != NULL;
    snprintf(saved_policy, sizeof saved_policy, "%s", p ? p : "");
    saved_threads = mg_get_num_threads();
}

static void restore_thread_settings(void) {
    if (had_policy) setenv("OMP_WAIT_POLICY", saved_policy, 1);
    else unsetenv("OMP_WAIT_POLICY");
    mg_set_num_threads(saved_threads);
    tu_restore_detected_isa();
}

static Suite *gemm_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *dispatch = tcase_create("dispatch");
    tcase_add_checked_fixture(dispatch, NULL, tu_restore_detected_isa);
    tcase_add_test(dispatch, isa_dispatch);
    suite_add_tcase(s, dispatch);
    TCase *shapes = tcase_create("shapes");
    tcase_add_checked_fixture(shapes, NULL, tu_restore_detected_isa);
    tcase_add_loop_test(shapes, odd_shapes_all_variants, 0, 4);
    tcase_add_loop_test(shapes, large_shapes_cross_blocks, 0, 4);
    tcase_add_loop_test(shapes, small_m_long_rows, 0, 4);
    tcase_add_test(shapes, k_zero_and_alpha_zero);
    tcase_add_test(shapes, bias_equals_filling_then_accumulating);
    suite_add_tcase(s, shapes);
    TCase *threads = tcase_create("threads");
    tcase_add_checked_fixture(threads, save_thread_settings, restore_thread_settings);
    tcase_add_loop_test(threads, thread_count_invariance, 0, 2);
    tcase_add_test(threads, inside_parallel_region);
    suite_add_tcase(s, threads);
    TCase *batched = tcase_create("batched");
    tcase_add_checked_fixture(batched, NULL, tu_restore_detected_isa);
    tcase_add_test(batched, batched_matches_reference);
    tcase_add_test(batched, batched_shared_c_accumulates);
    tcase_add_test(batched, batched_thread_count_invariance);
    suite_add_tcase(s, batched);
    return s;
}

MG_TEST_MAIN(gemm_suite)
