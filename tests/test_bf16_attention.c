/* mg_attention's bf16 products (mg_attn_set_impl(MG_ATTN_BF16_PRODUCTS) in bf16 precision) against
 * a scalar reference that rounds exactly where the op does: Q, K, V, the probabilities, dO and the
 * scaled dL/dlogits to bf16 (round to nearest even), every product by mg_bgemm_ref (the plain-loop
 * emulation of the path's instruction, tests/test_bf16.c checks it), and the float32 steps between
 * in the op's order: logits = scale * S, the bias callback, the bias tensor, the mask, max, expf,
 * a left-to-right sum, times 1/sum; dP * P summed left to right; the bias tensor's gradient summed
 * over its broadcast batch in order. Comparisons are exact (== : only a zero's sign may differ).
 * Odd shapes, causal and not, offset queries, the bias callback and a broadcast bias tensor with a
 * gradient; every bf16 path the machine has (one it lacks is reported skipped by name); 1, 2 and 3
 * threads give the same bits. The float32 path is covered by tests/test_attention.c. */
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/ops.h"
#include "minigrad/rng.h"
#include "minigrad/tensor.h"
#include "minigrad/testing.h"
#include "test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct bcase {
    const char *name;
    int64_t B, H, Tq, Tk, D;
    bool causal;
    int64_t q_pos0;
    bool callback, bias_tensor;
    float scale;
} bcase;

static const bcase cases[] = {
    {"full odd", 2, 3, 7, 13, 5, false, 0, false, false, 0},
    {"causal odd", 1, 2, 19, 19, 12, true, 0, false, false, 0},
    {"causal offset callback", 2, 1, 5, 23, 9, true, 18, true, false, 0.3f},
    {"bias tensor", 3, 2, 11, 17, 7, false, 0, false, true, 0},
    {"causal bias tensor callback", 2, 2, 33, 33, 16, true, 0, true, true, 0},
    {"long", 1, 1, 70, 131, 24, true, 61, false, true, 0},
};

static void slope_bias(const void *user, int64_t head, int64_t qpos, int64_t kpos0, int64_t n,
                       float *logits) {
    (void)user;
    for (int64_t c = 0; c < n; c++)
        logits[c] += -0.125f * (float)(head + 1) * (float)(qpos - kpos0 - c);
}

static mg_bf16 *to_bf(const float *x, int64_t n) {
    mg_bf16 *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int64_t i = 0; i < n; i++) y[i] = mg_f32_to_bf16_1(x[i]);
    return y;
}

typedef struct result {
    float *o, *dq, *dk, *dv, *db;
} result;

static void result_free(result *r) {
    free(r->o), free(r->dq), free(r->dk), free(r->dv), free(r->db);
}

static float *copy_of(const float *x, int64_t n) {
    float *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

static void inputs(const bcase *c, uint64_t seed, float **x, int64_t n[5]) {
    n[0] = n[4] = c->B * c->H * c->Tq * c->D;
    n[1] = n[2] = c->B * c->H * c->Tk * c->D;
    n[3] = c->H * c->Tq * c->Tk;
    mg_rng r = mg_rng_make(seed);
    for (int i = 0; i < 5; i++) {
        x[i] = malloc((size_t)n[i] * sizeof(float));
        ck_assert_ptr_nonnull(x[i]);
        for (int64_t j = 0; j < n[i]; j++) x[i][j] = mg_rng_normal(&r) * (i == 3 ? 0.5f : 1.0f);
    }
}

/* The op: x = q, k, v, bias (H,Tq,Tk), R (dO). */
static result run_op(const bcase *c, float *const *x, const int64_t n[5]) {
    mg_attn_set_impl(MG_ATTN_BF16_PRODUCTS);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    const int64_t sq[4] = {c->B, c->H, c->Tq, c->D}, sk[4] = {c->B, c->H, c->Tk, c->D},
                  sb[3] = {c->H, c->Tq, c->Tk};
    mg_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        t[i] =
            i == 3 ? mg_tensor_new(ctx, MG_F32, 3, sb) : mg_tensor_new(ctx, MG_F32, 4, i ? sk : sq);
        memcpy(t[i]->data, x[i], (size_t)n[i] * sizeof(float));
        mg_tensor_set_requires_grad(t[i], true);
    }
    mg_attn_opts o = {.causal = c->causal, .scale = c->scale, .q_pos0 = c->q_pos0};
    if (c->callback) o.bias = slope_bias;
    if (c->bias_tensor) o.bias_tensor = t[3];
    mg_tensor *y = mg_attention(ctx, t[0], t[1], t[2], &o);
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, 4, sq);
    memcpy(R->data, x[4], (size_t)n[4] * sizeof(float));
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    result res = {copy_of(y->data, n[0]), copy_of(t[0]->grad, n[0]), copy_of(t[1]->grad, n[1]),
                  copy_of(t[2]->grad, n[2]), c->bias_tensor ? copy_of(t[3]->grad, n[3]) : NULL};
    mg_ctx_free(ctx);
    return res;
}

static result run_ref(mg_bf16_path path, const bcase *c, float *const *x, const int64_t n[5]) {
    const int64_t B = c->B, H = c->H, Tq = c->Tq, Tk = c->Tk, D = c->D, BH = B * H;
    const float scale = c->scale != 0.0f ? c->scale : 1.0f / sqrtf((float)D);
    mg_bf16 *qb = to_bf(x[0], n[0]), *kb = to_bf(x[1], n[1]), *vb = to_bf(x[2], n[2]),
            *gb = to_bf(x[4], n[4]);
    result r = {calloc((size_t)n[0], 4), calloc((size_t)n[0], 4), calloc((size_t)n[1], 4),
                calloc((size_t)n[2], 4), c->bias_tensor ? calloc((size_t)n[3], 4) : NULL};
    float *P = malloc((size_t)(Tq * Tk) * 4), *S = malloc((size_t)(Tq * Tk) * 4),
          *dsall = calloc((size_t)(BH * Tq * Tk), 4);
    mg_bf16 *pb = malloc((size_t)(Tq * Tk) * 2);
    ck_assert(r.o && r.dq && r.dk && r.dv && P && S && pb && dsall);
    for (int64_t bh = 0; bh < BH; bh++) {
        const int64_t h = bh % H;
        mg_bgemm_ref(path, false, true, Tq, Tk, D, qb + bh * Tq * D, D, kb + bh * Tk * D, D, false,
                     P, Tk);
        for (int64_t i = 0; i < Tq; i++) {
            float *row = P + i * Tk;
            const int64_t qpos = c->q_pos0 + i,
                          vis = c->causal ? (qpos + 1 < Tk ? qpos + 1 : Tk) : Tk;
            for (int64_t j = 0; j < Tk; j++) row[j] = row[j] * scale;
            if (c->callback) slope_bias(NULL, h, qpos, 0, vis, row);
            if (c->bias_tensor)
                for (int64_t j = 0; j < vis; j++) row[j] = row[j] + x[3][(h * Tq + i) * Tk + j];
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < vis; j++)
                if (row[j] > mx) mx = row[j];
            for (int64_t j = 0; j < vis; j++) {
                row[j] = expf(row[j] - mx);
                sum = sum + row[j];
            }
            const float inv = 1.0f / sum;
            for (int64_t j = 0; j < Tk; j++) row[j] = j < vis ? row[j] * inv : 0.0f;
        }
        for (int64_t e = 0; e < Tq * Tk; e++) pb[e] = mg_f32_to_bf16_1(P[e]);
        mg_bgemm_ref(path, false, false, Tq, D, Tk, pb, Tk, vb + bh * Tk * D, D, false,
                     r.o + bh * Tq * D, D);
        mg_bgemm_ref(path, true, false, Tk, D, Tq, pb, Tk, gb + bh * Tq * D, D, true,
                     r.dv + bh * Tk * D, D);
        mg_bgemm_ref(path, false, true, Tq, Tk, D, gb + bh * Tq * D, D, vb + bh * Tk * D, D, false,
                     S, Tk);
        for (int64_t i = 0; i < Tq; i++) {
            float dot = 0.0f;
            for (int64_t j = 0; j < Tk; j++) dot = dot + S[i * Tk + j] * P[i * Tk + j];
            for (int64_t j = 0; j < Tk; j++) {
                const float g = P[i * Tk + j] * (S[i * Tk + j] - dot);
                dsall[bh * Tq * Tk + i * Tk + j] = g;
                pb[i * Tk + j] = mg_f32_to_bf16_1(g * scale);
            }
        }
        mg_bgemm_ref(path, false, false, Tq, D, Tk, pb, Tk, kb + bh * Tk * D, D, true,
                     r.dq + bh * Tq * D, D);
        mg_bgemm_ref(path, true, false, Tk, D, Tq, pb, Tk, qb + bh * Tq * D, D, true,
                     r.dk + bh * Tk * D, D);
    }
    if (r.db)
        for (int64_t e = 0; e < n[3]; e++) {
            const int64_t h = e / (Tq * Tk), rest = e % (Tq * Tk);
            float acc = 0.0f;
            for (int64_t b = 0; b < B; b++) acc = acc + dsall[(b * H + h) * Tq * Tk + rest];
            r.db[e] = r.db[e] + acc;
        }
    free(qb), free(kb), free(vb), free(gb), free(P), free(S), free(pb), free(dsall);
    return r;
}

static void expect_same(const char *path, const bcase *c, const char *what, const float *got,
                        const float *want, int64_t n) {
    if (!got && !want) return;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                      "%s, %s: %s[%lld] = %a, the reference %a", path, c->name, what, (long long)i,
                      got[i], want[i]);
}

static void expect_result(const char *path, const bcase *c, const result *a, const result *b,
                          const int64_t n[5]) {
    expect_same(path, c, "out", a->o, b->o, n[0]);
    expect_same(path, c, "dq", a->dq, b->dq, n[0]);
    expect_same(path, c, "dk", a->dk, b->dk, n[1]);
    expect_same(path, c, "dv", a->dv, b->dv, n[2]);
    expect_same(path, c, "dbias", a->db, b->db, n[3]);
}

static void path_matches_reference(mg_bf16_path path) {
    ck_assert(mg_bf16_path_force(path));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float *x[5];
        int64_t n[5];
        inputs(&cases[i], 100 + i, x, n);
        result got = run_op(&cases[i], x, n), want = run_ref(path, &cases[i], x, n);
        expect_result(mg_bf16_path_name(path), &cases[i], &got, &want, n);
        result_free(&got), result_free(&want);
        for (int j = 0; j < 5; j++) free(x[j]);
    }
}

START_TEST(attention_bf16_emulated_matches_reference) {
    path_matches_reference(MG_BF16_EMULATED);
}
END_TEST

START_TEST(attention_bf16_avx512bf16_matches_reference) {
    path_matches_reference(MG_BF16_AVX512);
}
END_TEST

START_TEST(attention_bf16_amx_matches_reference) {
    path_matches_reference(MG_BF16_AMX);
}
END_TEST

/* Same bits for 1, 2 and 3 threads, on the active path. */
START_TEST(attention_bf16_same_bits_for_any_thread_count) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float *x[5];
        int64_t n[5];
        inputs(&cases[i], 200 + i, x, n);
        omp_set_num_threads(1);
        result one = run_op(&cases[i], x, n);
        for (int t = 2; t <= 3; t++) {
            omp_set_num_threads(t);
            result more = run_op(&cases[i], x, n);
            expect_result(t == 2 ? "2 threads" : "3 threads", &cases[i], &more, &one, n);
            result_free(&more);
        }
        result_free(&one);
        for (int j = 0; j < 5; j++) free(x[j]);
    }
    omp_set_num_threads(saved);
#endif
}
END_TEST

/* bf16 stays close to float32 (a sanity bound, not the rounding rule): the outputs within 3% of
 * the output's largest magnitude. */
START_TEST(attention_bf16_close_to_fp32) {
    const bcase *c = &cases[4];
    float *x[5];
    int64_t n[5];
    inputs(c, 300, x, n);
    result b = run_op(c, x, n);
    mg_ctx *ctx = mg_ctx_new(0);
    const int64_t sq[4] = {c->B, c->H, c->Tq, c->D}, sk[4] = {c->B, c->H, c->Tk, c->D};
    mg_tensor *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = mg_tensor_new(ctx, MG_F32, 4, i ? sk : sq);
        memcpy(t[i]->data, x[i], (size_t)n[i] * sizeof(float));
    }
    const int64_t sb[3] = {c->H, c->Tq, c->Tk};
    mg_tensor *bias = mg_tensor_new(ctx, MG_F32, 3, sb);
    memcpy(bias->data, x[3], (size_t)n[3] * sizeof(float));
    mg_attn_opts o = {.causal = c->causal, .bias = slope_bias, .bias_tensor = bias};
    mg_tensor *y = mg_attention(ctx, t[0], t[1], t[2], &o);
    ck_assert(mg_ctx_ok(ctx));
    float big = 0.0f, worst = 0.0f;
    for (int64_t i = 0; i < n[0]; i++) big = fmaxf(big, fabsf(y->data[i]));
    for (int64_t i = 0; i < n[0]; i++) worst = fmaxf(worst, fabsf(y->data[i] - b.o[i]));
    ck_assert_msg(worst <= 0.03f * big && worst > 0.0f, "bf16 vs fp32: worst %g of %g", worst, big);
    mg_ctx_free(ctx);
    result_free(&b);
    for (int j = 0; j < 5; j++) free(x[j]);
}
END_TEST

static void restore_path(void) {
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
    mg_attn_set_impl(MG_ATTN_FUSED);
}

Suite *bf16_attention_suite(void) {
    Suite *s = suite_create("bf16_attention");
    TCase *tc = tcase_create("bf16_attention");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, NULL, restore_path);
    tcase_add_test(tc, attention_bf16_emulated_matches_reference);
    tu_add_bf16_path_case(tc, MG_BF16_AVX512, attention_bf16_avx512bf16_matches_reference,
                  "attention_bf16_avx512bf16_matches_reference", "no AVX512-BF16 on this CPU");
    tu_add_bf16_path_case(tc, MG_BF16_AMX, attention_bf16_amx_matches_reference,
                  "attention_bf16_amx_matches_reference",
                  mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU"
                                                     : "the build left the AMX path out");
    tcase_add_test(tc, attention_bf16_same_bits_for_any_thread_count);
    tcase_add_test(tc, attention_bf16_close_to_fp32);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_attention_suite)
