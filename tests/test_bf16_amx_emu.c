/* The AMX bf16 kernel's logic on every machine: core/kernels/bgemm_amx.c built a second time on the
 * software model of the tile instructions (core/kernels/amx_emu.c, switched on with
 * mg_bf16_amx_emulation), run through mg_bgemm's driver (packing, K slices, cache blocks, edge
 * tiles, threads) and compared bit for bit with mg_bgemm_ref's AMX arithmetic (TDPBF16PS as
 * Intel's SDM gives it). What this cannot check is the silicon: that TDPBF16PS computes what the
 * model computes, and the tile configuration, CPUID and arch_prctl calls as the CPU and Linux take
 * them. Those run only in tests/test_bf16.c's bgemm_amx_matches_reference on an AMX machine, and
 * in bgemm_amx_silicon_follows_the_model here, which on a mismatch says which other model the
 * silicon does follow. */
#include "test_util.h"
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/rng.h"
#include "minigrad/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static bool same_value(float a, float b) {
    return a == b || (isnan(a) && isnan(b));
}

typedef struct operands {
    int64_t lda, ldb, ldc;
    mg_bf16 *A, *B;
    float *C0; /* the starting C (accumulate), NAN otherwise */
} operands;

static operands make_operands(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool acc,
                              uint64_t seed) {
    operands o = {.lda = (ta ? M : K) + 3, .ldb = (tb ? K : N) + 1, .ldc = N + 2};
    o.A = tu_bf16_fill((size_t)((ta ? K : M) * o.lda), seed);
    o.B = tu_bf16_fill((size_t)((tb ? N : K) * o.ldb), seed + 1);
    o.C0 = malloc((size_t)(M * o.ldc) * sizeof *o.C0);
    ck_assert_ptr_nonnull(o.C0);
    mg_rng r = mg_rng_make(seed + 2);
    for (int64_t i = 0; i < M * o.ldc; i++) {
        float v = acc ? mg_rng_range(&r, -1.0f, 1.0f) : NAN;
        if (acc && i % 37 == 3) v = 1e-39f * v; /* a denormal start reads as zero */
        if (acc && i % 41 == 5) v = 0.0f;
        o.C0[i] = v;
    }
    return o;
}

static void free_operands(operands *o) {
    free(o->A), free(o->B), free(o->C0);
}

/* mg_bgemm on the active path into a copy of C0 (malloc'ed). */
static float *run(const operands *o, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool acc) {
    float *C = malloc((size_t)(M * o->ldc) * sizeof *C);
    ck_assert_ptr_nonnull(C);
    memcpy(C, o->C0, (size_t)(M * o->ldc) * sizeof *C);
    mg_bgemm(ta, tb, M, N, K, o->A, o->lda, o->B, o->ldb, acc, C, o->ldc);
    return C;
}

static float *reference(const operands *o, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        bool acc) {
    float *R = malloc((size_t)(M * o->ldc) * sizeof *R);
    ck_assert_ptr_nonnull(R);
    memcpy(R, o->C0, (size_t)(M * o->ldc) * sizeof *R);
    mg_bgemm_ref(MG_BF16_AMX, ta, tb, M, N, K, o->A, o->lda, o->B, o->ldb, acc, R, o->ldc);
    return R;
}

/* Every element, the padding columns between rows included (they must stay untouched). */
static void expect_equal(const char *what, const float *C, const float *R, bool ta, bool tb,
                         int64_t M, int64_t N, int64_t K, int64_t ldc, bool acc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++)
            ck_assert_msg(same_value(C[i * ldc + j], R[i * ldc + j]),
                          "%s ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d: C[%lld,%lld] = %a, the "
                          "reference %a",
                          what, ta, tb, (long long)M, (long long)N, (long long)K, acc, (long long)i,
                          (long long)j, C[i * ldc + j], R[i * ldc + j]);
}

static void emulation_on(void) {
    mg_bf16_amx_emulation(true);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    ck_assert_int_eq(mg_bf16_path_active(), MG_BF16_AMX);
}

static void emulation_off(void) {
    mg_bf16_amx_emulation(false);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

/* M, N, K: single elements, every size short of a tile (16 rows or columns) and of a micro-tile
 * (32), exact tiles, K odd and short of the 32 values of one TDPBF16PS step, K over the 1024 of a
 * K slice (two slices, the second continuing from C), N over the 512 of a column block, M over
 * the 1024 of a row block. */
static const int64_t shapes[][3] = {
    {1, 1, 1},    {3, 5, 7},      {15, 17, 31},  {16, 16, 32},   {17, 33, 33},
    {31, 47, 63}, {32, 32, 64},   {33, 65, 97},  {45, 31, 129},  {64, 48, 40},
    {7, 100, 1},  {70, 40, 1100}, {40, 530, 33}, {1030, 17, 40}, {2, 3, 2049},
};

START_TEST(amx_kernel_on_the_model_matches_reference) {
    emulation_on();
    uint64_t seed = 500;
    int checked = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const bool big = M * N * K > 1000000;
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                if (big && (t + acc) % 2) continue; /* the large ones: half the combinations */
                const bool ta = t & 1, tb = t >> 1;
                operands o = make_operands(ta, tb, M, N, K, acc, seed += 7);
                float *C = run(&o, ta, tb, M, N, K, acc), *R = reference(&o, ta, tb, M, N, K, acc);
                expect_equal("amx on the model", C, R, ta, tb, M, N, K, o.ldc, acc);
                free(C), free(R), free_operands(&o);
                checked++;
            }
    }
    ck_assert_int_ge(checked, 100);
    emulation_off();
}
END_TEST

/* 1, 2 and 3 threads give the same bits, each equal to the reference. */
START_TEST(amx_kernel_on_the_model_same_bits_for_1_2_3_threads) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
    emulation_on();
    const int64_t M = 97, N = 130, K = 1100;
    for (int acc = 0; acc < 2; acc++) {
        operands o = make_operands(false, true, M, N, K, acc, 900 + acc);
        float *R = reference(&o, false, true, M, N, K, acc);
        for (int nt = 1; nt <= 3; nt++) {
            omp_set_num_threads(nt);
            float *C = run(&o, false, true, M, N, K, acc);
            expect_equal(nt == 1   ? "1 thread"
                         : nt == 2 ? "2 threads"
                                   : "3 threads",
                         C, R, false, true, M, N, K, o.ldc, acc);
            free(C);
        }
        free(R), free_operands(&o);
    }
    omp_set_num_threads(before);
    emulation_off();
#endif
}
END_TEST

enum { TILES_RELEASED, TILES_FOREIGN };

static const char *const disturbed_name[] = {"after TILERELEASE", "after another LDTILECFG"};

static void expect_own_tiles(const char *what) {
    uint8_t want[64], got[64];
    tu_amx_tile_config(want, 8, 64, 16);
    mg_bf16_amx_emulation_store_tiles(got);
    ck_assert_msg(memcmp(got, want, sizeof got) == 0,
                  "%s: the thread's tile configuration is not the kernels' own", what);
}

/* The kernel owns no tile state between calls: after the tiles were released, or loaded with
 * another library's shapes, on the same thread, the next mg_bgemm loads its configuration again
 * and gives the reference's bits (before, the model stopped the process: the kernel remembered
 * its first load and ran its tiles on the state it found). One thread, so the product runs on the
 * thread whose tiles were changed; edge tiles, accumulation and K over one slice. */
START_TEST(amx_kernel_on_the_model_survives_other_tile_users) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    emulation_on();
    const int64_t shape[][3] = {{45, 31, 129}, {64, 64, 1100}};
    for (size_t s = 0; s < sizeof shape / sizeof *shape; s++)
        for (int how = TILES_RELEASED; how <= TILES_FOREIGN; how++) {
            const int64_t M = shape[s][0], N = shape[s][1], K = shape[s][2];
            operands o = make_operands(false, true, M, N, K, true, 1300 + 10 * s + how);
            float *R = reference(&o, false, true, M, N, K, true);
            float *C = run(&o, false, true, M, N, K, true);
            expect_equal("first call", C, R, false, true, M, N, K, o.ldc, true);
            expect_own_tiles("after the first call");
            free(C);
            ck_assert_msg(tu_amx_disturb_tiles(how == TILES_RELEASED),
                          "STTILECFG on the model, %s: not what was set",
                          disturbed_name[how]);
            C = run(&o, false, true, M, N, K, true);
            expect_equal(disturbed_name[how], C, R, false, true, M, N, K, o.ldc, true);
            expect_own_tiles(disturbed_name[how]);
            free(C), free(R), free_operands(&o);
        }
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
    emulation_off();
}
END_TEST

/* The same with 2 threads: between two products each thread of the team has its tiles changed,
 * one released, the other loaded with another library's shapes (OpenMP keeps the team's threads
 * from one parallel region to the next, so both run tiles of the second product). */
#ifdef _OPENMP
START_TEST(amx_kernel_on_the_model_survives_other_tile_users_2_threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(2);
    emulation_on();
    const int64_t M = 97, N = 130, K = 1100;
    operands o = make_operands(false, true, M, N, K, false, 1400);
    float *R = reference(&o, false, true, M, N, K, false);
    for (int round = 0; round < 3; round++) {
        float *C = run(&o, false, true, M, N, K, false);
        expect_equal(round == 0 ? "2 threads, first call" : "2 threads, after other tile users", C,
                     R, false, true, M, N, K, o.ldc, false);
        free(C);
        int disturbed = 0;
#pragma omp parallel num_threads(2) reduction(+ : disturbed)
        disturbed += tu_amx_disturb_tiles((omp_get_thread_num() + round) % 2 == 0);
        ck_assert_msg(disturbed == 2, "round %d: %d of 2 threads had their tiles changed", round,
                      disturbed);
    }
    free(R), free_operands(&o);
    omp_set_num_threads(before);
    emulation_off();
}
END_TEST
#endif

/* Small products stay on the AMX kernel under the model (nothing is handed to AVX512-BF16), the
 * switch leaves detection alone, and turning it off sends the active path back to the CPU's. */
START_TEST(amx_emulation_switch) {
    const mg_bf16_path cpu = mg_bf16_path_detected();
    emulation_on();
    ck_assert_int_eq(mg_bf16_path_detected(), cpu);
    operands o = make_operands(false, false, 3, 40, 70, false, 77);
    float *C = run(&o, false, false, 3, 40, 70, false),
          *R = reference(&o, false, false, 3, 40, 70, false);
    expect_equal("3 rows on the model", C, R, false, false, 3, 40, 70, o.ldc, false);
    free(C), free(R);
    mg_bf16_amx_emulation(false);
    ck_assert_int_eq(mg_bf16_path_active(), cpu);
    ck_assert_int_eq(mg_bf16_path_force(MG_BF16_AMX), mg_bf16_path_available(MG_BF16_AMX));
    ck_assert(mg_bf16_path_force(cpu));
    free_operands(&o);
}
END_TEST

/* The comparison has teeth: on these data the AMX arithmetic differs from the one-chain order of
 * VDPBF16PS in many elements, so a kernel that summed in another order would not pass. */
START_TEST(the_data_tell_the_orders_apart) {
    const int64_t M = 33, N = 65, K = 97;
    operands o = make_operands(false, false, M, N, K, true, 1234);
    float *R = reference(&o, false, false, M, N, K, true);
    float *V = malloc((size_t)(M * o.ldc) * sizeof *V);
    ck_assert_ptr_nonnull(V);
    memcpy(V, o.C0, (size_t)(M * o.ldc) * sizeof *V);
    mg_bgemm_ref(MG_BF16_EMULATED, false, false, M, N, K, o.A, o.lda, o.B, o.ldb, true, V, o.ldc);
    int64_t differ = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) differ += R[i * o.ldc + j] != V[i * o.ldc + j];
    ck_assert_msg(differ > M * N / 20, "only %lld of %lld elements differ", (long long)differ,
                  (long long)(M * N));
    free(R), free(V), free_operands(&o);
}
END_TEST

/* One chain per element in pair order, even product first (the pseudo-code of Intel's intrinsics
 * guide) or odd first: the other models the silicon might follow. */
static void chain_model(bool even_first, int64_t M, int64_t N, int64_t K, const mg_bf16 *A,
                        const mg_bf16 *B, float *C) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k += 2)
                for (int h = 0; h < 2; h++) {
                    const int64_t kk = k + (even_first ? h : 1 - h);
                    if (kk >= K) continue;
                    float a = mg_bf16_to_f32_1(A[i * K + kk]), b = mg_bf16_to_f32_1(B[kk * N + j]);
                    if (fpclassify(a) == FP_SUBNORMAL) a = 0.0f;
                    if (fpclassify(b) == FP_SUBNORMAL) b = 0.0f;
                    s = fmaf(a, b, s);
                    if (fpclassify(s) == FP_SUBNORMAL) s = 0.0f;
                }
            C[i * N + j] = s;
        }
}

/* On an AMX CPU only: the instructions against the model; on a mismatch, which model they do
 * follow, so that the reference and amx_emu.c can be put right. */
START_TEST(bgemm_amx_silicon_follows_the_model) {
    const int64_t M = 64, N = 64, K = 256;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 31), *B = tu_bf16_fill((size_t)(K * N), 32);
    float *C = malloc((size_t)(M * N) * sizeof *C), *R = malloc((size_t)(M * N) * sizeof *R),
          *E = malloc((size_t)(M * N) * sizeof *E), *O = malloc((size_t)(M * N) * sizeof *O);
    ck_assert(C && R && E && O);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    mg_bgemm(false, false, M, N, K, A, K, B, N, false, C, N);
    mg_bgemm_ref(MG_BF16_AMX, false, false, M, N, K, A, K, B, N, false, R, N);
    chain_model(true, M, N, K, A, B, E);
    chain_model(false, M, N, K, A, B, O);
    int64_t off_sdm = 0, off_even = 0, off_odd = 0;
    for (int64_t e = 0; e < M * N; e++) {
        off_sdm += !same_value(C[e], R[e]);
        off_even += !same_value(C[e], E[e]);
        off_odd += !same_value(C[e], O[e]);
    }
    ck_assert_msg(off_sdm == 0,
                  "TDPBF16PS differs from the SDM's model (two chains per 16 pairs) in %lld of "
                  "%lld elements; from one chain, even product first: %lld; odd first: %lld",
                  (long long)off_sdm, (long long)(M * N), (long long)off_even, (long long)off_odd);
    free(A), free(B), free(C), free(R), free(E), free(O);
}
END_TEST

typedef struct warned {
    int calls;
    char msg[512];
} warned;

static void on_warning(mg_log_level level, const char *msg, void *user) {
    warned *w = user;
    if (level == MG_LOG_WARN) w->calls++, snprintf(w->msg, sizeof w->msg, "%s", msg);
}

/* The start-up check passes the AMX kernels on the model, and has teeth: on a model that leaves
 * out the odd products each part, and each of the GEMM's four forms alone, fails and says which
 * product and element. */
START_TEST(amx_start_check_on_the_model) {
    char why[256];
    ck_assert_msg(mg_bf16_amx_check(true, 15, true, why, sizeof why), "%s", why);
    mg_bf16_amx_emulation_fault(true);
    static const char *const forms[4] = {"matrix product A B: element (", "matrix product A^T B: element (",
                                         "matrix product A B^T: element (", "matrix product A^T B^T: element ("};
    for (unsigned f = 0; f < 4; f++) {
        ck_assert(!mg_bf16_amx_check(true, 1u << f, false, why, sizeof why));
        tu_assert_has("GEMM form", why, forms[f]);
    }
    ck_assert(!mg_bf16_amx_check(true, 0, true, why, sizeof why));
    tu_assert_has("attention part", why, "attention tile product: element (");
    ck_assert_msg(mg_bf16_amx_check(true, 0, false, why, sizeof why), "nothing checked, nothing wrong: %s", why);
    mg_bf16_amx_emulation_fault(false);
    ck_assert_msg(mg_bf16_amx_check(true, 15, true, why, sizeof why), "%s", why);
}
END_TEST

/* A tile unit that fails the check is not used: forcing the path fails, it is not offered, an
 * active AMX path goes back to detection, and one warning says why. Put right, it is used again. */
START_TEST(amx_start_check_refuses_a_wrong_tile_unit) {
    warned w = {0};
    mg_log_set(on_warning, &w);
    mg_bf16_amx_emulation(true);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    ck_assert_int_eq(w.calls, 0);
    mg_bf16_amx_emulation_fault(true);
    ck_assert_int_eq(mg_bf16_path_active(), mg_bf16_path_detected());
    ck_assert(!mg_bf16_path_available(MG_BF16_AMX));
    ck_assert(!mg_bf16_path_force(MG_BF16_AMX));
    ck_assert_int_eq(w.calls, 1);
    tu_assert_has("warning", w.msg,
                  "bf16: the AMX tile unit got a product wrong in minigrad's start-up check (matrix "
                  "product A B: element (");
    tu_assert_has("warning", w.msg, "bf16 products run without AMX");
    mg_bf16_amx_emulation_fault(false);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    ck_assert_int_eq(w.calls, 1);
    mg_log_set(NULL, NULL);
}
END_TEST

/* On an AMX CPU only: the instructions pass the check that decides whether the path is used. */
START_TEST(amx_start_check_passes_on_silicon) {
    char why[256];
    ck_assert_msg(mg_bf16_amx_check(false, 15, true, why, sizeof why), "%s", why);
    ck_assert_int_eq(mg_bf16_path_detected(), MG_BF16_AMX);
}
END_TEST

static void restore_path(void) {
    mg_bf16_amx_emulation_fault(false);
    mg_log_set(NULL, NULL);
    mg_bf16_amx_emulation(false);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

Suite *bf16_amx_emu_suite(void) {
    Suite *s = suite_create("bf16_amx_emu");
    TCase *tc = tcase_create("bf16_amx_emu");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, NULL, restore_path);
    tcase_add_test(tc, amx_kernel_on_the_model_matches_reference);
    tcase_add_test(tc, amx_kernel_on_the_model_same_bits_for_1_2_3_threads);
    tcase_add_test(tc, amx_kernel_on_the_model_survives_other_tile_users);
#ifdef _OPENMP
    tcase_add_test(tc, amx_kernel_on_the_model_survives_other_tile_users_2_threads);
#else
    fprintf(stderr, "# amx_kernel_on_the_model_survives_other_tile_users_2_threads skipped: built "
                    "without OpenMP\n");
#endif
    tcase_add_test(tc, amx_emulation_switch);
    tcase_add_test(tc, the_data_tell_the_orders_apart);
    tcase_add_test(tc, amx_start_check_on_the_model);
    tcase_add_test(tc, amx_start_check_refuses_a_wrong_tile_unit);
    tu_add_bf16_path_case(tc, MG_BF16_AMX, amx_start_check_passes_on_silicon,
                          "amx_start_check_passes_on_silicon",
                          mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU"
                                                             : "the build left the AMX path out");
    tu_add_bf16_path_case(tc, MG_BF16_AMX, bgemm_amx_silicon_follows_the_model,
                          "bgemm_amx_silicon_follows_the_model",
                          mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU"
                                                             : "the build left the AMX path out");
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_amx_emu_suite)
