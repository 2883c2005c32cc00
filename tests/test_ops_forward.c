/* Forward results of every op against plain double-precision loops written from the math in
 * ops.h (not from core/ops/), on random inputs of awkward sizes (1, 3, 17, 65, 130: not multiples of
 * any SIMD width or tile) and batched shapes.
 *
 * Tolerances, per op, as |got - want| <= atol + rtol |want|:
 *  - add, mul, scale, embedding, reshape, split/merge heads: exact (one IEEE operation or a copy).
 *  - matmul: |err| <= 2 K eps sum_k |a_ik b_kj| + 1e-30, the worst-case float32 dot-product bound.
 *  - linear against mg_matmul + mg_add: the same bits without a bias; with one,
 *    |err| <= (K + 4) eps (sum_k |x_ik w_kj| + |b_j|) (tu_abs_product_bound).
 *  - gelu, softmax: atol 1e-6, rtol 1e-5.  layernorm: atol 1e-5, rtol 1e-5 (outputs are O(1)).
 *  - cross-entropy: rtol 1e-5 of the loss plus 1e-5 (log-sum-exp in float32).
 *  - attention: atol 2e-5 (outputs are convex combinations of v in [-1,1]).
 *  - rope: atol 1e-6 + 4e-7 (pos0 + t): the angle is formed in float32, its error grows with it.
 *  - dropout: kept values within 1 ulp-ish (rtol 1e-6) of x / (1 - p).
 *  - sum, mean: rtol 1e-6 of the double sum (the result is one float rounding of it).
 * A coverage test fails if an op in ops.def has no forward test here. */
#include "test_util.h"
#include "minigrad/minigrad.h"
#include "minigrad/testing.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

/* ---- helpers ---- */

static mg_tensor *rand_f32(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, float lo, float hi) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, lo, hi);
    return t;
}

static mg_tensor *rand_ids(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, int32_t below) {
    mg_tensor *t = mg_tensor_new(ctx, MG_I32, ndim, shape);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->numel; i++) t->i32[i] = (int32_t)mg_rng_below(r, (uint32_t)below);
    return t;
}

static double *dbuf(int64_t n) {
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* Fails with the worst element if any |got - want| > atol + rtol |want| or got is not finite. */
static void expect_close(const char *what, const float *got, const double *want, int64_t n, double atol,
                         double rtol) {
    int64_t worst = -1;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), tol = atol + rtol * fabs(want[i]);
        if (!isfinite(got[i]) && isfinite(want[i])) err = INFINITY;
        if (err > tol && (worst < 0 || err - tol > worst_excess)) worst = i, worst_excess = err - tol;
    }
    ck_assert_msg(worst < 0, "%s: element %lld of %lld: got %.9g, want %.9g (atol %g, rtol %g)", what,
                  (long long)worst, (long long)n, worst >= 0 ? got[worst] : 0.0, worst >= 0 ? want[worst] : 0.0,
                  atol, rtol);
}

static void expect_shape(const mg_tensor *t, int ndim, const int64_t *shape) {
    char buf[80];
    ck_assert_msg(t->ndim == ndim, "ndim %d, want %d (shape %s)", t->ndim, ndim, mg_shape_str(t, buf, sizeof buf));
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        ck_assert_msg(t->shape[i] == shape[i], "dim %d is %lld, want %lld (shape %s)", i, (long long)t->shape[i],
                      (long long)shape[i], mg_shape_str(t, buf, sizeof buf));
        numel *= shape[i];
    }
    ck_assert_int_eq(t->numel, numel);
    ck_assert_int_eq(t->dtype, MG_F32);
}

static void expect_error(mg_ctx *ctx, const tu_trap *c, int nwords, ...) {
    ck_assert_msg(c->calls == 1, "expected exactly one error, got %d", c->calls);
    ck_assert_ptr_nonnull(mg_ctx_error(ctx));
    va_list ap;
    va_start(ap, nwords);
    for (int i = 0; i < nwords; i++) {
        const char *w = va_arg(ap, const char *);
        ck_assert_msg(strstr(c->msg, w) != NULL, "error message \"%s\" does not mention \"%s\"", c->msg, w);
    }
    va_end(ap);
}

static const int64_t odd_sizes[] = {1, 3, 17, 65, 130};
enum { N_ODD = 5 };

/* ---- matmul ---- */

/* want[b][i][j] = sum_k a[b][i][k] * B(b)[k][j]; bound = sum_k |a b|. b_batched: b has a's batch.
 * nt: b is stored (N,K). */
static void ref_matmul(const float *a, const float *b, int64_t batch, int64_t M, int64_t K, int64_t N,
                       bool b_batched, bool nt, double *want, double *bound) {
    for (int64_t z = 0; z < batch; z++) {
        const float *A = a + z * M * K, *B = b + (b_batched ? z * K * N : 0);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0.0, s_abs = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    double p = (double)A[i * K + k] * (nt ? B[j * K + k] : B[k * N + j]);
                    s += p;
                    s_abs += fabs(p);
                }
                want[(z * M + i) * N + j] = s;
                bound[(z * M + i) * N + j] = s_abs;
            }
    }
}

static void check_matmul(mg_ctx *ctx, mg_rng *r, int na, const int64_t *ashape, int nb, const int64_t *bshape,
                         bool nt) {
    mg_tensor *a = rand_f32(ctx, r, na, ashape, -1.0f, 1.0f);
    mg_tensor *b = rand_f32(ctx, r, nb, bshape, -1.0f, 1.0f);
    int64_t M = ashape[na - 1 - 1], K = ashape[na - 1];
    int64_t N = nt ? bshape[nb - 2] : bshape[nb - 1];
    int64_t batch = a->numel / (M * K);
    bool b_batched = nb > 2;
    mg_tensor *y = nt ? mg_matmul_nt(ctx, a, b) : mg_matmul(ctx, a, b);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    int64_t oshape[MG_MAX_DIMS];
    memcpy(oshape, ashape, sizeof(int64_t) * (size_t)na);
    oshape[na - 1] = N;
    expect_shape(y, na, oshape);
    double *want = dbuf(y->numel), *bound = dbuf(y->numel);
    ref_matmul(a->data, b->data, batch, M, K, N, b_batched, nt, want, bound);
    char what[160];
    snprintf(what, sizeof what, "%s a(%lld..,%lld,%lld) b%s", nt ? "mg_matmul_nt" : "mg_matmul", (long long)batch,
             (long long)M, (long long)K, b_batched ? " batched" : "");
    int64_t worst = -1;
    for (int64_t i = 0; i < y->numel; i++) {
        double tol = 2.0 * (double)K * FLT_EPSILON * bound[i] + 1e-30;
        if (!(fabs(y->data[i] - want[i]) <= tol)) {
            worst = i;
            break;
        }
    }
    ck_assert_msg(worst < 0, "%s N=%lld: element %lld: got %.9g want %.9g (bound %.3g)", what, (long long)N,
                  (long long)worst, worst >= 0 ? y->data[worst] : 0.0, worst >= 0 ? want[worst] : 0.0,
                  worst >= 0 ? 2.0 * (double)K * FLT_EPSILON * bound[worst] : 0.0);
    free(want);
    free(bound);
}

/* M from the loop index; K and N over all odd sizes. */
START_TEST(matmul_2d_odd_sizes) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(100 + (uint64_t)_i);
    int64_t M = odd_sizes[_i];
    for (int k = 0; k < N_ODD; k++)
        for (int n = 0; n < N_ODD; n++) {
            mg_ctx_reset(ctx);
            int64_t K = odd_sizes[k], N = odd_sizes[n];
            check_matmul(ctx, &r, 2, (int64_t[]){M, K}, 2, (int64_t[]){K, N}, false);
            check_matmul(ctx, &r, 2, (int64_t[]){M, K}, 2, (int64_t[]){N, K}, true);
        }
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(matmul_batched) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(7);
    for (int nt = 0; nt < 2; nt++) {
        /* a (B,T,K) with a shared weight: the Linear layer */
        check_matmul(ctx, &r, 3, (int64_t[]){2, 17, 65}, 2, nt ? (int64_t[]){3, 65} : (int64_t[]){65, 3}, nt);
        check_matmul(ctx, &r, 4, (int64_t[]){2, 3, 5, 7}, 2, nt ? (int64_t[]){130, 7} : (int64_t[]){7, 130}, nt);
        /* batched b: q k^T and p v per head */
        check_matmul(ctx, &r, 4, (int64_t[]){2, 3, 17, 9}, 4, nt ? (int64_t[]){2, 3, 19, 9} : (int64_t[]){2, 3, 9, 19},
                     nt);
        check_matmul(ctx, &r, 3, (int64_t[]){5, 1, 3}, 3, nt ? (int64_t[]){5, 1, 3} : (int64_t[]){5, 3, 1}, nt);
        check_matmul(ctx, &r, 3, (int64_t[]){3, 65, 1}, 3, nt ? (int64_t[]){3, 130, 1} : (int64_t[]){3, 1, 130}, nt);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* mg_linear: x (...,K) @ W (K,N) + b (N), against the same double reference plus the bias. */
static void check_linear(mg_ctx *ctx, mg_rng *r, int nx, const int64_t *xshape, int64_t N, bool with_bias) {
    int64_t K = xshape[nx - 1];
    mg_tensor *x = rand_f32(ctx, r, nx, xshape, -1.0f, 1.0f);
    mg_tensor *w = rand_f32(ctx, r, 2, (int64_t[]){K, N}, -1.0f, 1.0f);
    mg_tensor *b = with_bias ? rand_f32(ctx, r, 1, (int64_t[]){N}, -1.0f, 1.0f) : NULL;
    mg_tensor *y = mg_linear(ctx, x, w, b);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    int64_t oshape[MG_MAX_DIMS];
    memcpy(oshape, xshape, sizeof(int64_t) * (size_t)nx);
    oshape[nx - 1] = N;
    expect_shape(y, nx, oshape);
    int64_t rows = x->numel / K;
    double *want = dbuf(y->numel), *bound = dbuf(y->numel);
    ref_matmul(x->data, w->data, 1, rows, K, N, false, false, want, bound);
    for (int64_t i = 0; i < y->numel; i++) {
        double bias = b ? b->data[i % N] : 0.0;
        double tol = 2.0 * (double)(K + 1) * FLT_EPSILON * (bound[i] + fabs(bias)) + 1e-30;
        ck_assert_msg(fabs(y->data[i] - (want[i] + bias)) <= tol, "mg_linear rows %lld K %lld N %lld: element %lld: got %.9g want %.9g",
                      (long long)rows, (long long)K, (long long)N, (long long)i, y->data[i], want[i] + bias);
    }
    free(want);
    free(bound);
}

START_TEST(linear_fused) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(77);
    for (int k = 0; k < N_ODD; k++)
        for (int n = 0; n < N_ODD; n++) {
            mg_ctx_reset(ctx);
            check_linear(ctx, &r, 3, (int64_t[]){2, 17, odd_sizes[k]}, odd_sizes[n], true);
            check_linear(ctx, &r, 2, (int64_t[]){3, odd_sizes[k]}, odd_sizes[n], false);
        }
    check_linear(ctx, &r, 1, (int64_t[]){65}, 3, true);
    mg_ctx_free(ctx);
}
END_TEST

/* mg_linear against the two ops it fuses, mg_matmul then mg_add, with x (2, M, K) folding its
 * batch: no bias, exactly the product; a bias, within the rounding of one product and one add.
 * (The gradients of the same pair: test_ops_grad.c.) */
START_TEST(linear_matches_matmul_plus_add) {
    const int64_t Ms[] = {1, 3, 130}, Ks[] = {1, 7, 65}, Ns[] = {1, 17, 63};
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    mg_rng r = mg_rng_make(12);
    char what[160];
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < 3; c++)
                for (int bias = 0; bias < 2; bias++) {
                    const int64_t M = Ms[a], K = Ks[k], N = Ns[c];
                    mg_ctx_reset(ctx);
                    mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){2, M, K}, -1.0f, 1.0f);
                    mg_tensor *w = rand_f32(ctx, &r, 2, (int64_t[]){K, N}, -1.0f, 1.0f);
                    mg_tensor *b = bias ? rand_f32(ctx, &r, 1, (int64_t[]){N}, -1.0f, 1.0f) : NULL;
                    mg_tensor *y = mg_linear(ctx, x, w, b);
                    mg_tensor *y2 = mg_matmul(ctx, x, w);
                    if (b) y2 = mg_add(ctx, y2, b);
                    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                    ck_assert_int_eq(y->ndim, 3);
                    ck_assert(y->shape[0] == 2 && y->shape[1] == M && y->shape[2] == N);
                    snprintf(what, sizeof what, "mg_linear (2,%lld,%lld) @ (%lld,%lld)%s", (long long)M, (long long)K,
                             (long long)K, (long long)N, bias ? " + bias" : "");
                    if (!bias) /* no bias: exactly the product */
                        ck_assert_msg(memcmp(y->data, y2->data, (size_t)y->numel * sizeof(float)) == 0,
                                      "%s: results differ bit for bit", what);
                    float *ty = tu_abs_product_bound(x->data, w->data, b ? b->data : NULL, 2 * M, K, N, false, false);
                    tu_expect_within(what, y->data, y2->data, ty, y->numel);
                    free(ty);
                }
    mg_ctx_free(ctx);
}
END_TEST

/* Crosses every cache block of the packed GEMM (KC 256, MC up to 512, NC 512). */
START_TEST(matmul_large_crosses_blocks) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(8);
    check_matmul(ctx, &r, 2, (int64_t[]){521, 300}, 2, (int64_t[]){300, 515}, false);
    check_matmul(ctx, &r, 2, (int64_t[]){67, 520}, 2, (int64_t[]){530, 520}, true);
    mg_ctx_free(ctx);
}
END_TEST

/* Every ISA path this CPU has gives the right answer (the dispatch must not pick a broken kernel). */
START_TEST(matmul_every_isa) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(9);
    mg_isa keep = mg_isa_active();
    int tried = 0;
    for (int isa = MG_ISA_GENERIC; isa <= MG_ISA_AVX512; isa++) {
        if (!mg_isa_force((mg_isa)isa)) continue;
        tried++;
        for (int i = 0; i < N_ODD; i++) {
            mg_ctx_reset(ctx);
            int64_t s = odd_sizes[i];
            check_matmul(ctx, &r, 3, (int64_t[]){2, s, 17}, 2, (int64_t[]){17, s + 2}, false);
            check_matmul(ctx, &r, 3, (int64_t[]){2, 17, s}, 3, (int64_t[]){2, s + 1, s}, true);
        }
    }
    mg_isa_force(keep);
    ck_assert_int_ge(tried, 1);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- add, mul, scale ---- */

static void check_binary(mg_ctx *ctx, mg_rng *r, int na, const int64_t *as, int nb, const int64_t *bs, bool mul) {
    mg_tensor *a = rand_f32(ctx, r, na, as, -2.0f, 2.0f), *b = rand_f32(ctx, r, nb, bs, -2.0f, 2.0f);
    mg_tensor *y = mul ? mg_mul(ctx, a, b) : mg_add(ctx, a, b);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape(y, na, as);
    for (int64_t i = 0; i < a->numel; i++) {
        float bv = b->data[i % b->numel]; /* b is a's trailing dims: it repeats every b->numel */
        float want = mul ? a->data[i] * bv : a->data[i] + bv;
        ck_assert_msg(y->data[i] == want, "%s element %lld: %.9g, want %.9g", mul ? "mg_mul" : "mg_add",
                      (long long)i, y->data[i], want);
    }
}

START_TEST(add_mul_broadcasts) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(11);
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < N_ODD; i++) {
            int64_t C = odd_sizes[i];
            check_binary(ctx, &r, 2, (int64_t[]){3, C}, 2, (int64_t[]){3, C}, m);          /* same shape */
            check_binary(ctx, &r, 3, (int64_t[]){2, 17, C}, 1, (int64_t[]){C}, m);         /* bias */
            check_binary(ctx, &r, 3, (int64_t[]){2, 5, C}, 2, (int64_t[]){5, C}, m);       /* row table */
            check_binary(ctx, &r, 4, (int64_t[]){2, 3, 4, C}, 3, (int64_t[]){3, 4, C}, m); /* 3 trailing */
            check_binary(ctx, &r, 4, (int64_t[]){2, 3, 4, C}, 4, (int64_t[]){2, 3, 4, C}, m);
        }
    /* one large enough for any parallel or vector path */
    check_binary(ctx, &r, 2, (int64_t[]){1031, 130}, 1, (int64_t[]){130}, false);
    check_binary(ctx, &r, 2, (int64_t[]){1031, 130}, 2, (int64_t[]){1031, 130}, true);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(scale_exact) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(12);
    const float ss[] = {0.0f, 1.0f, -1.7f, 1e-3f, 3.0e5f};
    for (int i = 0; i < N_ODD; i++)
        for (int k = 0; k < 5; k++) {
            mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){2, odd_sizes[i], 7}, -3.0f, 3.0f);
            mg_tensor *y = mg_scale(ctx, x, ss[k]);
            expect_shape(y, 3, x->shape);
            for (int64_t j = 0; j < x->numel; j++)
                ck_assert_msg(y->data[j] == x->data[j] * ss[k], "mg_scale(%g) element %lld: %.9g vs %.9g", ss[k],
                              (long long)j, y->data[j], x->data[j] * ss[k]);
        }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- gelu ---- */

static double ref_gelu(double x, mg_gelu_kind kind) {
    if (kind == MG_GELU_ERF) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    const double c = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

START_TEST(gelu_matches_formula) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(13);
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < N_ODD; i++) {
            mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){2, 3, odd_sizes[i] * 7}, -6.0f, 6.0f);
            mg_tensor *y = mg_gelu(ctx, x, (mg_gelu_kind)kind);
            expect_shape(y, 3, x->shape);
            double *want = dbuf(x->numel);
            for (int64_t j = 0; j < x->numel; j++) want[j] = ref_gelu(x->data[j], (mg_gelu_kind)kind);
            expect_close(kind ? "gelu erf" : "gelu tanh", y->data, want, x->numel, 1e-6, 1e-5);
            free(want);
        }
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(gelu_extremes) {
    mg_ctx *ctx = mg_ctx_new(0);
    const float xs[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 10.0f, -10.0f, 30.0f, -30.0f, 100.0f, -100.0f,
                        1e4f, -1e4f, 1e15f, -1e15f, 1e30f, -1e30f};
    enum { NX = sizeof xs / sizeof xs[0] };
    for (int kind = 0; kind < 2; kind++) {
        mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){NX}, (void *)xs);
        mg_tensor *y = mg_gelu(ctx, x, (mg_gelu_kind)kind);
        for (int i = 0; i < NX; i++) {
            float v = y->data[i];
            ck_assert_msg(isfinite(v), "gelu kind %d of %g is %g", kind, xs[i], v);
            if (xs[i] >= 10.0f)
                ck_assert_msg(fabsf(v - xs[i]) <= 1e-6f * xs[i], "gelu(%g) = %.9g, want x", xs[i], v);
            else if (xs[i] <= -10.0f)
                ck_assert_msg(fabsf(v) <= 1e-6f, "gelu(%g) = %.9g, want ~0", xs[i], v);
            else
                ck_assert_msg(fabs(v - ref_gelu(xs[i], (mg_gelu_kind)kind)) <= 1e-35, "gelu(%g) = %.9g", xs[i], v);
        }
        ck_assert_msg(y->data[0] == 0.0f, "gelu(0) = %g", y->data[0]);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- softmax ---- */

static void ref_softmax_row(const float *x, int64_t n, double *y) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < n; j++) mx = fmax(mx, x[j]);
    for (int64_t j = 0; j < n; j++) s += (y[j] = exp((double)x[j] - mx));
    for (int64_t j = 0; j < n; j++) y[j] /= s;
}

static void check_softmax(mg_ctx *ctx, mg_tensor *x, const char *what) {
    mg_tensor *y = mg_softmax(ctx, x);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape(y, x->ndim, x->shape);
    int64_t C = mg_cols(x), R = mg_rows(x);
    double *want = dbuf(x->numel);
    for (int64_t i = 0; i < R; i++) ref_softmax_row(x->data + i * C, C, want + i * C);
    expect_close(what, y->data, want, x->numel, 1e-6, 1e-5);
    for (int64_t i = 0; i < R; i++) {
        double s = 0.0;
        for (int64_t j = 0; j < C; j++) s += y->data[i * C + j];
        ck_assert_msg(fabs(s - 1.0) < 1e-5, "%s: row %lld sums to %.9g", what, (long long)i, s);
    }
    free(want);
}

START_TEST(softmax_matches_formula) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(14);
    for (int i = 0; i < N_ODD; i++) {
        int64_t C = odd_sizes[i];
        check_softmax(ctx, rand_f32(ctx, &r, 2, (int64_t[]){5, C}, -5.0f, 5.0f), "softmax 2d");
        check_softmax(ctx, rand_f32(ctx, &r, 4, (int64_t[]){2, 3, 17, C}, -5.0f, 5.0f), "softmax 4d");
        check_softmax(ctx, rand_f32(ctx, &r, 1, (int64_t[]){C}, -5.0f, 5.0f), "softmax 1d");
    }
    check_softmax(ctx, rand_f32(ctx, &r, 2, (int64_t[]){3, 1031}, -5.0f, 5.0f), "softmax wide");
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(softmax_large_logits) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(15);
    for (int i = 0; i < N_ODD; i++) {
        int64_t C = odd_sizes[i];
        check_softmax(ctx, rand_f32(ctx, &r, 2, (int64_t[]){4, C}, -1e4f, 1e4f), "softmax +-1e4");
        check_softmax(ctx, rand_f32(ctx, &r, 2, (int64_t[]){4, C}, 1e4f - 5.0f, 1e4f), "softmax near 1e4");
        check_softmax(ctx, rand_f32(ctx, &r, 2, (int64_t[]){4, C}, -1e4f, -1e4f + 5.0f), "softmax near -1e4");
    }
    /* all equal at 1e4: uniform; one dominant: one-hot */
    float eq[7], dom[7];
    for (int j = 0; j < 7; j++) eq[j] = 1e4f, dom[j] = (j == 4) ? 1e4f : -1e4f;
    mg_tensor *y = mg_softmax(ctx, mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){7}, eq));
    for (int j = 0; j < 7; j++) ck_assert_float_eq_tol(y->data[j], 1.0f / 7.0f, 1e-7f);
    y = mg_softmax(ctx, mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){7}, dom));
    for (int j = 0; j < 7; j++) ck_assert_float_eq(y->data[j], j == 4 ? 1.0f : 0.0f);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- layernorm ---- */

static void ref_layernorm(const float *x, int64_t R, int64_t C, const float *w, const float *b, double eps,
                          double *y) {
    for (int64_t i = 0; i < R; i++) {
        const float *row = x + i * C;
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < C; j++) mean += row[j];
        mean /= (double)C;
        for (int64_t j = 0; j < C; j++) var += (row[j] - mean) * (row[j] - mean);
        var /= (double)C;
        double rstd = 1.0 / sqrt(var + eps);
        for (int64_t j = 0; j < C; j++)
            y[i * C + j] = (row[j] - mean) * rstd * (w ? w[j] : 1.0) + (b ? b[j] : 0.0);
    }
}

static void check_layernorm(mg_ctx *ctx, mg_rng *r, mg_tensor *x, int wb, float eps, double atol, const char *what) {
    int64_t C = mg_cols(x);
    mg_tensor *w = (wb & 1) ? rand_f32(ctx, r, 1, (int64_t[]){C}, 0.5f, 1.5f) : NULL;
    mg_tensor *b = (wb & 2) ? rand_f32(ctx, r, 1, (int64_t[]){C}, -1.0f, 1.0f) : NULL;
    mg_tensor *y = mg_layernorm(ctx, x, w, b, eps);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape(y, x->ndim, x->shape);
    double *want = dbuf(x->numel);
    ref_layernorm(x->data, mg_rows(x), C, w ? w->data : NULL, b ? b->data : NULL, eps, want);
    char name[128];
    snprintf(name, sizeof name, "%s C=%lld%s%s", what, (long long)C, w ? " w" : "", b ? " b" : "");
    expect_close(name, y->data, want, x->numel, atol, 1e-5);
    free(want);
}

START_TEST(layernorm_matches_formula) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(16);
    for (int i = 0; i < N_ODD; i++) {
        int64_t C = odd_sizes[i];
        for (int wb = 0; wb < 4; wb++) {
            check_layernorm(ctx, &r, rand_f32(ctx, &r, 3, (int64_t[]){2, 17, C}, -2.0f, 3.0f), wb, 1e-5f, 1e-5,
                            "layernorm");
            check_layernorm(ctx, &r, rand_f32(ctx, &r, 1, (int64_t[]){C}, -2.0f, 3.0f), wb, 1e-5f, 1e-5,
                            "layernorm 1 row");
        }
        check_layernorm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){3, C}, -2.0f, 3.0f), 3, 0.1f, 1e-5,
                        "layernorm eps 0.1");
    }
    /* many rows (any parallel path) and a wide row */
    check_layernorm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){1031, 65}, -2.0f, 3.0f), 3, 1e-5f, 1e-5,
                    "layernorm many rows");
    check_layernorm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){2, 4099}, -2.0f, 3.0f), 3, 1e-5f, 1e-5,
                    "layernorm wide");
    mg_ctx_free(ctx);
}
END_TEST

static const int64_t ln_widths[] = {3, 17, 65, 130, 768, 4099}; /* 768: GPT-2 small's width */
enum { NW = sizeof ln_widths / sizeof ln_widths[0] };

START_TEST(layernorm_large_offset) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(17);
    /* A large common offset: a one-pass E[x^2] - E[x]^2, or a mean that drifts by many ulps, loses
     * the variance (1/12) here. atol 2e-3 on unit-scale outputs; a mean accurate to a few ulps of
     * 1000 gives about 2e-4. */
    for (int i = 0; i < NW; i++)
        check_layernorm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){4, ln_widths[i]}, 1000.0f, 1001.0f), 3, 1e-5f, 2e-3,
                        "layernorm offset 1000");
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(layernorm_constant_row) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(18);
    /* A constant row has zero variance: the output is the bias, never NaN or of unit size. The
     * tolerance is 1e-3 (the outputs are O(1)): the mean of C equal floats is exactly that float
     * when it is accumulated in double, and rstd = 1/sqrt(eps) ~ 316 amplifies any drift in it. */
    const float vals[] = {0.0f, 0.1f, 3.7f, -123.456f, 1000.1f, 10000.5f};
    for (int i = 0; i < NW; i++)
        for (int k = 0; k < 6; k++) {
            int64_t C = ln_widths[i];
            mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){2, C});
            for (int64_t j = 0; j < x->numel; j++) x->data[j] = vals[k];
            mg_tensor *w = rand_f32(ctx, &r, 1, (int64_t[]){C}, 0.5f, 1.5f);
            mg_tensor *b = rand_f32(ctx, &r, 1, (int64_t[]){C}, -1.0f, 1.0f);
            mg_tensor *y = mg_layernorm(ctx, x, w, b, 1e-5f);
            for (int64_t j = 0; j < x->numel; j++)
                ck_assert_msg(fabsf(y->data[j] - b->data[j % C]) <= 1e-3f,
                              "layernorm of a constant row %g (C=%lld): element %lld is %.9g, bias %.9g", vals[k],
                              (long long)C, (long long)j, y->data[j], b->data[j % C]);
            y = mg_layernorm(ctx, x, NULL, NULL, 1e-5f);
            for (int64_t j = 0; j < x->numel; j++)
                ck_assert_msg(fabsf(y->data[j]) <= 1e-3f, "plain layernorm of a constant row %g (C=%lld): %.9g",
                              vals[k], (long long)C, y->data[j]);
        }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- embedding ---- */

START_TEST(embedding_gathers_rows) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(18);
    for (int i = 0; i < N_ODD; i++) {
        int64_t C = odd_sizes[i];
        const int64_t V = 11;
        mg_tensor *w = rand_f32(ctx, &r, 2, (int64_t[]){V, C}, -1.0f, 1.0f);
        /* ids of several ranks: (n), (B,T), (B,T,S) */
        const int64_t shapes[3][3] = {{17, 0, 0}, {2, 65, 0}, {2, 3, 5}};
        for (int d = 1; d <= 3; d++) {
            mg_tensor *ids = rand_ids(ctx, &r, d, shapes[d - 1], (int32_t)V);
            ids->i32[0] = 0, ids->i32[ids->numel - 1] = (int32_t)V - 1; /* both ends of the table */
            mg_tensor *y = mg_embedding(ctx, w, ids);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            int64_t os[MG_MAX_DIMS];
            memcpy(os, shapes[d - 1], sizeof(int64_t) * (size_t)d);
            os[d] = C;
            expect_shape(y, d + 1, os);
            for (int64_t p = 0; p < ids->numel; p++)
                ck_assert_msg(memcmp(y->data + p * C, w->data + ids->i32[p] * C, sizeof(float) * (size_t)C) == 0,
                              "embedding row %lld (id %d) differs", (long long)p, ids->i32[p]);
        }
    }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- cross-entropy ---- */

static double ref_xent(const float *logits, const int32_t *t, int64_t N, int64_t V, int32_t ignore) {
    double total = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        if (t[i] == ignore) continue;
        const float *row = logits + i * V;
        double mx = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < V; j++) mx = fmax(mx, row[j]);
        for (int64_t j = 0; j < V; j++) s += exp((double)row[j] - mx);
        total += mx + log(s) - row[t[i]];
        count++;
    }
    return count ? total / (double)count : 0.0;
}

static void check_xent(mg_ctx *ctx, mg_tensor *logits, mg_tensor *t, int32_t ignore, const char *what) {
    mg_tensor *loss = mg_cross_entropy(ctx, logits, t, ignore);
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", what, mg_ctx_error(ctx));
    ck_assert_int_eq(loss->numel, 1);
    ck_assert_int_eq(loss->dtype, MG_F32);
    double want = ref_xent(logits->data, t->i32, t->numel, mg_cols(logits), ignore);
    ck_assert_msg(isfinite(loss->data[0]), "%s: loss %g", what, loss->data[0]);
    ck_assert_msg(fabs(loss->data[0] - want) <= 1e-5 + 1e-5 * fabs(want), "%s (V=%lld): loss %.9g, want %.9g", what,
                  (long long)mg_cols(logits), loss->data[0], want);
}

START_TEST(cross_entropy_matches_formula) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(19);
    for (int i = 0; i < N_ODD; i++) {
        int64_t V = odd_sizes[i];
        mg_tensor *lg = rand_f32(ctx, &r, 3, (int64_t[]){2, 17, V}, -4.0f, 4.0f);
        mg_tensor *t = rand_ids(ctx, &r, 2, (int64_t[]){2, 17}, (int32_t)V);
        check_xent(ctx, lg, t, -1, "cross-entropy (B,T,V)");
        for (int64_t j = 0; j < t->numel; j += 3) t->i32[j] = -100; /* every third ignored */
        check_xent(ctx, lg, t, -100, "cross-entropy ignore -100");
        lg = rand_f32(ctx, &r, 2, (int64_t[]){65, V}, -4.0f, 4.0f);
        t = rand_ids(ctx, &r, 1, (int64_t[]){65}, (int32_t)V);
        check_xent(ctx, lg, t, -1, "cross-entropy (N,V)");
        /* ignore_index may be a valid class: positions with that target are skipped */
        if (V >= 3) check_xent(ctx, lg, t, 2, "cross-entropy ignore class 2");
        lg = rand_f32(ctx, &r, 1, (int64_t[]){V}, -4.0f, 4.0f);
        t = rand_ids(ctx, &r, 0, (int64_t[]){0}, (int32_t)V);
        check_xent(ctx, lg, t, -1, "cross-entropy one position");
    }
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(cross_entropy_large_logits) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(20);
    for (int i = 0; i < N_ODD; i++) {
        int64_t V = odd_sizes[i];
        mg_tensor *lg = rand_f32(ctx, &r, 2, (int64_t[]){9, V}, -1e4f, 1e4f);
        mg_tensor *t = rand_ids(ctx, &r, 1, (int64_t[]){9}, (int32_t)V);
        check_xent(ctx, lg, t, -1, "cross-entropy logits +-1e4");
        /* O(1) losses from logits near 1e4: the differences of the logits are exact, so the loss
         * is as accurate as at small logits if lse - x[target] is formed without rounding lse */
        lg = rand_f32(ctx, &r, 2, (int64_t[]){9, V}, 1e4f, 1e4f + 3.0f);
        check_xent(ctx, lg, t, -1, "cross-entropy logits near 1e4");
    }
    /* all logits equal at 1e4: log V */
    float lg[2 * 5];
    for (int j = 0; j < 10; j++) lg[j] = 1e4f;
    int32_t t2[2] = {1, 4};
    mg_tensor *loss = mg_cross_entropy(ctx, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 5}, lg),
                                       mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){2}, t2), -1);
    ck_assert_float_eq_tol(loss->data[0], logf(5.0f), 1e-5f);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(cross_entropy_extremes) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(21);
    /* every position ignored: 0, not NaN */
    for (int i = 0; i < N_ODD; i++) {
        int64_t V = odd_sizes[i];
        mg_tensor *lg = rand_f32(ctx, &r, 3, (int64_t[]){2, 5, V}, -1e4f, 1e4f);
        mg_tensor *t = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 5});
        for (int64_t j = 0; j < t->numel; j++) t->i32[j] = -1;
        mg_tensor *loss = mg_cross_entropy(ctx, lg, t, -1);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        ck_assert_msg(loss->data[0] == 0.0f, "all-ignored cross-entropy is %g, want 0", loss->data[0]);
    }
    /* target far above the rest: 0; far below: the gap 2e4 */
    float lg[2 * 5];
    for (int j = 0; j < 10; j++) lg[j] = -1e4f;
    lg[1] = 1e4f, lg[5 + 4] = 1e4f;
    int32_t t2[2] = {1, 4}, t3[2] = {0, 0};
    mg_tensor *loss = mg_cross_entropy(ctx, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 5}, lg),
                                       mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){2}, t2), -1);
    ck_assert_float_eq(loss->data[0], 0.0f);
    loss = mg_cross_entropy(ctx, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 5}, lg),
                            mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){2}, t3), -1);
    ck_assert_float_eq_tol(loss->data[0], 2e4f, 1e-2f);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- reshape ---- */

START_TEST(reshape_same_data) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(21);
    mg_tensor *x = rand_f32(ctx, &r, 2, (int64_t[]){6, 130}, -1.0f, 1.0f);
    struct {
        int nd;
        int64_t s[4], want[4];
    } cases[] = {
        {3, {3, -1, 5}, {3, 52, 5}}, {1, {-1}, {780}},         {2, {-1, 65}, {12, 65}},
        {4, {2, 3, 13, 10}, {2, 3, 13, 10}}, {4, {1, -1, 1, 1}, {1, 780, 1, 1}}, {2, {780, -1}, {780, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mg_tensor *y = mg_reshape(ctx, x, cases[c].nd, cases[c].s);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        expect_shape(y, cases[c].nd, cases[c].want);
        ck_assert(memcmp(y->data, x->data, sizeof(float) * 780) == 0);
    }
    /* int32 ids reshape too (targets are flattened this way) */
    mg_tensor *ids = rand_ids(ctx, &r, 2, (int64_t[]){4, 17}, 1000);
    mg_tensor *flat = mg_reshape(ctx, ids, 1, (int64_t[]){-1});
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_int_eq(flat->dtype, MG_I32);
    ck_assert_int_eq(flat->shape[0], 68);
    ck_assert(memcmp(flat->i32, ids->i32, sizeof(int32_t) * 68) == 0);
    /* the input is unchanged */
    ck_assert_int_eq(x->ndim, 2);
    ck_assert_int_eq(x->shape[0], 6);
    ck_assert_int_eq(x->shape[1], 130);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- split / merge heads ---- */

START_TEST(split_merge_heads) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(22);
    const int64_t cfg[][4] = {/* B, T, C, H */ {1, 1, 1, 1},  {2, 3, 6, 3},    {2, 17, 12, 4},
                              {1, 65, 130, 5}, {3, 130, 17, 1}, {2, 5, 130, 13}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        int64_t B = cfg[c][0], T = cfg[c][1], C = cfg[c][2], H = cfg[c][3], D = C / H;
        mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){B, T, 3 * C}, -1.0f, 1.0f);
        for (int part = 0; part < 3; part++) {
            int64_t col0 = part * C;
            mg_tensor *y = mg_split_heads(ctx, x, H, col0, C);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            expect_shape(y, 4, (int64_t[]){B, H, T, D});
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t d = 0; d < D; d++)
                            ck_assert_msg(y->data[((b * H + h) * T + t) * D + d] ==
                                              x->data[(b * T + t) * 3 * C + col0 + h * D + d],
                                          "split_heads case %zu part %d at (%lld,%lld,%lld,%lld)", c, part,
                                          (long long)b, (long long)h, (long long)t, (long long)d);
            mg_tensor *m = mg_merge_heads(ctx, y);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            expect_shape(m, 3, (int64_t[]){B, T, C});
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < C; j++)
                        ck_assert(m->data[(b * T + t) * C + j] == x->data[(b * T + t) * 3 * C + col0 + j]);
        }
        /* merge on an arbitrary (B,H,T,D) tensor */
        mg_tensor *z = rand_f32(ctx, &r, 4, (int64_t[]){B, H, T, D}, -1.0f, 1.0f);
        mg_tensor *m = mg_merge_heads(ctx, z);
        expect_shape(m, 3, (int64_t[]){B, T, H * D});
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t d = 0; d < D; d++)
                        ck_assert(m->data[(b * T + t) * H * D + h * D + d] == z->data[((b * H + h) * T + t) * D + d]);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- attention ---- */

typedef struct {
    float slope[8];
    int64_t H, Tq, Tk, q_pos0;
    atomic_int calls, bad_args;
} bias_user;

static double bias_value(const bias_user *u, int64_t h, int64_t qpos, int64_t kpos) {
    /* ALiBi-like distance term plus a term that is not a function of (qpos - kpos) */
    return -(double)u->slope[h] * (double)(qpos - kpos) + 0.25 * cos(0.7 * (double)kpos + 0.3 * (double)qpos + (double)h);
}

static void test_bias(const void *user, int64_t h, int64_t qpos, int64_t k0, int64_t n, float *logits) {
    bias_user *u = (bias_user *)user; /* the counters are atomics: called from worker threads */
    atomic_fetch_add(&u->calls, 1);
    if (h < 0 || h >= u->H || qpos < u->q_pos0 || qpos >= u->q_pos0 + u->Tq || k0 < 0 || n < 0 || k0 + n > u->Tk) {
        atomic_fetch_add(&u->bad_args, 1);
        return;
    }
    for (int64_t j = 0; j < n; j++) logits[j] += (float)bias_value(u, h, qpos, k0 + j);
}

static void ref_attention(const mg_tensor *q, const mg_tensor *k, const mg_tensor *v, bool causal, double scale,
                          int64_t q_pos0, const bias_user *bu, double *out) {
    int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], D = q->shape[3], Tk = k->shape[2];
    double *l = dbuf(Tk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *Q = q->data + (b * H + h) * Tq * D, *K = k->data + (b * H + h) * Tk * D,
                        *Vv = v->data + (b * H + h) * Tk * D;
            for (int64_t i = 0; i < Tq; i++) {
                int64_t qpos = q_pos0 + i, nvis = causal ? (qpos + 1 < Tk ? qpos + 1 : Tk) : Tk;
                double mx = -INFINITY, s = 0.0;
                for (int64_t j = 0; j < nvis; j++) {
                    double d = 0.0;
                    for (int64_t e = 0; e < D; e++) d += (double)Q[i * D + e] * K[j * D + e];
                    l[j] = scale * d + (bu ? bias_value(bu, h, qpos, j) : 0.0);
                    mx = fmax(mx, l[j]);
                }
                for (int64_t j = 0; j < nvis; j++) s += (l[j] = exp(l[j] - mx));
                double *o = out + ((b * H + h) * Tq + i) * D;
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < nvis; j++) acc += l[j] * Vv[j * D + e];
                    o[e] = acc / s;
                }
            }
        }
    free(l);
}

typedef struct {
    int64_t B, H, Tq, Tk, D;
    bool causal;
    int64_t q_pos0;
    float scale;
    bool bias;
    float qk_range; /* q and k uniform in [-r, r] */
} attn_case;

static const attn_case attn_cases[] = {
    {1, 1, 1, 1, 1, true, 0, 0, false, 1},
    {2, 3, 17, 17, 8, true, 0, 0, false, 1},
    {2, 3, 17, 17, 8, false, 0, 0, false, 1},
    {1, 2, 65, 65, 3, true, 0, 0, false, 1},
    {1, 2, 65, 130, 17, false, 0, 0, false, 1},
    {2, 2, 130, 130, 16, true, 0, 0, false, 1},
    {1, 4, 130, 130, 64, true, 0, 0, false, 1},
    {2, 2, 3, 67, 5, true, 64, 0, false, 1},   /* incremental decoding: 3 new queries after 64 */
    {1, 3, 1, 130, 17, true, 129, 0, false, 1}, /* one new token */
    {2, 4, 17, 17, 8, true, 0, 0, true, 1},     /* ALiBi-style bias per head */
    {2, 4, 17, 40, 8, true, 23, 0, true, 1},
    {1, 3, 65, 130, 3, false, 0, 0, true, 1},
    {2, 2, 17, 17, 8, true, 0, 0.3f, false, 1}, /* custom scale */
    {1, 2, 65, 65, 17, false, 0, 2.5f, true, 1},
    {1, 2, 17, 65, 4, false, 0, 0, false, 60},  /* logits up to ~1e4 */
    {1, 2, 17, 17, 4, true, 0, 0, false, 60},
};
enum { N_ATTN = sizeof attn_cases / sizeof attn_cases[0] };

START_TEST(attention_matches_reference) {
    const attn_case *c = &attn_cases[_i];
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(300 + (uint64_t)_i);
    mg_tensor *q = rand_f32(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, -c->qk_range, c->qk_range);
    mg_tensor *k = rand_f32(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, -c->qk_range, c->qk_range);
    mg_tensor *v = rand_f32(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, -1.0f, 1.0f);
    bias_user bu = {.slope = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03f, 0.02f, 0.01f, 0.005f},
                    .H = c->H, .Tq = c->Tq, .Tk = c->Tk, .q_pos0 = c->q_pos0};
    atomic_init(&bu.calls, 0);
    atomic_init(&bu.bad_args, 0);
    mg_attn_opts o = {.causal = c->causal, .scale = c->scale, .q_pos0 = c->q_pos0};
    if (c->bias) o.bias = test_bias, o.bias_user = &bu;
    double *want = dbuf(q->numel);
    double scale = c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)c->D);
    ref_attention(q, k, v, c->causal, scale, c->q_pos0, c->bias ? &bu : NULL, want);
    char what[128];
    snprintf(what, sizeof what, "attention case %d (B%lld H%lld Tq%lld Tk%lld D%lld)", _i, (long long)c->B,
             (long long)c->H, (long long)c->Tq, (long long)c->Tk, (long long)c->D);
    /* once without and once with a gradient wanted: a fused kernel may save extra data for backward */
    for (int grad = 0; grad < 2; grad++) {
        mg_tensor_set_requires_grad(q, grad);
        mg_tensor *y = mg_attention(ctx, q, k, v, &o);
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", what, mg_ctx_error(ctx));
        expect_shape(y, 4, q->shape);
        expect_close(what, y->data, want, q->numel, 2e-5, 1e-5);
    }
    if (c->bias) {
        ck_assert_msg(atomic_load(&bu.calls) > 0, "%s: bias callback never called", what);
        ck_assert_msg(atomic_load(&bu.bad_args) == 0, "%s: bias callback got %d calls with arguments out of range",
                      what, atomic_load(&bu.bad_args));
    }
    /* opts NULL == non-causal, default scale, no bias */
    if (!c->causal && c->scale == 0.0f && !c->bias) {
        mg_tensor *y = mg_attention(ctx, q, k, v, NULL);
        expect_close("attention opts NULL", y->data, want, q->numel, 2e-5, 1e-5);
    }
    free(want);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- rope ---- */

START_TEST(rope_rotates_pairs) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(23);
    const int64_t cfg[][5] = {/* B, H, T, D, pos0 */ {1, 1, 1, 2, 0},   {2, 3, 17, 8, 0},  {1, 2, 65, 6, 3},
                              {2, 2, 130, 34, 0}, {1, 1, 3, 130, 1000}, {1, 4, 17, 64, 129}};
    const float bases[] = {10000.0f, 500.0f};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int bi = 0; bi < 2; bi++) {
            int64_t B = cfg[c][0], H = cfg[c][1], T = cfg[c][2], D = cfg[c][3], pos0 = cfg[c][4];
            mg_tensor *x = rand_f32(ctx, &r, 4, (int64_t[]){B, H, T, D}, -1.0f, 1.0f);
            mg_tensor *y = mg_rope(ctx, x, pos0, bases[bi]);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            expect_shape(y, 4, x->shape);
            for (int64_t row = 0; row < B * H * T; row++) {
                int64_t p = pos0 + row % T;
                for (int64_t i = 0; i < D / 2; i++) {
                    double ang = (double)p * pow((double)bases[bi], -2.0 * (double)i / (double)D);
                    double x0 = x->data[row * D + 2 * i], x1 = x->data[row * D + 2 * i + 1];
                    double w0 = x0 * cos(ang) - x1 * sin(ang), w1 = x0 * sin(ang) + x1 * cos(ang);
                    double tol = 1e-6 + 4e-7 * (double)p;
                    ck_assert_msg(fabs(y->data[row * D + 2 * i] - w0) <= tol &&
                                      fabs(y->data[row * D + 2 * i + 1] - w1) <= tol,
                                  "rope D=%lld pos %lld pair %lld: (%.9g, %.9g), want (%.9g, %.9g)", (long long)D,
                                  (long long)p, (long long)i, y->data[row * D + 2 * i], y->data[row * D + 2 * i + 1],
                                  w0, w1);
                }
            }
        }
    mg_ctx_free(ctx);
}
END_TEST

/* ---- dropout ---- */

START_TEST(dropout_mask_and_scaling) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(24);
    const int64_t n = 200000;
    mg_tensor *x = rand_f32(ctx, &r, 2, (int64_t[]){1000, n / 1000}, 0.5f, 1.5f); /* no zeros: mask is visible */
    const float ps[] = {0.1f, 0.3f, 0.5f, 0.9f};
    for (int k = 0; k < 4; k++) {
        float p = ps[k];
        mg_rng d1 = mg_rng_make(77), d2 = mg_rng_make(77), d3 = mg_rng_make(78);
        mg_tensor *y = mg_dropout(ctx, x, p, &d1);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        expect_shape(y, 2, x->shape);
        ck_assert_msg(d1.s != 77, "dropout did not draw from the generator");
        int64_t zeros = 0, block_zeros = 0, worst_block = 0;
        double scale = 1.0 / (1.0 - (double)p);
        for (int64_t i = 0; i < n; i++) {
            if (y->data[i] == 0.0f) {
                zeros++, block_zeros++;
            } else {
                double want = x->data[i] * scale;
                ck_assert_msg(fabs(y->data[i] - want) <= 1e-6 * want, "dropout p=%g kept %lld: %.9g, want %.9g", p,
                              (long long)i, y->data[i], want);
            }
            if (i % 10000 == 9999) { /* no block of 10000 far from p either */
                int64_t dev = llabs(block_zeros - (int64_t)llround(p * 10000.0));
                if (dev > worst_block) worst_block = dev;
                block_zeros = 0;
            }
        }
        /* the zero count is Binomial(n, p): allow 6 standard deviations */
        double sd = sqrt((double)n * p * (1.0 - p));
        ck_assert_msg(fabs((double)zeros - n * (double)p) <= 6.0 * sd, "dropout p=%g: %lld of %lld zeroed", p,
                      (long long)zeros, (long long)n);
        ck_assert_msg((double)worst_block <= 6.0 * sqrt(10000.0 * p * (1.0 - p)),
                      "dropout p=%g: a block of 10000 is off by %lld", p, (long long)worst_block);
        /* the same seed gives the same mask; another seed another one, agreeing only by chance */
        mg_tensor *y2 = mg_dropout(ctx, x, p, &d2);
        ck_assert(memcmp(y->data, y2->data, sizeof(float) * (size_t)n) == 0);
        ck_assert_int_eq(d1.s, d2.s);
        mg_tensor *y3 = mg_dropout(ctx, x, p, &d3);
        int64_t agree = 0;
        for (int64_t i = 0; i < n; i++) agree += (y->data[i] == 0.0f) == (y3->data[i] == 0.0f);
        double pa = (double)p * p + (1.0 - p) * (1.0 - p);
        ck_assert_msg(fabs((double)agree - n * pa) <= 6.0 * sqrt(n * pa * (1.0 - pa)),
                      "dropout p=%g: masks of seeds 77 and 78 agree on %lld of %lld", p, (long long)agree,
                      (long long)n);
        /* a second call on the same generator draws a fresh mask */
        mg_tensor *y4 = mg_dropout(ctx, x, p, &d1);
        ck_assert(memcmp(y->data, y4->data, sizeof(float) * (size_t)n) != 0);
    }
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(dropout_p0_is_identity) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(25), d = mg_rng_make(5);
    mg_tensor *x = rand_f32(ctx, &r, 3, (int64_t[]){2, 3, 17}, -1.0f, 1.0f);
    float copy[102];
    memcpy(copy, x->data, sizeof copy);
    mg_tensor *y = mg_dropout(ctx, x, 0.0f, &d);
    ck_assert_ptr_eq(y, x);
    ck_assert(memcmp(x->data, copy, sizeof copy) == 0);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- sum, mean ---- */

START_TEST(sum_mean_in_double) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(26);
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 3, 17}, {2, 65, 130}, {17, 130, 65}, {3, 1, 1}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        mg_tensor *x = rand_f32(ctx, &r, 3, shapes[c], -1.0f, 2.0f);
        long double s = 0.0L;
        for (int64_t i = 0; i < x->numel; i++) s += x->data[i];
        mg_tensor *ys = mg_sum(ctx, x), *ym = mg_mean(ctx, x);
        ck_assert_int_eq(ys->numel, 1);
        ck_assert_int_eq(ym->numel, 1);
        double want = (double)s, wm = (double)(s / x->numel);
        ck_assert_msg(fabs(ys->data[0] - want) <= 1e-6 * fabs(want) + 1e-30, "sum of %lld: %.9g, want %.9g",
                      (long long)x->numel, ys->data[0], want);
        ck_assert_msg(fabs(ym->data[0] - wm) <= 1e-6 * fabs(wm) + 1e-30, "mean of %lld: %.9g, want %.9g",
                      (long long)x->numel, ym->data[0], wm);
    }
    /* cancellation float32 accumulation gets wrong: 1e8 + 1 - 1e8 + ... */
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){3000});
    for (int i = 0; i < 3000; i++) x->data[i] = (i % 3 == 0) ? 1e8f : (i % 3 == 1) ? 1.0f : -1e8f;
    ck_assert_float_eq(mg_sum(ctx, x)->data[0], 1000.0f);
    ck_assert_float_eq_tol(mg_mean(ctx, x)->data[0], 1.0f / 3.0f, 1e-7f);
    /* many small terms: 0.1f a million times */
    x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){1000, 1000});
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 0.1f;
    double want = 1e6 * (double)0.1f;
    ck_assert_msg(fabs(mg_sum(ctx, x)->data[0] - want) <= 1e-6 * want, "sum of 1e6 x 0.1f: %.9g",
                  mg_sum(ctx, x)->data[0]);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- thread-count invariance (docs/style.md: bit-identical whatever the thread count) ---- */

static void run_ops(mg_ctx *ctx, float **outs, int64_t *lens, int *n) {
    mg_rng r = mg_rng_make(27), d = mg_rng_make(28);
    mg_tensor *a = rand_f32(ctx, &r, 3, (int64_t[]){3, 130, 65}, -1.0f, 1.0f);
    mg_tensor *w = rand_f32(ctx, &r, 2, (int64_t[]){65, 130}, -1.0f, 1.0f);
    mg_tensor *q = rand_f32(ctx, &r, 4, (int64_t[]){2, 3, 130, 17}, -1.0f, 1.0f);
    mg_tensor *k = rand_f32(ctx, &r, 4, (int64_t[]){2, 3, 130, 17}, -1.0f, 1.0f);
    mg_tensor *t = rand_ids(ctx, &r, 2, (int64_t[]){3, 130}, 130);
    mg_tensor *big = rand_f32(ctx, &r, 2, (int64_t[]){700, 1000}, -1.0f, 1.0f);
    mg_tensor *res[] = {
        mg_matmul(ctx, a, w),
        mg_matmul_nt(ctx, q, k),
        mg_attention(ctx, q, k, k, &(mg_attn_opts){.causal = true}),
        mg_softmax(ctx, big),
        mg_layernorm(ctx, big, NULL, NULL, 1e-5f),
        mg_gelu(ctx, big, MG_GELU_TANH),
        mg_cross_entropy(ctx, mg_matmul(ctx, a, w), t, -1),
        mg_sum(ctx, big),
        mg_mean(ctx, big),
        mg_dropout(ctx, big, 0.2f, &d),
        mg_rope(ctx, rand_f32(ctx, &r, 4, (int64_t[]){2, 3, 130, 16}, -1.0f, 1.0f), 5, 10000.0f),
        mg_embedding(ctx, big, t),
    };
    *n = (int)(sizeof res / sizeof res[0]);
    for (int i = 0; i < *n; i++) {
        lens[i] = res[i]->numel;
        outs[i] = malloc(sizeof(float) * (size_t)lens[i]);
        memcpy(outs[i], res[i]->data, sizeof(float) * (size_t)lens[i]);
    }
}

START_TEST(forward_bit_identical_across_thread_counts) {
    if (!mg_have_openmp()) return;
    int keep = mg_get_num_threads();
    float *o1[16], *o3[16];
    int64_t l1[16], l3[16];
    int n1, n3;
    mg_ctx *ctx = mg_ctx_new(0);
    mg_set_num_threads(1);
    run_ops(ctx, o1, l1, &n1);
    mg_ctx_reset(ctx);
    mg_set_num_threads(3);
    run_ops(ctx, o3, l3, &n3);
    mg_set_num_threads(keep);
    ck_assert_int_eq(n1, n3);
    for (int i = 0; i < n1; i++) {
        ck_assert_int_eq(l1[i], l3[i]);
        ck_assert_msg(memcmp(o1[i], o3[i], sizeof(float) * (size_t)l1[i]) == 0,
                      "op result %d differs between 1 and 3 threads", i);
        free(o1[i]);
        free(o3[i]);
    }
    mg_ctx_free(ctx);
}
END_TEST

/* Forward and backward of one mg_linear, x (M,K) @ W (K,N) + b (N), with `threads` threads: y,
 * then the gradients of x, W and b, into out. */
static void linear_run(int threads, float *out, int64_t M, int64_t K, int64_t N) {
    mg_set_num_threads(threads);
    mg_rng r = mg_rng_make(13);
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    mg_tensor *x = rand_f32(ctx, &r, 2, (int64_t[]){M, K}, -1.0f, 1.0f);
    mg_tensor *w = rand_f32(ctx, &r, 2, (int64_t[]){K, N}, -1.0f, 1.0f);
    mg_tensor *b = rand_f32(ctx, &r, 1, (int64_t[]){N}, -1.0f, 1.0f);
    mg_tensor *R = rand_f32(ctx, &r, 2, (int64_t[]){M, N}, -1.0f, 1.0f);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor_set_requires_grad(w, true);
    mg_tensor_set_requires_grad(b, true);
    mg_tensor *y = mg_linear(ctx, x, w, b);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R))); /* dy = R */
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    memcpy(out, y->data, (size_t)(M * N) * sizeof(float));
    memcpy(out + M * N, x->grad, (size_t)(M * K) * sizeof(float));
    memcpy(out + M * N + M * K, w->grad, (size_t)(K * N) * sizeof(float));
    memcpy(out + M * N + M * K + K * N, b->grad, (size_t)N * sizeof(float));
    mg_ctx_free(ctx);
}

/* The fused op, forward and backward (its own backward, not the matmul's), 1 vs 2 threads. */
START_TEST(linear_bit_identical_across_thread_counts) {
    const int64_t M = 1000, K = 96, N = 200, n = M * N + M * K + K * N + N;
    const int keep = mg_get_num_threads();
    float *one = malloc((size_t)n * sizeof(float)), *two = malloc((size_t)n * sizeof(float));
    ck_assert(one && two);
    linear_run(1, one, M, K, N);
    linear_run(2, two, M, K, N);
    mg_set_num_threads(keep);
    ck_assert_msg(memcmp(one, two, (size_t)n * sizeof(float)) == 0,
                  "mg_linear forward and backward, 1 vs 2 threads: results differ bit for bit");
    free(one);
    free(two);
}
END_TEST

/* ---- errors the contracts in ops.h promise ---- */

START_TEST(contract_errors) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *w = mg_zeros(ctx, 2, (int64_t[]){11, 4});
    int32_t ids[6] = {0, 1, 2, 3, 1234, 5};
    mg_tensor *y = mg_embedding(ctx, w, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 3}, ids));
    expect_error(ctx, &c, 2, "mg_embedding", "1234");
    ck_assert_ptr_nonnull(y);
    /* sticky: later ops are harmless no-ops returning the placeholder */
    y = mg_softmax(ctx, w);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    ids[4] = -7;
    mg_embedding(ctx, w = mg_zeros(ctx, 2, (int64_t[]){11, 4}), mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){6}, ids));
    expect_error(ctx, &c, 2, "mg_embedding", "-7");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    int32_t t[3] = {0, 9, -1};
    mg_cross_entropy(ctx, mg_zeros(ctx, 2, (int64_t[]){3, 5}), mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){3}, t), -1);
    expect_error(ctx, &c, 2, "mg_cross_entropy", "9");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_rope(ctx, mg_zeros(ctx, 4, (int64_t[]){1, 2, 3, 5}), 0, 10000.0f);
    expect_error(ctx, &c, 2, "mg_rope", "5");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_matmul(ctx, mg_zeros(ctx, 3, (int64_t[]){2, 128, 256}), mg_zeros(ctx, 2, (int64_t[]){512, 256}));
    expect_error(ctx, &c, 3, "mg_matmul", "(2,128,256)", "(512,256)");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_reshape(ctx, mg_zeros(ctx, 2, (int64_t[]){6, 10}), 2, (int64_t[]){7, -1});
    expect_error(ctx, &c, 2, "mg_reshape", "(6,10)");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_reshape(ctx, mg_zeros(ctx, 2, (int64_t[]){6, 10}), 3, (int64_t[]){-1, -1, 10});
    expect_error(ctx, &c, 1, "mg_reshape");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_split_heads(ctx, mg_zeros(ctx, 3, (int64_t[]){2, 3, 18}), 4, 0, 6);
    expect_error(ctx, &c, 1, "mg_split_heads");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    mg_split_heads(ctx, mg_zeros(ctx, 3, (int64_t[]){2, 3, 18}), 2, 14, 6);
    expect_error(ctx, &c, 1, "mg_split_heads");
    mg_ctx_free(ctx);

    for (int k = 0; k < 3; k++) {
        const float bad_p[] = {1.0f, -0.1f, 0.5f};
        ctx = tu_trapping_ctx(&c, 0);
        mg_dropout(ctx, mg_zeros(ctx, 1, (int64_t[]){4}), bad_p[k], NULL); /* p = 0.5 with no generator */
        expect_error(ctx, &c, 1, "mg_dropout");
        mg_ctx_free(ctx);
    }

    ctx = tu_trapping_ctx(&c, 0);
    mg_add(ctx, mg_zeros(ctx, 2, (int64_t[]){3, 5}), mg_zeros(ctx, 1, (int64_t[]){3}));
    expect_error(ctx, &c, 3, "mg_add", "(3,5)", "(3)");
    mg_ctx_free(ctx);
}
END_TEST

/* One bad mg_linear, x (3, xk) (int32 when int_x) @ W (wk, wn) + b (bn; none when 0), on a fresh
 * context: the placeholder back, exactly one error naming w1, w2 and w3, and nothing new from a
 * second call (the context is sticky). */
static void expect_linear_error(int64_t xk, int64_t wk, int64_t wn, int64_t bn, bool int_x, const char *w1,
                                const char *w2, const char *w3) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *x = mg_tensor_new(ctx, int_x ? MG_I32 : MG_F32, 2, (int64_t[]){3, xk});
    mg_tensor *w = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){wk, wn});
    mg_tensor *b = bn ? mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){bn}) : NULL;
    mg_tensor *y = mg_linear(ctx, x, w, b);
    ck_assert_ptr_nonnull(y); /* the placeholder, never NULL */
    expect_error(ctx, &c, 3, w1, w2, w3);
    mg_linear(ctx, x, w, b);
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_free(ctx);
}

START_TEST(linear_contract_errors) {
    expect_linear_error(5, 4, 6, 0, false, "mg_linear", "x(3,5)", "weight(4,6)");
    expect_linear_error(5, 5, 6, 7, false, "mg_linear", "bias(7)", "must be (6)");
    expect_linear_error(5, 5, 6, 0, true, "mg_linear", "x(3,5)", "float32");
}
END_TEST

/* ---- rms_norm (layers helper) ---- */

static void ref_rms_norm(const float *x, int64_t R, int64_t C, const float *w, double eps, double *y) {
    for (int64_t i = 0; i < R; i++) {
        const float *row = x + i * C;
        double ms = 0.0;
        for (int64_t j = 0; j < C; j++) ms += (double)row[j] * row[j];
        double rstd = 1.0 / sqrt(ms / (double)C + eps);
        for (int64_t j = 0; j < C; j++) y[i * C + j] = row[j] * rstd * (w ? w[j] : 1.0);
    }
}

static void check_rms_norm(mg_ctx *ctx, mg_rng *r, mg_tensor *x, bool with_w, float eps, const char *what) {
    int64_t C = mg_cols(x);
    mg_tensor *w = with_w ? rand_f32(ctx, r, 1, (int64_t[]){C}, -1.5f, 1.5f) : NULL;
    mg_tensor *y = mg_rms_norm(ctx, x, w, eps);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_shape(y, x->ndim, x->shape);
    double *want = dbuf(x->numel);
    ref_rms_norm(x->data, mg_rows(x), C, w ? w->data : NULL, eps, want);
    char name[128];
    snprintf(name, sizeof name, "%s C=%lld%s eps %g", what, (long long)C, w ? " w" : "", (double)eps);
    expect_close(name, y->data, want, x->numel, 1e-5, 1e-5);
    free(want);
}

START_TEST(rms_norm_matches_formula) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(61);
    for (int i = 0; i < N_ODD; i++) {
        int64_t C = odd_sizes[i];
        for (int wb = 0; wb < 2; wb++) {
            check_rms_norm(ctx, &r, rand_f32(ctx, &r, 3, (int64_t[]){2, 17, C}, -2.0f, 3.0f), wb, 1e-6f, "rms_norm");
            check_rms_norm(ctx, &r, rand_f32(ctx, &r, 1, (int64_t[]){C}, -2.0f, 3.0f), wb, 1e-6f, "rms_norm 1 row");
            check_rms_norm(ctx, &r, rand_f32(ctx, &r, 4, (int64_t[]){1, 3, 1, C}, -2.0f, 3.0f), wb, 0.0f,
                           "rms_norm size-1 dims, eps 0");
        }
        check_rms_norm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){3, C}, -0.1f, 0.1f), true, 0.5f, "rms_norm eps 0.5");
    }
    check_rms_norm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){1031, 65}, -2.0f, 3.0f), true, 1e-5f, "rms_norm many rows");
    check_rms_norm(ctx, &r, rand_f32(ctx, &r, 2, (int64_t[]){2, 4099}, 1000.0f, 1001.0f), true, 1e-5f,
                   "rms_norm wide, offset 1000");
    /* a zero row stays zero when eps > 0 */
    mg_tensor *z = mg_zeros(ctx, 2, (int64_t[]){2, 5});
    mg_tensor *y = mg_rms_norm(ctx, z, NULL, 1e-6f);
    for (int j = 0; j < 10; j++) ck_assert_float_eq(y->data[j], 0.0f);
    mg_ctx_free(ctx);
}
END_TEST

/* Forward and both gradients bit-identical with 1 and 3 threads (rows split across threads, the
 * weight gradient reduced in a fixed order). */
START_TEST(rms_norm_bit_identical_across_thread_counts) {
    if (!mg_have_openmp()) return;
    int keep = mg_get_num_threads();
    enum { R = 700, C = 130 };
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        mg_set_num_threads(run ? 3 : 1);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_rng r = mg_rng_make(62);
        mg_tensor *x = rand_f32(ctx, &r, 2, (int64_t[]){R, C}, -2.0f, 2.0f);
        mg_tensor *w = rand_f32(ctx, &r, 1, (int64_t[]){C}, -1.0f, 1.0f);
        mg_tensor *g = rand_f32(ctx, &r, 2, (int64_t[]){R, C}, -1.0f, 1.0f);
        mg_tensor_set_requires_grad(x, true);
        mg_tensor_set_requires_grad(w, true);
        mg_tensor *y = mg_rms_norm(ctx, x, w, 1e-5f);
        mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, g)));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        const float *src[3] = {y->data, x->grad, w->grad};
        const int64_t n[3] = {R * C, R * C, C};
        for (int k = 0; k < 3; k++) {
            out[run][k] = malloc((size_t)n[k] * sizeof(float));
            memcpy(out[run][k], src[k], (size_t)n[k] * sizeof(float));
        }
        mg_ctx_free(ctx);
    }
    mg_set_num_threads(keep);
    const int64_t n[3] = {R * C, R * C, C};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(memcmp(out[0][k], out[1][k], (size_t)n[k] * sizeof(float)) == 0,
                      "rms_norm %s differs between 1 and 3 threads", k == 0 ? "output" : k == 1 ? "dx" : "dweight");
        free(out[0][k]);
        free(out[1][k]);
    }
}
END_TEST

START_TEST(rms_norm_errors) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_rms_norm(ctx, mg_zeros(ctx, 2, (int64_t[]){2, 8}), mg_zeros(ctx, 1, (int64_t[]){7}), 1e-5f);
    expect_error(ctx, &c, 4, "mg_rms_norm: ", "x(2,8)", "weight(7)", "must be (8)");
    mg_ctx_free(ctx);
    ctx = tu_trapping_ctx(&c, 0);
    mg_rms_norm(ctx, mg_zeros(ctx, 2, (int64_t[]){2, 8}), mg_zeros(ctx, 2, (int64_t[]){1, 8}), 1e-5f);
    expect_error(ctx, &c, 3, "mg_rms_norm: ", "weight(1,8)", "must be (8)");
    mg_ctx_free(ctx);
    ctx = tu_trapping_ctx(&c, 0);
    mg_rms_norm(ctx, mg_zeros(ctx, 2, (int64_t[]){3, 0}), NULL, 1e-5f);
    expect_error(ctx, &c, 2, "mg_rms_norm: ", "x(3,0) needs a non-empty last dim");
    mg_ctx_free(ctx);
    ctx = tu_trapping_ctx(&c, 0);
    mg_rms_norm(ctx, mg_zeros(ctx, 0, NULL), NULL, 1e-5f);
    expect_error(ctx, &c, 2, "mg_rms_norm: ", "x() needs a non-empty last dim");
    mg_ctx_free(ctx);
    const float bad_eps[] = {-1e-5f, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        ctx = tu_trapping_ctx(&c, 0);
        mg_rms_norm(ctx, mg_zeros(ctx, 2, (int64_t[]){2, 8}), NULL, bad_eps[k]);
        expect_error(ctx, &c, 2, "mg_rms_norm: eps ", "must be finite and >= 0");
        mg_ctx_free(ctx);
    }
    ctx = tu_trapping_ctx(&c, 0);
    mg_rms_norm(ctx, mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 8}), NULL, 1e-5f);
    expect_error(ctx, &c, 3, "mg_rms_norm: ", "x(2,8)", "float32");
    mg_ctx_free(ctx);
}
END_TEST

/* ---- coverage ---- */

/* Every op in ops.def, by its mg_op_def name, and the tests above that cover it. */
static const char *const covered[] = {
    "mg_matmul", "mg_matmul_nt", "mg_add",       "mg_mul",           "mg_scale",         "mg_gelu",
    "mg_softmax", "mg_layernorm", "mg_embedding", "mg_cross_entropy", "mg_reshape",       "mg_split_heads",
    "mg_merge_heads", "mg_attention", "mg_rope", "mg_dropout",       "mg_sum",           "mg_mean",      "mg_linear",
    /* elementwise ops: their forward tests are in test_ops_elem.c */
    "mg_sub", "mg_div", "mg_maximum", "mg_minimum", "mg_silu", "mg_exp", "mg_ln", "mg_sqrt", "mg_neg", "mg_abs",
    "mg_pow", "mg_clamp", "mg_where", "mg_masked_fill",
    /* forward tests in test_ops_shape.c */
    "mg_sum_dim", "mg_mean_dim", "mg_max_dim", "mg_logsumexp", "mg_softmax_dim", "mg_log_softmax", "mg_transpose",
    "mg_permute", "mg_index_select", "mg_bmm", "mg_mse_loss", "mg_nll_loss", "mg_cross_entropy_smooth",
    "mg_rms_norm", /* layers helper */
    /* recurrent-cell ops: their forward tests are in test_ops_seq.c */
    "mg_sigmoid", "mg_tanh", "mg_narrow", "mg_cat",
    /* forward tests in tests/test_ops_conv.c */
    "mg_relu", "mg_conv2d", "mg_conv1d", "mg_max_pool2d", "mg_avg_pool2d",
};

START_TEST(every_op_has_a_forward_test) {
    enum { NC = sizeof covered / sizeof covered[0] };
    ck_assert_int_ge(mg_op_count, 1);
    for (int i = 0; i < mg_op_count; i++) {
        bool found = false;
        for (int c = 0; c < NC && !found; c++) found = strcmp(covered[c], mg_op_table[i]->name) == 0;
        ck_assert_msg(found, "op %s has no forward test", mg_op_table[i]->name);
    }
    /* and no stale entry: everything listed here is a real op */
    for (int c = 0; c < NC; c++) {
        bool found = false;
        for (int i = 0; i < mg_op_count && !found; i++) found = strcmp(covered[c], mg_op_table[i]->name) == 0;
        ck_assert_msg(found, "forward test list names %s, which is not in ops.def", covered[c]);
    }
}
END_TEST

static Suite *forward_suite(void) {
    Suite *s = suite_create("ops_forward");
    TCase *tc = tcase_create("forward");
    tcase_add_loop_test(tc, matmul_2d_odd_sizes, 0, N_ODD);
    tcase_add_test(tc, matmul_batched);
    tcase_add_test(tc, linear_fused);
    tcase_add_test(tc, linear_matches_matmul_plus_add);
    tcase_add_test(tc, matmul_large_crosses_blocks);
    tcase_add_test(tc, matmul_every_isa);
    tcase_add_test(tc, add_mul_broadcasts);
    tcase_add_test(tc, scale_exact);
    tcase_add_test(tc, gelu_matches_formula);
    tcase_add_test(tc, gelu_extremes);
    tcase_add_test(tc, softmax_matches_formula);
    tcase_add_test(tc, softmax_large_logits);
    tcase_add_test(tc, layernorm_matches_formula);
    tcase_add_test(tc, layernorm_large_offset);
    tcase_add_test(tc, layernorm_constant_row);
    tcase_add_test(tc, embedding_gathers_rows);
    tcase_add_test(tc, cross_entropy_matches_formula);
    tcase_add_test(tc, cross_entropy_large_logits);
    tcase_add_test(tc, cross_entropy_extremes);
    tcase_add_test(tc, reshape_same_data);
    tcase_add_test(tc, split_merge_heads);
    tcase_add_loop_test(tc, attention_matches_reference, 0, N_ATTN);
    tcase_add_test(tc, rope_rotates_pairs);
    tcase_add_test(tc, dropout_mask_and_scaling);
    tcase_add_test(tc, dropout_p0_is_identity);
    tcase_add_test(tc, sum_mean_in_double);
    tcase_add_test(tc, forward_bit_identical_across_thread_counts);
    tcase_add_test(tc, linear_bit_identical_across_thread_counts);
    tcase_add_test(tc, contract_errors);
    tcase_add_test(tc, linear_contract_errors);
    tcase_add_test(tc, every_op_has_a_forward_test);
    tcase_add_test(tc, rms_norm_matches_formula);
    tcase_add_test(tc, rms_norm_bit_identical_across_thread_counts);
    tcase_add_test(tc, rms_norm_errors);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(forward_suite)
