/* Forward results and errors of the reductions over a dim (sum, mean, max, logsumexp), softmax and
 * log-softmax over a dim, transpose / permute, index_select, batched and broadcast matmul, and the
 * losses (MSE, NLL, label-smoothed cross-entropy). Gradients: tests/test_ops_grad.c.
 *
 * References are plain double-precision loops written from the definitions in ops.h, on odd shapes
 * with size-1 dims, every dim of each shape counted both ways (0..n-1 and -n..-1). Tolerances, as
 * |got - want| <= atol + rtol |want|:
 *  - transpose, permute, index_select, max: exact (copies).
 *  - sum, mean: the float rounding of a double sum: rtol 1e-6 plus 1e-6 times the sum of |x|.
 *  - logsumexp, log_softmax: atol 2e-6, rtol 1e-6 (float exp, double sums); softmax: atol 1e-6,
 *    rtol 1e-5 (as mg_softmax's test).
 *  - matmul: |err| <= 2 K eps sum_k |a_ik b_kj|, the float32 dot-product bound.
 *  - losses: rtol 1e-5 plus 1e-6.
 * Errors: the exact message for each bad shape or argument, one error on a trapping context, the
 * placeholder returned, never a crash. One large case runs forward and backward on 1 and on 2
 * threads and must give the same bits. */
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- helpers ---- */

static mg_tensor *rand_f32(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, -2.0f, 2.0f);
    return t;
}

/* On a failed context: the placeholder, untouched (the error tests call ops twice). */
static mg_tensor *ids_of(mg_ctx *ctx, int n, const int32_t *v) {
    mg_tensor *t = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){n});
    if (mg_ctx_ok(ctx)) memcpy(t->i32, v, (size_t)n * sizeof(int32_t));
    return t;
}

static double *dbuf(int64_t n) {
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* Fails with the worst element if any |got - want| > atol[i] + rtol |want| (atol per element when
 * atols is given) or got is NaN/inf where want is finite (or not the same infinity). */
static void expect_close(const char *what, const float *got, const double *want, int64_t n, double atol,
                         const double *atols, double rtol) {
    for (int64_t i = 0; i < n; i++) {
        double tol = (atols ? atols[i] : atol) + rtol * fabs(want[i]);
        bool ok = isfinite(want[i]) ? isfinite(got[i]) && fabs((double)got[i] - want[i]) <= tol
                                    : (isnan(want[i]) ? isnan(got[i]) : (double)got[i] == want[i]);
        if (!ok)
            ck_abort_msg("%s: element %lld of %lld: got %.9g, want %.9g (tolerance %.3g)", what, (long long)i,
                         (long long)n, got[i], want[i], tol);
    }
}

static void expect_shape(const char *what, const mg_tensor *t, int ndim, const int64_t *shape) {
    char buf[80];
    bool ok = t->ndim == ndim && t->dtype == MG_F32;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    ck_assert_msg(ok, "%s: result shape %s, ndim %d wanted (first dim %lld)", what, mg_shape_str(t, buf, sizeof buf),
                  ndim, ndim ? (long long)shape[0] : 0LL);
}

/* x's shape as (outer, D, inner) around dim d. */
static void split3(const mg_tensor *x, int d, int64_t *outer, int64_t *D, int64_t *inner) {
    *outer = 1, *D = 1, *inner = 1;
    if (x->ndim == 0) return;
    for (int k = 0; k < d; k++) *outer *= x->shape[k];
    *D = x->shape[d];
    for (int k = d + 1; k < x->ndim; k++) *inner *= x->shape[k];
}

static int wrap_dim(int64_t dim, int ndim) {
    int n = ndim > 0 ? ndim : 1;
    return (int)(dim < 0 ? dim + n : dim);
}

/* Exactly one error on the trapping context, with exactly this message, and the placeholder back. */
static void expect_message(mg_ctx *ctx, const tu_trap *c, const mg_tensor *y, const char *msg) {
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(c->calls == 1, "expected one error \"%s\", got %d (last \"%s\")", msg, c->calls, c->msg);
    ck_assert_msg(strcmp(c->msg, msg) == 0, "error \"%s\", wanted \"%s\"", c->msg, msg);
    ck_assert_ptr_nonnull(mg_ctx_error(ctx));
}

typedef struct {
    int ndim;
    int64_t shape[MG_MAX_DIMS];
} shp;

/* odd sizes, size-1 dims, one long dim; the 0-d scalar first */
static const shp shapes[] = {
    {0, {0}}, {1, {1}}, {1, {7}}, {2, {65, 3}}, {3, {3, 1, 5}}, {3, {1, 130, 1}}, {3, {2, 3, 4}}, {4, {2, 1, 3, 17}},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

/* ---- reductions over a dim ---- */

typedef mg_tensor *(*reduce_fn)(mg_ctx *, mg_tensor *, int64_t, bool);

/* One reduction of x over dim against the double reference. kind: 0 sum, 1 mean, 2 max, 3 lse. */
static void check_reduce(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim, int kind) {
    static const reduce_fn fns[] = {mg_sum_dim, mg_mean_dim, mg_max_dim, mg_logsumexp};
    static const char *const names[] = {"mg_sum_dim", "mg_mean_dim", "mg_max_dim", "mg_logsumexp"};
    const int d = wrap_dim(dim, x->ndim);
    int64_t outer, D, inner;
    split3(x, d, &outer, &D, &inner);
    mg_tensor *y = fns[kind](ctx, x, dim, keepdim);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    char what[160], xs[80];
    snprintf(what, sizeof what, "%s x%s dim %lld keepdim %d", names[kind], mg_shape_str(x, xs, sizeof xs), (long long)dim,
             keepdim);
    int64_t shape[MG_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != d || keepdim) shape[nd++] = k == d ? 1 : x->shape[k];
    expect_shape(what, y, nd, shape);
    double *want = dbuf(outer * inner), *atol = dbuf(outer * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0, sa = 0, m = -INFINITY;
            for (int64_t k = 0; k < D; k++) {
                double v = x->data[(o * D + k) * inner + i];
                s += v, sa += fabs(v), m = v > m ? v : m;
            }
            double e = 0;
            for (int64_t k = 0; k < D; k++) e += exp(x->data[(o * D + k) * inner + i] - m);
            double w = kind == 0 ? s : kind == 1 ? s / (double)D : kind == 2 ? m : m + log(e);
            want[o * inner + i] = w;
            atol[o * inner + i] = kind == 2 ? 0.0 : kind == 3 ? 2e-6 : 1e-6 * (kind == 1 ? sa / (double)D : sa);
        }
    expect_close(what, y->data, want, outer * inner, 0, atol, kind == 2 ? 0.0 : 1e-6);
    free(want);
    free(atol);
}

START_TEST(reductions_match_reference) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(21);
    for (int s = 0; s < N_SHAPES; s++) {
        mg_tensor *x = rand_f32(ctx, &r, shapes[s].ndim, shapes[s].shape);
        int n = x->ndim > 0 ? x->ndim : 1;
        for (int64_t dim = -n; dim < n; dim++)
            for (int keep = 0; keep < 2; keep++)
                for (int kind = 0; kind < 4; kind++) check_reduce(ctx, x, dim, keep, kind);
        mg_ctx_reset(ctx);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* max: the first maximum takes the whole gradient; NaN wins. logsumexp: -inf lanes, huge values. */
START_TEST(max_and_logsumexp_edges) {
    mg_ctx *ctx = mg_ctx_new(0);
    float xv[8] = {1, 3, 3, 2, /* lane 2 */ -1, 5, NAN, 5};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 4}, xv);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *y = mg_max_dim(ctx, x, -1, false);
    ck_assert_float_eq(y->data[0], 3.0f);
    ck_assert(isnan(y->data[1]));
    mg_backward(ctx, mg_sum(ctx, mg_max_dim(ctx, x, 1, true)));
    const float want[8] = {0, 1, 0, 0, 0, 0, 1, 0};
    for (int i = 0; i < 8; i++) ck_assert_msg(x->grad[i] == want[i], "max grad[%d] = %g, want %g", i, x->grad[i], want[i]);
    /* ties down a column: the first row wins */
    float cv[6] = {4, 0, 4, 4, -1, 4};
    mg_tensor *c = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 2}, cv);
    mg_tensor_set_requires_grad(c, true);
    mg_backward(ctx, mg_sum(ctx, mg_max_dim(ctx, c, 0, false)));
    const float cw[6] = {1, 0, 0, 1, 0, 0};
    for (int i = 0; i < 6; i++) ck_assert_msg(c->grad[i] == cw[i], "column max grad[%d] = %g, want %g", i, c->grad[i], cw[i]);

    float lv[9] = {-INFINITY, -INFINITY, -INFINITY, 1e4f, 1e4f, 1e4f, INFINITY, 0, 1};
    mg_tensor *l = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 3}, lv);
    mg_tensor_set_requires_grad(l, true);
    mg_tensor *ly = mg_logsumexp(ctx, l, 1, false);
    ck_assert(ly->data[0] == -INFINITY);
    ck_assert_float_eq_tol(ly->data[1], 1e4f + (float)log(3.0), 1e-3f);
    ck_assert(ly->data[2] == INFINITY);
    mg_backward(ctx, mg_sum(ctx, mg_logsumexp(ctx, l, -1, true)));
    for (int i = 0; i < 3; i++) ck_assert_float_eq(l->grad[i], 0.0f); /* the all -inf lane */
    /* exp(x - y) with y = 1e4 + log 3 rounded to float (a step of 1e-3 there) */
    for (int i = 3; i < 6; i++) ck_assert_float_eq_tol(l->grad[i], 1.0f / 3.0f, 1e-3f);
    /* the empty dim: sum 0, logsumexp -inf */
    mg_tensor *e = mg_zeros(ctx, 2, (int64_t[]){3, 0});
    mg_tensor *es = mg_sum_dim(ctx, e, 1, false), *el = mg_logsumexp(ctx, e, -1, true);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape("sum over an empty dim", es, 1, (int64_t[]){3});
    expect_shape("logsumexp over an empty dim", el, 2, (int64_t[]){3, 1});
    for (int i = 0; i < 3; i++) ck_assert(es->data[i] == 0.0f && el->data[i] == -INFINITY);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- softmax / log_softmax over a dim ---- */

START_TEST(softmax_dims_match_reference) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(22);
    char what[160], xs[80];
    for (int s = 0; s < N_SHAPES; s++) {
        mg_tensor *x = rand_f32(ctx, &r, shapes[s].ndim, shapes[s].shape);
        int n = x->ndim > 0 ? x->ndim : 1;
        for (int64_t dim = -n; dim < n; dim++)
            for (int lg = 0; lg < 2; lg++) {
                mg_tensor *y = lg ? mg_log_softmax(ctx, x, dim) : mg_softmax_dim(ctx, x, dim);
                ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                snprintf(what, sizeof what, "%s x%s dim %lld", lg ? "mg_log_softmax" : "mg_softmax_dim",
                         mg_shape_str(x, xs, sizeof xs), (long long)dim);
                expect_shape(what, y, x->ndim, x->shape);
                int64_t outer, D, inner;
                split3(x, wrap_dim(dim, x->ndim), &outer, &D, &inner);
                double *want = dbuf(x->numel);
                for (int64_t o = 0; o < outer; o++)
                    for (int64_t i = 0; i < inner; i++) {
                        double m = -INFINITY, e = 0;
                        for (int64_t k = 0; k < D; k++) m = fmax(m, x->data[(o * D + k) * inner + i]);
                        for (int64_t k = 0; k < D; k++) e += exp(x->data[(o * D + k) * inner + i] - m);
                        for (int64_t k = 0; k < D; k++) {
                            double v = x->data[(o * D + k) * inner + i] - m;
                            want[(o * D + k) * inner + i] = lg ? v - log(e) : exp(v) / e;
                        }
                    }
                expect_close(what, y->data, want, x->numel, lg ? 2e-6 : 1e-6, NULL, lg ? 1e-6 : 1e-5);
                free(want);
            }
        /* over the last dim: mg_softmax's bits */
        if (x->ndim > 0) {
            mg_tensor *a = mg_softmax_dim(ctx, x, x->ndim - 1), *b = mg_softmax(ctx, x);
            ck_assert_msg(memcmp(a->data, b->data, (size_t)x->numel * sizeof(float)) == 0,
                          "mg_softmax_dim over the last dim of x%s differs from mg_softmax", mg_shape_str(x, xs, sizeof xs));
        }
        mg_ctx_reset(ctx);
    }
    /* a fully masked lane (column 1 of a (3,2), over dim 0): zeros and -inf; large logits stay finite */
    float v[6] = {1e4f, -INFINITY, 0, -INFINITY, -1e4f, -INFINITY};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 2}, v);
    mg_tensor *p = mg_softmax_dim(ctx, x, 0), *lp = mg_log_softmax(ctx, x, -2);
    ck_assert_float_eq(p->data[0], 1.0f);
    ck_assert_float_eq(lp->data[0], 0.0f);
    ck_assert_float_eq_tol(lp->data[2], -1e4f, 1e-2f);
    for (int k = 0; k < 3; k++) ck_assert(p->data[2 * k + 1] == 0.0f && lp->data[2 * k + 1] == -INFINITY);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- transpose, permute ---- */

/* y = x with dims reordered by perm, by the definition y[i] = x[j], j[perm[k]] = i[k]. */
static void check_permuted(const char *what, const mg_tensor *x, const mg_tensor *y, const int *perm) {
    int64_t shape[MG_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) shape[k] = x->shape[perm[k]];
    expect_shape(what, y, x->ndim, shape);
    for (int64_t f = 0; f < y->numel; f++) {
        int64_t idx[MG_MAX_DIMS], rem = f, j[MG_MAX_DIMS], off = 0;
        for (int k = y->ndim - 1; k >= 0; k--) idx[k] = rem % y->shape[k], rem /= y->shape[k];
        for (int k = 0; k < y->ndim; k++) j[perm[k]] = idx[k];
        for (int k = 0; k < x->ndim; k++) off = off * x->shape[k] + j[k];
        if (y->data[f] != x->data[off]) ck_abort_msg("%s: element %lld is %g, want %g", what, (long long)f, y->data[f], x->data[off]);
    }
}

START_TEST(transpose_permute_move_elements) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(23);
    char what[160], xs[80];
    for (int s = 0; s < N_SHAPES; s++) {
        mg_tensor *x = rand_f32(ctx, &r, shapes[s].ndim, shapes[s].shape);
        int n = x->ndim > 0 ? x->ndim : 1;
        for (int64_t d0 = -n; d0 < n; d0++)
            for (int64_t d1 = -n; d1 < n; d1++) {
                mg_tensor *y = mg_transpose(ctx, x, d0, d1);
                ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                int perm[MG_MAX_DIMS];
                for (int k = 0; k < x->ndim; k++) perm[k] = k;
                if (x->ndim) perm[wrap_dim(d0, x->ndim)] = wrap_dim(d1, x->ndim), perm[wrap_dim(d1, x->ndim)] = wrap_dim(d0, x->ndim);
                snprintf(what, sizeof what, "mg_transpose x%s %lld %lld", mg_shape_str(x, xs, sizeof xs), (long long)d0, (long long)d1);
                check_permuted(what, x, y, perm);
            }
        /* every permutation, written half with negative dims */
        int64_t dims[MG_MAX_DIMS];
        int perm[MG_MAX_DIMS], cnt = 1;
        for (int k = 2; k <= x->ndim; k++) cnt *= k;
        for (int p = 0; p < cnt; p++) {
            bool used[MG_MAX_DIMS] = {false};
            int code = p;
            for (int k = 0; k < x->ndim; k++) {
                int pick = code % (x->ndim - k), at = -1;
                code /= x->ndim - k;
                while (pick >= 0) pick -= !used[++at];
                used[at] = true, perm[k] = at;
                dims[k] = (p + k) % 2 ? at - x->ndim : at;
            }
            mg_tensor *y = mg_permute(ctx, x, x->ndim, dims);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            snprintf(what, sizeof what, "mg_permute x%s permutation %d", mg_shape_str(x, xs, sizeof xs), p);
            check_permuted(what, x, y, perm);
        }
        mg_ctx_reset(ctx);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- index_select ---- */

START_TEST(index_select_gathers_and_scatters) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(24);
    const int32_t idx[] = {2, 0, 2, 1, 2};
    char what[160], xs[80];
    for (int s = 1; s < N_SHAPES; s++) {
        mg_tensor *x = rand_f32(ctx, &r, shapes[s].ndim, shapes[s].shape);
        mg_tensor_set_requires_grad(x, true);
        for (int64_t dim = -x->ndim; dim < x->ndim; dim++) {
            const int d = wrap_dim(dim, x->ndim);
            int64_t outer, D, inner;
            split3(x, d, &outer, &D, &inner);
            int32_t sel[5];
            for (int j = 0; j < 5; j++) sel[j] = idx[j] % (int32_t)D; /* repeats, any order */
            mg_tensor *y = mg_index_select(ctx, x, dim, ids_of(ctx, 5, sel));
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            snprintf(what, sizeof what, "mg_index_select x%s dim %lld", mg_shape_str(x, xs, sizeof xs), (long long)dim);
            int64_t shape[MG_MAX_DIMS];
            for (int k = 0; k < x->ndim; k++) shape[k] = k == d ? 5 : x->shape[k];
            expect_shape(what, y, x->ndim, shape);
            for (int64_t o = 0; o < outer; o++)
                for (int j = 0; j < 5; j++)
                    for (int64_t i = 0; i < inner; i++)
                        ck_assert_msg(y->data[(o * 5 + j) * inner + i] == x->data[(o * D + sel[j]) * inner + i],
                                      "%s: element (%lld,%d,%lld)", what, (long long)o, j, (long long)i);
            /* backward of sum(y * w), w integers: dx = the scatter-add, exact in float */
            mg_tensor *w = mg_tensor_new(ctx, MG_F32, y->ndim, y->shape);
            for (int64_t f = 0; f < w->numel; f++) w->data[f] = (float)(f % 7) - 3.0f;
            if (x->grad) memset(x->grad, 0, (size_t)x->numel * sizeof(float));
            mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, w)));
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < D; k++)
                    for (int64_t i = 0; i < inner; i++) {
                        float want = 0;
                        for (int j = 0; j < 5; j++)
                            if (sel[j] == k) want += w->data[(o * 5 + j) * inner + i];
                        ck_assert_msg(x->grad[(o * D + k) * inner + i] == want, "%s: grad (%lld,%lld,%lld) %g, want %g", what,
                                      (long long)o, (long long)k, (long long)i, x->grad[(o * D + k) * inner + i], want);
                    }
        }
        mg_ctx_reset(ctx);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- batched and broadcast matmul ---- */

/* a (...,M,K) @ b (...,K,N) (b stored (...,N,K) when nt) against the double reference, the batch
 * dims broadcast by NumPy rules (na, nb <= 4). */
static void check_bcast_matmul(mg_ctx *ctx, mg_rng *r, int na, const int64_t *as, int nb, const int64_t *bs, bool nt,
                               int nout, const int64_t *outshape) {
    mg_tensor *a = rand_f32(ctx, r, na, as), *b = rand_f32(ctx, r, nb, bs);
    mg_tensor *c = nt ? mg_matmul_nt(ctx, a, b) : mg_matmul(ctx, a, b);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    char what[200], s1[80], s2[80];
    snprintf(what, sizeof what, "%s a%s b%s", nt ? "mg_matmul_nt" : "mg_matmul", mg_shape_str(a, s1, sizeof s1),
             mg_shape_str(b, s2, sizeof s2));
    expect_shape(what, c, nout, outshape);
    const int64_t M = as[na - 2], K = as[na - 1], N = nt ? bs[nb - 2] : bs[nb - 1];
    const int nbat = nout - 2;
    int64_t batches = 1;
    for (int k = 0; k < nbat; k++) batches *= outshape[k];
    double *want = dbuf(c->numel), *atol = dbuf(c->numel);
    for (int64_t z = 0; z < batches; z++) {
        /* unravel z over the output's batch dims, then re-ravel into a's and b's (size-1 dims stay 0) */
        int64_t rem = z, za = 0, zb = 0, idx[MG_MAX_DIMS];
        for (int k = nbat - 1; k >= 0; k--) idx[k] = rem % outshape[k], rem /= outshape[k];
        for (int k = 0; k < nbat; k++) {
            int ka = k - (nbat - (na - 2)), kb = k - (nbat - (nb - 2));
            if (ka >= 0) za = za * as[ka] + (as[ka] == 1 ? 0 : idx[k]);
            if (kb >= 0) zb = zb * bs[kb] + (bs[kb] == 1 ? 0 : idx[k]);
        }
        const float *A = a->data + za * M * K, *B = b->data + zb * K * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, sa = 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = (double)A[i * K + k] * (nt ? B[j * K + k] : B[k * N + j]);
                    s += p, sa += fabs(p);
                }
                want[(z * M + i) * N + j] = s;
                atol[(z * M + i) * N + j] = 2.0 * (double)K * FLT_EPSILON * sa + 1e-30;
            }
    }
    expect_close(what, c->data, want, c->numel, 0, atol, 0);
    free(want);
    free(atol);
}

START_TEST(matmul_broadcasts_batch_dims) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(25);
    for (int nt = 0; nt < 2; nt++) {
#define BS(K_, N_) (nt ? (int64_t[]){N_, K_} : (int64_t[]){K_, N_})
        /* a's batch against b's: both stretched, one missing, size-1 on either side */
        check_bcast_matmul(ctx, &r, 4, (int64_t[]){2, 1, 3, 17}, 3, (int64_t[]){3, BS(17, 5)[0], BS(17, 5)[1]}, nt, 4,
                           (int64_t[]){2, 3, 3, 5});
        check_bcast_matmul(ctx, &r, 2, (int64_t[]){7, 65}, 3, (int64_t[]){4, BS(65, 3)[0], BS(65, 3)[1]}, nt, 3,
                           (int64_t[]){4, 7, 3});
        check_bcast_matmul(ctx, &r, 3, (int64_t[]){1, 3, 5}, 3, (int64_t[]){2, BS(5, 1)[0], BS(5, 1)[1]}, nt, 3,
                           (int64_t[]){2, 3, 1});
        check_bcast_matmul(ctx, &r, 3, (int64_t[]){3, 1, 5}, 4, (int64_t[]){2, 1, BS(5, 4)[0], BS(5, 4)[1]}, nt, 4,
                           (int64_t[]){2, 3, 1, 4});
        check_bcast_matmul(ctx, &r, 4, (int64_t[]){1, 2, 4, 9}, 4, (int64_t[]){3, 1, BS(9, 130)[0], BS(9, 130)[1]}, nt, 4,
                           (int64_t[]){3, 2, 4, 130});
        /* b with only size-1 batch dims (the shared path), and the 2-D / equal-batch paths */
        check_bcast_matmul(ctx, &r, 3, (int64_t[]){3, 4, 17}, 3, (int64_t[]){1, BS(17, 6)[0], BS(17, 6)[1]}, nt, 3,
                           (int64_t[]){3, 4, 6});
        check_bcast_matmul(ctx, &r, 3, (int64_t[]){3, 4, 17}, 2, (int64_t[]){BS(17, 6)[0], BS(17, 6)[1]}, nt, 3,
                           (int64_t[]){3, 4, 6});
        check_bcast_matmul(ctx, &r, 4, (int64_t[]){2, 3, 4, 17}, 4, (int64_t[]){2, 3, BS(17, 6)[0], BS(17, 6)[1]}, nt, 4,
                           (int64_t[]){2, 3, 4, 6});
#undef BS
        mg_ctx_reset(ctx);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* mg_bmm is mg_matmul on 3-D operands of one batch: the same bits, forward and backward. */
START_TEST(bmm_is_batched_matmul) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(26);
    mg_tensor *a = rand_f32(ctx, &r, 3, (int64_t[]){3, 17, 65}), *b = rand_f32(ctx, &r, 3, (int64_t[]){3, 65, 5});
    mg_tensor *a2 = rand_f32(ctx, &r, 3, a->shape), *b2 = rand_f32(ctx, &r, 3, b->shape);
    memcpy(a2->data, a->data, (size_t)a->numel * 4);
    memcpy(b2->data, b->data, (size_t)b->numel * 4);
    mg_tensor_set_requires_grad(a, true);
    mg_tensor_set_requires_grad(b, true);
    mg_tensor_set_requires_grad(a2, true);
    mg_tensor_set_requires_grad(b2, true);
    mg_tensor *y = mg_bmm(ctx, a, b), *y2 = mg_matmul(ctx, a2, b2);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape("mg_bmm", y, 3, (int64_t[]){3, 17, 5});
    ck_assert(memcmp(y->data, y2->data, (size_t)y->numel * 4) == 0);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, y)));
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y2, y2)));
    ck_assert(memcmp(a->grad, a2->grad, (size_t)a->numel * 4) == 0);
    ck_assert(memcmp(b->grad, b2->grad, (size_t)b->numel * 4) == 0);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- losses ---- */

START_TEST(losses_match_reference) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(27);
    const shp ls[] = {{1, {1}}, {2, {1, 1}}, {2, {3, 17}}, {3, {2, 5, 11}}, {4, {2, 1, 3, 65}}};
    char what[160], xs[80];
    for (size_t s = 0; s < sizeof ls / sizeof ls[0]; s++) {
        mg_tensor *x = rand_f32(ctx, &r, ls[s].ndim, ls[s].shape), *t = rand_f32(ctx, &r, ls[s].ndim, ls[s].shape);
        /* mse */
        double want = 0;
        for (int64_t i = 0; i < x->numel; i++) want += ((double)x->data[i] - t->data[i]) * ((double)x->data[i] - t->data[i]);
        want /= (double)x->numel;
        mg_tensor *y = mg_mse_loss(ctx, x, t);
        snprintf(what, sizeof what, "mg_mse_loss x%s", mg_shape_str(x, xs, sizeof xs));
        expect_shape(what, y, 0, NULL);
        expect_close(what, y->data, &want, 1, 1e-6, NULL, 1e-5);
        /* class losses: targets over the leading dims, every third ignored (-100), then none */
        const int64_t C = x->shape[x->ndim - 1], R = x->numel / C;
        mg_tensor *tg = mg_tensor_new(ctx, MG_I32, x->ndim - 1, x->shape);
        for (int ign = 0; ign < 2; ign++) {
            for (int64_t i = 0; i < R; i++) tg->i32[i] = ign && i % 3 == 1 ? -100 : (int32_t)mg_rng_below(&r, (uint32_t)C);
            for (int k = 0; k < 4; k++) {
                const float eps = (float[]){0.0f, 0.1f, 0.5f, 1.0f}[k];
                double nll = 0, ce = 0;
                int64_t cnt = 0;
                for (int64_t i = 0; i < R; i++) {
                    if (tg->i32[i] == -100) continue;
                    const float *row = x->data + i * C;
                    double m = -INFINITY, e = 0, mean = 0;
                    for (int64_t j = 0; j < C; j++) m = fmax(m, row[j]);
                    for (int64_t j = 0; j < C; j++) e += exp(row[j] - m), mean += row[j];
                    double lse = m + log(e);
                    nll -= row[tg->i32[i]];
                    ce += (1 - (double)eps) * (lse - row[tg->i32[i]]) + (double)eps * (lse - mean / (double)C);
                    cnt++;
                }
                double want_nll = cnt ? nll / (double)cnt : 0, want_ce = cnt ? ce / (double)cnt : 0;
                snprintf(what, sizeof what, "mg_cross_entropy_smooth x%s eps %g ignore %d", mg_shape_str(x, xs, sizeof xs),
                         (double)eps, ign);
                mg_tensor *l = mg_cross_entropy_smooth(ctx, x, tg, -100, eps);
                ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                expect_shape(what, l, 0, NULL);
                expect_close(what, l->data, &want_ce, 1, 1e-6, NULL, 1e-5);
                if (eps == 0.0f) { /* mg_cross_entropy: the same bits */
                    mg_tensor *l0 = mg_cross_entropy(ctx, x, tg, -100);
                    ck_assert_msg(l0->data[0] == l->data[0], "%s: mg_cross_entropy gives %.9g", what, l0->data[0]);
                }
                snprintf(what, sizeof what, "mg_nll_loss x%s ignore %d", mg_shape_str(x, xs, sizeof xs), ign);
                mg_tensor *n = mg_nll_loss(ctx, x, tg, -100);
                expect_close(what, n->data, &want_nll, 1, 1e-6, NULL, 1e-5);
            }
        }
        mg_ctx_reset(ctx);
    }
    /* every position ignored: 0, and no gradient */
    mg_tensor *x = rand_f32(ctx, &r, 2, (int64_t[]){2, 3});
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *tg = ids_of(ctx, 2, (int32_t[]){-1, -1});
    mg_tensor *l = mg_add(ctx, mg_nll_loss(ctx, x, tg, -1), mg_cross_entropy_smooth(ctx, x, tg, -1, 0.2f));
    mg_backward(ctx, l);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_float_eq(l->data[0], 0.0f);
    for (int i = 0; i < 6; i++) ck_assert(x->grad == NULL || x->grad[i] == 0.0f);
    mg_ctx_free(ctx);
}
END_TEST

/* Values PyTorch 1.13 gives for the same inputs: F.cross_entropy(logits, t, ignore_index=-1,
 * label_smoothing=0.2), F.nll_loss(F.log_softmax(logits, 1), t, ignore_index=-1) and
 * F.mse_loss(logits, logits.flip(0)). */
START_TEST(losses_match_pytorch) {
    mg_ctx *ctx = mg_ctx_new(0);
    float lv[12] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, 0.25f, -0.75f, 3.0f, 1.0f, 1.0f, -2.0f, 0.5f};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 4}, lv);
    mg_tensor *t = ids_of(ctx, 3, (int32_t[]){2, -1, 0});
    float fv[12];
    for (int i = 0; i < 12; i++) fv[i] = lv[(2 - i / 4) * 4 + i % 4];
    mg_tensor *f = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 4}, fv);
    mg_tensor *ce = mg_cross_entropy_smooth(ctx, x, t, -1, 0.2f);
    mg_tensor *nll = mg_nll_loss(ctx, mg_log_softmax(ctx, x, 1), t, -1);
    mg_tensor *mse = mg_mse_loss(ctx, x, f);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_float_eq_tol(ce->data[0], 0.9096452166928289f, 2e-6f);
    ck_assert_float_eq_tol(nll->data[0], 0.6596452166928289f, 2e-6f);
    ck_assert_float_eq_tol(mse->data[0], 3.4166666666666665f, 2e-6f);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- the same bits on 1 and 2 threads ---- */

/* Forward and backward of a large reduction, softmax, index_select and broadcast matmul on
 * `threads` threads; every output and gradient appended to out (n floats). */
static float *det_run(int threads, int64_t *n) {
    mg_set_num_threads(threads);
    mg_rng r = mg_rng_make(28);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){48, 300, 40});
    mg_tensor *a = rand_f32(ctx, &r, 4, (int64_t[]){4, 1, 64, 96}), *b = rand_f32(ctx, &r, 3, (int64_t[]){3, 96, 80});
    mg_tensor_set_requires_grad(x, true);
    mg_tensor_set_requires_grad(a, true);
    mg_tensor_set_requires_grad(b, true);
    int32_t sel[600];
    for (int i = 0; i < 600; i++) sel[i] = (int32_t)((i * 7) % 300);
    mg_tensor *outs[] = {
        mg_sum_dim(ctx, x, 1, false),
        mg_logsumexp(ctx, x, 0, true),
        mg_mean_dim(ctx, x, -1, false),
        mg_max_dim(ctx, x, 1, false),
        mg_softmax_dim(ctx, x, 1),
        mg_log_softmax(ctx, x, 0),
        mg_index_select(ctx, x, 1, ids_of(ctx, 600, sel)),
        mg_matmul(ctx, a, b),
        mg_permute(ctx, x, 3, (int64_t[]){2, 0, 1}),
    };
    enum { NO = sizeof outs / sizeof outs[0] };
    mg_tensor *loss = NULL;
    for (int i = 0; i < NO; i++) {
        mg_tensor *w = rand_f32(ctx, &r, outs[i]->ndim, outs[i]->shape);
        mg_tensor *term = mg_sum(ctx, mg_mul(ctx, outs[i], w));
        loss = loss ? mg_add(ctx, loss, term) : term;
    }
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    int64_t total = x->numel + a->numel + b->numel;
    for (int i = 0; i < NO; i++) total += outs[i]->numel;
    float *buf = malloc((size_t)total * sizeof(float)), *p = buf;
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i < NO; i++) memcpy(p, outs[i]->data, (size_t)outs[i]->numel * 4), p += outs[i]->numel;
    memcpy(p, x->grad, (size_t)x->numel * 4), p += x->numel;
    memcpy(p, a->grad, (size_t)a->numel * 4), p += a->numel;
    memcpy(p, b->grad, (size_t)b->numel * 4);
    *n = total;
    mg_ctx_free(ctx);
    return buf;
}

START_TEST(bit_identical_across_thread_counts) {
    const int keep = mg_get_num_threads();
    int64_t n1, n2;
    float *one = det_run(1, &n1), *two = det_run(2, &n2);
    mg_set_num_threads(keep);
    ck_assert_int_eq(n1, n2);
    for (int64_t i = 0; i < n1; i++)
        if (memcmp(&one[i], &two[i], 4) != 0)
            ck_abort_msg("1 vs 2 threads: float %lld of %lld differs (%.9g vs %.9g)", (long long)i, (long long)n1, one[i], two[i]);
    free(one);
    free(two);
}
END_TEST

/* ---- errors ---- */

/* Each case builds its inputs on a fresh trapping context and calls one op. */
typedef mg_tensor *(*bad_fn)(mg_ctx *ctx);

static mg_tensor *F32(mg_ctx *c, int nd, int64_t d0, int64_t d1, int64_t d2) {
    return mg_zeros(c, nd, (int64_t[]){d0, d1, d2});
}
static mg_tensor *I32(mg_ctx *c, int nd, int64_t d0, int64_t d1) {
    mg_tensor *t = mg_tensor_new(c, MG_I32, nd, (int64_t[]){d0, d1});
    if (mg_ctx_ok(c)) memset(t->i32, 0, (size_t)t->numel * 4);
    return t;
}

static mg_tensor *e_sum_dim(mg_ctx *c) { return mg_sum_dim(c, F32(c, 2, 2, 3, 0), 2, false); }
static mg_tensor *e_sum_dim_neg(mg_ctx *c) { return mg_sum_dim(c, F32(c, 2, 2, 3, 0), -3, true); }
static mg_tensor *e_mean_dim(mg_ctx *c) { return mg_mean_dim(c, F32(c, 1, 4, 0, 0), 1, false); }
static mg_tensor *e_mean_empty(mg_ctx *c) { return mg_mean_dim(c, F32(c, 2, 2, 0, 0), 1, false); }
static mg_tensor *e_max_dim(mg_ctx *c) { return mg_max_dim(c, F32(c, 3, 2, 1, 3), -4, false); }
static mg_tensor *e_max_empty(mg_ctx *c) { return mg_max_dim(c, F32(c, 2, 0, 3, 0), 0, true); }
static mg_tensor *e_lse(mg_ctx *c) { return mg_logsumexp(c, F32(c, 2, 2, 3, 0), 5, false); }
static mg_tensor *e_scalar(mg_ctx *c) { return mg_sum_dim(c, F32(c, 0, 0, 0, 0), 1, false); }
static mg_tensor *e_softmax_dim(mg_ctx *c) { return mg_softmax_dim(c, F32(c, 2, 2, 3, 0), 2); }
static mg_tensor *e_log_softmax(mg_ctx *c) { return mg_log_softmax(c, F32(c, 2, 2, 3, 0), -3); }
static mg_tensor *e_transpose(mg_ctx *c) { return mg_transpose(c, F32(c, 2, 2, 3, 0), 3, 0); }
static mg_tensor *e_transpose1(mg_ctx *c) { return mg_transpose(c, F32(c, 2, 2, 3, 0), 0, -3); }
static mg_tensor *e_permute_n(mg_ctx *c) { return mg_permute(c, F32(c, 3, 2, 3, 4), 2, (int64_t[]){1, 0}); }
static mg_tensor *e_permute_rep(mg_ctx *c) { return mg_permute(c, F32(c, 3, 2, 3, 4), 3, (int64_t[]){0, 2, -3}); }
static mg_tensor *e_permute_range(mg_ctx *c) { return mg_permute(c, F32(c, 3, 2, 3, 4), 3, (int64_t[]){0, 5, 1}); }
static mg_tensor *e_permute_null(mg_ctx *c) { return mg_permute(c, F32(c, 2, 2, 3, 0), 2, NULL); }
static mg_tensor *e_isel_range(mg_ctx *c) { return mg_index_select(c, F32(c, 2, 3, 5, 0), 1, ids_of(c, 4, (int32_t[]){0, 4, 5, 1})); }
static mg_tensor *e_isel_neg(mg_ctx *c) { return mg_index_select(c, F32(c, 2, 3, 5, 0), -2, ids_of(c, 2, (int32_t[]){1, -1})); }
static mg_tensor *e_isel_float(mg_ctx *c) { return mg_index_select(c, F32(c, 2, 3, 5, 0), 0, F32(c, 1, 4, 0, 0)); }
static mg_tensor *e_isel_2d(mg_ctx *c) { return mg_index_select(c, F32(c, 2, 3, 5, 0), 0, I32(c, 2, 2, 2)); }
static mg_tensor *e_isel_dim(mg_ctx *c) { return mg_index_select(c, F32(c, 2, 3, 5, 0), 2, I32(c, 1, 2, 0)); }
static mg_tensor *e_isel_scalar(mg_ctx *c) { return mg_index_select(c, F32(c, 0, 0, 0, 0), 0, I32(c, 1, 1, 0)); }
static mg_tensor *e_bmm_2d(mg_ctx *c) { return mg_bmm(c, F32(c, 2, 3, 4, 0), F32(c, 3, 1, 4, 5)); }
static mg_tensor *e_bmm_batch(mg_ctx *c) { return mg_bmm(c, F32(c, 3, 2, 3, 4), F32(c, 3, 1, 4, 5)); }
static mg_tensor *e_bmm_inner(mg_ctx *c) { return mg_bmm(c, F32(c, 3, 2, 3, 4), F32(c, 3, 2, 5, 6)); }
static mg_tensor *e_matmul_bcast(mg_ctx *c) {
    return mg_matmul(c, mg_zeros(c, 4, (int64_t[]){2, 3, 4, 5}), mg_zeros(c, 4, (int64_t[]){3, 3, 5, 6}));
}
static mg_tensor *e_matmul_nt_bcast(mg_ctx *c) { return mg_matmul_nt(c, F32(c, 3, 2, 4, 5), F32(c, 3, 3, 6, 5)); }
static mg_tensor *e_mse_shape(mg_ctx *c) { return mg_mse_loss(c, F32(c, 2, 2, 3, 0), F32(c, 2, 3, 2, 0)); }
static mg_tensor *e_mse_empty(mg_ctx *c) { return mg_mse_loss(c, F32(c, 2, 2, 0, 0), F32(c, 2, 2, 0, 0)); }
static mg_tensor *e_nll_range(mg_ctx *c) { return mg_nll_loss(c, F32(c, 2, 3, 5, 0), ids_of(c, 3, (int32_t[]){0, 7, -100}), -100); }
static mg_tensor *e_nll_shape(mg_ctx *c) { return mg_nll_loss(c, F32(c, 2, 2, 5, 0), I32(c, 1, 3, 0), -100); }
static mg_tensor *e_nll_float_t(mg_ctx *c) { return mg_nll_loss(c, F32(c, 2, 2, 5, 0), F32(c, 1, 2, 0, 0), -100); }
static mg_tensor *e_ces_eps(mg_ctx *c) { return mg_cross_entropy_smooth(c, F32(c, 2, 2, 5, 0), I32(c, 1, 2, 0), -1, 1.5f); }
static mg_tensor *e_ces_neg(mg_ctx *c) { return mg_cross_entropy_smooth(c, F32(c, 2, 2, 5, 0), I32(c, 1, 2, 0), -1, -0.25f); }
static mg_tensor *e_ces_nan(mg_ctx *c) { return mg_cross_entropy_smooth(c, F32(c, 2, 2, 5, 0), I32(c, 1, 2, 0), -1, NAN); }
static mg_tensor *e_ces_range(mg_ctx *c) {
    return mg_cross_entropy_smooth(c, F32(c, 2, 2, 5, 0), ids_of(c, 2, (int32_t[]){5, 1}), -1, 0.1f);
}
/* int32 where float32 is wanted */
static mg_tensor *i_sum_dim(mg_ctx *c) { return mg_sum_dim(c, I32(c, 2, 2, 3), 0, false); }
static mg_tensor *i_mean_dim(mg_ctx *c) { return mg_mean_dim(c, I32(c, 2, 2, 3), 0, false); }
static mg_tensor *i_max_dim(mg_ctx *c) { return mg_max_dim(c, I32(c, 2, 2, 3), 0, false); }
static mg_tensor *i_lse(mg_ctx *c) { return mg_logsumexp(c, I32(c, 2, 2, 3), 0, false); }
static mg_tensor *i_softmax_dim(mg_ctx *c) { return mg_softmax_dim(c, I32(c, 2, 2, 3), 0); }
static mg_tensor *i_log_softmax(mg_ctx *c) { return mg_log_softmax(c, I32(c, 2, 2, 3), 0); }
static mg_tensor *i_transpose(mg_ctx *c) { return mg_transpose(c, I32(c, 2, 2, 3), 0, 1); }
static mg_tensor *i_permute(mg_ctx *c) { return mg_permute(c, I32(c, 2, 2, 3), 2, (int64_t[]){1, 0}); }
static mg_tensor *i_isel(mg_ctx *c) { return mg_index_select(c, I32(c, 2, 2, 3), 0, I32(c, 1, 1, 0)); }
static mg_tensor *i_bmm(mg_ctx *c) { return mg_bmm(c, F32(c, 3, 1, 2, 3), mg_tensor_new(c, MG_I32, 3, (int64_t[]){1, 3, 2})); }
static mg_tensor *i_matmul(mg_ctx *c) { return mg_matmul(c, mg_tensor_new(c, MG_I32, 3, (int64_t[]){2, 2, 3}), F32(c, 3, 1, 3, 2)); }
static mg_tensor *i_mse(mg_ctx *c) { return mg_mse_loss(c, F32(c, 2, 2, 3, 0), I32(c, 2, 2, 3)); }
static mg_tensor *i_nll(mg_ctx *c) { return mg_nll_loss(c, I32(c, 2, 2, 3), I32(c, 1, 2, 0), -1); }
static mg_tensor *i_ces(mg_ctx *c) { return mg_cross_entropy_smooth(c, I32(c, 2, 2, 3), I32(c, 1, 2, 0), -1, 0.1f); }

static const struct {
    bad_fn fn;
    const char *msg;
} bad[] = {
    {e_sum_dim, "mg_sum_dim: dim 2 out of range for x(2,3)"},
    {e_sum_dim_neg, "mg_sum_dim: dim -3 out of range for x(2,3)"},
    {e_mean_dim, "mg_mean_dim: dim 1 out of range for x(4)"},
    {e_mean_empty, "mg_mean_dim: dim 1 of x(2,0) is empty"},
    {e_max_dim, "mg_max_dim: dim -4 out of range for x(2,1,3)"},
    {e_max_empty, "mg_max_dim: dim 0 of x(0,3) is empty"},
    {e_lse, "mg_logsumexp: dim 5 out of range for x(2,3)"},
    {e_scalar, "mg_sum_dim: dim 1 out of range for x()"},
    {e_softmax_dim, "mg_softmax_dim: dim 2 out of range for x(2,3)"},
    {e_log_softmax, "mg_log_softmax: dim -3 out of range for x(2,3)"},
    {e_transpose, "mg_transpose: dim 3 out of range for x(2,3)"},
    {e_transpose1, "mg_transpose: dim -3 out of range for x(2,3)"},
    {e_permute_n, "mg_permute: 2 dims given for x(2,3,4), which has 3"},
    {e_permute_rep, "mg_permute: dim -3 appears twice in dims for x(2,3,4) (dims must be a permutation)"},
    {e_permute_range, "mg_permute: dim 5 out of range for x(2,3,4)"},
    {e_permute_null, "mg_permute: dims is NULL for x(2,3)"},
    {e_isel_range, "mg_index_select: index 5 at position 2 of index(4) is out of range [0, 5) for dim 1 of x(3,5)"},
    {e_isel_neg, "mg_index_select: index -1 at position 1 of index(2) is out of range [0, 3) for dim -2 of x(3,5)"},
    {e_isel_float, "mg_index_select: index(4) must be a 1-D int32 tensor (got float32)"},
    {e_isel_2d, "mg_index_select: index(2,2) must be a 1-D int32 tensor"},
    {e_isel_dim, "mg_index_select: dim 2 out of range for x(3,5)"},
    {e_isel_scalar, "mg_index_select: x() needs at least one dim"},
    {e_bmm_2d, "mg_bmm: a(3,4) @ b(1,4,5): both must be 3-D, (B,M,K) and (B,K,N) with the same B"},
    {e_bmm_batch, "mg_bmm: a(2,3,4) @ b(1,4,5): both must be 3-D, (B,M,K) and (B,K,N) with the same B"},
    {e_bmm_inner, "mg_bmm: a(2,3,4) @ b(2,5,6): inner dims 4 != 5"},
    {e_matmul_bcast, "mg_matmul: a(2,3,4,5) @ b(3,3,5,6): batch dims differ and do not broadcast (2 vs 3)"},
    {e_matmul_nt_bcast, "mg_matmul_nt: a(2,4,5) @ b^T, b(3,6,5): batch dims differ and do not broadcast (2 vs 3)"},
    {e_mse_shape, "mg_mse_loss: input(2,3), target(3,2): shapes differ (no broadcasting)"},
    {e_mse_empty, "mg_mse_loss: input(2,0), target(2,0): no elements"},
    {e_nll_range, "mg_nll_loss: target 7 at flat position 1 of targets(3) is out of range [0, 5) (ignore_index -100)"},
    {e_nll_shape, "mg_nll_loss: logp(2,5), targets(3): targets must be int32 with the shape of logp minus its last dim"},
    {e_nll_float_t, "mg_nll_loss: logp(2,5), targets(2): targets must be int32 with the shape of logp minus its last dim"},
    {e_ces_eps, "mg_cross_entropy_smooth: label_smoothing 1.5 must be in [0, 1]"},
    {e_ces_neg, "mg_cross_entropy_smooth: label_smoothing -0.25 must be in [0, 1]"},
    {e_ces_nan, "mg_cross_entropy_smooth: label_smoothing nan must be in [0, 1]"},
    {e_ces_range, "mg_cross_entropy_smooth: target 5 at flat position 0 of targets(2) is out of range [0, 5) (ignore_index -1)"},
    {i_sum_dim, "mg_sum_dim: x(2,3) must be float32 (got int32 ids)"},
    {i_mean_dim, "mg_mean_dim: x(2,3) must be float32 (got int32 ids)"},
    {i_max_dim, "mg_max_dim: x(2,3) must be float32 (got int32 ids)"},
    {i_lse, "mg_logsumexp: x(2,3) must be float32 (got int32 ids)"},
    {i_softmax_dim, "mg_softmax_dim: x(2,3) must be float32 (got int32 ids)"},
    {i_log_softmax, "mg_log_softmax: x(2,3) must be float32 (got int32 ids)"},
    {i_transpose, "mg_transpose: x(2,3) must be float32 (got int32 ids)"},
    {i_permute, "mg_permute: x(2,3) must be float32 (got int32 ids)"},
    {i_isel, "mg_index_select: x(2,3) must be float32 (got int32 ids)"},
    {i_bmm, "mg_bmm: b(1,3,2) must be float32 (got int32 ids)"},
    {i_matmul, "mg_matmul: a(2,2,3) must be float32 (got int32 ids)"},
    {i_mse, "mg_mse_loss: target(2,3) must be float32 (got int32 ids)"},
    {i_nll, "mg_nll_loss: logp(2,3) must be float32 (got int32 ids)"},
    {i_ces, "mg_cross_entropy_smooth: logits(2,3) must be float32 (got int32 ids)"},
};
enum { N_BAD = sizeof bad / sizeof bad[0] };

START_TEST(errors_name_op_argument_and_shapes) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *y = bad[_i].fn(ctx);
    expect_message(ctx, &c, y, bad[_i].msg);
    /* sticky: the next call is a harmless no-op */
    y = bad[_i].fn(ctx);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_free(ctx);
}
END_TEST

static Suite *shape_suite(void) {
    Suite *s = suite_create("ops_shape");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, reductions_match_reference);
    tcase_add_test(tc, max_and_logsumexp_edges);
    tcase_add_test(tc, softmax_dims_match_reference);
    tcase_add_test(tc, transpose_permute_move_elements);
    tcase_add_test(tc, index_select_gathers_and_scatters);
    tcase_add_test(tc, matmul_broadcasts_batch_dims);
    tcase_add_test(tc, bmm_is_batched_matmul);
    tcase_add_test(tc, losses_match_reference);
    tcase_add_test(tc, losses_match_pytorch);
    tcase_add_test(tc, bit_identical_across_thread_counts);
    tcase_add_loop_test(tc, errors_name_op_argument_and_shapes, 0, N_BAD);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(shape_suite)
