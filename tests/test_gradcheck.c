/* The gradient checker itself (minigrad/gradcheck.h): it passes correct ops and a custom op written
 * with the public op API; it fails, naming the right tensor and element, on custom ops whose
 * backward is wrong in one element (of an input, of a parameter), leaves out an input, or gives a
 * NaN; the report's fields; the caller's inputs, parameters and parameter gradients bit for bit as
 * they were, on success, on failure and on an error mid-way; sampling; and every error path with
 * its message, never an abort. */
#include "gradcheck_assert.h"
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <string.h>

/* ---- custom ops with the public op API (minigrad/op.h) ----
 * y = x^3 * w elementwise (x and w of one shape). The correct backward, and wrong ones: one
 * element of dx doubled (BUG_X), one of dw (BUG_W), dw left out (NO_W), one dx NaN (NAN_X). */
enum { BUG_NONE, BUG_X, BUG_W, NO_W, NAN_X };

typedef struct {
    int bug;
    int64_t at; /* the element the bug hits */
} cube_cfg;

static void cube_backward(mg_ctx *ctx, mg_node *n) {
    const cube_cfg *cfg = n->user;
    mg_tensor *x = n->in[0], *w = n->in[1];
    const float *dy = n->out->grad;
    if (mg_requires_grad(x)) {
        float *dx = mg_grad(ctx, x);
        if (!dx) return;
        for (int64_t i = 0; i < x->numel; i++) {
            float g = 3.0f * x->data[i] * x->data[i] * w->data[i] * dy[i];
            if (i == cfg->at && cfg->bug == BUG_X) g *= 2.0f;
            if (i == cfg->at && cfg->bug == NAN_X) g = NAN;
            dx[i] += g;
        }
    }
    if (mg_requires_grad(w) && cfg->bug != NO_W) {
        float *dw = mg_grad(ctx, w);
        if (!dw) return;
        for (int64_t i = 0; i < w->numel; i++) {
            float g = x->data[i] * x->data[i] * x->data[i] * dy[i];
            dw[i] += i == cfg->at && cfg->bug == BUG_W ? g + 0.5f : g;
        }
    }
}

static const mg_op_def cube_def = {"test_cube_times", cube_backward};

static mg_tensor *cube_times(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, const cube_cfg *cfg) {
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!mg_same_shape(x, w)) {
        mg_ctx_fail(ctx, "test_cube_times: x and w differ in shape");
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "test_cube_times", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    for (int64_t i = 0; i < x->numel; i++) y->data[i] = x->data[i] * x->data[i] * x->data[i] * w->data[i];
    mg_node *n = mg_op_record(ctx, &cube_def, y, 2, (mg_tensor *[]){x, w});
    if (n) n->user = cfg;
    return y;
}

/* Both operands as inputs. */
static mg_tensor *cube_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    return cube_times(ctx, in[0], in[1], user);
}

/* x an input, w the parameter "fc.weight" of a store. */
typedef struct {
    cube_cfg cfg;
    mg_tensor *w;
    mg_tensor *x_fixed; /* not NULL: x is this constant, not an input */
} cube_param_run;

static mg_tensor *cube_param_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    cube_param_run *r = user;
    return cube_times(ctx, r->x_fixed ? r->x_fixed : in[0], r->w, &r->cfg);
}

static mg_tensor *rand_tensor(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, float lo, float hi) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, lo, hi);
    return t;
}

/* A copy of n floats, to compare bit for bit afterwards. */
static float *snapshot(const float *p, int64_t n) {
    float *c = malloc((size_t)n * sizeof(float) + 1);
    ck_assert_ptr_nonnull(c);
    memcpy(c, p, (size_t)n * sizeof(float));
    return c;
}

static void assert_bits_unchanged(const char *what, const float *now, float *before, int64_t n) {
    ck_assert_msg(memcmp(now, before, (size_t)n * sizeof(float)) == 0, "%s: the caller's data changed", what);
    free(before);
}

/* ---- correct ops pass ---- */

static mg_tensor *f_layernorm(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_layernorm(ctx, in[0], in[1], in[2], 1e-5f);
}
static mg_tensor *f_matmul_gelu(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_gelu(ctx, mg_matmul(ctx, in[0], in[1]), MG_GELU_TANH);
}
/* outputs that share the input's memory */
static mg_tensor *f_reshape(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_reshape(ctx, in[0], 2, (int64_t[]){-1, 2});
}
static mg_tensor *f_view_itself(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)ctx, (void)user;
    return in[0];
}
static mg_tensor *f_xent(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    return mg_cross_entropy(ctx, in[0], user, -1); /* targets through user */
}

START_TEST(passes_on_correct_ops) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(3);
    mg_gradcheck_report rep;

    mg_tensor *ln[3] = {rand_tensor(ctx, &r, 2, (int64_t[]){4, 9}, -1, 1), rand_tensor(ctx, &r, 1, (int64_t[]){9}, -1, 1),
                        rand_tensor(ctx, &r, 1, (int64_t[]){9}, -1, 1)};
    mg_gradcheck_opts o = mg_gradcheck_defaults();
    o.atol = 2e-3, o.rtol = 2e-2;
    ck_assert_msg(mg_gradcheck(f_layernorm, NULL, ln, 3, NULL, &o, &rep) == MG_OK, "%s", rep.message);
    ck_assert_int_eq(rep.checked, 36 + 9 + 9);
    ck_assert_int_eq(rep.failed, 0);
    ck_assert_int_eq(rep.tensors, 3);
    ck_assert(rep.worst_ratio >= 0.0 && rep.worst_ratio <= 1.0);
    ck_assert_msg(strstr(rep.message, "all 54 elements pass"), "%s", rep.message);

    mg_tensor *mm[2] = {rand_tensor(ctx, &r, 3, (int64_t[]){2, 3, 5}, -1, 1), rand_tensor(ctx, &r, 2, (int64_t[]){5, 4}, -1, 1)};
    ck_assert_msg(mg_gradcheck(f_matmul_gelu, NULL, mm, 2, NULL, NULL, &rep) == MG_OK, "%s", rep.message);
    ck_assert_int_eq(rep.checked, 30 + 20);

    /* an int32 input (targets) rides in user */
    mg_tensor *logits = rand_tensor(ctx, &r, 2, (int64_t[]){6, 7}, -2, 2);
    mg_tensor *tg = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++) tg->i32[i] = i % 7;
    ck_assert_int_eq(gc_assert_pass("cross entropy", f_xent, tg, &logits, 1, NULL, NULL), 42);

    /* an output that is the input's memory: its own view, or a reshape of it (exact: ratio 0) */
    ck_assert_msg(mg_gradcheck(f_reshape, NULL, mm, 1, NULL, NULL, &rep) == MG_OK, "%s", rep.message);
    ck_assert_int_eq(rep.checked, 30);
    ck_assert_double_eq(rep.max_abs_error, 0.0);
    ck_assert_msg(mg_gradcheck(f_view_itself, NULL, mm, 2, NULL, NULL, &rep) == MG_OK, "%s", rep.message);
    ck_assert_int_eq(rep.checked, 50);
    ck_assert_double_eq(rep.max_abs_error, 0.0);

    /* report and opts may both be NULL */
    ck_assert_int_eq(mg_gradcheck(f_matmul_gelu, NULL, mm, 2, NULL, NULL, NULL), MG_OK);
    mg_ctx_free(ctx);
}
END_TEST

/* The fn gets fresh views: new tensors over the caller's data, wanting a gradient. */
typedef struct {
    mg_tensor *caller;
    int calls, bad;
} view_probe;

static mg_tensor *probe_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    view_probe *p = user;
    p->calls++;
    if (in[0] == p->caller || in[0]->data != p->caller->data || !mg_requires_grad(in[0]) || in[0]->grad ||
        !mg_ctx_grad_enabled(ctx))
        p->bad++;
    return mg_gelu(ctx, in[0], MG_GELU_ERF);
}

START_TEST(custom_op_passes_and_fn_gets_fresh_views) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(4);
    mg_tensor *in[2] = {rand_tensor(ctx, &r, 2, (int64_t[]){3, 4}, -1, 1), rand_tensor(ctx, &r, 2, (int64_t[]){3, 4}, -1, 1)};
    cube_cfg ok = {BUG_NONE, -1};
    const int64_t tape = mg_ctx_tape_len(ctx), used = mg_ctx_used_bytes(ctx);
    ck_assert_int_eq(gc_assert_pass("x^3 w", cube_fn, &ok, in, 2, NULL, NULL), 24);
    /* nothing happened on the caller's context */
    ck_assert_int_eq(mg_ctx_tape_len(ctx), tape);
    ck_assert_int_eq((int64_t)mg_ctx_used_bytes(ctx), used);
    ck_assert_ptr_null(in[0]->grad);

    view_probe p = {in[0], 0, 0};
    ck_assert_int_eq(gc_assert_pass("gelu probe", probe_fn, &p, in, 1, NULL, NULL), 12);
    ck_assert_int_eq(p.calls, 1 + 2 * 12); /* the analytic pass, then two per element */
    ck_assert_int_eq(p.bad, 0);

    /* a caller's tensor need not live on any context */
    float xs[5] = {0.3f, -0.7f, 1.1f, 0.0f, 2.0f};
    mg_tensor loose = {.data = xs, .shape = {5}, .ndim = 1, .numel = 5, .dtype = MG_F32};
    mg_tensor *lp = &loose;
    p.caller = lp;
    ck_assert_int_eq(gc_assert_pass("loose tensor", probe_fn, &p, &lp, 1, NULL, NULL), 5);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- wrong backwards fail, naming the tensor and element ---- */

START_TEST(names_the_wrong_input_element) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(5);
    /* x away from 0 so that every dx is far from the tolerance */
    mg_tensor *in[2] = {rand_tensor(ctx, &r, 2, (int64_t[]){3, 4}, 0.5f, 1.5f),
                        rand_tensor(ctx, &r, 2, (int64_t[]){3, 4}, 0.5f, 1.5f)};
    /* the bug in x (input 0) at flat index 6 = [1,2]; then the same op with its operands swapped
     * so that the wrong tensor is input 1 */
    cube_cfg bug = {BUG_X, 6};
    float *x0 = snapshot(in[0]->data, 12), *w0 = snapshot(in[1]->data, 12);
    mg_gradcheck_report rep;
    ck_assert_int_eq(mg_gradcheck(cube_fn, &bug, in, 2, NULL, NULL, &rep), MG_ERR_INVALID);
    ck_assert_int_eq(rep.checked, 24);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_str_eq(rep.worst_tensor, "input 0");
    ck_assert_int_eq(rep.worst_index, 6);
    ck_assert_int_eq(rep.worst_ndim, 2);
    ck_assert_int_eq(rep.worst_coord[0], 1);
    ck_assert_int_eq(rep.worst_coord[1], 2);
    ck_assert(rep.worst_ratio > 1.0);
    /* the analytic value is twice the true one, the numeric one close to it */
    mg_rng rr = mg_rng_make(mg_gradcheck_defaults().seed);
    float R[12];
    for (int i = 0; i < 12; i++) R[i] = mg_rng_range(&rr, -1.0f, 1.0f);
    const double x = in[0]->data[6], w = in[1]->data[6], truth = 3.0 * x * x * w * R[6];
    ck_assert_msg(fabs(rep.worst_analytic - 2.0 * truth) <= 1e-5 * fabs(truth), "analytic %g, want %g",
                  rep.worst_analytic, 2.0 * truth);
    ck_assert_msg(fabs(rep.worst_numeric - truth) <= 1e-3 + 1e-2 * fabs(truth), "numeric %g, want %g", rep.worst_numeric,
                  truth);
    ck_assert_double_eq_tol(rep.worst_tolerance, 1e-3 + 1e-2 * fabs(rep.worst_numeric), 1e-12);
    ck_assert_double_eq_tol(rep.worst_ratio, fabs(rep.worst_analytic - rep.worst_numeric) / rep.worst_tolerance, 1e-9);
    ck_assert_msg(strstr(rep.message, "input 0[1,2]: analytic ") && strstr(rep.message, " vs numeric ") &&
                      strstr(rep.message, "1 of 24 elements fail"),
                  "%s", rep.message);
    ck_assert_str_eq(mg_last_error(), rep.message);
    assert_bits_unchanged("failing check, x", in[0]->data, x0, 12);
    assert_bits_unchanged("failing check, w", in[1]->data, w0, 12);

    /* a bug in dw: input 1, flat index 11 = [2,3] */
    cube_cfg bw = {BUG_W, 11};
    ck_assert_int_eq(mg_gradcheck(cube_fn, &bw, in, 2, NULL, NULL, &rep), MG_ERR_INVALID);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_str_eq(rep.worst_tensor, "input 1");
    ck_assert_int_eq(rep.worst_index, 11);
    ck_assert_msg(strstr(rep.message, "input 1[2,3]: "), "%s", rep.message);

    /* no gradient at all for input 1: every one of its elements fails, none of input 0's */
    cube_cfg nw = {NO_W, -1};
    ck_assert_int_eq(mg_gradcheck(cube_fn, &nw, in, 2, NULL, NULL, &rep), MG_ERR_INVALID);
    int want = 0; /* the elements whose true dw = x^3 R is over atol + rtol |dw| (all but tiny R) */
    for (int i = 0; i < 12; i++) {
        double d = fabs(pow(in[0]->data[i], 3) * R[i]);
        want += d > 1e-3 + 1e-2 * d;
    }
    ck_assert_int_ge(want, 8);
    ck_assert_int_eq(rep.failed, want);
    ck_assert_str_eq(rep.worst_tensor, "input 1");
    ck_assert_double_eq(rep.worst_analytic, 0.0);

    /* a NaN gradient fails its element, with an infinite ratio */
    cube_cfg nx = {NAN_X, 4};
    ck_assert_int_eq(mg_gradcheck(cube_fn, &nx, in, 2, NULL, NULL, &rep), MG_ERR_INVALID);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_int_eq(rep.worst_index, 4);
    ck_assert(isnan(rep.worst_analytic));
    ck_assert(isinf(rep.worst_ratio));
    ck_assert_msg(strstr(rep.message, "input 0[1,0]: analytic ") && strstr(rep.message, "nan vs numeric"), "%s",
                  rep.message);

    /* without a report the message is still the thread's error */
    ck_assert_int_eq(mg_gradcheck(cube_fn, &bug, in, 2, NULL, NULL, NULL), MG_ERR_INVALID);
    tu_assert_error_has("input 0[1,2]: analytic ");
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(names_the_wrong_parameter_element) {
    mg_params *P = mg_params_new();
    mg_tensor *w = mg_params_add(P, "fc.weight", 3, (int64_t[]){2, 3, 4}, mg_init_uniform(0.5f, 1.5f), 0);
    mg_tensor *b = mg_params_add(P, "fc.bias", 1, (int64_t[]){4}, mg_init_uniform(-1, 1), MG_NO_DECAY);
    ck_assert_ptr_nonnull(b);
    mg_rng r = mg_rng_make(6);
    TU_OK(mg_params_alloc(P, &r));
    /* sentinel gradients: the check must leave them as they are */
    float *g = mg_params_grad(P);
    for (int64_t i = 0; i < mg_params_slab_size(P); i++) g[i] = (float)i * 0.25f - 3.0f;
    float *g0 = snapshot(g, mg_params_slab_size(P)), *d0 = snapshot(mg_params_data(P), mg_params_slab_size(P));
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = rand_tensor(ctx, &r, 3, (int64_t[]){2, 3, 4}, 0.5f, 1.5f);
    float *x0 = snapshot(x->data, 24);

    cube_param_run run = {{BUG_W, 17}, w, NULL}; /* 17 = [1,1,1] */
    mg_gradcheck_report rep;
    ck_assert_int_eq(mg_gradcheck(cube_param_fn, &run, &x, 1, P, NULL, &rep), MG_ERR_INVALID);
    ck_assert_int_eq(rep.tensors, 3);         /* x, fc.weight, fc.bias (unused: zero both ways) */
    ck_assert_int_eq(rep.checked, 24 + 24 + 4);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_str_eq(rep.worst_tensor, "fc.weight");
    ck_assert_int_eq(rep.worst_index, 17);
    ck_assert_int_eq(rep.worst_ndim, 3);
    ck_assert_int_eq(rep.worst_coord[0], 1);
    ck_assert_int_eq(rep.worst_coord[1], 1);
    ck_assert_int_eq(rep.worst_coord[2], 1);
    ck_assert_msg(strstr(rep.message, "fc.weight[1,1,1]: analytic "), "%s", rep.message);
    ck_assert_msg(memcmp(g, g0, (size_t)mg_params_slab_size(P) * sizeof(float)) == 0, "parameter gradients changed");
    ck_assert_msg(memcmp(mg_params_data(P), d0, (size_t)mg_params_slab_size(P) * sizeof(float)) == 0,
                  "parameter values changed");

    /* correct: passes; a parameter that wants no gradient is not checked */
    run.cfg = (cube_cfg){BUG_NONE, -1};
    ck_assert_int_eq(gc_assert_pass("x^3 w with a parameter", cube_param_fn, &run, &x, 1, P, NULL), 52);
    b->flags &= ~(uint32_t)MG_REQUIRES_GRAD;
    ck_assert_int_eq(mg_gradcheck(cube_param_fn, &run, &x, 1, P, NULL, &rep), MG_OK);
    ck_assert_int_eq(rep.tensors, 2);
    ck_assert_int_eq(rep.checked, 48);
    /* parameters alone */
    run.x_fixed = x;
    ck_assert_int_eq(mg_gradcheck(cube_param_fn, &run, NULL, 0, P, NULL, &rep), MG_OK);
    ck_assert_int_eq(rep.checked, 24);
    ck_assert_int_eq(rep.tensors, 1);

    assert_bits_unchanged("parameter check, gradients", g, g0, mg_params_slab_size(P));
    assert_bits_unchanged("parameter check, values", mg_params_data(P), d0, mg_params_slab_size(P));
    assert_bits_unchanged("parameter check, x", x->data, x0, 24);
    mg_ctx_free(ctx);
    mg_params_free(P);
}
END_TEST

/* ---- the caller's data, bit for bit ---- */

/* y = x (through mg_scale by 1): the numeric derivative is exact (up to the division's rounding)
 * once the step actually taken is the denominator, even where eps is far below x's spacing. */
static mg_tensor *f_identity(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_scale(ctx, in[0], 1.0f);
}
static mg_tensor *f_square(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_mul(ctx, in[0], in[0]);
}

START_TEST(data_restored_bit_for_bit) {
    /* values whose x + eps - eps does not round back to x, signed zeros, a subnormal, huge ones */
    float xs[10] = {0.1f, -0.0f, 0.0f, 1e-40f, 1e8f, -3.3333333f, 0.7f, 1.0f / 3.0f, 16777215.0f, -1e-8f};
    uint32_t bits[10];
    memcpy(bits, xs, sizeof bits);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){10}, xs);
    mg_gradcheck_report rep;
    ck_assert_msg(mg_gradcheck(f_identity, NULL, &x, 1, NULL, NULL, &rep) == MG_OK, "%s", rep.message);
    ck_assert_msg(rep.max_abs_error <= 1e-12, "identity: max |error| %g: %s", rep.max_abs_error, rep.message);
    ck_assert_msg(memcmp(xs, bits, sizeof bits) == 0, "inputs changed by a passing check");
    /* a failing one: analytic of x*x through one view is 2x, but eps = 1 is far too big for 1e8 */
    mg_gradcheck_opts o = mg_gradcheck_defaults();
    o.eps = 5.0, o.atol = 0.0, o.rtol = 0.0;
    ck_assert_int_eq(mg_gradcheck(f_square, NULL, &x, 1, NULL, &o, &rep), MG_ERR_INVALID);
    ck_assert_msg(memcmp(xs, bits, sizeof bits) == 0, "inputs changed by a failing check");
    mg_ctx_free(ctx);
}
END_TEST

/* A forward that fails on its n-th call, to stop a check half-way. */
typedef struct {
    int calls, fail_at, how;
} flaky;
enum { FAIL_CTX, FAIL_NULL, FAIL_SHAPE };

static mg_tensor *flaky_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    flaky *f = user;
    if (++f->calls == f->fail_at) {
        if (f->how == FAIL_NULL) return NULL;
        if (f->how == FAIL_SHAPE) return mg_sum(ctx, in[0]);
        mg_ctx_fail(ctx, "flaky: failing on call %d", f->calls);
        return mg_ctx_dummy(ctx);
    }
    return mg_gelu(ctx, in[0], MG_GELU_TANH);
}

START_TEST(errors_mid_way_restore_and_report) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(8);
    mg_tensor *x = rand_tensor(ctx, &r, 2, (int64_t[]){2, 3}, -1, 1);
    float *x0;
    /* call 1 is the analytic pass; calls 2k and 2k+1 evaluate element k-1 moved up, then down */
    flaky f = {0, 9, FAIL_CTX}; /* element 3 = [1,0], moved down */
    x0 = snapshot(x->data, 6);
    TU_ASSERT_ERR(mg_gradcheck(flaky_fn, &f, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "mg_gradcheck: the forward failed with input 0[1,0] moved by -0.01: flaky: failing on call 9");
    assert_bits_unchanged("forward failing half-way", x->data, x0, 6);

    f = (flaky){0, 4, FAIL_NULL}; /* element 1, moved up */
    x0 = snapshot(x->data, 6);
    TU_ASSERT_ERR(mg_gradcheck(flaky_fn, &f, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "the forward returned NULL with input 0[0,1] moved by +0.01");
    assert_bits_unchanged("forward returning NULL half-way", x->data, x0, 6);

    f = (flaky){0, 5, FAIL_SHAPE};
    mg_gradcheck_report rep;
    TU_ASSERT_ERR(mg_gradcheck(flaky_fn, &f, &x, 1, NULL, NULL, &rep), MG_ERR_INVALID,
                  "the output changed shape from (2,3) to ()");
    ck_assert_str_eq(rep.message, mg_last_error());
    ck_assert_int_eq(rep.failed, 0);

    f = (flaky){0, 1, FAIL_CTX}; /* the analytic pass */
    TU_ASSERT_ERR(mg_gradcheck(flaky_fn, &f, &x, 1, NULL, NULL, &rep), MG_ERR_INVALID,
                  "the forward failed: flaky: failing on call 1");
    ck_assert_int_eq(rep.checked, 0);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- sampling ---- */

/* Records which element of input 0 each evaluation has moved (by comparing with a copy). */
typedef struct {
    const float *orig;
    int64_t n, moved[256];
    int calls;
} move_probe;

static mg_tensor *move_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    move_probe *p = user;
    int64_t at = -1;
    for (int64_t i = 0; i < p->n; i++)
        if (memcmp(&in[0]->data[i], &p->orig[i], sizeof(float)) != 0) at = i;
    if (p->calls < 256) p->moved[p->calls] = at;
    p->calls++;
    return mg_gelu(ctx, in[0], MG_GELU_TANH);
}

START_TEST(max_per_tensor_samples_evenly) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(9);
    mg_tensor *in[2] = {rand_tensor(ctx, &r, 2, (int64_t[]){10, 10}, 0.5f, 1.5f),
                        rand_tensor(ctx, &r, 2, (int64_t[]){10, 10}, 0.5f, 1.5f)};
    float *orig = snapshot(in[0]->data, 100);
    mg_gradcheck_opts o = mg_gradcheck_defaults();
    mg_gradcheck_report rep;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        o.max_per_tensor = 7, o.seed = seed;
        move_probe p = {orig, 100, {0}, 0};
        ck_assert_int_eq(mg_gradcheck(move_fn, &p, in, 1, NULL, &o, &rep), MG_OK);
        ck_assert_int_eq(rep.checked, 7);
        ck_assert_int_eq(p.calls, 1 + 2 * 7);
        ck_assert_int_eq(p.moved[0], -1); /* the analytic pass moves nothing */
        for (int k = 0; k < 7; k++) {
            /* element k moved up then down, one in each seventh of the tensor */
            int64_t at = p.moved[1 + 2 * k];
            ck_assert_int_eq(p.moved[2 + 2 * k], at);
            ck_assert_msg(at >= k * 100 / 7 && at < (k + 1) * 100 / 7 + 1, "seed %d: sample %d is element %lld",
                          (int)seed, k, (long long)at);
        }
        /* a bug in a sampled element is found; one in an element never sampled is not */
        cube_cfg bug = {BUG_X, p.moved[5]};
        ck_assert_int_eq(mg_gradcheck(cube_fn, &bug, in, 2, NULL, &o, &rep), MG_ERR_INVALID);
        ck_assert_int_eq(rep.checked, 14);
        ck_assert_int_eq(rep.worst_index, p.moved[5]);
        int64_t missed = 0;
        while (missed == p.moved[1] || missed == p.moved[3] || missed == p.moved[5] || missed == p.moved[7] ||
               missed == p.moved[9] || missed == p.moved[11] || missed == p.moved[13])
            missed++;
        bug.at = missed;
        ck_assert_int_eq(mg_gradcheck(cube_fn, &bug, in, 2, NULL, &o, &rep), MG_OK);
    }
    /* every element of a tensor no larger than the limit */
    o.max_per_tensor = 100;
    ck_assert_int_eq(mg_gradcheck(f_identity, NULL, in, 2, NULL, &o, &rep), MG_OK);
    ck_assert_int_eq(rep.checked, 200);
    assert_bits_unchanged("sampling", in[0]->data, orig, 100);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- errors: clear messages, nothing checked, no abort ---- */

static mg_tensor *f_constant(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)in, (void)user;
    return mg_scale(ctx, mg_zeros(ctx, 1, (int64_t[]){3}), 2.0f); /* built from nothing that wants a gradient */
}
static mg_tensor *f_caller_tensor(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)in;
    return mg_gelu(ctx, user, MG_GELU_TANH); /* the caller's tensor, not the view */
}
static mg_tensor *f_mismatch(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    return mg_matmul(ctx, in[0], in[0]); /* (2,3) @ (2,3) */
}
static mg_tensor *f_inf(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    mg_tensor *y = mg_scale(ctx, in[0], 1.0f);
    if (mg_ctx_ok(ctx)) y->data[1] = INFINITY;
    return y;
}
static const mg_op_def no_backward_def = {"test_no_backward", NULL};
static mg_tensor *f_no_backward(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)user;
    mg_tensor *y = mg_op_output(ctx, "test_no_backward", in[0]->ndim, in[0]->shape);
    if (!mg_ctx_ok(ctx)) return y;
    memcpy(y->data, in[0]->data, (size_t)y->numel * sizeof(float));
    mg_op_record(ctx, &no_backward_def, y, 1, (mg_tensor *[]){in[0]});
    return y;
}
static mg_tensor *f_int_output(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)in, (void)user;
    return mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){2});
}
static mg_tensor *f_empty(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)in, (void)user;
    return mg_zeros(ctx, 1, (int64_t[]){0});
}

START_TEST(error_paths) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(10);
    mg_tensor *x = rand_tensor(ctx, &r, 2, (int64_t[]){2, 3}, -1, 1);
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){3});
    mg_tensor *two[2] = {x, ids}, *nul[1] = {NULL};
    mg_gradcheck_report rep;
    float *x0 = snapshot(x->data, 6);

    TU_ASSERT_ERR(mg_gradcheck(NULL, NULL, &x, 1, NULL, NULL, &rep), MG_ERR_INVALID, "fn is NULL");
    ck_assert_int_eq(rep.checked, 0);
    ck_assert_str_eq(rep.message, mg_last_error());
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, -1, NULL, NULL, &rep), MG_ERR_INVALID, "n_inputs is -1");
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, NULL, 2, NULL, NULL, NULL), MG_ERR_INVALID,
                  "n_inputs is 2 but inputs is NULL");
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, nul, 1, NULL, NULL, NULL), MG_ERR_INVALID, "input 0 is NULL");
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, two, 2, NULL, NULL, &rep), MG_ERR_INVALID,
                  "input 1(3) is int32, not float32", "through `user`");
    ck_assert_int_eq(rep.checked, 0);
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, NULL, 0, NULL, NULL, NULL), MG_ERR_INVALID,
                  "nothing to check: no inputs and no parameter store");

    mg_gradcheck_opts o = mg_gradcheck_defaults();
    o.eps = 0.0;
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, 1, NULL, &o, NULL), MG_ERR_INVALID, "eps 0 must be finite and > 0");
    o = mg_gradcheck_defaults(), o.rtol = -1.0;
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, 1, NULL, &o, NULL), MG_ERR_INVALID, "rtol -1 must be finite");
    o = mg_gradcheck_defaults(), o.atol = NAN;
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, 1, NULL, &o, NULL), MG_ERR_INVALID, "atol nan");
    o = mg_gradcheck_defaults(), o.max_per_tensor = -3;
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, 1, NULL, &o, NULL), MG_ERR_INVALID, "max_per_tensor -3");

    mg_params *P = mg_params_new();
    mg_params_add(P, "w", 1, (int64_t[]){3}, mg_init_ones(), 0);
    TU_ASSERT_ERR(mg_gradcheck(f_identity, NULL, &x, 1, P, NULL, NULL), MG_ERR_INVALID,
                  "the parameter store is not allocated");
    mg_params_free(P);

    /* the forward's own failures */
    TU_ASSERT_ERR(mg_gradcheck(f_constant, NULL, &x, 1, NULL, NULL, &rep), MG_ERR_INVALID,
                  "the output(3) has no gradient path");
    ck_assert_str_eq(rep.message, mg_last_error());
    TU_ASSERT_ERR(mg_gradcheck(f_caller_tensor, x, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "the output(2,3) has no gradient path", "build it from the views");
    TU_ASSERT_ERR(mg_gradcheck(f_mismatch, NULL, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "mg_gradcheck: the forward failed: mg_matmul");
    TU_ASSERT_ERR(mg_gradcheck(f_no_backward, NULL, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "the backward failed: mg_backward: op 'test_no_backward' has no backward");
    TU_ASSERT_ERR(mg_gradcheck(f_inf, NULL, &x, 1, NULL, NULL, NULL), MG_ERR_NONFINITE,
                  "the output(2,3) is not finite at the unperturbed point: element [0,1] is inf");
    TU_ASSERT_ERR(mg_gradcheck(f_int_output, NULL, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID,
                  "returned an int32 tensor");
    TU_ASSERT_ERR(mg_gradcheck(f_empty, NULL, &x, 1, NULL, NULL, NULL), MG_ERR_INVALID, "has no elements");
    assert_bits_unchanged("error paths", x->data, x0, 6);
    mg_ctx_free(ctx);
}
END_TEST

/* The step actually taken is the denominator: near 1e8 float32's spacing is 8, far above eps. */
START_TEST(huge_values_use_the_step_taken) {
    float xs[3] = {1e8f, -2.5e9f, 3.0f};
    mg_tensor x = {.data = xs, .shape = {3}, .ndim = 1, .numel = 3, .dtype = MG_F32}, *xp = &x;
    mg_gradcheck_report rep;
    mg_gradcheck_opts o = mg_gradcheck_defaults();
    o.atol = 1e-6, o.rtol = 1e-6;
    ck_assert_msg(mg_gradcheck(f_identity, NULL, &xp, 1, NULL, &o, &rep) == MG_OK, "%s", rep.message);
    ck_assert_int_eq(rep.checked, 3);
}
END_TEST

static Suite *gradcheck_suite(void) {
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("checker");
    tcase_add_test(tc, passes_on_correct_ops);
    tcase_add_test(tc, custom_op_passes_and_fn_gets_fresh_views);
    tcase_add_test(tc, names_the_wrong_input_element);
    tcase_add_test(tc, names_the_wrong_parameter_element);
    tcase_add_test(tc, data_restored_bit_for_bit);
    tcase_add_test(tc, errors_mid_way_restore_and_report);
    tcase_add_test(tc, max_per_tensor_samples_evenly);
    tcase_add_test(tc, error_paths);
    tcase_add_test(tc, huge_values_use_the_step_taken);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(gradcheck_suite)
