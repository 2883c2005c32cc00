/* bf16 memory: the ops' scratch and the fused "activation, then Linear" ops.
 *  - mg_gelu_linear, mg_layernorm_linear and mg_merge_heads_linear pass a gradient check in fp32
 *    (every input, bias and LayerNorm affine or not);
 *  - in a bf16 context each gives the forward output and every gradient bit for bit as the
 *    composition it fuses (mg_linear of mg_gelu / mg_layernorm / mg_merge_heads), on odd shapes, shapes big enough
 *    for the threaded passes, either GELU, with only some inputs wanting a gradient, with
 *    gradients off, on 1 and 2 threads; in fp32 too; and its arena holds at least the float32
 *    activation less than the composition's;
 *  - bad arguments (NULL, shapes, dtypes, kind, eps) give a message naming the op, no crash;
 *  - the scratch: nested uses, growth past its block with earlier buffers intact, regrowth to the
 *    high-water mark once released, 64-byte alignment, a backward's scratch released, a fixed
 *    arena serving it;
 *  - a small GPT's bf16 training step takes no more arena (plus scratch) than its fp32 step. */
#include "gradcheck_assert.h"
#include "test_util.h"
#include "minigrad/gpt.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Option structs below leave trailing fields to their zero defaults on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

enum { FUSED_GELU, FUSED_LN, FUSED_MERGE };

typedef struct {
    const char *name;
    int kind;           /* FUSED_GELU, FUSED_LN or FUSED_MERGE */
    int ndim;
    int64_t shape[4];   /* x; its last dim is K (merge: (B,H,T,D), K = H*D) */
    int64_t N;
    bool bias, affine;  /* affine: LayerNorm weight and bias (else NULL) */
    mg_gelu_kind gelu;
} fcase;

static const fcase cases[] = {
    {"gelu tanh 2-d", FUSED_GELU, 2, {5, 7}, 3, true, false, MG_GELU_TANH},
    {"gelu erf 3-d no bias", FUSED_GELU, 3, {2, 3, 9}, 5, false, false, MG_GELU_ERF},
    {"gelu 1-d x", FUSED_GELU, 1, {11}, 4, true, false, MG_GELU_TANH},
    {"gelu threaded (700 x 131 -> 37)", FUSED_GELU, 2, {700, 131}, 37, true, false, MG_GELU_TANH},
    {"gelu erf threaded, 3-d (4, 150, 200 -> 33)", FUSED_GELU, 3, {4, 150, 200}, 33, false, false, MG_GELU_ERF},
    {"layernorm affine 2-d", FUSED_LN, 2, {6, 10}, 4, true, true},
    {"layernorm no affine 3-d", FUSED_LN, 3, {2, 5, 7}, 3, true, false},
    {"layernorm affine no bias, K 1", FUSED_LN, 2, {4, 1}, 3, false, true},
    {"layernorm threaded (600 x 97 -> 29)", FUSED_LN, 2, {600, 97}, 29, true, true},
    {"layernorm wide rows (9 x 5000 -> 7)", FUSED_LN, 2, {9, 5000}, 7, true, true},
    {"merge heads (2, 3, 5, 4) -> 6", FUSED_MERGE, 4, {2, 3, 5, 4}, 6, true},
    {"merge heads one head, no bias", FUSED_MERGE, 4, {1, 1, 7, 3}, 2, false},
    {"merge heads threaded (4, 6, 130, 17) -> 9", FUSED_MERGE, 4, {4, 6, 130, 17}, 9, true},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static int64_t case_K(const fcase *c) {
    return c->kind == FUSED_MERGE ? c->shape[1] * c->shape[3] : c->shape[c->ndim - 1];
}
static int64_t case_rows(const fcase *c) {
    if (c->kind == FUSED_MERGE) return c->shape[0] * c->shape[2];
    int64_t r = 1;
    for (int i = 0; i < c->ndim - 1; i++) r *= c->shape[i];
    return r;
}

/* The inputs in order x, W, b, ln_w, ln_b (absent ones NULL), filled from seed. */
typedef struct {
    mg_tensor *t[5];
} inputs;

static mg_tensor *filled(mg_ctx *ctx, int ndim, const int64_t *shape, mg_rng *r, float scale, float offset) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = offset + scale * mg_rng_normal(r);
    return t;
}

static inputs make_inputs(mg_ctx *ctx, const fcase *c, uint64_t seed) {
    mg_rng r = mg_rng_make(seed);
    const int64_t K = case_K(c);
    inputs in = {{NULL}};
    in.t[0] = filled(ctx, c->ndim, c->shape, &r, 1.5f, 0.1f);
    in.t[1] = filled(ctx, 2, (int64_t[]){K, c->N}, &r, 0.3f, 0.0f);
    if (c->bias) in.t[2] = filled(ctx, 1, (int64_t[]){c->N}, &r, 0.2f, 0.0f);
    if (c->kind == FUSED_LN && c->affine) {
        in.t[3] = filled(ctx, 1, (int64_t[]){K}, &r, 0.2f, 1.0f);
        in.t[4] = filled(ctx, 1, (int64_t[]){K}, &r, 0.2f, 0.0f);
    }
    return in;
}

static mg_tensor *run_fused(mg_ctx *ctx, const fcase *c, mg_tensor *const *t) {
    if (c->kind == FUSED_GELU) return mg_gelu_linear(ctx, t[0], c->gelu, t[1], t[2]);
    if (c->kind == FUSED_MERGE) return mg_merge_heads_linear(ctx, t[0], t[1], t[2]);
    return mg_layernorm_linear(ctx, t[0], t[3], t[4], 1e-5f, t[1], t[2]);
}

static mg_tensor *run_composed(mg_ctx *ctx, const fcase *c, mg_tensor *const *t) {
    mg_tensor *h = c->kind == FUSED_GELU    ? mg_gelu(ctx, t[0], c->gelu)
                   : c->kind == FUSED_MERGE ? mg_merge_heads(ctx, t[0])
                                            : mg_layernorm(ctx, t[0], t[3], t[4], 1e-5f);
    return mg_linear(ctx, h, t[1], t[2]);
}

/* ---- gradient check, fp32 ---- */

static mg_tensor *gc_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    const fcase *c = user;
    mg_tensor *t[5] = {in[0], in[1], NULL, NULL, NULL};
    int k = 2;
    if (c->bias) t[2] = in[k++];
    if (c->kind == FUSED_LN && c->affine) t[3] = in[k++], t[4] = in[k++];
    return run_fused(ctx, c, t);
}

START_TEST(fused_gradcheck_fp32) {
    const fcase *c = &cases[_i];
    if (case_rows(c) * case_K(c) > 20000) return; /* the small cases: finite differences of every element */
    mg_ctx *ctx = mg_ctx_new(0);
    inputs in = make_inputs(ctx, c, 11 + (uint64_t)_i);
    mg_tensor *list[5];
    int n = 0;
    for (int k = 0; k < 5; k++)
        if (in.t[k]) list[n++] = in.t[k];
    const mg_gradcheck_opts o = gc_opts(1e-2, 2e-3, 2e-2, 0, 5);
    gc_assert_pass(c->name, gc_fn, (void *)c, list, n, NULL, &o);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- bit for bit against the composition ---- */

typedef struct {
    float *y, *g[5];
    int64_t n[5], ny;
    size_t used_after_forward;
} result;

static void result_free(result *r) {
    free(r->y);
    for (int k = 0; k < 5; k++) free(r->g[k]);
}

static float *fdup(const float *p, int64_t n) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    ck_assert_ptr_nonnull(d);
    if (p) memcpy(d, p, (size_t)n * sizeof *d);
    return d;
}

/* One forward (and backward of sum(y * R), R fixed) of the fused op or the composition; `want`
 * says which inputs require a gradient (bit k for input k); grad_on false: forward only, with
 * gradients disabled. */
static result run_case(const fcase *c, bool fused, mg_precision prec, unsigned want, bool grad_on) {
    tu_trap trap;
    mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
    mg_ctx_set_precision(ctx, prec);
    inputs in = make_inputs(ctx, c, 101);
    for (int k = 0; k < 5; k++)
        if (in.t[k] && (want >> k & 1)) mg_tensor_set_requires_grad(in.t[k], true);
    mg_ctx_set_grad_enabled(ctx, grad_on);
    const size_t before = mg_ctx_used_bytes(ctx);
    mg_tensor *y = fused ? run_fused(ctx, c, in.t) : run_composed(ctx, c, in.t);
    result r = {0};
    r.used_after_forward = mg_ctx_used_bytes(ctx) - before;
    ck_assert_msg(trap.calls == 0, "%s: %s", c->name, trap.msg);
    r.ny = y->numel;
    r.y = fdup(y->data, y->numel);
    if (grad_on && mg_requires_grad(y)) {
        mg_rng rr = mg_rng_make(3);
        mg_tensor *R = filled(ctx, y->ndim, y->shape, &rr, 1.0f, 0.0f);
        mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
        ck_assert_msg(trap.calls == 0, "%s: %s", c->name, trap.msg);
    }
    for (int k = 0; k < 5; k++)
        if (in.t[k]) {
            r.n[k] = in.t[k]->numel;
            r.g[k] = in.t[k]->grad ? fdup(in.t[k]->grad, in.t[k]->numel) : NULL;
        }
    mg_ctx_free(ctx);
    return r;
}

static const char *const input_names[5] = {"x", "weight", "bias", "ln_weight", "ln_bias"};

static void expect_same(const fcase *c, const char *what, const result *a, const result *b) {
    ck_assert_int_eq(a->ny, b->ny);
    ck_assert_msg(memcmp(a->y, b->y, (size_t)a->ny * sizeof(float)) == 0, "%s, %s: outputs differ", c->name, what);
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(!a->g[k] == !b->g[k], "%s, %s: d%s present in one only", c->name, what, input_names[k]);
        if (a->g[k])
            for (int64_t i = 0; i < a->n[k]; i++)
                ck_assert_msg(memcmp(&a->g[k][i], &b->g[k][i], sizeof(float)) == 0,
                              "%s, %s: d%s[%lld] %.9g (fused) vs %.9g (composed)", c->name, what, input_names[k],
                              (long long)i, (double)a->g[k][i], (double)b->g[k][i]);
    }
}

START_TEST(fused_bf16_matches_composition_bit_for_bit) {
    const fcase *c = &cases[_i];
    const unsigned all = 31, wants[] = {all, 1u /* x only */, 2u | 4u /* W and b only */, 8u | 16u /* ln only */};
    for (int p = 0; p < 2; p++) {
        const mg_precision prec = p ? MG_PRECISION_BF16 : MG_PRECISION_FP32;
        for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
            if (c->kind != FUSED_LN && w == 3) continue;
            char what[64];
            snprintf(what, sizeof what, "%s, inputs wanting a gradient %#x", mg_precision_name(prec), wants[w]);
            result f = run_case(c, true, prec, wants[w], true), u = run_case(c, false, prec, wants[w], true);
            expect_same(c, what, &f, &u);
            if (prec == MG_PRECISION_BF16 && w == 0) {
                /* the float32 activation (x's size) is not in the arena */
                const size_t h_bytes = (size_t)(case_rows(c) * case_K(c)) * sizeof(float);
                ck_assert_msg(f.used_after_forward + h_bytes <= u.used_after_forward,
                              "%s: fused forward took %zu bytes of arena, the composition %zu (want %zu less)",
                              c->name, f.used_after_forward, u.used_after_forward, h_bytes);
            }
            result_free(&f);
            result_free(&u);
        }
        result f = run_case(c, true, prec, all, false), u = run_case(c, false, prec, all, false);
        expect_same(c, "gradients off", &f, &u);
        if (prec == MG_PRECISION_BF16)
            ck_assert_msg(f.used_after_forward < u.used_after_forward, "%s: gradients off, fused %zu vs %zu bytes",
                          c->name, f.used_after_forward, u.used_after_forward);
        result_free(&f);
        result_free(&u);
    }
}
END_TEST

START_TEST(fused_bf16_same_bits_on_1_and_2_threads) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    for (int i = 0; i < N_CASES; i++) {
        const fcase *c = &cases[i];
        omp_set_num_threads(1);
        result a = run_case(c, true, MG_PRECISION_BF16, 31, true);
        omp_set_num_threads(2);
        result b = run_case(c, true, MG_PRECISION_BF16, 31, true);
        expect_same(c, "1 vs 2 threads", &a, &b);
        result_free(&a);
        result_free(&b);
    }
    omp_set_num_threads(saved);
#endif
}
END_TEST

/* ---- errors ---- */

static void expect_error(mg_tensor *(*call)(mg_ctx *, mg_tensor **), const char *part) {
    tu_trap trap;
    mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    mg_tensor *t[9];
    t[0] = mg_zeros(ctx, 2, (int64_t[]){3, 4});            /* x */
    t[1] = mg_zeros(ctx, 2, (int64_t[]){4, 5});            /* W */
    t[2] = mg_zeros(ctx, 1, (int64_t[]){5});               /* b */
    t[3] = mg_zeros(ctx, 1, (int64_t[]){4});               /* ln w, b */
    t[4] = mg_zeros(ctx, 2, (int64_t[]){5, 4});            /* a W of the wrong shape */
    t[5] = mg_zeros(ctx, 1, (int64_t[]){3});               /* a vector of the wrong length */
    t[6] = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){3, 4}); /* int32 */
    t[7] = mg_zeros(ctx, 2, (int64_t[]){3, 0});            /* empty rows */
    t[8] = mg_zeros(ctx, 4, (int64_t[]){1, 2, 3, 2});      /* heads: (B,H,T,D), H*D = 4 */
    mg_tensor *y = call(ctx, t);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(trap.calls, 1);
    ck_assert_msg(strstr(trap.msg, part), "message '%s' lacks '%s'", trap.msg, part);
    /* the failed context stays harmless */
    y = mg_gelu_linear(ctx, t[0], MG_GELU_TANH, t[1], t[2]);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(trap.calls, 1);
    mg_ctx_free(ctx);
}

static mg_tensor *e_gelu_null_x(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, NULL, MG_GELU_TANH, t[1], t[2]); }
static mg_tensor *e_gelu_null_w(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, t[0], MG_GELU_TANH, NULL, t[2]); }
static mg_tensor *e_gelu_kind(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, t[0], (mg_gelu_kind)7, t[1], t[2]); }
static mg_tensor *e_gelu_w_shape(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, t[0], MG_GELU_TANH, t[4], NULL); }
static mg_tensor *e_gelu_b_shape(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, t[0], MG_GELU_ERF, t[1], t[5]); }
static mg_tensor *e_gelu_i32(mg_ctx *c, mg_tensor **t) { return mg_gelu_linear(c, t[6], MG_GELU_TANH, t[1], t[2]); }
static mg_tensor *e_ln_null_x(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, NULL, t[3], t[3], 1e-5f, t[1], t[2]); }
static mg_tensor *e_ln_null_w(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[3], t[3], 1e-5f, NULL, NULL); }
static mg_tensor *e_ln_lnw(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[5], t[3], 1e-5f, t[1], t[2]); }
static mg_tensor *e_ln_lnb(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], NULL, t[5], 1e-5f, t[1], t[2]); }
static mg_tensor *e_ln_eps(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[3], t[3], -1.0f, t[1], t[2]); }
static mg_tensor *e_ln_w_shape(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[3], t[3], 1e-5f, t[4], NULL); }
static mg_tensor *e_ln_b_shape(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], NULL, NULL, 1e-5f, t[1], t[5]); }
static mg_tensor *e_ln_i32(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[6], NULL, NULL, 1e-5f, t[1], t[2]); }
static mg_tensor *e_ln_empty(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[7], NULL, NULL, 1e-5f, t[1], t[2]); }
static mg_tensor *e_mh_null_x(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, NULL, t[1], t[2]); }
static mg_tensor *e_mh_3d(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, t[1], t[1], t[2]); }
static mg_tensor *e_mh_w_shape(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, t[8], t[4], NULL); }
static mg_tensor *e_mh_b_shape(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, t[8], t[1], t[5]); }
static mg_tensor *e_mh_i32(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, t[6], t[1], t[2]); }
static mg_tensor *e_ln_i32_w(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[6], NULL, 1e-5f, t[1], t[2]); }
static mg_tensor *e_ln_i32_b(mg_ctx *c, mg_tensor **t) { return mg_layernorm_linear(c, t[0], t[3], t[6], 1e-5f, t[1], t[2]); }
static mg_tensor *e_mh_null_w(mg_ctx *c, mg_tensor **t) { return mg_merge_heads_linear(c, t[8], NULL, t[2]); }

START_TEST(fused_bad_arguments_say_what_is_wrong) {
    expect_error(e_gelu_null_x, "mg_gelu_linear: x is NULL");
    expect_error(e_gelu_null_w, "mg_gelu_linear: weight is NULL");
    expect_error(e_gelu_kind, "mg_gelu_linear: unknown GELU kind 7");
    expect_error(e_gelu_w_shape, "mg_gelu_linear: x(3,4) @ weight(5,4): weight must be (4,N)");
    expect_error(e_gelu_b_shape, "mg_gelu_linear: x(3,4) @ weight(4,5) + bias(3): bias must be (5)");
    expect_error(e_gelu_i32, "mg_gelu_linear: x(3,4) must be float32");
    expect_error(e_ln_null_x, "mg_layernorm_linear: x is NULL");
    expect_error(e_ln_null_w, "mg_layernorm_linear: weight is NULL");
    expect_error(e_ln_lnw, "mg_layernorm_linear: x(3,4) with ln_weight(3), ln_bias(4): both must be (4)");
    expect_error(e_ln_lnb, "mg_layernorm_linear: x(3,4) with ln_weight(none), ln_bias(3)");
    expect_error(e_ln_eps, "mg_layernorm_linear: eps -1 must be >= 0");
    expect_error(e_ln_w_shape, "mg_layernorm_linear: x(3,4) @ weight(5,4): weight must be (4,N)");
    expect_error(e_ln_b_shape, "mg_layernorm_linear: x(3,4) @ weight(4,5) + bias(3): bias must be (5)");
    expect_error(e_ln_i32, "mg_layernorm_linear: x(3,4) must be float32");
    expect_error(e_ln_empty, "mg_layernorm_linear: x(3,0) needs a non-empty last dim");
    expect_error(e_ln_i32_w, "mg_layernorm_linear: ln_weight(3,4) must be float32");
    expect_error(e_ln_i32_b, "mg_layernorm_linear: ln_bias(3,4) must be float32");
    expect_error(e_mh_null_x, "mg_merge_heads_linear: x is NULL");
    expect_error(e_mh_null_w, "mg_merge_heads_linear: weight is NULL");
    expect_error(e_mh_3d, "mg_merge_heads_linear: x(4,5) must be (B,H,T,D)");
    expect_error(e_mh_w_shape, "mg_merge_heads_linear, heads merged: x(1,3,4) @ weight(5,4): weight must be (4,N)");
    expect_error(e_mh_b_shape, "mg_merge_heads_linear, heads merged: x(1,3,4) @ weight(4,5) + bias(3)");
    expect_error(e_mh_i32, "mg_merge_heads_linear: x(3,4) must be float32");
}
END_TEST

/* ---- the scratch ---- */

START_TEST(scratch_nests_grows_and_is_reused) {
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_uint_eq(mg_ctx_scratch_bytes(ctx), 0);
    const size_t m0 = mg_ctx_scratch_mark(ctx);
    ck_assert_uint_eq(m0, 0);
    unsigned char *a = mg_ctx_scratch_alloc(ctx, 1000, "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    memset(a, 0xA5, 1000);
    const size_t m1 = mg_ctx_scratch_mark(ctx);
    ck_assert_uint_eq(m1, 1024); /* rounded to 64 bytes */
    unsigned char *b = mg_ctx_scratch_alloc(ctx, 5u << 20, "b"); /* past the block: a buffer of its own */
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)b % 64, 0);
    memset(b, 0x5A, 5u << 20);
    unsigned char *c = mg_ctx_scratch_alloc(ctx, 100, "c");
    ck_assert_ptr_nonnull(c);
    memset(c, 0x11, 100);
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(a[i], 0xA5);
    ck_assert_uint_eq(b[12345], 0x5A);
    mg_ctx_scratch_release(ctx, m1);
    ck_assert_uint_eq(mg_ctx_scratch_mark(ctx), m1);
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(a[i], 0xA5); /* below the mark: untouched */
    const size_t peak = mg_ctx_scratch_bytes(ctx);
    ck_assert_uint_ge(peak, 1024 + (5u << 20) + 128);
    mg_ctx_scratch_release(ctx, m0);
    ck_assert_uint_eq(mg_ctx_scratch_mark(ctx), 0);
    /* released: the block now holds the high-water mark, and the same need fits in it in order */
    unsigned char *a2 = mg_ctx_scratch_alloc(ctx, 1000, "a");
    unsigned char *b2 = mg_ctx_scratch_alloc(ctx, 5u << 20, "b");
    ck_assert_ptr_eq(b2, a2 + 1024);
    ck_assert_uint_eq(mg_ctx_scratch_bytes(ctx), peak);
    mg_ctx_reset(ctx); /* the reset releases what is left */
    ck_assert_uint_eq(mg_ctx_scratch_mark(ctx), 0);
    ck_assert_uint_eq(mg_ctx_scratch_bytes(ctx), peak);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(scratch_of_a_fixed_arena_comes_from_it) {
    tu_trap trap;
    mg_ctx *ctx = tu_trapping_ctx(&trap, 1 << 16);
    const size_t used = mg_ctx_used_bytes(ctx);
    ck_assert_ptr_nonnull(mg_ctx_scratch_alloc(ctx, 4096, "fixed scratch"));
    ck_assert_uint_eq(mg_ctx_used_bytes(ctx), used + 4096);
    ck_assert_uint_eq(mg_ctx_scratch_bytes(ctx), 0);
    ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, 1 << 20, "too big a scratch"));
    ck_assert_int_eq(trap.calls, 1);
    ck_assert_msg(strstr(trap.msg, "too big a scratch"), "%s", trap.msg);
    mg_ctx_free(ctx);
}
END_TEST

/* mg_backward releases a node's scratch: after a bf16 step the mark is back at 0, and the dy
 * copies of backward are not in the arena (a second backward adds next to nothing to it). */
START_TEST(backward_releases_its_scratch) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    mg_rng r = mg_rng_make(9);
    mg_tensor *x = filled(ctx, 2, (int64_t[]){64, 48}, &r, 1.0f, 0.0f);
    mg_tensor *w = filled(ctx, 2, (int64_t[]){48, 40}, &r, 0.1f, 0.0f);
    mg_tensor *w2 = filled(ctx, 2, (int64_t[]){40, 24}, &r, 0.1f, 0.0f);
    mg_tensor_set_requires_grad(w, true);
    mg_tensor_set_requires_grad(w2, true);
    mg_tensor *loss = mg_sum(ctx, mg_matmul(ctx, mg_linear(ctx, x, w, NULL), w2));
    mg_backward(ctx, loss);
    ck_assert_uint_eq(mg_ctx_scratch_mark(ctx), 0);
    ck_assert_uint_ge(mg_ctx_scratch_bytes(ctx), (size_t)(64 * 40) * 2); /* dy of the linear in bf16 */
    const size_t used = mg_ctx_used_bytes(ctx);
    mg_backward(ctx, loss);
    /* gradients reused, the bf16 copies of dy and dC (8192 bytes) in the scratch */
    ck_assert_uint_lt(mg_ctx_used_bytes(ctx) - used, 1024);
    mg_ctx_free(ctx);
}
END_TEST

/* ---- a GPT step: bf16 takes no more memory than fp32 ---- */

static size_t gpt_step_bytes(mg_precision prec) {
    mg_gpt_config cfg = mg_gpt_config_default();
    cfg.vocab_size = 64, cfg.block_size = 64, cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64;
    mg_rng r = mg_rng_make(1);
    mg_gpt *g = NULL;
    ck_assert_int_eq(mg_gpt_new(&cfg, &r, &g), MG_OK);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, prec);
    for (int step = 0; step < 2; step++) {
        mg_ctx_reset(ctx);
        const int64_t B = 8, T = 64;
        mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){B, T});
        mg_tensor *tg = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){B, T});
        for (int64_t i = 0; i < B * T; i++) ids->i32[i] = (int32_t)mg_rng_below(&r, 64), tg->i32[i] = (int32_t)mg_rng_below(&r, 64);
        mg_params_zero_grad(mg_gpt_params(g));
        mg_backward(ctx, mg_gpt_loss(g, ctx, ids, tg, NULL));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    }
    const size_t bytes = mg_ctx_peak_bytes(ctx) + mg_ctx_scratch_bytes(ctx);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
    return bytes;
}

START_TEST(gpt_bf16_step_takes_no_more_memory_than_fp32) {
    const size_t fp32 = gpt_step_bytes(MG_PRECISION_FP32), bf16 = gpt_step_bytes(MG_PRECISION_BF16);
    printf("# GPT step (2 layers, 64 wide, 8 x 64 tokens), arena + scratch: fp32 %zu bytes, bf16 %zu bytes\n", fp32,
           bf16);
    ck_assert_msg(bf16 <= fp32, "bf16 step: %zu bytes of arena and scratch, fp32: %zu", bf16, fp32);
}
END_TEST

static Suite *bf16_memory_suite(void) {
    Suite *s = suite_create("bf16_memory");
    TCase *tc = tcase_create("bf16_memory");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, fused_gradcheck_fp32, 0, N_CASES);
    tcase_add_loop_test(tc, fused_bf16_matches_composition_bit_for_bit, 0, N_CASES);
    tcase_add_test(tc, fused_bf16_same_bits_on_1_and_2_threads);
    tcase_add_test(tc, fused_bad_arguments_say_what_is_wrong);
    tcase_add_test(tc, scratch_nests_grows_and_is_reused);
    tcase_add_test(tc, scratch_of_a_fixed_arena_comes_from_it);
    tcase_add_test(tc, backward_releases_its_scratch);
    tcase_add_test(tc, gpt_bf16_step_takes_no_more_memory_than_fp32);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_memory_suite)
