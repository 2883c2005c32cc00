/* The row and elementwise kernels (minigrad/rowops.h) against their reference twins, on every SIMD
 * path this machine supports (forced in turn with mg_isa_force), on odd shapes (rows 1, 3, 65;
 * widths 1, 7, 17, 63, 65, 257, 1000: every tail length of both vector widths turns up), forward
 * and backward, plus the promises the header makes: bit-identical results for 1 and 2 threads,
 * pure adds and the scatter-add equal to the reference bit for bit, the documented order of the
 * column sums, masked rows, NaN propagation, empty inputs. Last, a small model's loss and
 * gradients with the fast kernels (every path) against the references (mg_rowops_set_impl). The
 * fused op mg_linear is tested with the other ops (test_ops_forward.c, test_ops_grad.c).
 *
 * Process-wide switches: tests force SIMD paths in turn and one switches the kernels to their
 * reference twins; a checked teardown (restore_switches) puts the detected path and the fast
 * kernels back after every test, failed ones included.
 *
 * Tolerances, stated once: kernels that sum over a row are held to a bound proportional to the
 * row length times FLT_EPSILON times the same sum over absolute values (the worst-case error of a
 * float sum in any order), with a generous constant; the elementwise math (exp, tanh, erf) is held
 * to a few units of 1e-6 relative, which the polynomial approximations meet with room to spare.
 * Inputs live in exactly-sized malloc blocks so the sanitizers see any read past a row.
 */
#include "test_util.h"
#include "minigrad/kernels.h"
#include "minigrad/minigrad.h"
#include "minigrad/rng.h"
#include "minigrad/rowops.h"
#include "minigrad/testing.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const int64_t rows_list[] = {1, 3, 65};
static const int64_t widths[] = {1, 7, 17, 63, 65, 257, 1000};
enum { NR = sizeof rows_list / sizeof rows_list[0], NWID = sizeof widths / sizeof widths[0] };

static const mg_isa all_isas[] = {MG_ISA_GENERIC, MG_ISA_AVX2, MG_ISA_AVX512};

/* Every path this CPU runs, the detected one still active on return; the caller forces each in
 * turn and the checked teardown (restore_switches) puts the detected one back. */
static int usable_isas(mg_isa out[3]) {
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (mg_isa_force(all_isas[i])) out[n++] = all_isas[i];
    mg_isa_force(mg_isa_detected());
    ck_assert_int_ge(n, 1);
    return n;
}

static float *fbuf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static float *frand(int64_t n, mg_rng *r, float lo, float hi) {
    float *p = fbuf(n);
    for (int64_t i = 0; i < n; i++) p[i] = mg_rng_range(r, lo, hi);
    return p;
}

static float *fcopy(const float *src, int64_t n) {
    float *p = fbuf(n);
    memcpy(p, src, (size_t)(n > 0 ? n : 0) * sizeof(float));
    return p;
}

/* |got - want| <= tol[i] (or tol0 when tol is NULL), NaN only where want is NaN. */
static void expect_close(const char *what, const float *got, const float *want, const float *tol,
                         float tol0, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float t = tol ? tol[i] : tol0;
        const bool ok =
            isnan(want[i]) ? isnan(got[i]) : (got[i] == want[i] || fabsf(got[i] - want[i]) <= t);
        /* Check logs every passing assertion: only a failure may reach ck_assert here */
        if (!ok)
            ck_abort_msg("%s: element %lld of %lld: got %.9g, want %.9g (tolerance %.3g)", what,
                         (long long)i, (long long)n, got[i], want[i], t);
    }
}

static void expect_same_bits(const char *what, const void *a, const void *b, size_t bytes) {
    ck_assert_msg(memcmp(a, b, bytes) == 0, "%s: results differ bit for bit", what);
}

/* ---- LayerNorm ----------------------------------------------------------------------------------
 */

START_TEST(layernorm_forward_matches_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(1);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++)
                for (int wb = 0; wb < 4; wb++) {
                    ck_assert(mg_isa_force(isas[ii]));
                    const int64_t R = rows_list[a], C = widths[c];
                    /* wb 3 also shifts every row by 1000: the mean must stay accurate */
                    float *x = frand(R * C, &rng, -2.0f, 3.0f);
                    if (wb == 3)
                        for (int64_t i = 0; i < R * C; i++) x[i] += 1000.0f;
                    float *w = (wb & 1) ? frand(C, &rng, 0.5f, 1.5f) : NULL;
                    float *b = (wb & 2) ? frand(C, &rng, -1.0f, 1.0f) : NULL;
                    float *y = fbuf(R * C), *yr = fbuf(R * C);
                    float *m = fbuf(R), *s = fbuf(R), *mr = fbuf(R), *sr = fbuf(R);
                    mg_layernorm_fwd(R, C, x, w, b, 1e-5f, y, m, s);
                    mg_layernorm_fwd_ref(R, C, x, w, b, 1e-5f, yr, mr, sr);
                    snprintf(what, sizeof what, "%s layernorm R=%lld C=%lld wb=%d",
                             mg_isa_name(isas[ii]), (long long)R, (long long)C, wb);
                    /* outputs are O(1); with the offset, one ulp of 1000 in the mean is 6e-5 * rstd
                     */
                    expect_close(what, y, yr, NULL, wb == 3 ? 2e-3f : 2e-5f, R * C);
                    for (int64_t r = 0; r < R; r++) {
                        ck_assert_msg(fabsf(m[r] - mr[r]) <= 2e-6f * (1.0f + fabsf(mr[r])),
                                      "%s: mean[%lld] %.9g, want %.9g", what, (long long)r, m[r],
                                      mr[r]);
                        ck_assert_msg(
                            fabsf(s[r] - sr[r]) <= 1e-5f * sr[r] + (wb == 3 ? 1e-3f * sr[r] : 0.0f),
                            "%s: rstd[%lld] %.9g, want %.9g", what, (long long)r, s[r], sr[r]);
                    }
                    /* inference: no mean/rstd wanted, same output */
                    float *y2 = fbuf(R * C);
                    mg_layernorm_fwd(R, C, x, w, b, 1e-5f, y2, NULL, NULL);
                    expect_same_bits(what, y, y2, (size_t)(R * C) * sizeof(float));
                    free(x), free(w), free(b), free(y), free(yr), free(y2);
                    free(m), free(s), free(mr), free(sr);
                }
}
END_TEST

START_TEST(layernorm_constant_rows_are_exact) {
    /* Zero variance: rstd = 1/sqrt(eps) ~ 316 magnifies any error in the mean; the output must be
     * the bias exactly (x - mean == 0), on every path. */
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    const float vals[] = {0.1f, 3.7f, -123.456f, 1000.1f, 10000.5f};
    for (int ii = 0; ii < ni; ii++)
        for (int c = 0; c < NWID; c++)
            for (int k = 0; k < 5; k++) {
                ck_assert(mg_isa_force(isas[ii]));
                const int64_t R = 3, C = widths[c];
                float *x = fbuf(R * C), *b = fbuf(C), *y = fbuf(R * C), *m = fbuf(R), *s = fbuf(R);
                for (int64_t i = 0; i < R * C; i++) x[i] = vals[k];
                for (int64_t j = 0; j < C; j++) b[j] = (float)j * 0.25f - 1.0f;
                mg_layernorm_fwd(R, C, x, NULL, b, 1e-5f, y, m, s);
                for (int64_t i = 0; i < R * C; i++)
                    if (y[i] != b[i % C])
                        ck_abort_msg("%s: constant row %g, C=%lld: y[%lld] = %.9g, bias %.9g",
                                     mg_isa_name(isas[ii]), vals[k], (long long)C, (long long)i,
                                     y[i], b[i % C]);
                ck_assert_float_eq(m[0], vals[k]);
                free(x), free(b), free(y), free(m), free(s);
            }
}
END_TEST

START_TEST(layernorm_backward_matches_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(2);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++)
                for (int wv = 0; wv < 2; wv++) {
                    ck_assert(mg_isa_force(isas[ii]));
                    const int64_t R = rows_list[a], C = widths[c];
                    float *x = frand(R * C, &rng, -2.0f, 3.0f),
                          *dy = frand(R * C, &rng, -1.0f, 1.0f);
                    float *w = wv ? frand(C, &rng, 0.5f, 1.5f) : NULL;
                    float *y = fbuf(R * C), *m = fbuf(R), *s = fbuf(R);
                    mg_layernorm_fwd_ref(R, C, x, w, NULL, 1e-5f, y, m, s);
                    /* accumulate onto nonzero gradients, as backward does */
                    float *dx0 = frand(R * C, &rng, -1.0f, 1.0f),
                          *dw0 = frand(C, &rng, -1.0f, 1.0f);
                    float *db0 = frand(C, &rng, -1.0f, 1.0f);
                    float *dx = fcopy(dx0, R * C), *dw = fcopy(dw0, C), *db = fcopy(db0, C);
                    float *dxr = fcopy(dx0, R * C), *dwr = fcopy(dw0, C), *dbr = fcopy(db0, C);
                    float *ws = malloc(mg_layernorm_bwd_workspace(R, C));
                    ck_assert_ptr_nonnull(ws);
                    mg_layernorm_bwd(R, C, x, w, m, s, dy, dx, dw, db, ws);
                    mg_layernorm_bwd_ref(R, C, x, w, m, s, dy, dxr, dwr, dbr);
                    /* bounds: row sums of |g| (1 + |xhat|) scaled by rstd for dx; column sums of
                     * |dy| (1 + |xhat|) for dw and db */
                    float *tx = fbuf(R * C), *tw = fbuf(C);
                    for (int64_t j = 0; j < C; j++) tw[j] = 0.0f;
                    for (int64_t r = 0; r < R; r++) {
                        double row = 0.0;
                        for (int64_t j = 0; j < C; j++) {
                            const double xh = fabs(((double)x[r * C + j] - m[r]) * s[r]);
                            const double g = fabs((double)dy[r * C + j] * (w ? w[j] : 1.0f));
                            row += g * (1.0 + xh);
                            tw[j] += (float)(fabs(dy[r * C + j]) * (1.0 + xh));
                        }
                        for (int64_t j = 0; j < C; j++)
                            tx[r * C + j] = (float)((16.0 + 2.0 * (double)C) * FLT_EPSILON * s[r] *
                                                    (row / (double)C * 4.0 + 1.0)) +
                                            4.0f * FLT_EPSILON * fabsf(dxr[r * C + j]);
                    }
                    for (int64_t j = 0; j < C; j++)
                        tw[j] = (float)(R + 8) * FLT_EPSILON * (tw[j] + 2.0f);
                    snprintf(what, sizeof what, "%s layernorm backward R=%lld C=%lld w=%d",
                             mg_isa_name(isas[ii]), (long long)R, (long long)C, wv);
                    expect_close(what, dx, dxr, tx, 0.0f, R * C);
                    expect_close(what, dw, dwr, tw, 0.0f, C);
                    expect_close(what, db, dbr, tw, 0.0f, C);
                    /* only dx wanted: no scratch, the same dx */
                    float *dx2 = fcopy(dx0, R * C);
                    mg_layernorm_bwd(R, C, x, w, m, s, dy, dx2, NULL, NULL, NULL);
                    expect_same_bits(what, dx, dx2, (size_t)(R * C) * sizeof(float));
                    free(x), free(dy), free(w), free(y), free(m), free(s), free(dx0), free(dw0),
                        free(db0);
                    free(dx), free(dw), free(db), free(dxr), free(dwr), free(dbr), free(ws),
                        free(tx);
                    free(tw), free(dx2);
                }
}
END_TEST

/* ---- GELU ---------------------------------------------------------------------------------------
 */

/* Inputs: a sweep of [-8, 8] plus the values where the approximations change regime. */
static float *gelu_inputs(int64_t n, mg_rng *r) {
    static const float special[] = {0.0f,  -0.0f,  1e-20f, -1e-20f, 20.0f, -20.0f, 100.0f, -100.0f,
                                    1e30f, -1e30f, 5.0f,   -5.0f,   0.5f,  -0.5f,  13.5f,  -13.5f};
    float *x = frand(n, r, -8.0f, 8.0f);
    for (int64_t i = 0; i < n && i < 16; i++) x[i] = special[i];
    return x;
}

START_TEST(gelu_matches_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(3);
    char what[160];
    const int64_t lens[] = {1, 7, 17, 63, 65, 257, 1000, 4099};
    for (int ii = 0; ii < ni; ii++)
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < 8; c++) {
                ck_assert(mg_isa_force(isas[ii]));
                const mg_gelu_kind kind = k ? MG_GELU_ERF : MG_GELU_TANH;
                const int64_t n = lens[c];
                float *x = gelu_inputs(n, &rng), *dy = frand(n, &rng, -1.0f, 1.0f);
                float *y = fbuf(n), *yr = fbuf(n), *tol = fbuf(n), *tg = fbuf(n);
                float *dx0 = frand(n, &rng, -1.0f, 1.0f), *dx = fcopy(dx0, n), *dxr = fcopy(dx0, n);
                mg_gelu_fwd(kind, n, x, y);
                mg_gelu_fwd_ref(kind, n, x, yr);
                mg_gelu_bwd(kind, n, x, dy, dx);
                mg_gelu_bwd_ref(kind, n, x, dy, dxr);
                for (int64_t i = 0; i < n; i++) {
                    /* erf's approximation is 1.5e-7 absolute; the tanh reference itself loses
                     * 1 + tanh(u) to cancellation for x < 0 */
                    const float ax = fabsf(x[i]) < 1e6f ? fabsf(x[i]) : 0.0f;
                    tol[i] = 1e-6f * (1.0f + ax) + 4.0f * FLT_EPSILON * fabsf(yr[i]);
                    tg[i] = 2e-6f * (1.0f + ax * ax) + 4.0f * FLT_EPSILON * fabsf(dxr[i]);
                }
                snprintf(what, sizeof what, "%s gelu %s n=%lld", mg_isa_name(isas[ii]),
                         k ? "erf" : "tanh", (long long)n);
                expect_close(what, y, yr, tol, 0.0f, n);
                expect_close(what, dx, dxr, tg, 0.0f, n);
                /* the tails of the curve are exact: x itself far right, zero far left */
                for (int64_t i = 0; i < n && i < 16; i++)
                    if (fabsf(x[i]) >= 20.0f)
                        ck_assert_msg(y[i] == (x[i] > 0 ? x[i] : 0.0f), "%s: gelu(%g) = %g", what,
                                      x[i], y[i]);
                free(x), free(dy), free(y), free(yr), free(tol), free(tg), free(dx0), free(dx),
                    free(dxr);
            }
}
END_TEST

/* ---- adds, sums, embedding: exact
 * ---------------------------------------------------------------- */

START_TEST(adds_equal_reference_bit_for_bit) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(4);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++) {
                ck_assert(mg_isa_force(isas[ii]));
                const int64_t R = rows_list[a], N = widths[c], n = R * N;
                float *x = frand(n, &rng, -3.0f, 3.0f), *h = frand(n, &rng, -3.0f, 3.0f);
                float *b = frand(N, &rng, -3.0f, 3.0f);
                float *y = fbuf(n), *yr = fbuf(n);
                snprintf(what, sizeof what, "%s adds R=%lld N=%lld", mg_isa_name(isas[ii]),
                         (long long)R, (long long)N);
                mg_add_rows(R, N, x, b, y);
                mg_add_rows_ref(R, N, x, b, yr);
                expect_same_bits(what, y, yr, (size_t)n * sizeof(float));
                mg_add_residual(R, N, x, h, b, y);
                mg_add_residual_ref(R, N, x, h, b, yr);
                expect_same_bits(what, y, yr, (size_t)n * sizeof(float));
                /* the fused add is the bias add followed by the residual add */
                float *hb = fbuf(n);
                mg_add_rows_ref(R, N, h, b, hb);
                mg_add_rows_ref(1, n, x, hb, yr);
                expect_same_bits(what, y, yr, (size_t)n * sizeof(float));
                mg_add_residual(R, N, x, h, NULL, y);
                mg_add_residual_ref(R, N, x, h, NULL, yr);
                expect_same_bits(what, y, yr, (size_t)n * sizeof(float));
                /* in place */
                float *xi = fcopy(x, n);
                mg_add_residual(R, N, xi, h, b, xi);
                mg_add_residual_ref(R, N, x, h, b, yr);
                expect_same_bits(what, xi, yr, (size_t)n * sizeof(float));
                float *d = fcopy(x, n), *dr = fcopy(x, n);
                mg_accumulate(n, d, h);
                mg_accumulate_ref(n, dr, h);
                expect_same_bits(what, d, dr, (size_t)n * sizeof(float));
                free(x), free(h), free(b), free(y), free(yr), free(hb), free(xi), free(d), free(dr);
            }
}
END_TEST

/* The forms that write a fresh gradient buffer give the accumulating forms' bits on a zeroed one,
 * whatever the buffer held before: -0 in the source becomes +0 as 0 + -0 does, NaN stays NaN. */
START_TEST(fresh_forms_equal_accumulating_onto_zero) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(14);
    char what[160];
    const int64_t lens[] = {1, 7, 17, 63, 65, 257, 1000, 4099};
    for (int ii = 0; ii < ni; ii++)
        for (int c = 0; c < 8; c++) {
            ck_assert(mg_isa_force(isas[ii]));
            const int64_t n = lens[c];
            float *x = gelu_inputs(n, &rng), *src = frand(n, &rng, -2.0f, 2.0f);
            for (int64_t i = 0; i < n; i += 5) src[i] = -0.0f;
            if (n > 3) src[3] = NAN;
            float *want = fbuf(n), *got = frand(n, &rng, -9.0f, 9.0f); /* got starts as garbage */
            snprintf(what, sizeof what, "%s accumulate_fresh n=%lld", mg_isa_name(isas[ii]), (long long)n);
            memset(want, 0, (size_t)n * sizeof *want);
            mg_accumulate(n, want, src);
            mg_accumulate_fresh(n, got, src);
            expect_same_bits(what, got, want, (size_t)n * sizeof(float));
            for (int k = 0; k < 2; k++) {
                const mg_gelu_kind kind = k ? MG_GELU_ERF : MG_GELU_TANH;
                for (int64_t i = 0; i < n; i++) got[i] = mg_rng_range(&rng, -9.0f, 9.0f);
                memset(want, 0, (size_t)n * sizeof *want);
                mg_gelu_bwd(kind, n, x, src, want);
                mg_gelu_bwd_fresh(kind, n, x, src, got);
                snprintf(what, sizeof what, "%s gelu_bwd_fresh %s n=%lld", mg_isa_name(isas[ii]),
                         k ? "erf" : "tanh", (long long)n);
                expect_same_bits(what, got, want, (size_t)n * sizeof(float));
            }
            free(x), free(src), free(want), free(got);
        }
}
END_TEST

START_TEST(sum_rows_in_documented_order) {
    /* Each column: chunks of MG_ROWOPS_CHUNK rows summed from 0 in row order, added to dst in
     * chunk order. Computed here the same way, every path must match bit for bit; and the
     * reference (one long sum) must agree to rounding. */
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(5);
    const int64_t rlist[] = {1, 3, 65, 64, 129, 1000};
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < 6; a++)
            for (int c = 0; c < NWID; c++) {
                ck_assert(mg_isa_force(isas[ii]));
                const int64_t R = rlist[a], N = widths[c];
                float *src = frand(R * N, &rng, -1.0f, 1.0f), *d0 = frand(N, &rng, -1.0f, 1.0f);
                float *d = fcopy(d0, N), *want = fcopy(d0, N), *dr = fcopy(d0, N), *tol = fbuf(N);
                for (int64_t j = 0; j < N; j++) {
                    double abs_sum = fabs(d0[j]);
                    for (int64_t r0 = 0; r0 < R; r0 += MG_ROWOPS_CHUNK) {
                        float p = 0.0f;
                        for (int64_t r = r0; r < R && r < r0 + MG_ROWOPS_CHUNK; r++) {
                            p += src[r * N + j];
                            abs_sum += fabs(src[r * N + j]);
                        }
                        want[j] += p;
                    }
                    tol[j] = (float)((double)(R + 2) * FLT_EPSILON * abs_sum);
                }
                mg_sum_rows(R, N, src, d);
                mg_sum_rows_ref(R, N, src, dr);
                snprintf(what, sizeof what, "%s sum_rows R=%lld N=%lld", mg_isa_name(isas[ii]),
                         (long long)R, (long long)N);
                expect_same_bits(what, d, want, (size_t)N * sizeof(float));
                expect_close(what, d, dr, tol, 0.0f, N);
                free(src), free(d0), free(d), free(want), free(dr), free(tol);
            }
}
END_TEST

/* mg_sum_rows_bf16: the column sums of mg_sum_rows bit for bit, and the bf16 copy of the scalar
 * mg_f32_to_bf16_1 bit for bit (ties to even, NaN made quiet, infinities, signed zeros, denormals,
 * the largest floats rounding up to infinity), on every path, on 1 and 2 threads, in both of
 * mg_sum_rows's forms (chunks in parallel for few columns, columns split for many). */
START_TEST(sum_rows_bf16_sums_and_rounds_in_one_pass) {
    static const uint32_t special[] = {
        0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
        0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7f8000u,
        0x3f807fffu, 0x00008000u};
    const int64_t shapes[][2] = {{1, 7}, {3, 65}, {65, 17}, {129, 257}, {300, 1000}, {4, 33000}};
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(8);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int nt = 1; nt <= 2; nt++) {
                ck_assert(mg_isa_force(isas[ii]));
                mg_set_num_threads(nt);
                const int64_t R = shapes[si][0], N = shapes[si][1], n = R * N;
                float *src = frand(n, &rng, -3.0f, 3.0f), *d0 = frand(N, &rng, -1.0f, 1.0f);
                for (int64_t k = 0; k < n; k += 97) /* the special values, spread through src */
                    memcpy(&src[k], &special[(k / 97) % (sizeof special / sizeof special[0])], 4);
                float *d = fcopy(d0, N), *want = fcopy(d0, N);
                mg_bf16 *b = malloc((size_t)n * sizeof *b), *bw = malloc((size_t)n * sizeof *bw);
                ck_assert(b && bw);
                memset(b, 0xa5, (size_t)n * sizeof *b);
                mg_sum_rows_bf16(R, N, src, d, b);
                mg_sum_rows(R, N, src, want);
                for (int64_t k = 0; k < n; k++) bw[k] = mg_f32_to_bf16_1(src[k]);
                snprintf(what, sizeof what, "%s sum_rows_bf16 R=%lld N=%lld threads %d",
                         mg_isa_name(isas[ii]), (long long)R, (long long)N, nt);
                expect_same_bits(what, d, want, (size_t)N * sizeof(float));
                expect_same_bits(what, b, bw, (size_t)n * sizeof *b);
                free(src), free(d0), free(d), free(want), free(b), free(bw);
            }
    mg_set_num_threads(0);
}
END_TEST

START_TEST(embedding_equals_reference_bit_for_bit) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(6);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++) {
                ck_assert(mg_isa_force(isas[ii]));
                const int64_t n = rows_list[a] * 7, C = widths[c], V = 5; /* ids repeat */
                int32_t *ids = malloc((size_t)n * sizeof(int32_t));
                ck_assert_ptr_nonnull(ids);
                for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)mg_rng_below(&rng, (uint32_t)V);
                float *W = frand(V * C, &rng, -1.0f, 1.0f), *dy = frand(n * C, &rng, -1.0f, 1.0f);
                float *y = fbuf(n * C), *yr = fbuf(n * C);
                float *dW = frand(V * C, &rng, -1.0f, 1.0f), *dWr = fcopy(dW, V * C);
                mg_embedding_fwd(n, C, W, ids, y);
                mg_embedding_fwd_ref(n, C, W, ids, yr);
                mg_embedding_bwd(n, C, ids, dy, dW);
                mg_embedding_bwd_ref(n, C, ids, dy, dWr);
                snprintf(what, sizeof what, "%s embedding n=%lld C=%lld", mg_isa_name(isas[ii]),
                         (long long)n, (long long)C);
                expect_same_bits(what, y, yr, (size_t)(n * C) * sizeof(float));
                expect_same_bits(what, dW, dWr, (size_t)(V * C) * sizeof(float));
                free(ids), free(W), free(dy), free(y), free(yr), free(dW), free(dWr);
            }
}
END_TEST

/* ---- softmax and cross-entropy
 * -------------------------------------------------------------------- */

START_TEST(softmax_matches_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(7);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++) {
                ck_assert(mg_isa_force(isas[ii]));
                const int64_t R = rows_list[a], C = widths[c], n = R * C;
                float *x = frand(n, &rng, -30.0f, 30.0f);
                if (C > 2) x[1] = -INFINITY; /* a masked key */
                float *y = fbuf(n), *yr = fbuf(n), *tol = fbuf(n);
                mg_softmax_fwd(R, C, x, y);
                mg_softmax_fwd_ref(R, C, x, yr);
                /* both sum C terms in float: relative error grows with C */
                for (int64_t i = 0; i < n; i++)
                    tol[i] = (2e-6f + 0.25f * (float)C * FLT_EPSILON) * yr[i];
                snprintf(what, sizeof what, "%s softmax R=%lld C=%lld", mg_isa_name(isas[ii]),
                         (long long)R, (long long)C);
                /* probabilities: relative accuracy, except those the flush below e^-87 zeroes */
                for (int64_t i = 0; i < n; i++)
                    if (yr[i] < 1e-37f) tol[i] = 1e-37f;
                expect_close(what, y, yr, tol, 0.0f, n);
                if (C > 2) ck_assert_float_eq(y[1], 0.0f);
                float *dy = frand(n, &rng, -1.0f, 1.0f), *dx0 = frand(n, &rng, -1.0f, 1.0f);
                float *dx = fcopy(dx0, n), *dxr = fcopy(dx0, n);
                mg_softmax_bwd(R, C, yr, dy, dx);
                mg_softmax_bwd_ref(R, C, yr, dy, dxr);
                for (int64_t i = 0; i < n; i++)
                    tol[i] = (float)(C + 8) * FLT_EPSILON * (yr[i] + 1.0f) * 2.0f;
                expect_close(what, dx, dxr, tol, 0.0f, n);
                free(x), free(y), free(yr), free(tol), free(dy), free(dx0), free(dx), free(dxr);
            }
}
END_TEST

START_TEST(softmax_masked_and_nan_rows) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    for (int ii = 0; ii < ni; ii++)
        for (int c = 0; c < NWID; c++) {
            ck_assert(mg_isa_force(isas[ii]));
            const int64_t C = widths[c];
            float *x = fbuf(3 * C), *y = fbuf(3 * C);
            for (int64_t j = 0; j < C; j++) {
                x[j] = -INFINITY;                       /* row 0: fully masked */
                x[C + j] = j == C / 2 ? 0.0f : -1e30f;  /* row 1: one live entry */
                x[2 * C + j] = j == C - 1 ? NAN : 1.0f; /* row 2: a NaN */
            }
            mg_softmax_fwd(3, C, x, y);
            for (int64_t j = 0; j < C; j++)
                if (y[j] != 0.0f || y[C + j] != (j == C / 2 ? 1.0f : 0.0f))
                    ck_abort_msg(
                        "%s C=%lld, column %lld: masked row gives %g, one live entry gives %g",
                        mg_isa_name(isas[ii]), (long long)C, (long long)j, y[j], y[C + j]);
            for (int64_t j = 0; j < C; j++)
                if (!isnan(y[2 * C + j]))
                    ck_abort_msg("%s C=%lld: a NaN in the row left %g in column %lld",
                                 mg_isa_name(isas[ii]), (long long)C, y[2 * C + j], (long long)j);
            /* a NaN among -inf: not a masked row (a max may drop the NaN) */
            for (int64_t j = 0; j < C; j++) x[2 * C + j] = j == 0 ? NAN : -INFINITY;
            mg_softmax_fwd(1, C, x + 2 * C, y);
            ck_assert_msg(isnan(y[0]), "%s C=%lld: NaN among -inf taken for a masked row",
                          mg_isa_name(isas[ii]), (long long)C);
            free(x), free(y);
        }
}
END_TEST

START_TEST(cross_entropy_matches_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(8);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int a = 0; a < NR; a++)
            for (int c = 0; c < NWID; c++)
                for (int big = 0; big < 2; big++) {
                    ck_assert(mg_isa_force(isas[ii]));
                    const int64_t R = rows_list[a], V = widths[c], n = R * V;
                    /* big: logits near 1e4, whose O(1) losses must keep their accuracy */
                    float *x =
                        big ? frand(n, &rng, 1e4f, 1e4f + 3.0f) : frand(n, &rng, -6.0f, 6.0f);
                    int32_t *t = malloc((size_t)R * sizeof(int32_t));
                    ck_assert_ptr_nonnull(t);
                    for (int64_t r = 0; r < R; r++)
                        t[r] = r % 3 == 1 ? -100 : (int32_t)mg_rng_below(&rng, (uint32_t)V);
                    float *mx = fbuf(R), *ls = fbuf(R), *mxr = fbuf(R), *lsr = fbuf(R);
                    double *loss = malloc((size_t)R * sizeof(double)),
                           *lossr = malloc((size_t)R * sizeof(double));
                    ck_assert(loss && lossr);
                    mg_xent_fwd(R, V, x, t, -100, mx, ls, loss);
                    mg_xent_fwd_ref(R, V, x, t, -100, mxr, lsr, lossr);
                    snprintf(what, sizeof what, "%s cross-entropy R=%lld V=%lld%s",
                             mg_isa_name(isas[ii]), (long long)R, (long long)V,
                             big ? " near 1e4" : "");
                    for (int64_t r = 0; r < R; r++) {
                        ck_assert_msg(mx[r] == mxr[r], "%s: max of row %lld", what, (long long)r);
                        ck_assert_msg(fabsf(ls[r] - lsr[r]) <= 4e-6f * (1.0f + fabsf(lsr[r])),
                                      "%s: log-sum of row %lld: %.9g, want %.9g", what,
                                      (long long)r, ls[r], lsr[r]);
                        ck_assert_msg(fabs(loss[r] - lossr[r]) <= 4e-6 * (1.0 + fabs(lossr[r])),
                                      "%s: loss of row %lld: %.9g, want %.9g", what, (long long)r,
                                      loss[r], lossr[r]);
                        if (t[r] == -100)
                            ck_assert_msg(loss[r] == 0.0, "%s: ignored row %lld costs %g", what,
                                          (long long)r, loss[r]);
                    }
                    float *dx0 = frand(n, &rng, -1.0f, 1.0f), *dx = fcopy(dx0, n),
                          *dxr = fcopy(dx0, n);
                    const float g = 0.37f;
                    mg_xent_bwd(R, V, x, t, -100, mxr, lsr, g, dx);
                    mg_xent_bwd_ref(R, V, x, t, -100, mxr, lsr, g, dxr);
                    expect_close(what, dx, dxr, NULL, 2e-6f, n);
                    for (int64_t r = 0; r < R; r++) /* ignored rows untouched */
                        if (t[r] == -100)
                            expect_same_bits(what, dx + r * V, dx0 + r * V,
                                             (size_t)V * sizeof(float));
                    free(x), free(t), free(mx), free(ls), free(mxr), free(lsr), free(loss),
                        free(lossr);
                    free(dx0), free(dx), free(dxr);
                }
}
END_TEST

START_TEST(cross_entropy_nan_logit_gives_nan_loss) {
    /* A diverging run must show up as a non-finite loss, not be hidden by the max or the exp. */
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    for (int ii = 0; ii < ni; ii++)
        for (int c = 1; c < NWID; c++) {
            ck_assert(mg_isa_force(isas[ii]));
            const int64_t V = widths[c];
            float *x = fbuf(V), mx, ls;
            for (int64_t j = 0; j < V; j++) x[j] = (float)j * 0.01f;
            x[V / 2] = NAN;
            const int32_t t = 0;
            double loss;
            mg_xent_fwd(1, V, x, &t, -1, &mx, &ls, &loss);
            ck_assert_msg(isnan(loss), "%s V=%lld: loss %g from a NaN logit", mg_isa_name(isas[ii]),
                          (long long)V, loss);
            free(x);
        }
}
END_TEST

/* ---- optimizer updates
 * --------------------------------------------------------------------------- */

START_TEST(optimizer_updates_match_reference) {
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(9);
    char what[160];
    for (int ii = 0; ii < ni; ii++)
        for (int c = 0; c < NWID; c++) {
            ck_assert(mg_isa_force(isas[ii]));
            const int64_t n = widths[c] * 3;
            float *w = frand(n, &rng, -1.0f, 1.0f), *m = fbuf(n), *v = fbuf(n);
            for (int64_t i = 0; i < n; i++) m[i] = v[i] = 0.0f;
            float *wr = fcopy(w, n), *mr = fcopy(m, n), *vr = fcopy(v, n);
            snprintf(what, sizeof what, "%s adamw n=%lld", mg_isa_name(isas[ii]), (long long)n);
            for (int step = 1; step <= 4; step++) {
                float *g = frand(n, &rng, -1.0f, 1.0f);
                const mg_adamw_hyper h = {1e-2f,
                                          0.9f,
                                          0.999f,
                                          1e-8f,
                                          step == 2 ? 0.0f : 0.1f,
                                          1.0f - powf(0.9f, (float)step),
                                          1.0f - powf(0.999f, (float)step)};
                mg_adamw_update(n, w, g, m, v, &h);
                mg_adamw_update_ref(n, wr, g, mr, vr, &h);
                expect_close(what, m, mr, NULL, 1e-7f, n);
                expect_close(what, v, vr, NULL, 1e-7f, n);
                expect_close(what, w, wr, NULL, 1e-6f, n);
                free(g);
            }
            snprintf(what, sizeof what, "%s sgd n=%lld", mg_isa_name(isas[ii]), (long long)n);
            for (int step = 1; step <= 3; step++) {
                float *g = frand(n, &rng, -1.0f, 1.0f);
                mg_sgd_update(n, w, g, m, 0.1f, step == 3 ? 0.0f : 0.9f, 0.01f, step == 1);
                mg_sgd_update_ref(n, wr, g, mr, 0.1f, step == 3 ? 0.0f : 0.9f, 0.01f, step == 1);
                expect_close(what, m, mr, NULL, 1e-6f, n);
                expect_close(what, w, wr, NULL, 1e-6f, n);
                free(g);
            }
            free(w), free(m), free(v), free(wr), free(mr), free(vr);
        }
}
END_TEST

/* ---- thread-count invariance
 * --------------------------------------------------------------------- */

/* Every fast kernel once, on shapes big enough that each splits its work, writing every output
 * into one buffer (laid out by offsets). */
typedef struct {
    int64_t R, C;
    float *x, *h, *w, *b, *dy, *ws;
    int32_t *ids, *t;
} inv_inputs;

static size_t run_all(const inv_inputs *in, float *out) {
    const int64_t R = in->R, C = in->C, n = R * C;
    float *p = out;
    float *mean = p + n, *rstd = mean + R;
    mg_layernorm_fwd(R, C, in->x, in->w, in->b, 1e-5f, p, mean, rstd);
    p = rstd + R;
    memset(p, 0, (size_t)(n + 2 * C) * sizeof(float));
    mg_layernorm_bwd(R, C, in->x, in->w, mean, rstd, in->dy, p, p + n, p + n + C, in->ws);
    p += n + 2 * C;
    mg_gelu_fwd(MG_GELU_TANH, n, in->x, p);
    p += n;
    mg_gelu_fwd(MG_GELU_ERF, n, in->x, p);
    p += n;
    memset(p, 0, (size_t)(2 * n) * sizeof(float));
    mg_gelu_bwd(MG_GELU_TANH, n, in->x, in->dy, p);
    mg_gelu_bwd(MG_GELU_ERF, n, in->x, in->dy, p + n);
    p += 2 * n;
    mg_add_rows(R, C, in->x, in->b, p);
    p += n;
    mg_add_residual(R, C, in->x, in->h, in->b, p);
    p += n;
    memcpy(p, in->x, (size_t)n * sizeof(float));
    mg_accumulate(n, p, in->dy);
    p += n;
    memset(p, 0, (size_t)C * sizeof(float));
    mg_sum_rows(R, C, in->dy, p);
    p += C;
    mg_softmax_fwd(R, C, in->x, p);
    memset(p + n, 0, (size_t)n * sizeof(float));
    mg_softmax_bwd(R, C, p, in->dy, p + n);
    p += 2 * n;
    float *mx = p, *ls = p + R;
    size_t off = (size_t)(ls + R - out);
    off += off & 1; /* out is malloc'ed: an even float offset is 8-byte aligned */
    double *loss = (double *)(void *)(out + off);
    mg_xent_fwd(R, C, in->x, in->t, -1, mx, ls, loss);
    p = out + off + 2 * R;
    memset(p, 0, (size_t)n * sizeof(float));
    mg_xent_bwd(R, C, in->x, in->t, -1, mx, ls, 0.5f, p);
    p += n;
    mg_embedding_fwd(R, C, in->x, in->ids, p); /* rows of x as the table */
    p += n;
    memset(p, 0, (size_t)n * sizeof(float));
    mg_embedding_bwd(R, C, in->ids, in->dy, p);
    p += n;
    float *wt = p, *m = p + n, *v = p + 2 * n;
    memcpy(wt, in->x, (size_t)n * sizeof(float));
    memset(m, 0, (size_t)(2 * n) * sizeof(float));
    const mg_adamw_hyper hy = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.001f};
    mg_adamw_update(n, wt, in->dy, m, v, &hy);
    mg_adamw_update(n, wt, in->h, m, v, &hy);
    p += 3 * n;
    memcpy(p, in->x, (size_t)n * sizeof(float));
    memset(p + n, 0, (size_t)n * sizeof(float));
    mg_sgd_update(n, p, in->dy, p + n, 0.1f, 0.9f, 0.01f, true);
    mg_sgd_update(n, p, in->h, p + n, 0.1f, 0.9f, 0.01f, false);
    p += 2 * n;
    return (size_t)(p - out);
}

START_TEST(thread_count_invariance) {
#ifndef _OPENMP
    fprintf(stderr, "# built without OpenMP: one thread only, nothing to compare\n");
#else
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    mg_rng rng = mg_rng_make(10);
    /* the last shape is wide enough for the column-split kernels to use both threads */
    const int64_t shapes[][2] = {{1000, 257}, {4096, 65}, {33, 4099}, {16, 8200}};
    for (int s = 0; s < 4; s++) {
        inv_inputs in = {.R = shapes[s][0], .C = shapes[s][1]};
        const int64_t n = in.R * in.C;
        in.x = frand(n, &rng, -3.0f, 3.0f);
        in.h = frand(n, &rng, -1.0f, 1.0f);
        in.dy = frand(n, &rng, -1.0f, 1.0f);
        in.w = frand(in.C, &rng, 0.5f, 1.5f);
        in.b = frand(in.C, &rng, -1.0f, 1.0f);
        in.ws = malloc(mg_layernorm_bwd_workspace(in.R, in.C));
        in.ids = malloc((size_t)in.R * sizeof(int32_t));
        in.t = malloc((size_t)in.R * sizeof(int32_t));
        ck_assert(in.ws && in.ids && in.t);
        for (int64_t r = 0; r < in.R; r++) {
            in.ids[r] = (int32_t)mg_rng_below(&rng, 7); /* few distinct rows: many collisions */
            in.t[r] = r % 5 == 0 ? -1 : (int32_t)mg_rng_below(&rng, (uint32_t)in.C);
        }
        const size_t cap = (size_t)(30 * n + 8 * in.R + 8 * in.C);
        float *one = fbuf((int64_t)cap), *two = fbuf((int64_t)cap);
        for (int ii = 0; ii < ni; ii++) {
            ck_assert(mg_isa_force(isas[ii]));
            memset(one, 0, cap * sizeof(float));
            memset(two, 0, cap * sizeof(float));
            mg_set_num_threads(1);
            const size_t used = run_all(&in, one);
            mg_set_num_threads(2);
            ck_assert_uint_eq(run_all(&in, two), used);
            ck_assert_uint_le(used, cap);
            for (size_t i = 0; i < used; i++)
                if (memcmp(&one[i], &two[i], sizeof(float)) != 0)
                    ck_abort_msg("%s R=%lld C=%lld: float %zu of the outputs differs between 1 and "
                                 "2 threads "
                                 "(%.9g vs %.9g)",
                                 mg_isa_name(isas[ii]), (long long)in.R, (long long)in.C, i, one[i],
                                 two[i]);
        }
        mg_set_num_threads(2);
        free(one), free(two), free(in.x), free(in.h), free(in.dy), free(in.w), free(in.b);
        free(in.ws), free(in.ids), free(in.t);
    }
#endif
}
END_TEST

START_TEST(inside_a_parallel_region_runs_on_the_caller) {
    /* Each thread normalises its own rows: the kernel must neither fork nor touch other rows. */
    mg_rng rng = mg_rng_make(11);
    const int64_t R = 256, C = 300;
    float *x = frand(R * C, &rng, -2.0f, 2.0f), *y = fbuf(R * C), *yr = fbuf(R * C);
    mg_layernorm_fwd(R, C, x, NULL, NULL, 1e-5f, yr, NULL, NULL);
#ifdef _OPENMP
#pragma omp parallel for num_threads(2) schedule(static)
#endif
    for (int64_t r = 0; r < R; r++)
        mg_layernorm_fwd(1, C, x + r * C, NULL, NULL, 1e-5f, y + r * C, NULL, NULL);
    expect_same_bits("layernorm row by row inside a parallel region", y, yr,
                     (size_t)(R * C) * sizeof(float));
    free(x), free(y), free(yr);
}
END_TEST

START_TEST(empty_inputs_touch_nothing) {
    float buf[4] = {1.0f, 2.0f, 3.0f, 4.0f}, keep[4];
    memcpy(keep, buf, sizeof buf);
    int32_t ids[1] = {0};
    double loss[1] = {5.0};
    mg_layernorm_fwd(0, 4, buf, NULL, NULL, 1e-5f, buf, buf, buf);
    mg_layernorm_bwd(4, 0, buf, NULL, buf, buf, buf, buf, buf, buf, NULL);
    mg_gelu_fwd(MG_GELU_TANH, 0, buf, buf);
    mg_gelu_bwd(MG_GELU_ERF, 0, buf, buf, buf);
    mg_add_rows(0, 4, buf, buf, buf);
    mg_add_residual(4, 0, buf, buf, buf, buf);
    mg_accumulate(0, buf, buf);
    mg_sum_rows(0, 4, buf, buf);
    mg_softmax_fwd(0, 4, buf, buf);
    mg_softmax_bwd(4, 0, buf, buf, buf);
    mg_xent_bwd(0, 4, buf, ids, -1, buf, buf, 1.0f, buf);
    mg_embedding_fwd(0, 4, buf, ids, buf);
    mg_embedding_bwd(4, 0, ids, buf, buf);
    const mg_adamw_hyper h = {1.0f, 0.9f, 0.9f, 1e-8f, 0.0f, 1.0f, 1.0f};
    mg_adamw_update(0, buf, buf, buf, buf, &h);
    mg_sgd_update(0, buf, buf, buf, 1.0f, 0.9f, 0.0f, true);
    ck_assert(memcmp(buf, keep, sizeof buf) == 0);
    ck_assert_uint_eq(mg_layernorm_bwd_workspace(0, 8), 0);
    /* no classes: only ignored positions can exist; they cost nothing */
    float mx, ls;
    mg_xent_fwd(1, 0, buf, ids, 0, &mx, &ls, loss);
    ck_assert(loss[0] == 0.0);
}
END_TEST

/* ---- a whole small model: fast kernels against the references
 * ------------------------------------ */

enum { TM_B = 2, TM_T = 9, TM_C = 24, TM_V = 13, TM_NP = 10 };

typedef struct tiny_model {
    float *p[TM_NP];
    int64_t shape[TM_NP][2];
    int ndim[TM_NP];
    int32_t ids[TM_B * TM_T], tgt[TM_B * TM_T];
} tiny_model;

static void tiny_init(tiny_model *m) {
    static const int64_t shapes[TM_NP][2] = {
        {TM_V, TM_C},  {TM_T, TM_C},     {TM_C, 0}, {TM_C, 0}, {TM_C, 4 * TM_C},
        {4 * TM_C, 0}, {4 * TM_C, TM_C}, {TM_C, 0}, {TM_C, 0}, {TM_C, 0}};
    mg_rng r = mg_rng_make(14);
    for (int i = 0; i < TM_NP; i++) {
        m->ndim[i] = shapes[i][1] ? 2 : 1;
        m->shape[i][0] = shapes[i][0];
        m->shape[i][1] = shapes[i][1];
        const int64_t n = shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1);
        /* layer-norm gains around 1, everything else small */
        const bool gain = i == 2 || i == 8;
        m->p[i] = frand(n, &r, gain ? 0.8f : -0.3f, gain ? 1.2f : 0.3f);
    }
    for (int i = 0; i < TM_B * TM_T; i++) {
        m->ids[i] = (int32_t)mg_rng_below(&r, TM_V);
        m->tgt[i] = i % 7 == 3 ? -1 : (int32_t)mg_rng_below(&r, TM_V);
    }
}

/* Loss and every parameter gradient of one step, into grads (concatenated). */
static float tiny_step(const tiny_model *m, float *grads) {
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    mg_tensor *P[TM_NP];
    for (int i = 0; i < TM_NP; i++) {
        P[i] = mg_tensor_wrap(ctx, MG_F32, m->ndim[i], m->shape[i], m->p[i]);
        P[i]->flags |= MG_REQUIRES_GRAD;
    }
    mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){TM_B, TM_T}, (void *)m->ids);
    mg_tensor *tgt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){TM_B, TM_T}, (void *)m->tgt);
    mg_tensor *x = mg_add(ctx, mg_embedding(ctx, P[0], ids), P[1]);
    mg_tensor *h = mg_layernorm(ctx, x, P[2], P[3], 1e-5f);
    h = mg_linear(ctx, mg_gelu(ctx, mg_linear(ctx, h, P[4], P[5]), MG_GELU_TANH), P[6], P[7]);
    x = mg_add(ctx, x, h);
    x = mg_mul(ctx, x, mg_softmax(ctx, x)); /* a softmax gate, to have softmax in the graph */
    x = mg_layernorm(ctx, x, P[8], P[9], 1e-5f);
    mg_tensor *loss = mg_cross_entropy(ctx, mg_matmul_nt(ctx, x, P[0]), tgt, -1);
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int i = 0; i < TM_NP; i++) {
        memcpy(grads, P[i]->grad, (size_t)P[i]->numel * sizeof(float));
        grads += P[i]->numel;
    }
    const float l = loss->data[0];
    mg_ctx_free(ctx);
    return l;
}

START_TEST(model_loss_and_gradients_fast_vs_reference) {
    tiny_model m;
    tiny_init(&m);
    int64_t n = 0;
    for (int i = 0; i < TM_NP; i++) n += m.shape[i][0] * (m.shape[i][1] ? m.shape[i][1] : 1);
    float *gref = fbuf(n), *gfast = fbuf(n);
    mg_rowops_set_impl(MG_ROWOPS_REFERENCE);
    ck_assert_int_eq(mg_rowops_get_impl(), MG_ROWOPS_REFERENCE);
    const float lref = tiny_step(&m, gref);
    mg_rowops_set_impl(MG_ROWOPS_FAST);
    ck_assert_int_eq(mg_rowops_get_impl(), MG_ROWOPS_FAST);
    float gmax = 0.0f;
    for (int64_t i = 0; i < n; i++) gmax = fabsf(gref[i]) > gmax ? fabsf(gref[i]) : gmax;
    ck_assert(gmax > 0.0f && isfinite(lref));
    mg_isa isas[3];
    const int ni = usable_isas(isas);
    bool differs = false;
    for (int ii = 0; ii < ni; ii++) {
        ck_assert(mg_isa_force(isas[ii]));
        const float lfast = tiny_step(&m, gfast);
        ck_assert_msg(fabsf(lfast - lref) <= 1e-5f * lref, "%s: loss %.9g, reference kernels %.9g",
                      mg_isa_name(isas[ii]), lfast, lref);
        char what[96];
        snprintf(what, sizeof what, "%s: model gradients, fast vs reference kernels",
                 mg_isa_name(isas[ii]));
        expect_close(what, gfast, gref, NULL, 1e-4f * gmax, n);
        /* the switch really routes: float rounding tells the two sets of kernels apart */
        differs |= memcmp(gfast, gref, (size_t)n * sizeof(float)) != 0 || lfast != lref;
    }
    ck_assert_msg(differs,
                  "fast and reference kernels gave the same bits everywhere: is the switch wired?");
    for (int i = 0; i < TM_NP; i++) free(m.p[i]);
    free(gref), free(gfast);
}
END_TEST

/* The checked teardown, after every test: back to the fast kernels (the model test switches to
 * the references and back) and to the detected SIMD path (most tests force each in turn). */
static void restore_switches(void) {
    mg_rowops_set_impl(MG_ROWOPS_FAST);
    tu_restore_detected_isa();
}

static Suite *rowops_suite(void) {
    Suite *s = suite_create("rowops");
    TCase *tc = tcase_create("rowops");
    tcase_add_checked_fixture(tc, NULL, restore_switches);
    tcase_add_test(tc, layernorm_forward_matches_reference);
    tcase_add_test(tc, layernorm_constant_rows_are_exact);
    tcase_add_test(tc, layernorm_backward_matches_reference);
    tcase_add_test(tc, gelu_matches_reference);
    tcase_add_test(tc, adds_equal_reference_bit_for_bit);
    tcase_add_test(tc, fresh_forms_equal_accumulating_onto_zero);
    tcase_add_test(tc, sum_rows_in_documented_order);
    tcase_add_test(tc, sum_rows_bf16_sums_and_rounds_in_one_pass);
    tcase_add_test(tc, embedding_equals_reference_bit_for_bit);
    tcase_add_test(tc, softmax_matches_reference);
    tcase_add_test(tc, softmax_masked_and_nan_rows);
    tcase_add_test(tc, cross_entropy_matches_reference);
    tcase_add_test(tc, cross_entropy_nan_logit_gives_nan_loss);
    tcase_add_test(tc, optimizer_updates_match_reference);
    tcase_add_test(tc, thread_count_invariance);
    tcase_add_test(tc, inside_a_parallel_region_runs_on_the_caller);
    tcase_add_test(tc, empty_inputs_touch_nothing);
    tcase_add_test(tc, model_loss_and_gradients_fast_vs_reference);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(rowops_suite)
