/* The generator is pinned bit-exactly (docs/posenc-benchmark.md section 1): golden values, the
 * multiply-shift mapping, and the distributions the samplers promise. */
#include "harness.h"
#include "minigrad/rng.h"

#include <math.h>

START_TEST(splitmix_golden) {
    mg_rng r = mg_rng_make(0);
    ck_assert_uint_eq(mg_rng_next(&r), 0xE220A8397B1DCDAFULL);
    ck_assert_uint_eq(mg_rng_next(&r), 0x6E789E6AA1B965F4ULL);
    ck_assert_uint_eq(mg_rng_next(&r), 0x06C45D188009454FULL);
}
END_TEST

START_TEST(below_matches_spec_permutation) {
    /* The fixed permutation of the perm task is a Fisher-Yates shuffle driven by mg_rng_below. */
    static const int expect[32] = {5,  10, 3,  27, 23, 24, 9,  22, 21, 17, 1,  8,  14, 0,  28, 12,
                                   30, 15, 11, 25, 13, 6,  20, 2,  29, 18, 31, 26, 7,  16, 4,  19};
    int pi[32];
    for (int i = 0; i < 32; i++) pi[i] = i;
    mg_rng r = mg_rng_make(0x7E2A0000);
    for (int i = 31; i >= 1; i--) {
        int j = (int)mg_rng_below(&r, (uint32_t)i + 1), t = pi[i];
        pi[i] = pi[j];
        pi[j] = t;
    }
    for (int i = 0; i < 32; i++) ck_assert_int_eq(pi[i], expect[i]);
}
END_TEST

START_TEST(uniform_and_normal_moments) {
    mg_rng r = mg_rng_make(42);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    float umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        float u = mg_rng_uniform(&r);
        ck_assert(u >= 0.0f && u < 1.0f);
        umin = fminf(umin, u);
        umax = fmaxf(umax, u);
        su += u;
        double z = mg_rng_normal(&r);
        ck_assert(isfinite(z));
        sn += z;
        sn2 += z * z;
    }
    ck_assert_double_eq_tol(su / n, 0.5, 0.005);
    ck_assert_double_eq_tol(sn / n, 0.0, 0.01);
    ck_assert_double_eq_tol(sn2 / n, 1.0, 0.02);
    ck_assert(umin < 0.001f && umax > 0.999f);
}
END_TEST

START_TEST(categorical_frequencies) {
    const float p[4] = {0.1f, 0.0f, 0.6f, 0.3f};
    int count[4] = {0};
    mg_rng r = mg_rng_make(7);
    for (int i = 0; i < 100000; i++) count[mg_rng_categorical(&r, p, 4)]++;
    ck_assert_int_eq(count[1], 0);
    ck_assert_double_eq_tol(count[0] / 1e5, 0.1, 0.01);
    ck_assert_double_eq_tol(count[2] / 1e5, 0.6, 0.01);
    ck_assert_double_eq_tol(count[3] / 1e5, 0.3, 0.01);
    /* unnormalised weights give the same draw as normalised ones from the same state */
    const float q[4] = {1.0f, 0.0f, 6.0f, 3.0f};
    mg_rng a = mg_rng_make(9), b = mg_rng_make(9);
    for (int i = 0; i < 1000; i++) ck_assert_int_eq(mg_rng_categorical(&a, p, 4), mg_rng_categorical(&b, q, 4));
}
END_TEST

START_TEST(same_seed_same_stream) {
    mg_rng a = mg_rng_make(123), b = mg_rng_make(123), c = mg_rng_make(124);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = mg_rng_next(&a);
        ck_assert_uint_eq(x, mg_rng_next(&b));
        differ += x != mg_rng_next(&c);
    }
    ck_assert_int_eq(differ, 100);
}
END_TEST

static Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, splitmix_golden);
    tcase_add_test(tc, below_matches_spec_permutation);
    tcase_add_test(tc, uniform_and_normal_moments);
    tcase_add_test(tc, categorical_frequencies);
    tcase_add_test(tc, same_seed_same_stream);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(rng_suite)
