/* Elementwise ops: unary (silu, exp, ln, sqrt, neg, abs, pow, clamp), binary with broadcasting
 * (add, sub, mul, div, maximum, minimum), where and masked_fill. Forward results and gradients
 * against double-precision loops written from the math in ops.h (not from core/ops/), on odd
 * shapes with size-1, missing, empty and broadcast dims; PyTorch 1.13's values at the special
 * points (signed zeros, infinities, NaN, ties, bounds; a gradient's -0 reads +0, as gradients
 * accumulate into buffers that start at +0); every error with its exact message; and
 * the same bits for 1 and 2 threads.
 *
 * Tolerances:
 *  - add, sub, mul, div, maximum, minimum, neg, abs, clamp, where, masked_fill forward: exact (one
 *    IEEE operation or a selection: the double result of float operands rounds to the float one).
 *  - exp, ln, sqrt, silu, pow forward: rtol 1e-6 (libm's float functions, a few roundings).
 *  - a gradient summed over broadcast dims: (n + 4) FLT_EPSILON sum |terms| over its n terms (the
 *    worst case of a float sum in any order; the general path sums in double and does better).
 *  - unary gradients: atol 2e-6 |dy|, rtol 1e-5 (a few float roundings of the derivative). */
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- shapes and the reference broadcasting ---- */

typedef struct {
    int ndim;
    int64_t d[MG_MAX_DIMS];
} shp;

#define SH(n, ...) ((shp){n, {__VA_ARGS__}})

static int64_t numel_of(shp s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.d[i];
    return n;
}

static shp shape_of(const mg_tensor *t) {
    shp s = {t->ndim, {0}};
    for (int i = 0; i < t->ndim; i++) s.d[i] = t->shape[i];
    return s;
}

/* The broadcast of a and b, written out plainly (the shapes here always broadcast). */
static shp bcast2(shp a, shp b) {
    shp o = {a.ndim > b.ndim ? a.ndim : b.ndim, {0}};
    for (int p = 1; p <= o.ndim; p++) {
        int64_t x = p <= a.ndim ? a.d[a.ndim - p] : 1, y = p <= b.ndim ? b.d[b.ndim - p] : 1;
        ck_assert_msg(x == y || x == 1 || y == 1, "test shapes do not broadcast");
        o.d[o.ndim - p] = x == 1 ? y : x;
    }
    return o;
}

/* Flat index into t (which broadcasts to out) of out's flat element o. */
static int64_t src_index(shp out, int64_t o, shp t) {
    int64_t idx[MG_MAX_DIMS];
    for (int i = out.ndim - 1; i >= 0; i--) idx[i] = o % out.d[i], o /= out.d[i];
    int64_t k = 0;
    for (int i = 0; i < t.ndim; i++) {
        const int64_t oi = idx[out.ndim - t.ndim + i];
        k = k * t.d[i] + (t.d[i] == 1 ? 0 : oi);
    }
    return k;
}

static mg_tensor *rand_t(mg_ctx *ctx, mg_rng *r, shp s, float lo, float hi) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, s.ndim, s.d);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, lo, hi);
    return t;
}

static char *shape_text(shp s, char *buf) {
    int n = sprintf(buf, "(");
    for (int i = 0; i < s.ndim; i++) n += sprintf(buf + n, i ? ",%lld" : "%lld", (long long)s.d[i]);
    sprintf(buf + n, ")");
    return buf;
}

static void expect_shape(const mg_tensor *t, shp s) {
    char b1[80], b2[80];
    bool same = t->ndim == s.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = t->shape[i] == s.d[i];
    ck_assert_msg(same, "output shape %s, want %s", mg_shape_str(t, b1, sizeof b1), shape_text(s, b2));
}

/* got and want are the same float: equal with the same sign, or both NaN. */
static bool same_float(float got, float want) {
    if (isnan(want)) return isnan(got);
    return got == want && signbit(got) == signbit(want);
}

/* The same value, zeros of either sign equal (gradients: a gradient buffer starts at +0 and
 * accumulates, so a -0 contribution reads +0). */
static bool same_value(float got, float want) { return isnan(want) ? isnan(got) : got == want; }

/* |got - want| <= tol per element (want in double). */
static void expect_within(const char *what, const float *got, const double *want, const double *tol, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= tol[i] && isfinite(got[i]), "%s: element %lld: got %.9g, want %.9g (tolerance %.3g)",
                      what, (long long)i, got[i], want[i], tol[i]);
    }
}

static double *dalloc(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Runs backward of sum(y * R) so that y's gradient is R. */
static void backward_with(mg_ctx *ctx, mg_tensor *y, const mg_tensor *R) {
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, (mg_tensor *)R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
}

/* ---- binary ops ---- */

typedef mg_tensor *(*bin_fn)(mg_ctx *, mg_tensor *, mg_tensor *);

typedef struct {
    const char *name;
    bin_fn fn;
    int kind; /* 0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min */
} bin_op;

static const bin_op bin_ops[] = {
    {"mg_add", mg_add, 0}, {"mg_sub", mg_sub, 1},         {"mg_mul", mg_mul, 2},
    {"mg_div", mg_div, 3}, {"mg_maximum", mg_maximum, 4}, {"mg_minimum", mg_minimum, 5},
};
enum { N_BIN = sizeof bin_ops / sizeof bin_ops[0] };

static double bin_ref(int kind, double x, double y) {
    switch (kind) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return x < y ? y : x;
    default: return x > y ? y : x;
    }
}

/* d out / d x (which 0) or d out / d y (which 1); random data has no ties. */
static double bin_deriv(int kind, int which, double x, double y) {
    switch (kind) {
    case 0: return 1.0;
    case 1: return which ? -1.0 : 1.0;
    case 2: return which ? x : y;
    case 3: return which ? -x / (y * y) : 1.0 / y;
    case 4: return (x > y) == !which ? 1.0 : 0.0;
    default: return (x < y) == !which ? 1.0 : 0.0;
    }
}

static const shp bin_shapes[][2] = {
    {SH(3, 3, 1, 5), SH(2, 4, 1)},       {SH(2, 4, 1), SH(3, 3, 1, 5)},    {SH(2, 2, 3), SH(2, 2, 3)},
    {SH(1, 17), SH(1, 1)},               {SH(1, 1), SH(1, 17)},            {SH(4, 2, 1, 3, 1), SH(4, 1, 4, 1, 5)},
    {SH(2, 65, 17), SH(1, 17)},          {SH(1, 17), SH(2, 65, 17)},       {SH(2, 1, 17), SH(2, 65, 1)},
    {SH(3, 3, 4, 5), SH(3, 3, 1, 5)},    {SH(0, 0), SH(2, 3, 2)},          {SH(2, 130, 1), SH(1, 1)},
    {SH(2, 0, 3), SH(2, 1, 3)},          {SH(3, 2, 1, 130), SH(3, 2, 65, 1)}, {SH(4, 1, 1, 1, 1), SH(0, 0)},
    {SH(3, 17, 1, 3), SH(2, 1, 3)},      {SH(2, 3, 1), SH(1, 1)},
};
enum { N_BIN_SHAPES = sizeof bin_shapes / sizeof bin_shapes[0] };

/* Every binary op on shape pair _i: forward exact, both gradients against the double sums. */
START_TEST(binary_broadcast_forward_and_backward) {
    const shp sa = bin_shapes[_i][0], sb = bin_shapes[_i][1], so = bcast2(sa, sb);
    const int64_t no = numel_of(so), na = numel_of(sa), nb = numel_of(sb);
    char what[200], t1[80], t2[80];
    for (int k = 0; k < N_BIN; k++) {
        const bin_op *op = &bin_ops[k];
        snprintf(what, sizeof what, "%s a%s b%s", op->name, shape_text(sa, t1), shape_text(sb, t2));
        mg_rng r = mg_rng_make(100 + (uint64_t)_i);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *a = rand_t(ctx, &r, sa, -1.0f, 1.0f), *b = rand_t(ctx, &r, sb, -1.0f, 1.0f);
        if (op->kind == 3) /* keep b away from 0 */
            for (int64_t i = 0; i < nb; i++) b->data[i] += b->data[i] < 0 ? -0.25f : 0.25f;
        mg_tensor *R = rand_t(ctx, &r, so, -1.0f, 1.0f);
        mg_tensor_set_requires_grad(a, true);
        mg_tensor_set_requires_grad(b, true);
        mg_tensor *y = op->fn(ctx, a, b);
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", what, mg_ctx_error(ctx));
        expect_shape(y, so);
        for (int64_t o = 0; o < no; o++) {
            const float x = a->data[src_index(so, o, sa)], z = b->data[src_index(so, o, sb)];
            const float want = (float)bin_ref(op->kind, x, z);
            ck_assert_msg(same_float(y->data[o], want), "%s: element %lld: %.9g, want %.9g", what, (long long)o,
                          y->data[o], want);
        }
        backward_with(ctx, y, R);
        double *ga = dalloc(na), *gb = dalloc(nb), *ta = dalloc(na), *tb = dalloc(nb);
        int64_t *ca = calloc((size_t)na + 1, sizeof *ca), *cb = calloc((size_t)nb + 1, sizeof *cb);
        for (int64_t o = 0; o < no; o++) {
            const int64_t ia = src_index(so, o, sa), ib = src_index(so, o, sb);
            const double x = a->data[ia], z = b->data[ib], g = R->data[o];
            const double da = g * bin_deriv(op->kind, 0, x, z), db = g * bin_deriv(op->kind, 1, x, z);
            ga[ia] += da, ta[ia] += fabs(da), ca[ia]++;
            gb[ib] += db, tb[ib] += fabs(db), cb[ib]++;
        }
        for (int64_t i = 0; i < na; i++) ta[i] = (double)(ca[i] + 4) * FLT_EPSILON * ta[i] + 1e-30;
        for (int64_t i = 0; i < nb; i++) tb[i] = (double)(cb[i] + 4) * FLT_EPSILON * tb[i] + 1e-30;
        if (na) {
            ck_assert_ptr_nonnull(a->grad);
            expect_within(what, a->grad, ga, ta, na);
        }
        if (nb) {
            ck_assert_ptr_nonnull(b->grad);
            expect_within(what, b->grad, gb, tb, nb);
        }
        free(ga), free(gb), free(ta), free(tb), free(ca), free(cb);
        mg_ctx_free(ctx);
    }
}
END_TEST

/* mg_add / mg_mul with the smaller operand first take the fast path with the operands swapped:
 * the same bits as the other order, forward and backward. */
START_TEST(add_mul_either_order_same_bits) {
    for (int mul = 0; mul < 2; mul++) {
        mg_rng r = mg_rng_make(7);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *big = rand_t(ctx, &r, SH(3, 2, 70, 17), -1, 1), *small = rand_t(ctx, &r, SH(2, 70, 17), -1, 1);
        mg_tensor *R = rand_t(ctx, &r, SH(3, 2, 70, 17), -1, 1);
        mg_tensor *big2 = rand_t(ctx, &r, SH(3, 2, 70, 17), -1, 1), *small2 = rand_t(ctx, &r, SH(2, 70, 17), -1, 1);
        memcpy(big2->data, big->data, (size_t)big->numel * 4);
        memcpy(small2->data, small->data, (size_t)small->numel * 4);
        mg_tensor *ts[4] = {big, small, big2, small2};
        for (int i = 0; i < 4; i++) mg_tensor_set_requires_grad(ts[i], true);
        mg_tensor *y1 = mul ? mg_mul(ctx, big, small) : mg_add(ctx, big, small);
        mg_tensor *y2 = mul ? mg_mul(ctx, small2, big2) : mg_add(ctx, small2, big2);
        expect_shape(y2, SH(3, 2, 70, 17));
        ck_assert(memcmp(y1->data, y2->data, (size_t)y1->numel * 4) == 0);
        backward_with(ctx, y1, R);
        backward_with(ctx, y2, R);
        ck_assert(memcmp(big->grad, big2->grad, (size_t)big->numel * 4) == 0);
        ck_assert(memcmp(small->grad, small2->grad, (size_t)small->numel * 4) == 0);
        mg_ctx_free(ctx);
    }
}
END_TEST

/* ---- unary ops ---- */

typedef struct {
    const char *name;
    int kind; /* 0 silu, 1 exp, 2 ln, 3 sqrt, 4 neg, 5 abs, 6 pow, 7 clamp */
    float lo, hi; /* input range */
    float p0, p1; /* exponent; clamp bounds */
    double rtol;  /* forward */
} un_case;

static const un_case un_cases[] = {
    {"mg_silu", 0, -12, 12, 0, 0, 1e-6},
    {"mg_exp", 1, -10, 10, 0, 0, 1e-6},
    {"mg_ln", 2, 0.01f, 4, 0, 0, 1e-6},
    {"mg_sqrt", 3, 0, 4, 0, 0, 1e-6},
    {"mg_neg", 4, -2, 2, 0, 0, 0},
    {"mg_abs", 5, -2, 2, 0, 0, 0},
    {"mg_pow 2", 6, -2, 2, 2, 0, 1e-6},
    {"mg_pow 3", 6, -2, 2, 3, 0, 1e-6},
    {"mg_pow -1", 6, 0.05f, 2, -1, 0, 1e-6},
    {"mg_pow -2", 6, -2, -0.05f, -2, 0, 1e-6},
    {"mg_pow 0.5", 6, 0, 3, 0.5f, 0, 1e-6},
    {"mg_pow -0.5", 6, 0.05f, 3, -0.5f, 0, 1e-6},
    {"mg_pow 2.5", 6, 0, 3, 2.5f, 0, 1e-6},
    {"mg_pow -1.5", 6, 0.05f, 3, -1.5f, 0, 1e-6},
    {"mg_pow 1", 6, -2, 2, 1, 0, 0},
    {"mg_pow 0", 6, -2, 2, 0, 0, 0},
    {"mg_clamp", 7, -2, 2, -0.5f, 0.7f, 0},
    {"mg_clamp no min", 7, -2, 2, -INFINITY, 0.3f, 0},
    {"mg_clamp no max", 7, -2, 2, -0.2f, INFINITY, 0},
    {"mg_clamp min > max", 7, -2, 2, 0.5f, -0.5f, 0},
};
enum { N_UN = sizeof un_cases / sizeof un_cases[0] };

static mg_tensor *un_apply(mg_ctx *ctx, const un_case *c, mg_tensor *x) {
    switch (c->kind) {
    case 0: return mg_silu(ctx, x);
    case 1: return mg_exp(ctx, x);
    case 2: return mg_ln(ctx, x);
    case 3: return mg_sqrt(ctx, x);
    case 4: return mg_neg(ctx, x);
    case 5: return mg_abs(ctx, x);
    case 6: return mg_pow(ctx, x, c->p0);
    default: return mg_clamp(ctx, x, c->p0, c->p1);
    }
}

/* y and dy/dx in double. */
static void un_ref(const un_case *c, double x, double *y, double *d) {
    const double p = c->p0;
    switch (c->kind) {
    case 0: {
        const double s = 1.0 / (1.0 + exp(-x));
        *y = x * s, *d = s * (1.0 + x * (1.0 - s));
        break;
    }
    case 1: *y = exp(x), *d = exp(x); break;
    case 2: *y = log(x), *d = 1.0 / x; break;
    case 3: *y = sqrt(x), *d = 0.5 / sqrt(x); break;
    case 4: *y = -x, *d = -1.0; break;
    case 5: *y = fabs(x), *d = x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; break;
    case 6: *y = pow(x, p), *d = p == 0 ? 0.0 : p * pow(x, p - 1); break;
    default: {
        const double lo = c->p0, hi = c->p1;
        *y = fmin(fmax(x, lo), hi), *d = x >= lo && x <= hi ? 1.0 : 0.0;
    }
    }
}

static const shp un_shapes[] = {SH(1, 1), SH(1, 3), SH(2, 17, 1), SH(3, 2, 1, 65), SH(1, 130), SH(0, 0), SH(2, 0, 5)};
enum { N_UN_SHAPES = sizeof un_shapes / sizeof un_shapes[0] };

START_TEST(unary_forward_and_backward) {
    const un_case *c = &un_cases[_i];
    for (int s = 0; s < N_UN_SHAPES; s++) {
        mg_rng r = mg_rng_make(200 + (uint64_t)_i * 16 + (uint64_t)s);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *x = rand_t(ctx, &r, un_shapes[s], c->lo, c->hi), *R = rand_t(ctx, &r, un_shapes[s], -1, 1);
        if (c->kind == 3 && x->numel > 0) x->data[0] = 1e-3f; /* sqrt: near 0, gradient large */
        mg_tensor_set_requires_grad(x, true);
        mg_tensor *y = un_apply(ctx, c, x);
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
        expect_shape(y, un_shapes[s]);
        const int64_t n = x->numel;
        double *want = dalloc(n), *tol = dalloc(n), *dwant = dalloc(n), *dtol = dalloc(n);
        for (int64_t i = 0; i < n; i++) {
            double yv, dv;
            un_ref(c, x->data[i], &yv, &dv);
            want[i] = yv, tol[i] = c->rtol * fabs(yv);
            dwant[i] = R->data[i] * dv, dtol[i] = 2e-6 * fabs(R->data[i]) + 1e-5 * fabs(dwant[i]);
        }
        char what[120], t1[80];
        snprintf(what, sizeof what, "%s x%s forward", c->name, shape_text(un_shapes[s], t1));
        if (c->rtol == 0)
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(same_float(y->data[i], (float)want[i]), "%s: element %lld: %.9g, want %.9g", what,
                              (long long)i, y->data[i], want[i]);
        else
            expect_within(what, y->data, want, tol, n);
        backward_with(ctx, y, R);
        snprintf(what, sizeof what, "%s x%s gradient", c->name, shape_text(un_shapes[s], t1));
        if (n) expect_within(what, x->grad, dwant, dtol, n);
        free(want), free(tol), free(dwant), free(dtol);
        mg_ctx_free(ctx);
    }
}
END_TEST

/* ---- PyTorch 1.13's values at the special points ---- */

/* y = f(x) and the gradient of sum(y) for 5 given inputs, against the recorded values. */
typedef struct {
    const char *what;
    int kind;
    float p0, p1;
    float x[5], y[5], g[5];
} special_case;

START_TEST(unary_special_values_as_pytorch) {
    const float nan = NAN, inf = INFINITY;
    const special_case cases[] = {
        {"abs", 5, 0, 0, {-1, 0, 1, nan, -0.0f}, {1, 0, 1, nan, 0}, {-1, 0, 1, 0, 0}},
        {"clamp(-1, 1)", 7, -1, 1, {-1, 0, 1, nan, -0.0f}, {-1, 0, 1, nan, -0.0f}, {1, 1, 1, 0, 1}},
        {"clamp(-inf, 0)", 7, -inf, 0, {-1, 0, 1, nan, -0.0f}, {-1, 0, 0, nan, -0.0f}, {1, 1, 0, 0, 1}},
        {"clamp(2, 1)", 7, 2, 1, {0.5f, 3, -1, 1.5f, nan}, {1, 1, 1, 1, nan}, {0, 0, 0, 0, 0}},
        {"pow 0.5", 6, 0.5f, 0, {0, -0.0f, 4, -1, -inf}, {0, -0.0f, 2, nan, nan}, {inf, -inf, 0.25f, nan, nan}},
        {"pow 0", 6, 0, 0, {0, -0.0f, 4, -1, -inf}, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}},
        {"pow 2", 6, 2, 0, {0, -0.0f, 4, -1, -inf}, {0, 0, 16, 1, inf}, {0, -0.0f, 8, -2, -inf}},
        {"pow -1", 6, -1, 0, {0, -0.0f, 4, -1, -inf}, {inf, -inf, 0.25f, -1, -0.0f}, {-inf, -inf, -0.0625f, -1, -0.0f}},
        {"sqrt", 3, 0, 0, {0, -0.0f, 4, -1, -inf}, {0, -0.0f, 2, nan, nan}, {inf, -inf, 0.25f, nan, nan}},
        {"ln", 2, 0, 0, {0, -0.0f, 1, -1, -inf}, {-inf, -inf, 0, nan, nan}, {inf, -inf, 1, -1, -0.0f}},
        {"exp", 1, 0, 0, {0, -inf, inf, nan, 1}, {1, 0, inf, nan, expf(1)}, {1, 0, inf, nan, expf(1)}},
        {"neg", 4, 0, 0, {0, -0.0f, inf, nan, 1}, {-0.0f, 0, -inf, nan, -1}, {-1, -1, -1, -1, -1}},
        {"silu", 0, 0, 0, {-100, 0, 100, nan, -inf}, {-0.0f, 0, 100, nan, nan}, {-0.0f, 0.5f, 1, nan, nan}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const special_case *c = &cases[k];
        const un_case uc = {c->what, c->kind, 0, 0, c->p0, c->p1, 0};
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *x = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){5});
        memcpy(x->data, c->x, sizeof c->x);
        mg_tensor_set_requires_grad(x, true);
        mg_tensor *y = un_apply(ctx, &uc, x);
        mg_backward(ctx, mg_sum(ctx, y));
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->what, mg_ctx_error(ctx));
        for (int i = 0; i < 5; i++) {
            ck_assert_msg(same_float(y->data[i], c->y[i]), "%s(%g): %g, want %g", c->what, c->x[i], y->data[i], c->y[i]);
            ck_assert_msg(same_value(x->grad[i], c->g[i]), "%s'(%g): %g, want %g", c->what, c->x[i], x->grad[i], c->g[i]);
        }
        mg_ctx_free(ctx);
    }
}
END_TEST

/* maximum / minimum: NaN from either side, signed zeros, and ties splitting the gradient in half;
 * div at 0 (values recorded from PyTorch 1.13). */
START_TEST(binary_special_values_as_pytorch) {
    const float nan = NAN, inf = INFINITY;
    const struct {
        const char *what;
        bin_fn fn;
        float a[5], b[5], y[5], ga[5], gb[5];
    } cases[] = {
        {"maximum", mg_maximum, {1, 2, 3, nan, 0}, {1, 1, 4, 1, -0.0f}, {1, 2, 4, nan, 0}, {0.5f, 1, 0, 1, 0.5f},
         {0.5f, 0, 1, 1, 0.5f}},
        {"minimum", mg_minimum, {1, 2, 3, nan, 0}, {1, 1, 4, 1, -0.0f}, {1, 1, 3, nan, 0}, {0.5f, 0, 1, 1, 0.5f},
         {0.5f, 1, 0, 1, 0.5f}},
        {"maximum signed zeros", mg_maximum, {-0.0f, 0, 1, nan, -inf}, {0, -0.0f, nan, nan, -inf}, {-0.0f, 0, nan, nan, -inf},
         {0.5f, 0.5f, 1, 1, 0.5f}, {0.5f, 0.5f, 1, 1, 0.5f}},
        {"minimum signed zeros", mg_minimum, {-0.0f, 0, 1, nan, inf}, {0, -0.0f, nan, nan, inf}, {-0.0f, 0, nan, nan, inf},
         {0.5f, 0.5f, 1, 1, 0.5f}, {0.5f, 0.5f, 1, 1, 0.5f}},
        {"div", mg_div, {1, 0, 0, 1, -1}, {0, 0, 2, inf, 4}, {inf, nan, 0, 0, -0.25f}, {inf, inf, 0.5f, 0, 0.25f},
         {-inf, nan, -0.0f, -0.0f, 0.0625f}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *a = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){5}), *b = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){5});
        memcpy(a->data, cases[k].a, sizeof cases[k].a);
        memcpy(b->data, cases[k].b, sizeof cases[k].b);
        mg_tensor_set_requires_grad(a, true);
        mg_tensor_set_requires_grad(b, true);
        mg_tensor *y = cases[k].fn(ctx, a, b);
        mg_backward(ctx, mg_sum(ctx, y));
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", cases[k].what, mg_ctx_error(ctx));
        for (int i = 0; i < 5; i++) {
            ck_assert_msg(same_float(y->data[i], cases[k].y[i]), "%s(%g, %g): %g, want %g", cases[k].what,
                          cases[k].a[i], cases[k].b[i], y->data[i], cases[k].y[i]);
            ck_assert_msg(same_value(a->grad[i], cases[k].ga[i]) && same_value(b->grad[i], cases[k].gb[i]),
                          "%s(%g, %g): gradients %g, %g, want %g, %g", cases[k].what, cases[k].a[i], cases[k].b[i],
                          a->grad[i], b->grad[i], cases[k].ga[i], cases[k].gb[i]);
        }
        mg_ctx_free(ctx);
    }
    /* a tie against a broadcast operand: each of the 4 ties gives b half of its gradient */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *a = mg_zeros(ctx, 2, (int64_t[]){4, 3}), *b = mg_zeros(ctx, 1, (int64_t[]){1});
    mg_tensor_set_requires_grad(a, true);
    mg_tensor_set_requires_grad(b, true);
    for (int i = 0; i < 12; i++) a->data[i] = (float)(i % 3) - 1.0f; /* -1, 0, 1 per row */
    mg_backward(ctx, mg_sum(ctx, mg_maximum(ctx, a, b)));
    ck_assert_float_eq(b->grad[0], 4 * 0.5f + 4 * 1.0f);
    for (int i = 0; i < 12; i++) ck_assert_float_eq(a->grad[i], i % 3 == 0 ? 0.0f : i % 3 == 1 ? 0.5f : 1.0f);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- where and masked_fill ---- */

/* A condition of shape s: int32 values in {-3, 0, 1}, or float32 values in {0, -0, 1.5, NaN}
 * (NaN is nonzero: true). */
static mg_tensor *rand_cond(mg_ctx *ctx, mg_rng *r, shp s, bool f32) {
    mg_tensor *t = mg_tensor_new(ctx, f32 ? MG_F32 : MG_I32, s.ndim, s.d);
    for (int64_t i = 0; i < t->numel; i++) {
        const uint32_t v = mg_rng_below(r, 4);
        if (f32)
            t->data[i] = v == 0 ? 0.0f : v == 1 ? -0.0f : v == 2 ? 1.5f : NAN;
        else
            t->i32[i] = v == 0 ? -3 : v == 3 ? 1 : 0;
    }
    return t;
}

static bool cond_at(const mg_tensor *t, int64_t i) { return t->dtype == MG_I32 ? t->i32[i] != 0 : t->data[i] != 0.0f; }

static const shp sel_shapes[][3] = {
    {SH(2, 3, 5), SH(2, 3, 5), SH(2, 3, 5)}, {SH(2, 4, 1), SH(3, 3, 1, 5), SH(1, 5)},
    {SH(3, 3, 1, 5), SH(2, 4, 1), SH(0, 0)}, {SH(1, 1), SH(2, 65, 17), SH(2, 65, 1)},
    {SH(2, 130, 1), SH(1, 1), SH(2, 1, 3)},  {SH(2, 0, 1), SH(1, 4), SH(1, 1)},
};
enum { N_SEL = sizeof sel_shapes / sizeof sel_shapes[0] };

/* mg_where(cond, x, y) and mg_masked_fill(x, mask = cond, 2.5) on shape triple _i, both
 * condition dtypes: forward exact, gradients against the double sums. */
START_TEST(where_masked_fill_broadcast) {
    const shp sc = sel_shapes[_i][0], sx = sel_shapes[_i][1], sy = sel_shapes[_i][2];
    for (int f32 = 0; f32 < 2; f32++)
        for (int fill = 0; fill < 2; fill++) {
            const shp so = fill ? bcast2(sx, sc) : bcast2(bcast2(sc, sx), sy);
            mg_rng r = mg_rng_make(300 + (uint64_t)_i);
            mg_ctx *ctx = mg_ctx_new(0);
            mg_tensor *c = rand_cond(ctx, &r, sc, f32);
            mg_tensor *x = rand_t(ctx, &r, sx, -1, 1), *y = rand_t(ctx, &r, sy, -1, 1), *R = rand_t(ctx, &r, so, -1, 1);
            mg_tensor_set_requires_grad(x, true);
            mg_tensor_set_requires_grad(y, true);
            mg_tensor *out = fill ? mg_masked_fill(ctx, x, c, 2.5f) : mg_where(ctx, c, x, y);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            expect_shape(out, so);
            const int64_t no = numel_of(so), nx = x->numel, ny = y->numel;
            double *gx = dalloc(nx), *gy = dalloc(ny), *tx = dalloc(nx), *ty = dalloc(ny);
            for (int64_t o = 0; o < no; o++) {
                const bool t = cond_at(c, src_index(so, o, sc));
                const int64_t ix = src_index(so, o, sx), iy = fill ? 0 : src_index(so, o, sy);
                const float want = fill ? (t ? 2.5f : x->data[ix]) : (t ? x->data[ix] : y->data[iy]);
                ck_assert_msg(same_float(out->data[o], want), "%s, %s cond: element %lld: %g, want %g",
                              fill ? "mg_masked_fill" : "mg_where", f32 ? "float32" : "int32", (long long)o,
                              out->data[o], want);
                const bool to_x = fill ? !t : t; /* where the gradient goes */
                if (to_x) gx[ix] += R->data[o], tx[ix] += fabs(R->data[o]) * FLT_EPSILON;
                if (!fill && !t) gy[iy] += R->data[o], ty[iy] += fabs(R->data[o]) * FLT_EPSILON;
            }
            backward_with(ctx, out, R);
            /* the sum over at most 130*17 terms: tolerance (n + 4) eps sum|terms| with n <= no */
            for (int64_t i = 0; i < nx; i++) tx[i] = tx[i] * (double)(no + 4) + 1e-30;
            for (int64_t i = 0; i < ny; i++) ty[i] = ty[i] * (double)(no + 4) + 1e-30;
            ck_assert_ptr_nonnull(x->grad);
            if (nx) expect_within(fill ? "mg_masked_fill dx" : "mg_where dx", x->grad, gx, tx, nx);
            if (!fill && ny) expect_within("mg_where dy", y->grad, gy, ty, ny);
            free(gx), free(gy), free(tx), free(ty);
            mg_ctx_free(ctx);
        }
}
END_TEST

/* ---- errors ---- */

/* One bad call on a fresh trapping context: the placeholder back, exactly `want` as the message,
 * and nothing new from a second call (the context is sticky). */
typedef mg_tensor *(*bad_call)(mg_ctx *ctx, int which);

static void expect_message(bad_call call, int which, const char *want) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *y = call(ctx, which);
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(c.calls == 1, "case %d (%s): %d handler calls", which, want, c.calls);
    ck_assert_str_eq(c.msg, want);
    call(ctx, which);
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_free(ctx);
}

static mg_tensor *z(mg_ctx *ctx, shp s) { return mg_zeros(ctx, s.ndim, s.d); }
static mg_tensor *zi(mg_ctx *ctx, shp s) {
    mg_tensor *t = mg_tensor_new(ctx, MG_I32, s.ndim, s.d);
    if (mg_ctx_ok(ctx)) memset(t->i32, 0, (size_t)t->numel * 4);
    return t;
}

static mg_tensor *bad_binary(mg_ctx *ctx, int which) {
    const bin_fn fn = bin_ops[which % N_BIN].fn;
    switch (which / N_BIN) {
    case 0: return fn(ctx, z(ctx, SH(2, 2, 3)), z(ctx, SH(1, 4)));
    case 1: return fn(ctx, z(ctx, SH(3, 2, 3, 4)), z(ctx, SH(3, 5, 1, 4)));
    case 2: return fn(ctx, z(ctx, SH(2, 0, 3)), z(ctx, SH(2, 2, 3)));
    case 3: return fn(ctx, zi(ctx, SH(2, 2, 3)), z(ctx, SH(1, 3)));
    default: return fn(ctx, z(ctx, SH(2, 2, 3)), zi(ctx, SH(1, 3)));
    }
}

START_TEST(binary_errors) {
    char want[200];
    for (int k = 0; k < N_BIN; k++) {
        const char *op = bin_ops[k].name;
        snprintf(want, sizeof want, "%s: a(2,3) and b(4) cannot broadcast: dim -1 is 3 vs 4", op);
        expect_message(bad_binary, k, want);
        snprintf(want, sizeof want, "%s: a(2,3,4) and b(5,1,4) cannot broadcast: dim -3 is 2 vs 5", op);
        expect_message(bad_binary, N_BIN + k, want);
        snprintf(want, sizeof want, "%s: a(0,3) and b(2,3) cannot broadcast: dim -2 is 0 vs 2", op);
        expect_message(bad_binary, 2 * N_BIN + k, want);
        snprintf(want, sizeof want, "%s: a(2,3) must be float32 (got int32 ids)", op);
        expect_message(bad_binary, 3 * N_BIN + k, want);
        snprintf(want, sizeof want, "%s: b(3) must be float32 (got int32 ids)", op);
        expect_message(bad_binary, 4 * N_BIN + k, want);
    }
}
END_TEST

static mg_tensor *bad_unary(mg_ctx *ctx, int which) {
    if (which == N_UN) return mg_clamp(ctx, z(ctx, SH(2, 2, 3)), NAN, 1.0f);
    if (which == N_UN + 1) return mg_clamp(ctx, z(ctx, SH(1, 4)), -INFINITY, NAN);
    return un_apply(ctx, &un_cases[which], zi(ctx, SH(2, 2, 3)));
}

START_TEST(unary_errors) {
    char want[200];
    for (int k = 0; k < N_UN; k++) {
        char name[32];
        sscanf(un_cases[k].name, "%31s", name);
        snprintf(want, sizeof want, "%s: x(2,3) must be float32 (got int32 ids)", name);
        expect_message(bad_unary, k, want);
    }
    expect_message(bad_unary, N_UN,
                   "mg_clamp: x(2,3): bounds min nan, max 1 must not be NaN (use -INFINITY / INFINITY for no bound)");
    expect_message(bad_unary, N_UN + 1,
                   "mg_clamp: x(4): bounds min -inf, max nan must not be NaN (use -INFINITY / INFINITY for no bound)");
}
END_TEST

static mg_tensor *bad_select(mg_ctx *ctx, int which) {
    switch (which) {
    case 0: return mg_where(ctx, z(ctx, SH(2, 2, 3)), z(ctx, SH(1, 3)), z(ctx, SH(1, 4)));
    case 1: return mg_where(ctx, zi(ctx, SH(1, 1)), z(ctx, SH(2, 2, 3)), z(ctx, SH(2, 3, 2)));
    case 2: return mg_where(ctx, zi(ctx, SH(2, 4, 3)), z(ctx, SH(2, 2, 3)), z(ctx, SH(1, 3)));
    case 3: return mg_where(ctx, zi(ctx, SH(1, 2)), zi(ctx, SH(1, 2)), z(ctx, SH(1, 2)));
    case 4: return mg_where(ctx, zi(ctx, SH(1, 2)), z(ctx, SH(1, 2)), zi(ctx, SH(1, 2)));
    case 5: return mg_masked_fill(ctx, z(ctx, SH(2, 3, 4)), zi(ctx, SH(1, 3)), 0.0f);
    case 6: return mg_masked_fill(ctx, z(ctx, SH(3, 2, 1, 4)), z(ctx, SH(3, 3, 5, 1)), 0.0f);
    default: return mg_masked_fill(ctx, zi(ctx, SH(2, 3, 4)), zi(ctx, SH(1, 4)), 0.0f);
    }
}

START_TEST(select_errors) {
    const char *want[] = {
        "mg_where: cond(2,3) and y(4) cannot broadcast: dim -1 is 3 vs 4",
        "mg_where: x(2,3) and y(3,2) cannot broadcast: dim -1 is 3 vs 2",
        "mg_where: cond(4,3) and x(2,3) cannot broadcast: dim -2 is 4 vs 2",
        "mg_where: x(2) must be float32 (got int32 ids)",
        "mg_where: y(2) must be float32 (got int32 ids)",
        "mg_masked_fill: x(3,4) and mask(3) cannot broadcast: dim -1 is 4 vs 3",
        "mg_masked_fill: x(2,1,4) and mask(3,5,1) cannot broadcast: dim -3 is 2 vs 3",
        "mg_masked_fill: x(3,4) must be float32 (got int32 ids)",
    };
    for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++) expect_message(bad_select, k, want[k]);
}
END_TEST

/* ---- the same bits for any thread count ---- */

/* Forward and both gradients of each op on large broadcasts: a (40,1,200) with b (60,1), out
 * (40,60,200); and b (3000) or a scalar against a (100,3000), whose reductions run in chunks.
 * Returns everything in one malloc'ed buffer of *n floats. */
static float *run_large(int threads, int64_t *n) {
    mg_set_num_threads(threads);
    mg_rng r = mg_rng_make(42);
    mg_ctx *ctx = mg_ctx_new(0);
    float *dst = NULL;
    *n = 0;
    const shp pairs[][2] = {{SH(3, 40, 1, 200), SH(2, 60, 1)}, {SH(2, 100, 3000), SH(1, 3000)}, {SH(2, 100, 3000), SH(0, 0)}};
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < N_BIN + 2; k++) {
            mg_ctx_reset(ctx);
            mg_tensor *a = rand_t(ctx, &r, pairs[p][0], -1, 1), *b = rand_t(ctx, &r, pairs[p][1], 0.5f, 1.5f);
            mg_tensor_set_requires_grad(a, true);
            mg_tensor_set_requires_grad(b, true);
            mg_tensor *y;
            if (k < N_BIN) {
                y = bin_ops[k].fn(ctx, a, b);
            } else {
                mg_tensor *c = rand_cond(ctx, &r, pairs[p][1], k == N_BIN);
                y = k == N_BIN ? mg_where(ctx, c, a, b) : mg_masked_fill(ctx, mg_silu(ctx, a), c, -1.0f);
            }
            mg_tensor *R = rand_t(ctx, &r, shape_of(y), -1, 1);
            backward_with(ctx, y, R);
            const int64_t add = y->numel + a->numel + b->numel;
            dst = realloc(dst, (size_t)(*n + add) * sizeof(float));
            ck_assert_ptr_nonnull(dst);
            float *d = dst + *n;
            memcpy(d, y->data, (size_t)y->numel * 4);
            memcpy(d + y->numel, a->grad, (size_t)a->numel * 4);
            if (b->grad) /* masked_fill does not use b */
                memcpy(d + y->numel + a->numel, b->grad, (size_t)b->numel * 4);
            else
                memset(d + y->numel + a->numel, 0, (size_t)b->numel * 4);
            *n += add;
        }
    mg_ctx_free(ctx);
    return dst;
}

START_TEST(large_broadcast_bit_identical_across_thread_counts) {
    const int keep = mg_get_num_threads();
    int64_t n1, n2;
    float *one = run_large(1, &n1), *two = run_large(2, &n2);
    mg_set_num_threads(keep);
    ck_assert_int_eq(n1, n2);
    ck_assert_msg(memcmp(one, two, (size_t)n1 * sizeof(float)) == 0,
                  "elementwise ops on large broadcasts, 1 vs 2 threads: results differ bit for bit");
    free(one);
    free(two);
}
END_TEST

/* mg_log names both torch.log (first argument a context) and the logger (first argument a level). */
static int logged;
static void count_log(mg_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == MG_LOG_WARN && strcmp(msg, "seven 7") == 0) logged++;
}
START_TEST(log_is_the_op_and_the_logger) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){3});
    x->data[0] = 1.0f, x->data[1] = 2.0f, x->data[2] = 0.5f;
    mg_tensor *a = mg_log(ctx, x), *b = mg_ln(ctx, x);
    ck_assert_ptr_null(mg_ctx_error(ctx));
    ck_assert_mem_eq(a->data, b->data, 3 * sizeof(float));
    ck_assert_float_eq_tol(a->data[1], (float)log(2.0), 1e-7f);
    logged = 0;
    mg_log_set(count_log, NULL);
    mg_log(MG_LOG_WARN, "seven %d", 7);
    mg_log_set(NULL, NULL);
    ck_assert_int_eq(logged, 1);
    mg_ctx_free(ctx);
}
END_TEST

static Suite *elem_suite(void) {
    Suite *s = suite_create("ops_elem");
    TCase *tc = tcase_create("elementwise");
    tcase_add_loop_test(tc, binary_broadcast_forward_and_backward, 0, N_BIN_SHAPES);
    tcase_add_test(tc, add_mul_either_order_same_bits);
    tcase_add_loop_test(tc, unary_forward_and_backward, 0, N_UN);
    tcase_add_test(tc, unary_special_values_as_pytorch);
    tcase_add_test(tc, binary_special_values_as_pytorch);
    tcase_add_loop_test(tc, where_masked_fill_broadcast, 0, N_SEL);
    tcase_add_test(tc, binary_errors);
    tcase_add_test(tc, unary_errors);
    tcase_add_test(tc, select_errors);
    tcase_add_test(tc, log_is_the_op_and_the_logger);
    tcase_add_test(tc, large_broadcast_bit_identical_across_thread_counts);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(elem_suite)
