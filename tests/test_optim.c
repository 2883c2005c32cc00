/* Optimizers, clipping, the LR schedule and the parameter store, against references written in
 * double from the formulas in optim.h and params.h.
 *
 * Tolerances: parameters after several AdamW/SGD steps within 2e-6 absolute + 1e-5 relative of the
 * double reference (each float32 step rounds p, m and v once or twice); optimizer state within
 * 1e-5 relative; the clipping norm within 1e-6 relative of a long double sum (it is summed in
 * double and rounded once to float); the schedule within 1e-6 relative. */
#include "harness.h"
#include "minigrad/minigrad.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- a small store used by several tests ---- */

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    uint32_t flags;
} pdecl;

static const pdecl decls[] = {
    {"w", 2, {3, 17}, 0},
    {"b", 1, {17}, MG_NO_DECAY},
    {"big", 1, {130}, 0},
    {"e", 2, {65, 3}, MG_NO_DECAY},
    {"one", 1, {1}, 0},
};
enum { ND = sizeof decls / sizeof decls[0] };

static mg_params *make_store(uint64_t seed) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_nonnull(P);
    for (int i = 0; i < ND; i++)
        ck_assert_ptr_nonnull(mg_params_add(P, decls[i].name, decls[i].ndim, decls[i].shape,
                                            mg_init_uniform(-1.0f, 1.0f), decls[i].flags));
    mg_rng r = mg_rng_make(seed);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    return P;
}

/* Deterministic gradients for step s; a few exact zeros (decay must still apply to them). */
static void fill_grads(mg_params *P, int s) {
    mg_rng r = mg_rng_make(1000 + (uint64_t)s);
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *t = mg_params_at(P, k);
        for (int64_t i = 0; i < t->numel; i++) t->grad[i] = (i % 7 == 3) ? 0.0f : mg_rng_range(&r, -2.0f, 2.0f);
    }
}

/* The double reference: p, m, v per element of the store (in declaration order). */
typedef struct {
    double *p, *m, *v;
    int64_t n;
} ref_state;

static ref_state ref_from(const mg_params *P) {
    ref_state s = {.n = mg_params_numel(P)};
    s.p = calloc((size_t)s.n, sizeof(double));
    s.m = calloc((size_t)s.n, sizeof(double));
    s.v = calloc((size_t)s.n, sizeof(double));
    ck_assert(s.p && s.m && s.v);
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *t = mg_params_at(P, k);
        for (int64_t i = 0; i < t->numel; i++) s.p[j++] = t->data[i];
    }
    return s;
}

static void ref_free(ref_state *s) {
    free(s->p);
    free(s->m);
    free(s->v);
}

/* AdamW as optim.h writes it, in double (betas and eps as the float32 values the library gets). */
static void ref_adamw_step(ref_state *s, const mg_params *P, mg_adamw_cfg c, double lr, int64_t t) {
    double b1 = c.beta1, b2 = c.beta2, eps = c.eps;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *tn = mg_params_at(P, k);
        double wd = (tn->flags & MG_NO_DECAY) ? 0.0 : (double)c.weight_decay;
        for (int64_t i = 0; i < tn->numel; i++, j++) {
            double g = tn->grad[i];
            s->m[j] = b1 * s->m[j] + (1.0 - b1) * g;
            s->v[j] = b2 * s->v[j] + (1.0 - b2) * g * g;
            double mh = s->m[j] / bc1, vh = s->v[j] / bc2;
            s->p[j] -= lr * (mh / (sqrt(vh) + eps) + wd * s->p[j]);
        }
    }
}

/* SGD with momentum, PyTorch semantics: d = g + wd p; buf = d on the first step, mu buf + d after. */
static void ref_sgd_step(ref_state *s, const mg_params *P, double mu, double wd_all, double lr, int64_t t) {
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *tn = mg_params_at(P, k);
        double wd = (tn->flags & MG_NO_DECAY) ? 0.0 : wd_all;
        for (int64_t i = 0; i < tn->numel; i++, j++) {
            double d = tn->grad[i] + wd * s->p[j];
            s->m[j] = t == 1 ? d : mu * s->m[j] + d;
            s->p[j] -= lr * s->m[j];
        }
    }
}

static void expect_params(const char *what, int step, const mg_params *P, const double *want, double atol,
                          double rtol) {
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *t = mg_params_at(P, k);
        for (int64_t i = 0; i < t->numel; i++, j++)
            ck_assert_msg(fabs(t->data[i] - want[j]) <= atol + rtol * fabs(want[j]),
                          "%s step %d: %s[%lld] = %.9g, want %.9g", what, step, t->name, (long long)i, t->data[i],
                          want[j]);
    }
}

/* State slab `slot` at each parameter's offset against want (in declaration order). atol: the
 * moments are sums of terms up to that size that may cancel. */
static void expect_state(const char *what, const mg_optim *o, const mg_params *P, int slot, const double *want,
                         double atol, double rtol) {
    const float *st = mg_optim_state(o, slot);
    ck_assert_ptr_nonnull(st);
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        const float *s = st + mg_params_offset(P, k);
        for (int64_t i = 0; i < mg_params_at(P, k)->numel; i++, j++)
            ck_assert_msg(fabs(s[i] - want[j]) <= atol + rtol * fabs(want[j]), "%s slot %d, %s[%lld] = %.9g, want %.9g",
                          what, slot, mg_params_at(P, k)->name, (long long)i, s[i], want[j]);
    }
}

static const float lrs[] = {1e-2f, 5e-3f, 2e-2f, 1e-3f, 1e-2f, 3e-2f, 7e-3f};
enum { NSTEPS = sizeof lrs / sizeof lrs[0] };

/* ---- AdamW ---- */

START_TEST(adamw_defaults) {
    mg_adamw_cfg c = mg_adamw_defaults();
    ck_assert_float_eq(c.beta1, 0.9f);
    ck_assert_float_eq(c.beta2, 0.999f);
    ck_assert_float_eq(c.eps, 1e-8f);
    ck_assert_float_eq(c.weight_decay, 0.01f);
}
END_TEST

static void run_adamw_against_reference(mg_adamw_cfg cfg, const char *what) {
    mg_params *P = make_store(1);
    mg_optim *o = mg_adamw_new(P, cfg);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(mg_optim_steps(o), 0);
    ref_state s = ref_from(P);
    for (int step = 1; step <= NSTEPS; step++) {
        fill_grads(P, step);
        ref_adamw_step(&s, P, cfg, lrs[step - 1], step);
        mg_optim_step(o, lrs[step - 1]);
        ck_assert_int_eq(mg_optim_steps(o), step);
        expect_params(what, step, P, s.p, 2e-6, 1e-5);
    }
    expect_state(what, o, P, 0, s.m, 2e-6, 1e-5); /* |g| <= 2 */
    expect_state(what, o, P, 1, s.v, 4e-6, 1e-5); /* g^2 <= 4 */
    ref_free(&s);
    mg_optim_free(o);
    mg_params_free(P);
}

START_TEST(adamw_matches_reference) {
    run_adamw_against_reference(mg_adamw_defaults(), "adamw defaults");
    run_adamw_against_reference((mg_adamw_cfg){0.8f, 0.95f, 1e-6f, 0.1f}, "adamw b(0.8,0.95) wd 0.1");
    run_adamw_against_reference((mg_adamw_cfg){0.9f, 0.999f, 1e-8f, 0.0f}, "adam (wd 0)");
    run_adamw_against_reference((mg_adamw_cfg){0.0f, 0.5f, 1e-3f, 0.5f}, "adamw b1 0");
}
END_TEST

/* Step 1 with m = v = 0: the bias-corrected update is lr * g / (|g| + eps), i.e. lr * sign(g). */
START_TEST(adamw_bias_correction_first_step) {
    mg_params *P = make_store(2);
    mg_optim *o = mg_adamw_new(P, (mg_adamw_cfg){0.9f, 0.999f, 1e-8f, 0.0f});
    mg_tensor *w = mg_params_find(P, "w");
    fill_grads(P, 1);
    float before[51];
    memcpy(before, w->data, sizeof before);
    mg_optim_step(o, 0.1f);
    for (int i = 0; i < 51; i++) {
        float g = w->grad[i], want = g > 0 ? before[i] - 0.1f : g < 0 ? before[i] + 0.1f : before[i];
        ck_assert_msg(fabsf(w->data[i] - want) <= 2e-6f, "w[%d]: %.9g -> %.9g with g %g, want %.9g", i, before[i],
                      w->data[i], g, want);
    }
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* Decoupled decay: with zero gradients the moments stay 0 and p shrinks by exactly (1 - lr wd) per
 * step, except MG_NO_DECAY parameters, which do not move at all. */
START_TEST(adamw_decoupled_decay_and_no_decay) {
    mg_params *P = make_store(3);
    ref_state s = ref_from(P);
    mg_optim *o = mg_adamw_new(P, (mg_adamw_cfg){0.9f, 0.999f, 1e-8f, 0.5f});
    mg_params_zero_grad(P);
    for (int step = 1; step <= 3; step++) mg_optim_step(o, 0.1f);
    int64_t j = 0;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *t = mg_params_at(P, k);
        bool decays = !(t->flags & MG_NO_DECAY);
        for (int64_t i = 0; i < t->numel; i++, j++) {
            double want = decays ? s.p[j] * pow(1.0 - 0.1 * 0.5, 3) : s.p[j];
            ck_assert_msg(fabs(t->data[i] - want) <= 1e-6 * fabs(want) + 1e-12, "%s[%lld]: %.9g, want %.9g", t->name,
                          (long long)i, t->data[i], want);
            if (!decays) ck_assert(t->data[i] == (float)s.p[j]);
        }
    }
    /* the flags the test relies on */
    ck_assert(mg_params_find(P, "b")->flags & MG_NO_DECAY);
    ck_assert(!(mg_params_find(P, "w")->flags & MG_NO_DECAY));
    ref_free(&s);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* weight_decay 0 is Adam: a decayed and an undecayed parameter with the same values and gradients
 * end up identical. */
START_TEST(adamw_wd0_is_adam) {
    mg_params *P = mg_params_new();
    mg_tensor *a = mg_params_add(P, "a", 1, (int64_t[]){33}, mg_init_zeros(), 0);
    mg_tensor *b = mg_params_add(P, "b", 1, (int64_t[]){33}, mg_init_zeros(), MG_NO_DECAY);
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    mg_rng r = mg_rng_make(4);
    for (int i = 0; i < 33; i++) a->data[i] = b->data[i] = mg_rng_range(&r, -1.0f, 1.0f);
    mg_optim *o = mg_adamw_new(P, (mg_adamw_cfg){0.9f, 0.99f, 1e-8f, 0.0f});
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < 33; i++) a->grad[i] = b->grad[i] = mg_rng_range(&r, -1.0f, 1.0f);
        mg_optim_step(o, 0.05f);
    }
    ck_assert(memcmp(a->data, b->data, sizeof(float) * 33) == 0);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* ---- SGD ---- */

static void run_sgd_against_reference(float mu, float wd, const char *what) {
    mg_params *P = make_store(5);
    mg_optim *o = mg_sgd_new(P, mu, wd);
    ck_assert_ptr_nonnull(o);
    ref_state s = ref_from(P);
    for (int step = 1; step <= NSTEPS; step++) {
        fill_grads(P, step);
        ref_sgd_step(&s, P, mu, wd, lrs[step - 1], step);
        mg_optim_step(o, lrs[step - 1]);
        expect_params(what, step, P, s.p, 2e-6, 1e-5);
        if (mu != 0.0f) expect_state(what, o, P, 0, s.m, 2e-5, 1e-5); /* |buf| <= 2 / (1 - mu) + wd |p| */
    }
    ck_assert_int_eq(mg_optim_steps(o), NSTEPS);
    ref_free(&s);
    mg_optim_free(o);
    mg_params_free(P);
}

START_TEST(sgd_matches_reference) {
    run_sgd_against_reference(0.9f, 0.0f, "sgd momentum 0.9");
    run_sgd_against_reference(0.9f, 0.05f, "sgd momentum 0.9 wd 0.05");
    run_sgd_against_reference(0.0f, 0.0f, "plain sgd");
    run_sgd_against_reference(0.5f, 0.1f, "sgd momentum 0.5 wd 0.1");
}
END_TEST

/* PyTorch: the first step sets buf = g (not (1 - mu) g, not mu * 0 + g scaled): p moves by lr g. */
START_TEST(sgd_first_step_buf_is_grad) {
    mg_params *P = make_store(6);
    mg_optim *o = mg_sgd_new(P, 0.9f, 0.0f);
    fill_grads(P, 1);
    mg_tensor *w = mg_params_find(P, "w");
    float before[51];
    memcpy(before, w->data, sizeof before);
    mg_optim_step(o, 0.5f);
    const float *buf = mg_optim_state(o, 0) + mg_params_offset(P, 0);
    for (int i = 0; i < 51; i++) {
        ck_assert_float_eq(buf[i], w->grad[i]);
        ck_assert_float_eq_tol(w->data[i], before[i] - 0.5f * w->grad[i], 1e-6f);
    }
    /* second step: buf = 0.9 g1 + g2 */
    float g1[51];
    memcpy(g1, w->grad, sizeof g1);
    fill_grads(P, 2);
    mg_optim_step(o, 0.5f);
    for (int i = 0; i < 51; i++) ck_assert_float_eq_tol(buf[i], 0.9f * g1[i] + w->grad[i], 1e-6f);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* ---- optimizer state, steps, resumption ---- */

START_TEST(optim_state_access) {
    mg_params *P = make_store(7);
    mg_optim *a = mg_adamw_new(P, mg_adamw_defaults()), *s = mg_sgd_new(P, 0.9f, 0.0f);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(mg_optim_name(a), "adamw");
    ck_assert_str_eq(mg_optim_name(s), "sgd");
    ck_assert_int_eq(mg_optim_state_slots(a), 2);
    ck_assert_int_eq(mg_optim_state_slots(s), 1);
    ck_assert_ptr_nonnull(mg_optim_state(a, 0));
    ck_assert_ptr_nonnull(mg_optim_state(a, 1));
    ck_assert_ptr_ne(mg_optim_state(a, 0), mg_optim_state(a, 1));
    ck_assert_ptr_nonnull(mg_optim_state(s, 0));
    ck_assert_ptr_null(mg_optim_state(s, 1));
    ck_assert_ptr_null(mg_optim_state(a, 2));
    ck_assert_ptr_null(mg_optim_state(a, -1));
    /* fresh state is zero over the whole slab, and writable (a checkpoint restores into it) */
    int64_t n = mg_params_slab_size(P);
    for (int slot = 0; slot < 2; slot++) {
        float *st = mg_optim_state(a, slot);
        for (int64_t i = 0; i < n; i++) ck_assert_float_eq(st[i], 0.0f);
        st[n - 1] = 1.0f, st[n - 1] = 0.0f;
    }
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(mg_optim_state(s, 0)[i], 0.0f);
    mg_optim_free(a);
    mg_optim_free(s);
    mg_params_free(P);
}
END_TEST

/* A checkpoint restore (values, both state slabs, the step count) continues bit for bit; without the
 * step count the bias correction differs. */
START_TEST(optim_resume_with_set_steps) {
    mg_adamw_cfg cfg = {0.9f, 0.95f, 1e-8f, 0.1f};
    mg_params *P1 = make_store(8), *P2 = make_store(99), *P3 = make_store(98);
    mg_optim *o1 = mg_adamw_new(P1, cfg);
    for (int step = 1; step <= 3; step++) {
        fill_grads(P1, step);
        mg_optim_step(o1, lrs[step - 1]);
    }
    int64_t n = mg_params_slab_size(P1);
    ck_assert_int_eq(mg_params_slab_size(P2), n);
    mg_optim *o2 = mg_adamw_new(P2, cfg), *o3 = mg_adamw_new(P3, cfg);
    memcpy(mg_params_data(P2), mg_params_data(P1), sizeof(float) * (size_t)n);
    memcpy(mg_params_data(P3), mg_params_data(P1), sizeof(float) * (size_t)n);
    for (int slot = 0; slot < 2; slot++) {
        memcpy(mg_optim_state(o2, slot), mg_optim_state(o1, slot), sizeof(float) * (size_t)n);
        memcpy(mg_optim_state(o3, slot), mg_optim_state(o1, slot), sizeof(float) * (size_t)n);
    }
    mg_optim_set_steps(o2, mg_optim_steps(o1));
    ck_assert_int_eq(mg_optim_steps(o2), 3);
    for (int step = 4; step <= NSTEPS; step++) {
        fill_grads(P1, step);
        fill_grads(P2, step);
        fill_grads(P3, step);
        mg_optim_step(o1, lrs[step - 1]);
        mg_optim_step(o2, lrs[step - 1]);
        mg_optim_step(o3, lrs[step - 1]);
    }
    ck_assert_int_eq(mg_optim_steps(o2), NSTEPS);
    ck_assert_int_eq(mg_optim_steps(o3), NSTEPS - 3);
    ck_assert(memcmp(mg_params_data(P1), mg_params_data(P2), sizeof(float) * (size_t)n) == 0);
    for (int slot = 0; slot < 2; slot++)
        ck_assert(memcmp(mg_optim_state(o1, slot), mg_optim_state(o2, slot), sizeof(float) * (size_t)n) == 0);
    ck_assert(memcmp(mg_params_data(P1), mg_params_data(P3), sizeof(float) * (size_t)n) != 0);
    mg_optim_free(o1);
    mg_optim_free(o2);
    mg_optim_free(o3);
    mg_params_free(P1);
    mg_params_free(P2);
    mg_params_free(P3);
}
END_TEST

START_TEST(optim_needs_allocated_store) {
    mg_params *P = mg_params_new();
    mg_params_add(P, "w", 1, (int64_t[]){4}, mg_init_zeros(), 0);
    mg_clear_error();
    ck_assert_ptr_null(mg_adamw_new(P, mg_adamw_defaults()));
    ck_assert_msg(strstr(mg_last_error(), "alloc") != NULL, "message: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_sgd_new(P, 0.9f, 0.0f));
    ck_assert_msg(strstr(mg_last_error(), "alloc") != NULL, "message: %s", mg_last_error());
    mg_optim_free(NULL);
    mg_params_free(P);
}
END_TEST

static void expect_refused(mg_optim *o, const char *want) {
    ck_assert_ptr_null(o);
    ck_assert_msg(strstr(mg_last_error(), want) != NULL, "want '%s' in: %s", want, mg_last_error());
}

/* Settings outside their ranges (the ones mg_train_run checks in its cfg) are refused with a message
 * naming the setting; so is a NULL store. */
START_TEST(optim_settings_are_checked) {
    mg_params *P = make_store(3);
    mg_adamw_cfg c = mg_adamw_defaults();
    c.beta1 = 2;
    expect_refused(mg_adamw_new(P, c), "mg_adamw_new: beta1 must lie in [0, 1), got 2");
    c = mg_adamw_defaults();
    c.beta2 = NAN;
    expect_refused(mg_adamw_new(P, c), "mg_adamw_new: beta2 must lie in [0, 1), got nan");
    c = mg_adamw_defaults();
    c.eps = -1;
    expect_refused(mg_adamw_new(P, c), "mg_adamw_new: eps must be positive and finite, got -1");
    c.eps = 0;
    expect_refused(mg_adamw_new(P, c), "eps must be positive and finite, got 0");
    c = mg_adamw_defaults();
    c.weight_decay = -0.5f;
    expect_refused(mg_adamw_new(P, c), "mg_adamw_new: weight_decay must lie in [0, inf), got -0.5");
    expect_refused(mg_sgd_new(P, -1.0f, 0.0f), "mg_sgd_new: momentum must lie in [0, inf), got -1");
    expect_refused(mg_sgd_new(P, 0.9f, -1.0f), "mg_sgd_new: weight_decay must lie in [0, inf), got -1");
    expect_refused(mg_sgd_new(P, INFINITY, 0.0f), "momentum must lie in [0, inf), got inf");
    expect_refused(mg_adamw_new(NULL, mg_adamw_defaults()), "not allocated");
    mg_clear_error();
    /* the edges of the ranges are accepted */
    mg_optim *o = mg_adamw_new(P, (mg_adamw_cfg){0.0f, 0.0f, 1e-30f, 0.0f});
    ck_assert_ptr_nonnull(o);
    mg_optim_free(o);
    o = mg_sgd_new(P, 0.0f, 0.0f);
    ck_assert_ptr_nonnull(o);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* A learning rate that is NaN, infinite or negative, and a negative step count, change nothing and
 * leave a message (the two functions return nothing). */
START_TEST(optim_step_and_set_steps_refuse_bad_values) {
    mg_params *P = make_store(4);
    mg_optim *o = mg_adamw_new(P, mg_adamw_defaults());
    int64_t n = mg_params_slab_size(P);
    fill_grads(P, 1);
    mg_optim_step(o, 1e-2f);
    float *before = malloc(sizeof(float) * (size_t)n);
    memcpy(before, mg_params_data(P), sizeof(float) * (size_t)n);
    const float bad[] = {NAN, INFINITY, -1e-3f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mg_clear_error();
        mg_optim_step(o, bad[i]);
        ck_assert_msg(strstr(mg_last_error(), "mg_optim_step: lr must be finite and at least 0") != NULL, "%s",
                      mg_last_error());
        ck_assert_int_eq(mg_optim_steps(o), 1);
        ck_assert(memcmp(before, mg_params_data(P), sizeof(float) * (size_t)n) == 0);
    }
    mg_clear_error();
    mg_optim_set_steps(o, -5);
    ck_assert_msg(strstr(mg_last_error(), "mg_optim_set_steps: the step count must be at least 0, got -5 (kept at 1)"),
                  "%s", mg_last_error());
    ck_assert_int_eq(mg_optim_steps(o), 1);
    mg_optim_step(o, 1e-2f); /* the next step is an ordinary second step: finite */
    for (int64_t i = 0; i < n; i++) ck_assert(isfinite(mg_params_data(P)[i]));
    mg_optim_set_steps(o, 0);
    ck_assert_int_eq(mg_optim_steps(o), 0);
    free(before);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* ---- gradient clipping ---- */

static mg_params *grad_store(int64_t n1, int64_t n2, int64_t n3) {
    mg_params *P = mg_params_new();
    mg_params_add(P, "a", 1, (int64_t[]){n1}, mg_init_zeros(), 0);
    mg_params_add(P, "b", 1, (int64_t[]){n2}, mg_init_zeros(), MG_NO_DECAY);
    mg_params_add(P, "c", 1, (int64_t[]){n3}, mg_init_zeros(), 0);
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    return P;
}

static long double grad_norm_ref(const mg_params *P) {
    long double s = 0.0L;
    for (int k = 0; k < mg_params_len(P); k++) {
        mg_tensor *t = mg_params_at(P, k);
        for (int64_t i = 0; i < t->numel; i++) s += (long double)t->grad[i] * t->grad[i];
    }
    return sqrtl(s);
}

START_TEST(clip_measures_and_scales) {
    mg_params *P = grad_store(17, 130, 4099);
    int64_t n = mg_params_slab_size(P);
    float *copy = malloc(sizeof(float) * (size_t)n);
    mg_rng r = mg_rng_make(9);
    for (int k = 0; k < 3; k++) {
        mg_tensor *t = mg_params_at(P, k);
        for (int64_t i = 0; i < t->numel; i++) t->grad[i] = mg_rng_range(&r, -1.0f, 1.0f);
    }
    memcpy(copy, mg_params_grad(P), sizeof(float) * (size_t)n);
    double want = (double)grad_norm_ref(P);
    /* below max_norm, and max_norm <= 0: measure only, gradients bit-identical */
    const float keep[] = {1e6f, (float)want * 1.001f, 0.0f, -1.0f};
    for (int k = 0; k < 4; k++) {
        float norm = mg_clip_grad_norm(P, keep[k]);
        ck_assert_msg(fabs(norm - want) <= 1e-6 * want, "norm %.9g, want %.9g", norm, want);
        ck_assert_msg(memcmp(copy, mg_params_grad(P), sizeof(float) * (size_t)n) == 0,
                      "max_norm %g changed the gradients", keep[k]);
    }
    /* above: every gradient scaled by max_norm / norm, the new norm is max_norm */
    float max_norm = (float)want / 3.0f;
    float norm = mg_clip_grad_norm(P, max_norm);
    ck_assert_msg(fabs(norm - want) <= 1e-6 * want, "returned %.9g, want the norm before clipping %.9g", norm, want);
    for (int k = 0; k < 3; k++) {
        mg_tensor *t = mg_params_at(P, k);
        const float *old = copy + mg_params_offset(P, k);
        for (int64_t i = 0; i < t->numel; i++)
            ck_assert_msg(fabs(t->grad[i] - old[i] * (double)max_norm / want) <= 1e-6 * fabs(old[i]) + 1e-30,
                          "%s[%lld]: %.9g from %.9g", t->name, (long long)i, t->grad[i], old[i]);
    }
    double after = (double)grad_norm_ref(P);
    ck_assert_msg(fabs(after - max_norm) <= 1e-5 * max_norm, "norm after clipping %.9g, max_norm %.9g", after,
                  max_norm);
    free(copy);
    mg_params_free(P);
}
END_TEST

/* norm exactly max_norm is not "above" it */
START_TEST(clip_boundary) {
    mg_params *P = grad_store(1, 3, 5);
    mg_params_at(P, 0)->grad[0] = 3.0f;
    mg_params_at(P, 2)->grad[4] = -4.0f;
    ck_assert_float_eq(mg_clip_grad_norm(P, 5.0f), 5.0f);
    ck_assert_float_eq(mg_params_at(P, 0)->grad[0], 3.0f);
    ck_assert_float_eq(mg_params_at(P, 2)->grad[4], -4.0f);
    ck_assert_float_eq(mg_clip_grad_norm(P, 2.5f), 5.0f);
    ck_assert_float_eq_tol(mg_params_at(P, 0)->grad[0], 1.5f, 1e-6f);
    ck_assert_float_eq_tol(mg_params_at(P, 2)->grad[4], -2.0f, 1e-6f);
    mg_params_free(P);
}
END_TEST

/* Accumulated in double: squares that overflow or underflow float32, and a million terms. */
START_TEST(clip_norm_in_double) {
    mg_params *P = grad_store(1000, 1000, 998000);
    const float vals[] = {0.1f, 1e20f, 1e-25f, 3.0f};
    for (int k = 0; k < 4; k++) {
        for (int p = 0; p < 3; p++) {
            mg_tensor *t = mg_params_at(P, p);
            for (int64_t i = 0; i < t->numel; i++) t->grad[i] = (i & 1) ? vals[k] : -vals[k];
        }
        double want = (double)vals[k] * 1000.0; /* sqrt(1e6 v^2) */
        float norm = mg_clip_grad_norm(P, 0.0f);
        ck_assert_msg(fabs(norm - want) <= 1e-6 * want, "norm of 1e6 x %g: %.9g, want %.9g", vals[k], norm, want);
    }
    mg_params_free(P);
}
END_TEST

START_TEST(clip_nonfinite_left_alone) {
    mg_params *P = grad_store(17, 130, 65);
    int64_t n = mg_params_slab_size(P);
    float *copy = malloc(sizeof(float) * (size_t)n);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        mg_rng r = mg_rng_make(10);
        for (int p = 0; p < 3; p++) {
            mg_tensor *t = mg_params_at(P, p);
            for (int64_t i = 0; i < t->numel; i++) t->grad[i] = mg_rng_range(&r, -1.0f, 1.0f);
        }
        mg_params_at(P, 1)->grad[77] = bad[k];
        memcpy(copy, mg_params_grad(P), sizeof(float) * (size_t)n);
        float norm = mg_clip_grad_norm(P, 0.5f);
        if (isnan(bad[k]))
            ck_assert_msg(isnan(norm), "norm with a NaN gradient: %g", norm);
        else
            ck_assert_msg(isinf(norm) && norm > 0, "norm with an infinite gradient: %g", norm);
        ck_assert_msg(memcmp(copy, mg_params_grad(P), sizeof(float) * (size_t)n) == 0,
                      "gradients were changed although one is %g", bad[k]);
    }
    free(copy);
    mg_params_free(P);
}
END_TEST

/* Every gradient finite, their norm beyond float32's range: the norm "exceeds max_norm", so the
 * gradients must still be scaled down (only a non-finite gradient leaves them alone). */
START_TEST(clip_norm_beyond_float_range) {
    mg_params *P = grad_store(4, 4, 8);
    for (int p = 0; p < 3; p++)
        for (int64_t i = 0; i < mg_params_at(P, p)->numel; i++) mg_params_at(P, p)->grad[i] = 3e38f;
    mg_clip_grad_norm(P, 1.0f);
    double after = (double)grad_norm_ref(P);
    ck_assert_msg(fabs(after - 1.0) <= 1e-5, "16 gradients of 3e38 clipped to max_norm 1 have norm %.9g", after);
    mg_params_free(P);
}
END_TEST

/* ---- the schedule ---- */

static double want_lr(int64_t step, int64_t warmup, int64_t total, double hi, double lo) {
    /* step s < warmup trains at hi * (s+1)/warmup: the first step already moves, the last one
     * reaches hi (optim.h) */
    if (step < warmup) return hi * (double)(step + 1) / (double)warmup;
    if (step >= total) return lo;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    return lo + 0.5 * (hi - lo) * (1.0 + cos(M_PI * progress));
}

START_TEST(lr_schedule_cosine) {
    const int64_t W = 100, T = 1100;
    const float hi = 1e-3f, lo = 1e-4f;
    /* end of warmup, cosine midpoint, end value, after total */
    ck_assert_float_eq_tol(mg_lr_schedule(W, W, T, hi, lo), hi, 1e-6f * hi);
    ck_assert_float_eq_tol(mg_lr_schedule((W + T) / 2, W, T, hi, lo), 0.5f * (hi + lo), 1e-6f * hi);
    ck_assert_float_eq_tol(mg_lr_schedule(T, W, T, hi, lo), lo, 1e-7f * hi);
    ck_assert_float_eq_tol(mg_lr_schedule(T + 1, W, T, hi, lo), lo, 1e-7f * hi);
    ck_assert_float_eq_tol(mg_lr_schedule(10 * T, W, T, hi, lo), lo, 1e-7f * hi);
    /* the formula at every step from W on, monotone down */
    for (int64_t s = W; s <= T + 5; s++) {
        double got = mg_lr_schedule(s, W, T, hi, lo), want = want_lr(s, W, T, hi, lo);
        ck_assert_msg(fabs(got - want) <= 1e-6 * hi, "step %lld: lr %.9g, want %.9g", (long long)s, got, want);
        if (s > W) ck_assert(got <= mg_lr_schedule(s - 1, W, T, hi, lo));
    }
}
END_TEST

/* optim.h: "Linear warmup from 0 over `warmup` steps ... step counts from 0": lr(0) = 0 and
 * lr(warmup) = lr_max, a straight line in between. */
START_TEST(lr_schedule_warmup_ramp) {
    const int64_t W = 100, T = 1100;
    const float hi = 1e-3f, lo = 1e-4f;
    for (int64_t s = 1; s < W; s++) {
        double d = mg_lr_schedule(s, W, T, hi, lo) - mg_lr_schedule(s - 1, W, T, hi, lo);
        ck_assert_msg(fabs(d - hi / (double)W) <= 1e-5 * hi, "warmup step %lld rises by %g, want %g", (long long)s, d,
                      hi / (double)W);
    }
    for (int64_t s = 0; s <= W; s++) {
        double got = mg_lr_schedule(s, W, T, hi, lo), want = want_lr(s, W, T, hi, lo);
        ck_assert_msg(fabs(got - want) <= 1e-6 * hi, "warmup step %lld: lr %.9g, want %.9g", (long long)s, got, want);
    }
}
END_TEST

START_TEST(lr_schedule_no_warmup) {
    ck_assert_float_eq_tol(mg_lr_schedule(0, 0, 10, 2.0f, 0.5f), 2.0f, 1e-6f);
    ck_assert_float_eq_tol(mg_lr_schedule(5, 0, 10, 2.0f, 0.5f), 1.25f, 1e-6f);
    ck_assert_float_eq_tol(mg_lr_schedule(10, 0, 10, 2.0f, 0.5f), 0.5f, 1e-6f);
    ck_assert_float_eq_tol(mg_lr_schedule(3, 0, 10, 2.0f, 2.0f), 2.0f, 1e-6f); /* constant */
    for (int64_t s = 0; s < 30; s++) {
        float v = mg_lr_schedule(s, 0, 20, 1.0f, 0.0f);
        ck_assert(isfinite(v) && v >= 0.0f && v <= 1.0f);
    }
}
END_TEST

/* ---- the parameter store ---- */

START_TEST(params_declaration_errors) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_nonnull(mg_params_add(P, "h.0.attn.c_attn.weight", 2, (int64_t[]){4, 12}, mg_init_zeros(), 0));
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "h.0.attn.c_attn.weight", 1, (int64_t[]){3}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "h.0.attn.c_attn.weight") && strstr(mg_last_error(), "duplicate"),
                  "duplicate: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "", 1, (int64_t[]){3}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "name") != NULL, "empty name: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, NULL, 1, (int64_t[]){3}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "name") != NULL, "NULL name: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "five", 5, (int64_t[]){1, 1, 1, 1, 1}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "five") != NULL, "5 dims: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "neg", -1, (int64_t[]){1}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "neg") != NULL, "-1 dims: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "zero_dim", 2, (int64_t[]){3, 0}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "zero_dim") != NULL, "dim 0: %s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "negdim", 2, (int64_t[]){-3, 2}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "negdim") && strstr(mg_last_error(), "-3"), "dim -3: %s", mg_last_error());
    /* the failed declarations left nothing behind */
    ck_assert_int_eq(mg_params_len(P), 1);
    ck_assert_ptr_null(mg_params_find(P, "five"));
    ck_assert_ptr_null(mg_params_find(P, "zero_dim"));
    /* a random initialiser without a generator is refused, naming the parameter; nothing is
     * allocated, and the store can still be allocated with one */
    mg_tensor *u = mg_params_add(P, "wte.weight", 2, (int64_t[]){5, 4}, mg_init_normal(0.0f, 0.02f), 0);
    ck_assert_ptr_nonnull(u);
    mg_clear_error();
    ck_assert_int_lt(mg_params_alloc(P, NULL), 0);
    ck_assert_msg(strstr(mg_last_error(), "wte.weight") != NULL, "no generator: %s", mg_last_error());
    ck_assert(!mg_params_allocated(P));
    ck_assert_ptr_null(u->data);
    mg_rng r = mg_rng_make(11);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    ck_assert(mg_params_allocated(P));
    /* nothing can be added after alloc, and alloc happens once */
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "late", 1, (int64_t[]){3}, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "late") != NULL, "after alloc: %s", mg_last_error());
    ck_assert_int_eq(mg_params_len(P), 2);
    ck_assert_int_lt(mg_params_alloc(P, &r), 0);
    mg_params_free(P);
    mg_params_free(NULL);
}
END_TEST

/* Initialisers out of range (and a NULL shape) are refused where they are declared, naming the
 * parameter, and leave nothing behind. */
START_TEST(params_initialiser_errors) {
    mg_params *P = mg_params_new();
    const struct {
        const char *name, *want;
        mg_init init;
    } bad_init[] = {
        {"kind", "'kind': unknown initialiser kind 9", {(mg_init_kind)9, 0, 0}},
        {"kind_neg", "unknown initialiser kind -1", {(mg_init_kind)-1, 0, 0}},
        {"const_nan", "'const_nan': constant initialiser value nan is not finite", mg_init_const(NAN)},
        {"const_inf", "constant initialiser value inf", mg_init_const(INFINITY)},
        {"uni_rev", "'uni_rev': uniform initialiser [5, -5) needs finite bounds with lo <= hi", mg_init_uniform(5, -5)},
        {"uni_nan", "uniform initialiser [nan, 1)", mg_init_uniform(NAN, 1)},
        {"uni_wide", "hi - lo finite", mg_init_uniform(-FLT_MAX, FLT_MAX)},
        {"norm_neg", "'norm_neg': normal initialiser (mean 0, std -1) needs", mg_init_normal(0, -1)},
        {"norm_mean", "normal initialiser (mean inf, std 1)", mg_init_normal(INFINITY, 1)},
    };
    for (size_t i = 0; i < sizeof bad_init / sizeof bad_init[0]; i++) {
        mg_clear_error();
        ck_assert_ptr_null(mg_params_add(P, bad_init[i].name, 1, (int64_t[]){3}, bad_init[i].init, 0));
        ck_assert_msg(strstr(mg_last_error(), bad_init[i].want) != NULL, "want '%s' in: %s", bad_init[i].want,
                      mg_last_error());
        ck_assert_ptr_null(mg_params_find(P, bad_init[i].name));
    }
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "noshape", 2, NULL, mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "'noshape': shape is NULL for 2 dims") != NULL, "%s", mg_last_error());
    /* the edges are accepted: an empty-width uniform range, a zero std */
    ck_assert_ptr_nonnull(mg_params_add(P, "uni_point", 1, (int64_t[]){2}, mg_init_uniform(0.5f, 0.5f), 0));
    ck_assert_ptr_nonnull(mg_params_add(P, "norm_zero", 1, (int64_t[]){2}, mg_init_normal(1, 0), 0));
    ck_assert_int_eq(mg_params_len(P), 2);
    mg_rng r = mg_rng_make(1);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    ck_assert(mg_params_find(P, "uni_point")->data[1] == 0.5f);
    ck_assert(mg_params_find(P, "norm_zero")->data[1] == 1.0f);
    mg_params_free(P);
}
END_TEST

START_TEST(params_layout) {
    mg_params *P = mg_params_new();
    const int64_t sizes[] = {1, 3, 17, 65, 130, 16, 33};
    char name[8] = "p0";
    mg_tensor *t[7];
    for (int i = 0; i < 7; i++) {
        name[1] = (char)('0' + i);
        t[i] = mg_params_add(P, name, 1, &sizes[i], mg_init_const(1.0f + (float)i), i % 2 ? MG_NO_DECAY : 0);
        ck_assert_ptr_nonnull(t[i]);
        ck_assert_ptr_null(t[i]->data);
    }
    name[1] = 'X'; /* the store keeps its own copy of each name */
    ck_assert(!mg_params_allocated(P));
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    ck_assert_int_eq(mg_params_len(P), 7);
    ck_assert_int_eq(mg_params_numel(P), 1 + 3 + 17 + 65 + 130 + 16 + 33);
    float *data = mg_params_data(P), *grad = mg_params_grad(P);
    int64_t size = mg_params_slab_size(P);
    ck_assert_int_eq((uintptr_t)data % 64, 0);
    ck_assert_int_eq((uintptr_t)grad % 64, 0);
    ck_assert_int_ge(size, mg_params_numel(P));
    bool *used = calloc((size_t)size, 1);
    for (int i = 0; i < 7; i++) {
        char want[4] = {'p', (char)('0' + i), 0};
        ck_assert_ptr_eq(mg_params_at(P, i), t[i]);
        ck_assert_ptr_eq(mg_params_find(P, want), t[i]);
        ck_assert_str_eq(t[i]->name, want);
        ck_assert_int_eq(t[i]->numel, sizes[i]);
        ck_assert_int_eq(t[i]->ndim, 1);
        ck_assert_int_eq(t[i]->dtype, MG_F32);
        ck_assert(t[i]->flags & MG_PARAM);
        ck_assert(t[i]->flags & MG_REQUIRES_GRAD);
        ck_assert(!!(t[i]->flags & MG_NO_DECAY) == (i % 2 == 1));
        int64_t off = mg_params_offset(P, i);
        ck_assert_ptr_eq(t[i]->data, data + off);
        ck_assert_ptr_eq(t[i]->grad, grad + off);
        ck_assert_int_eq((uintptr_t)t[i]->data % 64, 0);
        ck_assert_int_eq((uintptr_t)t[i]->grad % 64, 0);
        ck_assert_int_le(off + sizes[i], size);
        for (int64_t j = off; j < off + sizes[i]; j++) {
            ck_assert_msg(!used[j], "parameters overlap at slab float %lld", (long long)j);
            used[j] = true;
            ck_assert_float_eq(data[j], 1.0f + (float)i);
            ck_assert_float_eq(grad[j], 0.0f);
        }
        if (i > 0) ck_assert_int_gt(off, mg_params_offset(P, i - 1)); /* declaration order */
    }
    for (int64_t j = 0; j < size; j++)
        if (!used[j]) ck_assert_msg(data[j] == 0.0f && grad[j] == 0.0f, "gap at slab float %lld is not zero", (long long)j);
    ck_assert_ptr_null(mg_params_find(P, "pX"));
    ck_assert_ptr_null(mg_params_find(P, "nope"));
    ck_assert_ptr_null(mg_params_at(P, 7));
    ck_assert_ptr_null(mg_params_at(P, -1));
    /* zero_grad clears the whole gradient slab, gaps included, and leaves the values */
    for (int64_t j = 0; j < size; j++) grad[j] = (float)j + 1.0f;
    mg_params_zero_grad(P);
    for (int64_t j = 0; j < size; j++) ck_assert_float_eq(grad[j], 0.0f);
    ck_assert_float_eq(t[6]->data[32], 7.0f);
    free(used);
    mg_params_free(P);
}
END_TEST

START_TEST(params_initialisers) {
    mg_params *P = mg_params_new();
    const int64_t n = 200000;
    mg_tensor *z = mg_params_add(P, "z", 1, (int64_t[]){17}, mg_init_zeros(), 0);
    mg_tensor *o = mg_params_add(P, "o", 2, (int64_t[]){3, 5}, mg_init_ones(), 0);
    mg_tensor *c = mg_params_add(P, "c", 1, (int64_t[]){9}, mg_init_const(-0.37f), 0);
    mg_tensor *u = mg_params_add(P, "u", 2, (int64_t[]){n / 100, 100}, mg_init_uniform(-0.3f, 0.7f), 0);
    mg_tensor *g = mg_params_add(P, "g", 1, (int64_t[]){n}, mg_init_normal(0.5f, 2.0f), 0);
    mg_rng r = mg_rng_make(12);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    ck_assert(r.s != 12); /* the caller's generator advanced */
    for (int i = 0; i < 17; i++) ck_assert_float_eq(z->data[i], 0.0f);
    for (int i = 0; i < 15; i++) ck_assert_float_eq(o->data[i], 1.0f);
    for (int i = 0; i < 9; i++) ck_assert_float_eq(c->data[i], -0.37f);
    /* uniform in [a, b): range, mean (b+a)/2, variance (b-a)^2/12; each within 6 standard errors */
    double s = 0, s2 = 0, mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = u->data[i];
        s += v, s2 += v * v, mn = fmin(mn, v), mx = fmax(mx, v);
    }
    double mean = s / n, var = s2 / n - mean * mean;
    ck_assert_msg(mn >= -0.3f && mx < 0.7f, "uniform range [%g, %g]", mn, mx);
    ck_assert_msg(mn < -0.29 && mx > 0.69, "uniform does not fill its range: [%g, %g]", mn, mx);
    ck_assert_msg(fabs(mean - 0.2) <= 6.0 * sqrt(1.0 / 12.0 / n), "uniform mean %g", mean);
    ck_assert_msg(fabs(var - 1.0 / 12.0) <= 6.0 * sqrt(1.0 / 180.0 / n), "uniform variance %g", var);
    /* normal: mean, standard deviation, the share within one sigma (0.6827), excess kurtosis 0 */
    double m4 = 0;
    int64_t within = 0;
    s = s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = g->data[i];
        ck_assert(isfinite(v));
        s += v, s2 += v * v;
        within += fabs(v - 0.5) < 2.0;
    }
    mean = s / n;
    double sd = sqrt(s2 / n - mean * mean);
    for (int64_t i = 0; i < n; i++) m4 += pow((g->data[i] - mean) / sd, 4);
    m4 /= n;
    ck_assert_msg(fabs(mean - 0.5) <= 6.0 * 2.0 / sqrt((double)n), "normal mean %g", mean);
    ck_assert_msg(fabs(sd - 2.0) <= 6.0 * 2.0 / sqrt(2.0 * n), "normal sd %g", sd);
    ck_assert_msg(fabs((double)within / n - 0.682689) <= 6.0 * sqrt(0.6827 * 0.3173 / n), "normal: %g within 1 sd",
                  (double)within / n);
    ck_assert_msg(fabs(m4 - 3.0) <= 6.0 * sqrt(96.0 / n), "normal kurtosis %g", m4);
    mg_params_free(P);
}
END_TEST

/* The seed whose first mg_rng_next() returns `out`: SplitMix64's output step is a bijection, so it
 * can be run backwards (each xor-shift and each odd multiplier has an inverse mod 2^64). */
static uint64_t unshift(uint64_t y, int s) {
    uint64_t x = y;
    for (int k = s; k < 64; k += s) x ^= y >> k;
    return x;
}

static uint64_t inverse_odd(uint64_t c) {
    uint64_t inv = c; /* Newton: each step doubles the correct low bits (3 -> 6 -> ... -> 96) */
    for (int i = 0; i < 5; i++) inv *= 2 - c * inv;
    return inv;
}

static uint64_t seed_for_first_output(uint64_t out) {
    uint64_t z = unshift(out, 31);
    z *= inverse_odd(0x94D049BB133111EBULL);
    z = unshift(z, 27);
    z *= inverse_odd(0xBF58476D1CE4E5B9ULL);
    z = unshift(z, 30);
    return z - 0x9E3779B97F4A7C15ULL;
}

/* params.h: uniform in [a, b). The largest uniform draw, 1 - 2^-24, must still land below b: for
 * [1, 2), 1 + (1 - 2^-24) rounds to 2 in float32 (a tie, to even). */
START_TEST(params_uniform_excludes_upper_bound) {
    mg_rng probe = mg_rng_make(seed_for_first_output(0xFFFFFF0000000000ULL));
    ck_assert_float_eq(mg_rng_uniform(&probe), 1.0f - 0x1.0p-24f); /* the crafted seed works */
    const float lo[] = {1.0f, -0.3f, 0.0f, -2.0f}, hi[] = {2.0f, 0.7f, 1.0f, 2.0f};
    for (int k = 0; k < 4; k++) {
        mg_params *P = mg_params_new();
        mg_tensor *t = mg_params_add(P, "u", 1, (int64_t[]){1}, mg_init_uniform(lo[k], hi[k]), 0);
        mg_rng r = mg_rng_make(seed_for_first_output(0xFFFFFF0000000000ULL));
        ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
        ck_assert_msg(t->data[0] >= lo[k] && t->data[0] < hi[k], "uniform [%g, %g) initialised a weight to %.9g",
                      lo[k], hi[k], t->data[0]);
        mg_params_free(P);
    }
}
END_TEST

/* A seed fixes every weight; initialisers draw in declaration order from the one generator, so a
 * parameter's values depend only on the seed and the parameters declared before it. */
static void init_store(uint64_t seed, bool with_a, float *a_out, float *b_out) {
    mg_params *P = mg_params_new();
    if (with_a) mg_params_add(P, "a", 1, (int64_t[]){50}, mg_init_uniform(-1.0f, 1.0f), 0);
    mg_params_add(P, "k", 1, (int64_t[]){5}, mg_init_const(2.0f), 0);
    mg_params_add(P, "b", 1, (int64_t[]){50}, mg_init_normal(0.0f, 1.0f), 0);
    mg_rng r = mg_rng_make(seed);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    if (with_a) memcpy(a_out, mg_params_find(P, "a")->data, sizeof(float) * 50);
    memcpy(b_out, mg_params_find(P, "b")->data, sizeof(float) * 50);
    mg_params_free(P);
}

START_TEST(params_init_order_and_seed) {
    float a1[50], b1[50], a2[50], b2[50], a3[50], b3[50], b4[50];
    init_store(13, true, a1, b1);
    init_store(13, true, a2, b2);
    init_store(14, true, a3, b3);
    init_store(13, false, NULL, b4);
    ck_assert(memcmp(a1, a2, sizeof a1) == 0 && memcmp(b1, b2, sizeof b1) == 0); /* same seed, same weights */
    ck_assert(memcmp(a1, a3, sizeof a1) != 0 && memcmp(b1, b3, sizeof b1) != 0); /* another seed */
    ck_assert(memcmp(b1, b4, sizeof b1) != 0); /* "a" drew first, so "b" continued from later draws */
    /* without "a", "b" is still fixed by the seed */
    float b5[50];
    init_store(13, false, NULL, b5);
    ck_assert(memcmp(b4, b5, sizeof b4) == 0);
}
END_TEST

START_TEST(params_empty_store) {
    mg_params *P = mg_params_new();
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    ck_assert_int_eq(mg_params_len(P), 0);
    ck_assert_int_eq(mg_params_numel(P), 0);
    mg_params_zero_grad(P);
    ck_assert_float_eq(mg_clip_grad_norm(P, 1.0f), 0.0f);
    mg_optim *o = mg_adamw_new(P, mg_adamw_defaults());
    ck_assert_ptr_nonnull(o);
    mg_optim_step(o, 0.1f);
    ck_assert_int_eq(mg_optim_steps(o), 1);
    mg_optim_free(o);
    mg_params_free(P);
}
END_TEST

/* Names are found through a hash table: many parameters (tens of thousands make a deep model),
 * names that share long prefixes and differ in one character, duplicates refused anywhere in the
 * store, misses that match no name. Correctness only; the cost is not measured here. */
START_TEST(params_many_names) {
    enum { N = 200000 };
    mg_params *P = mg_params_new();
    char name[64];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "h.%d.%s", i / 4, (const char *[]){"w", "b", "ln.w", "ln.b"}[i % 4]);
        mg_tensor *t = mg_params_add(P, name, 1, (int64_t[]){1 + i % 3}, mg_init_zeros(), 0);
        ck_assert_msg(t != NULL, "declaring %s: %s", name, mg_last_error());
    }
    ck_assert_int_eq(mg_params_len(P), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "h.%d.%s", i / 4, (const char *[]){"w", "b", "ln.w", "ln.b"}[i % 4]);
        mg_tensor *t = mg_params_find(P, name);
        ck_assert_msg(t == mg_params_at(P, i), "find %s gave parameter %s", name, t ? t->name : "(none)");
        ck_assert_str_eq(t->name, name);
        ck_assert_int_eq(t->numel, 1 + i % 3);
    }
    /* misses: past the last layer, a prefix, an extension, a near neighbour, the empty name */
    const char *miss[] = {"h.50000.w", "h.0", "h.0.w.", "h.0.x", "h.1.ln", "H.0.w", "", "h.49999.ln.c"};
    for (size_t i = 0; i < sizeof miss / sizeof *miss; i++)
        ck_assert_msg(mg_params_find(P, miss[i]) == NULL, "'%s' is not declared but was found", miss[i]);
    /* duplicates of the first, a middle and the last name are refused and change nothing */
    const char *dup[] = {"h.0.w", "h.25000.ln.w", "h.49999.ln.b"};
    for (size_t i = 0; i < sizeof dup / sizeof *dup; i++) {
        mg_clear_error();
        ck_assert_ptr_null(mg_params_add(P, dup[i], 1, (int64_t[]){7}, mg_init_zeros(), 0));
        ck_assert_msg(strstr(mg_last_error(), "duplicate") && strstr(mg_last_error(), dup[i]), "duplicate %s: %s",
                      dup[i], mg_last_error());
        ck_assert_int_ne(mg_params_find(P, dup[i])->numel, 7);
    }
    ck_assert_int_eq(mg_params_len(P), N);
    /* a name that was missed can still be declared, and is then found */
    ck_assert_ptr_nonnull(mg_params_add(P, "h.0", 1, (int64_t[]){2}, mg_init_zeros(), 0));
    ck_assert_ptr_eq(mg_params_find(P, "h.0"), mg_params_at(P, N));
    ck_assert_ptr_eq(mg_params_find(P, "h.0.w"), mg_params_at(P, 0));
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    ck_assert_ptr_eq(mg_params_find(P, "h.31337.b")->data, mg_params_data(P) + mg_params_offset(P, 4 * 31337 + 1));
    mg_params_free(P);
}
END_TEST

/* A shape whose element count overflows 64 bits is refused by name, not wrapped around. */
START_TEST(params_shape_overflow) {
    mg_params *P = mg_params_new();
    mg_clear_error();
    ck_assert_ptr_null(mg_params_add(P, "huge", 3, (int64_t[]){INT64_C(1) << 40, INT64_C(1) << 20, 1 << 10},
                                     mg_init_zeros(), 0));
    ck_assert_msg(strstr(mg_last_error(), "huge") != NULL, "overflow: %s", mg_last_error());
    ck_assert_int_eq(mg_params_len(P), 0);
    ck_assert_ptr_null(mg_params_find(P, "huge"));
    /* a count that fits but no memory could hold: refused by alloc with a message */
    ck_assert_ptr_nonnull(mg_params_add(P, "big", 2, (int64_t[]){INT64_C(1) << 40, INT64_C(1) << 22}, mg_init_zeros(), 0));
    mg_clear_error();
    ck_assert_int_lt(mg_params_alloc(P, NULL), 0);
    ck_assert_msg(strstr(mg_last_error(), "big") != NULL, "alloc: %s", mg_last_error());
    ck_assert(!mg_params_allocated(P));
    mg_params_free(P);
}
END_TEST

static Suite *optim_suite(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_test(tc, adamw_defaults);
    tcase_add_test(tc, adamw_matches_reference);
    tcase_add_test(tc, adamw_bias_correction_first_step);
    tcase_add_test(tc, adamw_decoupled_decay_and_no_decay);
    tcase_add_test(tc, adamw_wd0_is_adam);
    tcase_add_test(tc, sgd_matches_reference);
    tcase_add_test(tc, sgd_first_step_buf_is_grad);
    tcase_add_test(tc, optim_state_access);
    tcase_add_test(tc, optim_resume_with_set_steps);
    tcase_add_test(tc, optim_needs_allocated_store);
    tcase_add_test(tc, optim_settings_are_checked);
    tcase_add_test(tc, optim_step_and_set_steps_refuse_bad_values);
    tcase_add_test(tc, clip_measures_and_scales);
    tcase_add_test(tc, clip_boundary);
    tcase_add_test(tc, clip_norm_in_double);
    tcase_add_test(tc, clip_nonfinite_left_alone);
    tcase_add_test(tc, clip_norm_beyond_float_range);
    tcase_add_test(tc, lr_schedule_cosine);
    tcase_add_test(tc, lr_schedule_warmup_ramp);
    tcase_add_test(tc, lr_schedule_no_warmup);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("params");
    tcase_add_test(tp, params_declaration_errors);
    tcase_add_test(tp, params_initialiser_errors);
    tcase_add_test(tp, params_layout);
    tcase_add_test(tp, params_initialisers);
    tcase_add_test(tp, params_uniform_excludes_upper_bound);
    tcase_add_test(tp, params_init_order_and_seed);
    tcase_add_test(tp, params_empty_store);
    tcase_add_test(tp, params_many_names);
    tcase_add_test(tp, params_shape_overflow);
    suite_add_tcase(s, tp);
    return s;
}

MG_TEST_MAIN(optim_suite)
