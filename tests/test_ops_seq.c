/* The recurrent-cell ops mg_sigmoid, mg_tanh, mg_narrow and mg_cat: forward values against float64
 * (or exact index arithmetic for the copies) on odd shapes with size-1 and size-0 dims and negative
 * dims; mg_cat with more inputs than a tape node holds, through backward with gradient buffers
 * recycled; and the exact message of every error. (The single-node gradient checks of each op are
 * in test_ops_grad.c.) */
#include "gradcheck_assert.h"
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <string.h>

static mg_tensor *rand_t(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, float lo, float hi, bool grad) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, lo, hi);
    mg_tensor_set_requires_grad(t, grad);
    return t;
}

/* ---- sigmoid and tanh ---- */

START_TEST(sigmoid_tanh_match_float64) {
    static const struct {
        int ndim;
        int64_t shape[4];
    } shapes[] = {{1, {1}}, {0, {0}}, {3, {3, 1, 5}}, {2, {1, 70001}}, {4, {2, 1, 3, 1}}, {2, {0, 4}}};
    mg_rng r = mg_rng_make(3);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *x = rand_t(ctx, &r, shapes[s].ndim, shapes[s].shape, -12.0f, 12.0f, false);
        static const float edge[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 88.0f, -88.0f, 104.0f, -104.0f, 1e4f, -1e4f,
                                     INFINITY, -INFINITY};
        for (int64_t i = 0; i < x->numel && i < (int64_t)(sizeof edge / sizeof edge[0]); i++)
            x->data[i] = edge[i];
        mg_tensor *ys = mg_sigmoid(ctx, x), *yt = mg_tanh(ctx, x);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        ck_assert_int_eq(ys->numel, x->numel);
        ck_assert_int_eq(ys->ndim, x->ndim);
        for (int64_t i = 0; i < x->numel; i++) {
            double v = x->data[i], ws = 1.0 / (1.0 + exp(-v)), wt = tanh(v);
            ck_assert_msg(fabs(ys->data[i] - ws) <= 2e-7 * fabs(ws) + 1e-30 && isfinite(ys->data[i]),
                          "sigmoid(%g) = %.9g, want %.9g", v, ys->data[i], ws);
            ck_assert_msg(fabs(yt->data[i] - wt) <= 4e-7, "tanh(%g) = %.9g, want %.9g", v, yt->data[i], wt);
        }
        mg_ctx_free(ctx);
    }
}
END_TEST

/* ---- narrow ---- */

START_TEST(narrow_matches_indexing) {
    mg_rng r = mg_rng_make(4);
    static const struct {
        int ndim;
        int64_t shape[4];
    } shapes[] = {{1, {1}}, {1, {7}}, {2, {1, 1}}, {3, {2, 5, 3}}, {4, {3, 1, 4, 2}}, {3, {2, 0, 3}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int nd = shapes[s].ndim;
        for (int64_t dim = -nd; dim < nd; dim++) {
            const int d = (int)(dim < 0 ? dim + nd : dim);
            const int64_t size = shapes[s].shape[d];
            for (int64_t start = -size; start <= size; start++)
                for (int64_t len = 0; len <= size - (start < 0 ? start + size : start); len++) {
                    mg_ctx *ctx = mg_ctx_new(0);
                    mg_tensor *x = rand_t(ctx, &r, nd, shapes[s].shape, -1, 1, false);
                    mg_tensor *y = mg_narrow(ctx, x, dim, start, len);
                    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                    ck_assert_int_eq(y->ndim, nd);
                    for (int i = 0; i < nd; i++) ck_assert_int_eq(y->shape[i], i == d ? len : x->shape[i]);
                    /* every output element from its coordinates */
                    const int64_t s0 = start < 0 ? start + size : start;
                    for (int64_t e = 0; e < y->numel; e++) {
                        int64_t rem = e, xi = 0, stride = 1, c[4];
                        for (int i = nd - 1; i >= 0; i--) c[i] = rem % y->shape[i], rem /= y->shape[i];
                        for (int i = nd - 1; i >= 0; i--) {
                            xi += (i == d ? c[i] + s0 : c[i]) * stride;
                            stride *= x->shape[i];
                        }
                        ck_assert_msg(y->data[e] == x->data[xi], "narrow dim %lld start %lld len %lld: element %lld",
                                      (long long)dim, (long long)start, (long long)len, (long long)e);
                    }
                    mg_ctx_free(ctx);
                }
        }
    }
}
END_TEST

START_TEST(narrow_and_cat_copy_int32) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) ids->i32[i] = 10 + i;
    mg_tensor *n = mg_narrow(ctx, ids, 1, 1, 2);
    mg_tensor *c = mg_cat(ctx, (mg_tensor *[]){n, ids}, 2, -1);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_int_eq(n->dtype, MG_I32);
    ck_assert_int_eq(c->dtype, MG_I32);
    static const int32_t want[] = {11, 12, 10, 11, 12, 14, 15, 13, 14, 15};
    ck_assert_int_eq(c->numel, 10);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(c->i32[i], want[i]);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- cat ---- */

/* Reference cat in float64 index arithmetic: element e of the output comes from the input whose
 * range along d holds the coordinate. */
static void check_cat(mg_tensor *const *xs, int n, int64_t dim, const mg_tensor *y) {
    const int nd = xs[0]->ndim, d = (int)(dim < 0 ? dim + nd : dim);
    int64_t total = 0;
    for (int k = 0; k < n; k++) total += xs[k]->shape[d];
    ck_assert_int_eq(y->ndim, nd);
    for (int i = 0; i < nd; i++) ck_assert_int_eq(y->shape[i], i == d ? total : xs[0]->shape[i]);
    for (int64_t e = 0; e < y->numel; e++) {
        int64_t rem = e, c[MG_MAX_DIMS] = {0};
        for (int i = nd - 1; i >= 0; i--) c[i] = rem % y->shape[i], rem /= y->shape[i];
        int k = 0;
        while (c[d] >= xs[k]->shape[d]) c[d] -= xs[k]->shape[d], k++;
        int64_t xi = 0, stride = 1;
        for (int i = nd - 1; i >= 0; i--) xi += c[i] * stride, stride *= xs[k]->shape[i];
        ck_assert_msg(y->data[e] == xs[k]->data[xi], "cat dim %lld: element %lld from xs[%d]", (long long)dim,
                      (long long)e, k);
    }
}

START_TEST(cat_matches_indexing) {
    mg_rng r = mg_rng_make(5);
    /* sizes along the joined dim, per input; the other dims of the base shape */
    static const int64_t base[3] = {2, 1, 3};
    static const int64_t along[][6] = {{1, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, {3, 0, 2, 0, 0, 0},
                                       {1, 2, 3, 1, 2, 1}, {0, 0, 1, 0, 0, 0}};
    static const int counts[] = {1, 2, 3, 6, 3};
    for (int64_t dim = -3; dim < 3; dim++)
        for (size_t a = 0; a < sizeof counts / sizeof counts[0]; a++) {
            const int d = (int)(dim < 0 ? dim + 3 : dim);
            mg_ctx *ctx = mg_ctx_new(0);
            mg_tensor *xs[6];
            for (int k = 0; k < counts[a]; k++) {
                int64_t sh[3] = {base[0], base[1], base[2]};
                sh[d] = along[a][k];
                xs[k] = rand_t(ctx, &r, 3, sh, -1, 1, false);
            }
            mg_tensor *y = mg_cat(ctx, xs, counts[a], dim);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            check_cat(xs, counts[a], dim, y);
            mg_ctx_free(ctx);
        }
    /* one-dim tensors, and a large one (the parallel copy) */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *xs[3] = {rand_t(ctx, &r, 1, (int64_t[]){1}, -1, 1, false),
                        rand_t(ctx, &r, 1, (int64_t[]){5}, -1, 1, false),
                        rand_t(ctx, &r, 1, (int64_t[]){2}, -1, 1, false)};
    check_cat(xs, 3, 0, mg_cat(ctx, xs, 3, -1));
    mg_tensor *big[2] = {rand_t(ctx, &r, 2, (int64_t[]){300, 257}, -1, 1, false),
                         rand_t(ctx, &r, 2, (int64_t[]){300, 3}, -1, 1, false)};
    check_cat(big, 2, 1, mg_cat(ctx, big, 2, 1));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    mg_ctx_free(ctx);
}
END_TEST

/* Nine inputs, more than a node holds, through the gradient checker. */
typedef struct {
    int n;
    int64_t dim;
} cat_run;

static mg_tensor *run_cat(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    const cat_run *c = user;
    return mg_cat(ctx, in, c->n, c->dim);
}

START_TEST(cat_nine_inputs_gradcheck) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(6);
    mg_tensor *xs[9];
    for (int k = 0; k < 9; k++) xs[k] = rand_t(ctx, &r, 3, (int64_t[]){2, 1 + k % 3, 3}, -1, 1, true);
    cat_run c = {9, -2};
    mg_gradcheck_opts o = gc_opts(1e-2, 1e-3, 1e-2, 0, 6);
    int64_t checked = gc_assert_pass("mg_cat of nine along dim -2", run_cat, &c, xs, 9, NULL, &o);
    int64_t want = 0;
    for (int k = 0; k < 9; k++) want += xs[k]->numel;
    ck_assert_int_eq(checked, want);
    mg_ctx_free(ctx);
}
END_TEST

/* Only inputs past the fourth want a gradient: the node is still recorded and they get theirs. The
 * inputs are intermediate results (tanh of leaves) whose gradient buffers mg_backward recycles once
 * their nodes have run; the values are checked against the chain rule, and a second pass must add
 * exactly the same flow again. */
START_TEST(cat_many_inputs_through_backward) {
    enum { K = 8, W = 3 };
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(7);
    mg_tensor *leaf[K], *xs[K];
    for (int k = 0; k < K; k++) {
        leaf[k] = rand_t(ctx, &r, 2, (int64_t[]){2, W}, -1, 1, k >= 5);
        xs[k] = k >= 5 ? mg_tanh(ctx, leaf[k]) : leaf[k];
    }
    mg_tensor *y = mg_cat(ctx, xs, K, 1); /* (2, K*W) */
    mg_tensor *R = rand_t(ctx, &r, 2, (int64_t[]){2, K * W}, -1, 1, false);
    mg_tensor *part = mg_narrow(ctx, mg_mul(ctx, mg_sigmoid(ctx, y), R), 1, W, (K - 1) * W); /* drops input 0 */
    mg_tensor *loss = mg_sum(ctx, part);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_msg(mg_requires_grad(y), "cat recorded no node although inputs 5..7 want gradients");
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    float first[K][2 * W];
    for (int k = 0; k < K; k++) {
        if (k < 5) {
            ck_assert_ptr_null(leaf[k]->grad);
            continue;
        }
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < W; j++) {
                double t = tanh(leaf[k]->data[b * W + j]), s = 1.0 / (1.0 + exp(-t));
                double want = R->data[b * K * W + k * W + j] * s * (1 - s) * (1 - t * t);
                float got = leaf[k]->grad[b * W + j];
                ck_assert_msg(fabs(got - want) <= 1e-6 + 1e-5 * fabs(want), "input %d [%d,%d]: %g, want %g", k, b, j,
                              got, want);
                first[k][b * W + j] = got;
            }
    }
    mg_backward(ctx, loss);
    for (int k = 5; k < K; k++)
        for (int i = 0; i < 2 * W; i++)
            ck_assert_float_eq_tol(leaf[k]->grad[i], 2.0f * first[k][i], 1e-6f * fabsf(first[k][i]) + 1e-7f);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(cat_and_narrow_without_grad_record_nothing) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){2, 3});
    mg_tensor_set_requires_grad(x, true);
    bool prev = mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *y = mg_cat(ctx, (mg_tensor *[]){x, x, x, x, x, x}, 6, 0);
    mg_tensor *z = mg_narrow(ctx, y, 0, 1, 2);
    mg_tensor *s = mg_sigmoid(ctx, mg_tanh(ctx, z));
    mg_ctx_set_grad_enabled(ctx, prev);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_int_eq(mg_ctx_tape_len(ctx), 0);
    ck_assert(!mg_requires_grad(s));
    ck_assert_float_eq(s->data[0], 0.5f);
    mg_ctx_free(ctx);
}
END_TEST

/* Large enough for the parallel paths: forward and backward bit-identical with 1 and 2 threads. */
START_TEST(bit_identical_across_thread_counts) {
    float *first[2] = {NULL, NULL};
    const int64_t n = 3 * 70001;
    for (int run = 0; run < 2; run++) {
        mg_set_num_threads(run + 1);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_rng r = mg_rng_make(8);
        mg_tensor *x = rand_t(ctx, &r, 2, (int64_t[]){3, 70001}, -4, 4, true);
        mg_tensor *a = mg_sigmoid(ctx, mg_narrow(ctx, x, 1, 1, 70000));
        mg_tensor *b = mg_tanh(ctx, mg_narrow(ctx, x, 1, 0, 70000));
        mg_tensor *y = mg_cat(ctx, (mg_tensor *[]){a, b, a}, 3, 0);
        mg_tensor *R = rand_t(ctx, &r, 2, (int64_t[]){9, 70000}, -1, 1, false);
        mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        first[run] = malloc((size_t)(y->numel + n) * sizeof(float));
        ck_assert_ptr_nonnull(first[run]);
        memcpy(first[run], y->data, (size_t)y->numel * sizeof(float));
        memcpy(first[run] + y->numel, x->grad, (size_t)n * sizeof(float));
        if (run == 1) ck_assert_mem_eq(first[0], first[1], (size_t)(y->numel + n) * sizeof(float));
        mg_ctx_free(ctx);
    }
    mg_set_num_threads(0);
    free(first[0]);
    free(first[1]);
}
END_TEST

/* ---- errors: exact messages, never a crash ---- */

START_TEST(bad_arguments_name_op_argument_and_shape) {
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *a = mg_zeros(ctx, 2, (int64_t[]){2, 3});
    mg_tensor *b = mg_zeros(ctx, 2, (int64_t[]){2, 4});
    mg_tensor *c = mg_zeros(ctx, 3, (int64_t[]){2, 3, 1});
    mg_tensor *s = mg_zeros(ctx, 0, NULL);
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 3});
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
#define EXPECT(call, message)                                                                      \
    do {                                                                                           \
        mg_tensor *r_ = (call);                                                                    \
        ck_assert_ptr_nonnull(r_);                                                                 \
        ck_assert_msg(!mg_ctx_ok(ctx), "%s: no error", #call);                                     \
        ck_assert_str_eq(t.msg, message);                                                          \
        mg_ctx_clear_error(ctx);                                                                   \
    } while (0)
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a, a}, 2, 3), "mg_cat: dim 3 out of range for x(2,3)");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a}, 1, -3), "mg_cat: dim -3 out of range for x(2,3)");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a, b}, 2, 0),
           "mg_cat: xs[1](2,4) does not match xs[0](2,3) in the dims other than dim 0");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a, a, c}, 3, -1),
           "mg_cat: xs[2](2,3,1) does not match xs[0](2,3) in the dims other than dim -1");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a}, 0, 0), "mg_cat: n = 0 tensors (xs given), need at least one");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a}, -2, 0), "mg_cat: n = -2 tensors (xs given), need at least one");
    EXPECT(mg_cat(ctx, NULL, 2, 0), "mg_cat: n = 2 tensors (xs NULL), need at least one");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a, NULL}, 2, 0), "mg_cat: xs[1] is NULL");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){a, ids}, 2, 0), "mg_cat: xs[1](2,3) is int32 but xs[0](2,3) is float32");
    EXPECT(mg_cat(ctx, (mg_tensor *[]){s, s}, 2, 0), "mg_cat: x() has no dims to join along");
    EXPECT(mg_narrow(ctx, a, 2, 0, 1), "mg_narrow: dim 2 out of range for x(2,3)");
    EXPECT(mg_narrow(ctx, a, -3, 0, 1), "mg_narrow: dim -3 out of range for x(2,3)");
    EXPECT(mg_narrow(ctx, a, 1, 2, 2), "mg_narrow: start 2, length 2 out of range for dim 1 (size 3) of x(2,3)");
    EXPECT(mg_narrow(ctx, a, -1, 4, 0), "mg_narrow: start 4, length 0 out of range for dim -1 (size 3) of x(2,3)");
    EXPECT(mg_narrow(ctx, a, 0, -3, 1), "mg_narrow: start -3, length 1 out of range for dim 0 (size 2) of x(2,3)");
    EXPECT(mg_narrow(ctx, a, 0, 0, -1), "mg_narrow: start 0, length -1 out of range for dim 0 (size 2) of x(2,3)");
    EXPECT(mg_narrow(ctx, s, 0, 0, 1), "mg_narrow: x() has no dims to narrow");
    EXPECT(mg_sigmoid(ctx, ids), "mg_sigmoid: x(2,3) must be float32 (got int32 ids)");
    EXPECT(mg_tanh(ctx, ids), "mg_tanh: x(2,3) must be float32 (got int32 ids)");
#undef EXPECT
    /* after an error, every op returns the placeholder without a new message */
    mg_narrow(ctx, a, 9, 0, 0);
    int calls = t.calls;
    mg_tensor *p = mg_cat(ctx, (mg_tensor *[]){a, a}, 2, 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(t.calls, calls);
    mg_ctx_free(ctx);
}
END_TEST

static Suite *seq_suite(void) {
    Suite *s = suite_create("ops_seq");
    TCase *tc = tcase_create("seq");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sigmoid_tanh_match_float64);
    tcase_add_test(tc, narrow_matches_indexing);
    tcase_add_test(tc, narrow_and_cat_copy_int32);
    tcase_add_test(tc, cat_matches_indexing);
    tcase_add_test(tc, cat_nine_inputs_gradcheck);
    tcase_add_test(tc, cat_many_inputs_through_backward);
    tcase_add_test(tc, cat_and_narrow_without_grad_record_nothing);
    tcase_add_test(tc, bit_identical_across_thread_counts);
    tcase_add_test(tc, bad_arguments_name_op_argument_and_shape);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(seq_suite)
