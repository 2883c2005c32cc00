/* Gradient checks: every op's backward against central finite differences, with mg_gradcheck
 * (minigrad/gradcheck.h).
 *
 * For an op f and a fixed random weighting R, the scalar L(x) = sum_i f(x)_i R_i is evaluated in
 * double from f's float32 output. The analytic gradient comes from mg_backward; the numeric one
 * from (L(x + h e_j) - L(x - h e_j)) / 2h for every element j of every float input. They must
 * agree within |a - n| <= atol + rtol |n|, with atol and rtol stated per case below. float32
 * forward passes limit how tight this can be: with h = 1e-2 the truncation error is O(h^2) for
 * smooth ops and the rounding error about 1e-7 |L| / h.
 * A coverage test fails if an op in ops.def has no case here.
 *
 * The fused op mg_linear is also held, far tighter than finite differences can, to the gradients
 * of the ops it fuses (mg_matmul then mg_add): each gradient within the rounding bound of the
 * product that forms it, (K + 4) eps sum |a b| over its inner dimension (tu_abs_product_bound). */
#include "gradcheck_assert.h"
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <string.h>

/* The case table below leaves trailing fields to their zero defaults on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define MAXIN 4

typedef struct gcase gcase;
typedef mg_tensor *(*op_fn)(mg_ctx *ctx, mg_tensor **in, const gcase *c);

typedef struct {
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    int ids_below; /* > 0: an int32 input with values in [0, ids_below) (not differentiated) */
    int ids_ignore_every; /* cross-entropy: every k-th target set to -1 */
} input_spec;

struct gcase {
    const char *name; /* readable case name */
    const char *op;   /* mg_op_def name it covers */
    op_fn fn;
    int n_in;
    input_spec in[MAXIN];
    float h, atol, rtol;
    int64_t iarg[4];
    float farg[2];
};

/* ---- op wrappers ---- */
static mg_tensor *f_matmul(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_matmul(c, x[0], x[1]); }
static mg_tensor *f_matmul_nt(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_matmul_nt(c, x[0], x[1]); }
static mg_tensor *f_add(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_add(c, x[0], x[1]); }
static mg_tensor *f_mul(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_mul(c, x[0], x[1]); }
static mg_tensor *f_scale(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_scale(c, x[0], g->farg[0]); }
static mg_tensor *f_linear(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_linear(c, x[0], x[1], g->n_in > 2 ? x[2] : NULL); }
static mg_tensor *f_gelu(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_gelu(c, x[0], (mg_gelu_kind)g->iarg[0]); }
static mg_tensor *f_softmax(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_softmax(c, x[0]); }
static mg_tensor *f_layernorm(mg_ctx *c, mg_tensor **x, const gcase *g) {
    return mg_layernorm(c, x[0], g->n_in > 1 ? x[1] : NULL, g->n_in > 2 ? x[2] : NULL, 1e-5f);
}
static mg_tensor *f_embedding(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_embedding(c, x[0], x[1]); }
static mg_tensor *f_xent(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_cross_entropy(c, x[0], x[1], -1); }
static mg_tensor *f_reshape(mg_ctx *c, mg_tensor **x, const gcase *g) {
    return mg_reshape(c, x[0], 3, (int64_t[]){g->iarg[0], -1, g->iarg[1]});
}
static mg_tensor *f_split(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_split_heads(c, x[0], g->iarg[0], g->iarg[1], g->iarg[2]); }
static mg_tensor *f_merge(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_merge_heads(c, x[0]); }

static void linear_bias(const void *user, int64_t h, int64_t qpos, int64_t k0, int64_t n, float *logits) {
    const float *slope = user;
    for (int64_t j = 0; j < n; j++) logits[j] -= slope[h] * fabsf((float)(qpos - (k0 + j)));
}
static const float test_slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};

static mg_tensor *f_attention(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_attn_opts o = {.causal = g->iarg[0] != 0, .q_pos0 = g->iarg[1], .scale = g->farg[0]};
    if (g->iarg[2]) o.bias = linear_bias, o.bias_user = test_slopes;
    return mg_attention(c, x[0], x[1], x[2], &o);
}
static mg_tensor *f_rope(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_rope(c, x[0], g->iarg[0], 10000.0f); }
/* Attention with a bias tensor x[3] (iarg as f_attention's). */
static mg_tensor *f_attention_tbias(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_attn_opts o = {.causal = g->iarg[0] != 0, .q_pos0 = g->iarg[1], .scale = g->farg[0], .bias_tensor = x[3]};
    if (g->iarg[2]) o.bias = linear_bias, o.bias_user = test_slopes;
    return mg_attention(c, x[0], x[1], x[2], &o);
}
static mg_tensor *f_dropout(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_rng r = mg_rng_make(1234); /* same mask on every evaluation */
    return mg_dropout(c, x[0], g->farg[0], &r);
}
static mg_tensor *f_sum(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_sum(c, x[0]); }
static mg_tensor *f_mean(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_mean(c, x[0]); }
/* layers helper */
static mg_tensor *f_rms_norm(mg_ctx *c, mg_tensor **x, const gcase *g) {
    return mg_rms_norm(c, x[0], g->n_in > 1 ? x[1] : NULL, g->farg[0]);
}

/* Elementwise ops. A constant row added to an input (pattern: vals cycled along the last dim)
 * keeps every checked point a margin away from a kink (abs, clamp, maximum, minimum) or a pole or
 * domain edge (div, ln, sqrt, pow), whatever the random inputs in [-1, 1]. */
static mg_tensor *pattern(mg_ctx *c, const mg_tensor *like, int nv, const float *vals) {
    const int64_t n = like->ndim ? like->shape[like->ndim - 1] : 1;
    mg_tensor *t = mg_tensor_new(c, MG_F32, 1, (int64_t[]){n});
    for (int64_t i = 0; i < n; i++) t->data[i] = vals[i % nv];
    return t;
}
#define SHIFT(c, x, ...) mg_add(c, x, pattern(c, x, sizeof((float[]){__VA_ARGS__}) / sizeof(float), (float[]){__VA_ARGS__}))
static mg_tensor *f_sub(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_sub(c, x[0], x[1]); }
static mg_tensor *f_div(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_div(c, x[0], SHIFT(c, x[1], 2.0f, -2.0f)); }
static mg_tensor *f_maximum(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_maximum(c, SHIFT(c, x[0], 2.5f, -2.5f), x[1]); }
static mg_tensor *f_minimum(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_minimum(c, SHIFT(c, x[0], 2.5f, -2.5f), x[1]); }
static mg_tensor *f_silu(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_silu(c, mg_scale(c, x[0], g->farg[0])); }
static mg_tensor *f_exp(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_exp(c, x[0]); }
static mg_tensor *f_ln(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_ln(c, SHIFT(c, x[0], 1.5f)); }
static mg_tensor *f_sqrt(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_sqrt(c, SHIFT(c, x[0], 1.5f)); }
static mg_tensor *f_neg(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_neg(c, x[0]); }
static mg_tensor *f_abs(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_abs(c, SHIFT(c, x[0], 1.5f, -1.5f)); }
static mg_tensor *f_pow(mg_ctx *c, mg_tensor **x, const gcase *g) { /* iarg[0]: on (0.5, 2.5) only */
    return mg_pow(c, g->iarg[0] ? SHIFT(c, x[0], 1.5f) : x[0], g->farg[0]);
}
static mg_tensor *f_clamp(mg_ctx *c, mg_tensor **x, const gcase *g) { /* below, inside, above (min, max) = (-1.5, 1.5) */
    return mg_clamp(c, SHIFT(c, x[0], -3.0f, 0.0f, 3.0f), g->farg[0], g->farg[1]);
}
static mg_tensor *f_where(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_where(c, x[0], x[1], x[2]); }
static mg_tensor *f_masked_fill(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_masked_fill(c, x[0], x[1], g->farg[0]); }
/* reductions over a dim, softmax over a dim, shape ops, batched matmul, losses: iarg[0] the dim,
 * iarg[1] keepdim */
static mg_tensor *f_sum_dim(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_sum_dim(c, x[0], g->iarg[0], g->iarg[1]); }
static mg_tensor *f_mean_dim(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_mean_dim(c, x[0], g->iarg[0], g->iarg[1]); }
/* The max of x + offsets, the offsets 3 apart and scrambled (the maximum of each lane at varied
 * positions): no step of the finite difference moves a lane's maximum to another element. */
static mg_tensor *f_max_dim(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_tensor *off = mg_tensor_new(c, MG_F32, x[0]->ndim, x[0]->shape);
    for (int64_t i = 0; i < off->numel; i++) off->data[i] = 3.0f * (float)((i * 37) % off->numel);
    return mg_max_dim(c, mg_add(c, x[0], off), g->iarg[0], g->iarg[1]);
}
static mg_tensor *f_logsumexp(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_logsumexp(c, x[0], g->iarg[0], g->iarg[1]); }
static mg_tensor *f_softmax_dim(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_softmax_dim(c, x[0], g->iarg[0]); }
static mg_tensor *f_log_softmax(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_log_softmax(c, x[0], g->iarg[0]); }
static mg_tensor *f_transpose(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_transpose(c, x[0], g->iarg[0], g->iarg[1]); }
static mg_tensor *f_permute(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_permute(c, x[0], x[0]->ndim, g->iarg); }
static mg_tensor *f_index_select(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_index_select(c, x[0], g->iarg[0], x[1]); }
static mg_tensor *f_bmm(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_bmm(c, x[0], x[1]); }
static mg_tensor *f_mse(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_mse_loss(c, x[0], x[1]); }
static mg_tensor *f_nll(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_nll_loss(c, x[0], x[1], -1); }
static mg_tensor *f_xent_smooth(mg_ctx *c, mg_tensor **x, const gcase *g) {
    return mg_cross_entropy_smooth(c, x[0], x[1], -1, g->farg[0]);
}
/* recurrent-cell ops */
static mg_tensor *f_sigmoid(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_sigmoid(c, x[0]); }
static mg_tensor *f_tanh(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_tanh(c, x[0]); }
static mg_tensor *f_narrow(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_narrow(c, x[0], g->iarg[0], g->iarg[1], g->iarg[2]); }
static mg_tensor *f_cat(mg_ctx *c, mg_tensor **x, const gcase *g) { return mg_cat(c, x, g->n_in, g->iarg[0]); }
/* conv / pool / relu: iarg = stride, padding, dilation, groups (conv; both axes alike) or kernel,
 * stride, padding (pools); farg[0] != 0: conv1d causal. A third input is the bias. */
static mg_tensor *f_relu(mg_ctx *c, mg_tensor **x, const gcase *g) { (void)g; return mg_relu(c, x[0]); }
static mg_tensor *f_conv2d(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_conv2d_opts o = {{g->iarg[0], g->iarg[0]}, {g->iarg[1], g->iarg[1]}, {g->iarg[2], g->iarg[2]}, g->iarg[3]};
    return mg_conv2d(c, x[0], x[1], g->n_in > 2 ? x[2] : NULL, &o);
}
static mg_tensor *f_conv1d(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_conv1d_opts o = {g->iarg[0], g->iarg[1], g->iarg[2], g->iarg[3], g->farg[0] != 0.0f};
    return mg_conv1d(c, x[0], x[1], g->n_in > 2 ? x[2] : NULL, &o);
}
static mg_tensor *f_max_pool2d(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_pool2d_opts o = {{g->iarg[0], g->iarg[0]}, {g->iarg[1], g->iarg[1]}, {g->iarg[2], g->iarg[2]}};
    return mg_max_pool2d(c, x[0], &o);
}
static mg_tensor *f_avg_pool2d(mg_ctx *c, mg_tensor **x, const gcase *g) {
    mg_pool2d_opts o = {{g->iarg[0], g->iarg[0]}, {g->iarg[1], g->iarg[1]}, {g->iarg[2], g->iarg[2]}};
    return mg_avg_pool2d(c, x[0], &o);
}

#define S1(a) 1, {a}
#define S2(a, b) 2, {a, b}
#define S3(a, b, c) 3, {a, b, c}
#define S4(a, b, c, d) 4, {a, b, c, d}
#define F(...) {__VA_ARGS__, 0, 0}
#define IDS(below, ...) {__VA_ARGS__, below, 0}

/* Tolerances: most ops are smooth and checked at atol 1e-3, rtol 1e-2. */
static const gcase cases[] = {
    {"matmul 2d", "mg_matmul", f_matmul, 2, {F(S2(4, 17)), F(S2(17, 3))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul 1x1", "mg_matmul", f_matmul, 2, {F(S2(1, 1)), F(S2(1, 1))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul batched a, shared b", "mg_matmul", f_matmul, 2, {F(S3(2, 3, 5)), F(S2(5, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul batched both", "mg_matmul", f_matmul, 2, {F(S4(2, 3, 4, 5)), F(S4(2, 3, 5, 6))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul_nt shared", "mg_matmul_nt", f_matmul_nt, 2, {F(S3(2, 3, 19)), F(S2(7, 19))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul_nt batched", "mg_matmul_nt", f_matmul_nt, 2, {F(S4(2, 2, 3, 5)), F(S4(2, 2, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"add same shape", "mg_add", f_add, 2, {F(S2(3, 5)), F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"add bias", "mg_add", f_add, 2, {F(S3(2, 70, 17)), F(S1(17))}, 1e-2f, 1e-3f, 1e-2f},
    {"add row table", "mg_add", f_add, 2, {F(S3(3, 4, 5)), F(S2(4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"mul same shape", "mg_mul", f_mul, 2, {F(S2(3, 5)), F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"mul broadcast", "mg_mul", f_mul, 2, {F(S3(2, 3, 7)), F(S1(7))}, 1e-2f, 1e-3f, 1e-2f},
    {"scale", "mg_scale", f_scale, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .farg = {-1.7f}},
    {"scale batched", "mg_scale", f_scale, 1, {F(S3(2, 3, 37))}, 1e-2f, 1e-3f, 1e-2f, .farg = {0.3f}},
    {"linear bias", "mg_linear", f_linear, 3, {F(S3(2, 70, 5)), F(S2(5, 7)), F(S1(7))}, 1e-2f, 1e-3f, 1e-2f},
    {"linear no bias", "mg_linear", f_linear, 2, {F(S2(3, 19)), F(S2(19, 4))}, 1e-2f, 1e-3f, 1e-2f},
    {"linear 1-d x", "mg_linear", f_linear, 3, {F(S1(6)), F(S2(6, 3)), F(S1(3))}, 1e-2f, 1e-3f, 1e-2f},
    {"gelu tanh", "mg_gelu", f_gelu, 1, {F(S2(5, 19))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {MG_GELU_TANH}},
    {"gelu erf", "mg_gelu", f_gelu, 1, {F(S2(5, 19))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {MG_GELU_ERF}},
    {"gelu tanh batched", "mg_gelu", f_gelu, 1, {F(S3(2, 3, 33))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {MG_GELU_TANH}},
    {"gelu erf one row", "mg_gelu", f_gelu, 1, {F(S1(70))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {MG_GELU_ERF}},
    {"softmax", "mg_softmax", f_softmax, 1, {F(S3(2, 3, 17))}, 1e-2f, 1e-3f, 1e-2f},
    {"softmax wide", "mg_softmax", f_softmax, 1, {F(S2(4, 33))}, 1e-2f, 1e-3f, 1e-2f},
    {"softmax batched 4-d", "mg_softmax", f_softmax, 1, {F(S4(2, 2, 3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"layernorm w b", "mg_layernorm", f_layernorm, 3, {F(S3(2, 3, 17)), F(S1(17)), F(S1(17))}, 1e-2f, 2e-3f, 2e-2f},
    {"layernorm many rows", "mg_layernorm", f_layernorm, 3, {F(S2(130, 5)), F(S1(5)), F(S1(5))}, 1e-2f, 2e-3f, 2e-2f},
    {"layernorm plain", "mg_layernorm", f_layernorm, 1, {F(S2(4, 33))}, 1e-2f, 2e-3f, 2e-2f},
    {"embedding", "mg_embedding", f_embedding, 2, {F(S2(11, 5)), IDS(11, S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"embedding wide", "mg_embedding", f_embedding, 2, {F(S2(4, 37)), IDS(4, S1(9))}, 1e-2f, 1e-3f, 1e-2f},
    {"cross entropy", "mg_cross_entropy", f_xent, 2, {F(S3(2, 5, 11)), IDS(11, S2(2, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"cross entropy ignore", "mg_cross_entropy", f_xent, 2, {F(S2(9, 7)), {S1(9), 7, 3}}, 1e-2f, 1e-3f, 1e-2f},
    {"reshape", "mg_reshape", f_reshape, 1, {F(S2(6, 10))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {3, 5}},
    {"reshape 4-d", "mg_reshape", f_reshape, 1, {F(S4(2, 3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 5}},
    {"split heads", "mg_split_heads", f_split, 1, {F(S3(2, 3, 18))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 6, 6}},
    {"split heads offset", "mg_split_heads", f_split, 1, {F(S3(3, 5, 30))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 10, 20}},
    {"merge heads", "mg_merge_heads", f_merge, 1, {F(S4(2, 3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"merge heads one batch", "mg_merge_heads", f_merge, 1, {F(S4(1, 4, 3, 17))}, 1e-2f, 1e-3f, 1e-2f},
    {"attention causal", "mg_attention", f_attention, 3, {F(S4(2, 2, 5, 3)), F(S4(2, 2, 5, 3)), F(S4(2, 2, 5, 3))},
     1e-2f, 2e-3f, 2e-2f, .iarg = {1, 0, 0}},
    {"attention full", "mg_attention", f_attention, 3, {F(S4(1, 3, 4, 6)), F(S4(1, 3, 7, 6)), F(S4(1, 3, 7, 6))},
     1e-2f, 2e-3f, 2e-2f, .iarg = {0, 0, 0}},
    {"attention causal offset + bias", "mg_attention", f_attention, 3,
     {F(S4(1, 4, 3, 4)), F(S4(1, 4, 6, 4)), F(S4(1, 4, 6, 4))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {1, 3, 1}},
    {"attention T=1 one head", "mg_attention", f_attention, 3, {F(S4(2, 1, 1, 5)), F(S4(2, 1, 1, 5)), F(S4(2, 1, 1, 5))},
     1e-2f, 2e-3f, 2e-2f, .iarg = {1, 0, 0}, .farg = {0.7f}},
    {"rope", "mg_rope", f_rope, 1, {F(S4(2, 2, 5, 6))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {3}},
    {"rope from 0, wide", "mg_rope", f_rope, 1, {F(S4(1, 3, 7, 18))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {0}},
    {"dropout", "mg_dropout", f_dropout, 1, {F(S2(7, 9))}, 1e-2f, 1e-3f, 1e-2f, .farg = {0.3f}},
    {"dropout batched", "mg_dropout", f_dropout, 1, {F(S3(2, 3, 37))}, 1e-2f, 1e-3f, 1e-2f, .farg = {0.5f}},
    {"sum", "mg_sum", f_sum, 1, {F(S3(3, 5, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"sum large", "mg_sum", f_sum, 1, {F(S2(70, 130))}, 1e-2f, 1e-2f, 1e-2f},
    {"mean", "mg_mean", f_mean, 1, {F(S2(4, 9))}, 1e-2f, 1e-3f, 1e-2f},
    {"mean batched", "mg_mean", f_mean, 1, {F(S3(3, 5, 17))}, 1e-2f, 1e-3f, 1e-2f},
    /* elementwise ops, broadcasting */
    {"add broadcast both ways", "mg_add", f_add, 2, {F(S3(3, 1, 5)), F(S2(4, 1))}, 1e-2f, 1e-3f, 1e-2f},
    {"add a broadcast to b", "mg_add", f_add, 2, {F(S1(5)), F(S3(2, 3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"mul broadcast both ways", "mg_mul", f_mul, 2, {F(S4(2, 1, 3, 1)), F(S3(4, 1, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"mul a broadcast to b", "mg_mul", f_mul, 2, {F(S2(1, 7)), F(S3(2, 3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"sub same shape", "mg_sub", f_sub, 2, {F(S2(3, 5)), F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"sub broadcast", "mg_sub", f_sub, 2, {F(S3(3, 1, 5)), F(S2(4, 1))}, 1e-2f, 1e-3f, 1e-2f},
    {"div same shape", "mg_div", f_div, 2, {F(S2(3, 5)), F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"div broadcast", "mg_div", f_div, 2, {F(S2(4, 1)), F(S3(3, 1, 6))}, 1e-2f, 1e-3f, 1e-2f},
    {"maximum same shape", "mg_maximum", f_maximum, 2, {F(S2(3, 6)), F(S2(3, 6))}, 1e-2f, 1e-3f, 1e-2f},
    {"maximum broadcast", "mg_maximum", f_maximum, 2, {F(S3(3, 1, 5)), F(S2(4, 1))}, 1e-2f, 1e-3f, 1e-2f},
    {"minimum same shape", "mg_minimum", f_minimum, 2, {F(S2(3, 6)), F(S2(3, 6))}, 1e-2f, 1e-3f, 1e-2f},
    {"minimum broadcast", "mg_minimum", f_minimum, 2, {F(S2(1, 4)), F(S3(2, 3, 1))}, 1e-2f, 1e-3f, 1e-2f},
    {"silu", "mg_silu", f_silu, 1, {F(S3(2, 3, 7))}, 1e-2f, 1e-3f, 1e-2f, .farg = {4.0f}},
    {"exp", "mg_exp", f_exp, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"ln", "mg_ln", f_ln, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"sqrt", "mg_sqrt", f_sqrt, 1, {F(S3(2, 1, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"neg", "mg_neg", f_neg, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"abs", "mg_abs", f_abs, 1, {F(S2(3, 8))}, 1e-2f, 1e-3f, 1e-2f},
    {"pow 3", "mg_pow", f_pow, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .farg = {3.0f}},
    {"pow 2.5", "mg_pow", f_pow, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1}, .farg = {2.5f}},
    {"pow -1.5", "mg_pow", f_pow, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1}, .farg = {-1.5f}},
    {"pow 0", "mg_pow", f_pow, 1, {F(S1(5))}, 1e-2f, 1e-3f, 1e-2f, .farg = {0.0f}},
    {"clamp", "mg_clamp", f_clamp, 1, {F(S2(4, 9))}, 1e-2f, 1e-3f, 1e-2f, .farg = {-1.5f, 1.5f}},
    {"clamp no lower bound", "mg_clamp", f_clamp, 1, {F(S2(4, 9))}, 1e-2f, 1e-3f, 1e-2f, .farg = {-INFINITY, 1.5f}},
    {"where", "mg_where", f_where, 3, {IDS(2, S2(3, 5)), F(S2(3, 5)), F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"where broadcast", "mg_where", f_where, 3, {IDS(2, S2(4, 1)), F(S3(3, 1, 5)), F(S1(5))}, 1e-2f, 1e-3f, 1e-2f},
    {"masked_fill", "mg_masked_fill", f_masked_fill, 2, {F(S3(3, 4, 5)), IDS(2, S2(4, 1))}, 1e-2f, 1e-3f, 1e-2f,
     .farg = {-7.0f}},
    {"masked_fill x broadcast", "mg_masked_fill", f_masked_fill, 2, {F(S2(4, 1)), IDS(2, S3(3, 1, 5))}, 1e-2f, 1e-3f,
     1e-2f, .farg = {0.5f}},
    /* reductions over a dim, softmax over a dim, shape ops, batched matmul, losses */
    {"sum_dim first, keepdim", "mg_sum_dim", f_sum_dim, 1, {F(S3(3, 1, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {0, 1}},
    {"sum_dim middle", "mg_sum_dim", f_sum_dim, 1, {F(S3(2, 3, 70))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-2, 0}},
    {"mean_dim", "mg_mean_dim", f_mean_dim, 1, {F(S3(2, 3, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1, 0}},
    {"mean_dim last, keepdim", "mg_mean_dim", f_mean_dim, 1, {F(S2(4, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1, 1}},
    {"max_dim middle", "mg_max_dim", f_max_dim, 1, {F(S3(3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1, 0}},
    {"max_dim last, keepdim", "mg_max_dim", f_max_dim, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1, 1}},
    {"logsumexp middle", "mg_logsumexp", f_logsumexp, 1, {F(S3(3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1, 0}},
    {"logsumexp last, keepdim", "mg_logsumexp", f_logsumexp, 1, {F(S2(2, 9))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1, 1}},
    {"softmax_dim middle", "mg_softmax_dim", f_softmax_dim, 1, {F(S3(2, 5, 3))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1}},
    {"softmax_dim first", "mg_softmax_dim", f_softmax_dim, 1, {F(S2(4, 6))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-2}},
    {"softmax_dim last", "mg_softmax_dim", f_softmax_dim, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1}},
    {"log_softmax middle", "mg_log_softmax", f_log_softmax, 1, {F(S3(2, 5, 3))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1}},
    {"log_softmax last", "mg_log_softmax", f_log_softmax, 1, {F(S2(3, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1}},
    {"transpose outer", "mg_transpose", f_transpose, 1, {F(S3(2, 3, 4))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {0, 2}},
    {"transpose 2-d", "mg_transpose", f_transpose, 1, {F(S2(3, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1, 0}},
    {"permute 4-d", "mg_permute", f_permute, 1, {F(S4(2, 3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 0, -1, 1}},
    {"index_select middle", "mg_index_select", f_index_select, 2, {F(S3(4, 5, 3)), IDS(5, S1(7))}, 1e-2f, 1e-3f, 1e-2f,
     .iarg = {1}},
    {"index_select last, repeats", "mg_index_select", f_index_select, 2, {F(S2(2, 3)), IDS(3, S1(9))}, 1e-2f, 1e-3f,
     1e-2f, .iarg = {-1}},
    {"bmm", "mg_bmm", f_bmm, 2, {F(S3(3, 2, 5)), F(S3(3, 5, 4))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul broadcast both", "mg_matmul", f_matmul, 2, {F(S4(2, 1, 3, 4)), F(S3(3, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul broadcast 2-d a", "mg_matmul", f_matmul, 2, {F(S2(3, 4)), F(S3(2, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul broadcast size-1 a", "mg_matmul", f_matmul, 2, {F(S3(1, 3, 4)), F(S3(2, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul broadcast size-1 b", "mg_matmul", f_matmul, 2, {F(S3(2, 3, 4)), F(S3(1, 4, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"matmul_nt broadcast", "mg_matmul_nt", f_matmul_nt, 2, {F(S4(2, 1, 3, 4)), F(S3(3, 5, 4))}, 1e-2f, 1e-3f, 1e-2f},
    {"mse_loss", "mg_mse_loss", f_mse, 2, {F(S3(2, 3, 5)), F(S3(2, 3, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"nll_loss", "mg_nll_loss", f_nll, 2, {F(S3(2, 5, 11)), IDS(11, S2(2, 5))}, 1e-2f, 1e-3f, 1e-2f},
    {"nll_loss ignore", "mg_nll_loss", f_nll, 2, {F(S2(9, 7)), {S1(9), 7, 3}}, 1e-2f, 1e-3f, 1e-2f},
    {"cross entropy smoothed", "mg_cross_entropy_smooth", f_xent_smooth, 2, {F(S3(2, 5, 11)), IDS(11, S2(2, 5))}, 1e-2f,
     1e-3f, 1e-2f, .farg = {0.1f}},
    {"cross entropy smoothed ignore", "mg_cross_entropy_smooth", f_xent_smooth, 2, {F(S2(9, 7)), {S1(9), 7, 3}}, 1e-2f,
     1e-3f, 1e-2f, .farg = {0.3f}},
    /* layers helper */
    {"rms_norm w", "mg_rms_norm", f_rms_norm, 2, {F(S3(2, 3, 17)), F(S1(17))}, 1e-2f, 2e-3f, 2e-2f, .farg = {1e-5f}},
    {"rms_norm many rows", "mg_rms_norm", f_rms_norm, 2, {F(S2(130, 5)), F(S1(5))}, 1e-2f, 2e-3f, 2e-2f,
     .farg = {1e-5f}},
    {"rms_norm plain, size-1 dims", "mg_rms_norm", f_rms_norm, 1, {F(S4(1, 4, 1, 33))}, 1e-2f, 2e-3f, 2e-2f,
     .farg = {0.1f}},
    {"rms_norm C=1", "mg_rms_norm", f_rms_norm, 2, {F(S2(3, 1)), F(S1(1))}, 1e-2f, 2e-3f, 2e-2f, .farg = {0.5f}},
    /* attention with a bias tensor */
    {"attention bias tensor causal", "mg_attention", f_attention_tbias, 4,
     {F(S4(2, 2, 5, 3)), F(S4(2, 2, 5, 3)), F(S4(2, 2, 5, 3)), F(S4(2, 2, 5, 5))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {1, 0, 0}},
    {"attention bias tensor full, per head", "mg_attention", f_attention_tbias, 4,
     {F(S4(2, 3, 4, 6)), F(S4(2, 3, 7, 6)), F(S4(2, 3, 7, 6)), F(S3(3, 4, 7))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {0, 0, 0}},
    {"attention bias tensor (1,1,Tq,Tk) causal offset + callback", "mg_attention", f_attention_tbias, 4,
     {F(S4(2, 4, 3, 4)), F(S4(2, 4, 6, 4)), F(S4(2, 4, 6, 4)), F(S4(1, 1, 3, 6))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {1, 3, 1}},
    {"attention bias tensor (B,1,Tq,Tk) full", "mg_attention", f_attention_tbias, 4,
     {F(S4(2, 2, 5, 4)), F(S4(2, 2, 5, 4)), F(S4(2, 2, 5, 4)), F(S4(2, 1, 5, 5))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {0, 0, 0}},
    {"attention bias tensor (Tq,Tk) causal", "mg_attention", f_attention_tbias, 4,
     {F(S4(1, 2, 6, 3)), F(S4(1, 2, 6, 3)), F(S4(1, 2, 6, 3)), F(S2(6, 6))}, 1e-2f, 2e-3f, 2e-2f, .iarg = {1, 0, 0}},
    /* recurrent-cell ops */
    {"sigmoid", "mg_sigmoid", f_sigmoid, 1, {F(S3(2, 3, 7))}, 1e-2f, 1e-3f, 1e-2f},
    {"tanh", "mg_tanh", f_tanh, 1, {F(S2(5, 9))}, 1e-2f, 1e-3f, 1e-2f},
    {"narrow middle dim", "mg_narrow", f_narrow, 1, {F(S3(2, 5, 3))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {1, 1, 3}},
    {"narrow last dim, negative", "mg_narrow", f_narrow, 1, {F(S2(3, 8))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {-1, -5, 4}},
    {"cat three along dim 1", "mg_cat", f_cat, 3, {F(S3(2, 1, 3)), F(S3(2, 4, 3)), F(S3(2, 2, 3))}, 1e-2f, 1e-3f,
     1e-2f, .iarg = {1}},
    {"cat four along dim -1", "mg_cat", f_cat, 4, {F(S2(3, 2)), F(S2(3, 1)), F(S2(3, 5)), F(S2(3, 2))}, 1e-2f, 1e-3f,
     1e-2f, .iarg = {-1}},
    /* relu and max pooling have kinks: a small step keeps every perturbation on one side of them */
    {"relu", "mg_relu", f_relu, 1, {F(S3(2, 3, 11))}, 1e-3f, 1e-3f, 1e-2f},
    {"conv2d pad 1 + bias, non-square", "mg_conv2d", f_conv2d, 3, {F(S4(2, 3, 5, 6)), F(S4(4, 3, 3, 2)), F(S1(4))},
     1e-2f, 1e-3f, 1e-2f, .iarg = {1, 1, 1, 1}},
    {"conv2d stride 2, dilation 2, groups 2, pad 2", "mg_conv2d", f_conv2d, 3,
     {F(S4(1, 4, 7, 6)), F(S4(6, 2, 2, 3)), F(S1(6))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 2, 2, 2}},
    {"conv2d 1x1 no bias, size-1 dims", "mg_conv2d", f_conv2d, 2, {F(S4(3, 1, 1, 1)), F(S4(2, 1, 1, 1))}, 1e-2f,
     1e-3f, 1e-2f},
    {"conv1d stride 2 pad 1 + bias", "mg_conv1d", f_conv1d, 3, {F(S3(2, 3, 9)), F(S3(4, 3, 3)), F(S1(4))}, 1e-2f,
     1e-3f, 1e-2f, .iarg = {2, 1, 1, 1}},
    {"conv1d causal dilation 2 groups 3", "mg_conv1d", f_conv1d, 3, {F(S3(1, 3, 7)), F(S3(6, 1, 3)), F(S1(6))},
     1e-2f, 1e-3f, 1e-2f, .iarg = {1, 0, 2, 3}, .farg = {1.0f}},
    {"max_pool2d 2x2", "mg_max_pool2d", f_max_pool2d, 1, {F(S4(2, 3, 5, 7))}, 1e-3f, 1e-3f, 1e-2f, .iarg = {2, 0, 0}},
    {"max_pool2d 3x3 stride 2 pad 1", "mg_max_pool2d", f_max_pool2d, 1, {F(S4(1, 2, 6, 5))}, 1e-3f, 1e-3f, 1e-2f,
     .iarg = {3, 2, 1}},
    {"avg_pool2d 2x2", "mg_avg_pool2d", f_avg_pool2d, 1, {F(S4(2, 3, 5, 7))}, 1e-2f, 1e-3f, 1e-2f, .iarg = {2, 0, 0}},
    {"avg_pool2d 3x3 stride 1 pad 1", "mg_avg_pool2d", f_avg_pool2d, 1, {F(S4(1, 2, 4, 5))}, 1e-2f, 1e-3f, 1e-2f,
     .iarg = {3, 1, 1}},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void make_input(mg_ctx *ctx, const input_spec *s, mg_rng *r, mg_tensor **out) {
    if (s->ids_below > 0) {
        mg_tensor *t = mg_tensor_new(ctx, MG_I32, s->ndim, s->shape);
        for (int64_t i = 0; i < t->numel; i++) {
            t->i32[i] = (int32_t)mg_rng_below(r, (uint32_t)s->ids_below);
            if (s->ids_ignore_every && i % s->ids_ignore_every == 1) t->i32[i] = -1;
        }
        *out = t;
    } else {
        mg_tensor *t = mg_tensor_new(ctx, MG_F32, s->ndim, s->shape);
        for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, -1.0f, 1.0f);
        *out = t;
    }
}

/* The case's float inputs arrive as the checker's views, in order; its int32 inputs (ids,
 * targets) come from the case's own tensors. */
typedef struct {
    const gcase *c;
    mg_tensor *in[MAXIN];
} grun;

static mg_tensor *run_case(mg_ctx *ctx, mg_tensor *const *views, void *user) {
    const grun *g = user;
    mg_tensor *x[MAXIN];
    int v = 0;
    for (int k = 0; k < g->c->n_in; k++) x[k] = g->in[k]->dtype == MG_F32 ? views[v++] : g->in[k];
    return g->c->fn(ctx, x, g->c);
}

START_TEST(gradcheck) {
    const gcase *c = &cases[_i];
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(1000 + (uint64_t)_i);
    grun g = {c, {0}};
    mg_tensor *floats[MAXIN];
    int n_float = 0;
    for (int k = 0; k < c->n_in; k++) {
        make_input(ctx, &c->in[k], &r, &g.in[k]);
        if (g.in[k]->dtype == MG_F32) floats[n_float++] = g.in[k];
    }
    ck_assert_int_gt(n_float, 0);
    mg_gradcheck_opts o = gc_opts(c->h, c->atol, c->rtol, 0, 1000 + (uint64_t)_i);
    int64_t checked = gc_assert_pass(c->name, run_case, &g, floats, n_float, NULL, &o);
    int64_t want = 0;
    for (int k = 0; k < n_float; k++) want += floats[k]->numel;
    ck_assert_int_eq(checked, want); /* every element of every float input */
    mg_ctx_free(ctx);
}
END_TEST

/* ---- mg_linear against the ops it fuses ---- */

static mg_tensor *rand_leaf(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, bool grad) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, -1.0f, 1.0f);
    mg_tensor_set_requires_grad(t, grad);
    return t;
}

/* A new leaf with t's values, wanting a gradient when t does. */
static mg_tensor *copy_leaf(mg_ctx *ctx, const mg_tensor *t) {
    mg_tensor *c = mg_tensor_new(ctx, MG_F32, t->ndim, t->shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    memcpy(c->data, t->data, (size_t)t->numel * sizeof(float));
    mg_tensor_set_requires_grad(c, mg_requires_grad(t));
    return c;
}

/* Backward of sum_i y_i R_i, so that backward sees dy = R. */
static void backward_weighted(mg_ctx *ctx, mg_tensor *y, mg_tensor *R) {
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
}

/* x (2, M, K) folding its batch, W (K, N) and b (N) each once into mg_linear and, as copies, into
 * mg_matmul then mg_add: dx = dy W^T (a sum over N), dW = x^T dy (over the 2M rows), db = the
 * column sums of dy (over the 2M rows). (The forward values of the same pair: test_ops_forward.c.) */
START_TEST(linear_grads_match_matmul_plus_add) {
    const int64_t Ms[] = {1, 3, 130}, Ks[] = {1, 7, 65}, Ns[] = {1, 17, 63};
    mg_rng rng = mg_rng_make(12);
    char what[160];
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < 3; c++)
                for (int bias = 0; bias < 2; bias++) {
                    const int64_t M = Ms[a], K = Ks[k], N = Ns[c];
                    mg_ctx *ctx = mg_ctx_new(0);
                    ck_assert_ptr_nonnull(ctx);
                    mg_tensor *x = rand_leaf(ctx, &rng, 3, (int64_t[]){2, M, K}, true);
                    mg_tensor *w = rand_leaf(ctx, &rng, 2, (int64_t[]){K, N}, true);
                    mg_tensor *b = bias ? rand_leaf(ctx, &rng, 1, (int64_t[]){N}, true) : NULL;
                    mg_tensor *R = rand_leaf(ctx, &rng, 3, (int64_t[]){2, M, N}, false);
                    mg_tensor *x2 = copy_leaf(ctx, x), *w2 = copy_leaf(ctx, w), *b2 = b ? copy_leaf(ctx, b) : NULL;
                    mg_tensor *y = mg_linear(ctx, x, w, b);
                    mg_tensor *y2 = mg_matmul(ctx, x2, w2);
                    if (b2) y2 = mg_add(ctx, y2, b2);
                    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
                    snprintf(what, sizeof what, "mg_linear (2,%lld,%lld) @ (%lld,%lld)%s gradients", (long long)M,
                             (long long)K, (long long)K, (long long)N, bias ? " + bias" : "");
                    backward_weighted(ctx, y, R);
                    backward_weighted(ctx, y2, R);
                    float *tx = tu_abs_product_bound(R->data, w->data, NULL, 2 * M, N, K, false, true);
                    float *tw = tu_abs_product_bound(x->data, R->data, NULL, K, 2 * M, N, true, false);
                    tu_expect_within(what, x->grad, x2->grad, tx, x->numel);
                    tu_expect_within(what, w->grad, w2->grad, tw, w->numel);
                    if (b) {
                        float *ones = malloc((size_t)(2 * M) * sizeof(float));
                        ck_assert_ptr_nonnull(ones);
                        for (int64_t i = 0; i < 2 * M; i++) ones[i] = 1.0f;
                        float *tb = tu_abs_product_bound(ones, R->data, NULL, 1, 2 * M, N, false, false);
                        tu_expect_within(what, b->grad, b2->grad, tb, N);
                        free(ones);
                        free(tb);
                    }
                    free(tx);
                    free(tw);
                    mg_ctx_free(ctx);
                }
}
END_TEST

START_TEST(every_op_has_a_gradcheck) {
    for (int i = 0; i < mg_op_count; i++) {
        bool found = false;
        for (int c = 0; c < N_CASES && !found; c++) found = strcmp(cases[c].op, mg_op_table[i]->name) == 0;
        ck_assert_msg(found, "op %s has no gradient check", mg_op_table[i]->name);
        ck_assert_msg(mg_op_table[i]->backward != NULL, "op %s has no backward", mg_op_table[i]->name);
    }
}
END_TEST

START_TEST(gradients_accumulate) {
    /* Two backward passes without zeroing give twice the gradient. */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(5);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){3, 4});
    for (int i = 0; i < 12; i++) x->data[i] = mg_rng_normal(&r);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *loss = mg_sum(ctx, mg_gelu(ctx, x, MG_GELU_TANH));
    mg_backward(ctx, loss);
    float once[12];
    memcpy(once, x->grad, sizeof once);
    mg_backward(ctx, loss);
    for (int i = 0; i < 12; i++) ck_assert_float_eq_tol(x->grad[i], 2.0f * once[i], 1e-6f);
    /* a tensor used twice gets both contributions */
    mg_ctx_reset(ctx); /* x died with the arena: make a new one */
    x = mg_zeros(ctx, 2, (int64_t[]){3, 4});
    mg_tensor_set_requires_grad(x, true);
    mg_backward(ctx, mg_sum(ctx, mg_add(ctx, x, x)));
    for (int i = 0; i < 12; i++) ck_assert_float_eq(x->grad[i], 2.0f);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(backward_reuses_dead_gradients) {
    /* A chain of 24 ops over a 64K-element tensor: one gradient per activation would be 24 buffers
     * of 256 KiB; handing each dead one on keeps backward's own use to a few. */
    enum { N = 1 << 16, DEPTH = 24 };
    const size_t buf = (size_t)N * sizeof(float);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(11);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){N});
    for (int i = 0; i < N; i++) x->data[i] = mg_rng_normal(&r);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *h = x, *mid = NULL, *kept = NULL;
    for (int d = 0; d < DEPTH; d++) {
        h = d % 2 ? mg_scale(ctx, h, 0.9f) : mg_gelu(ctx, h, MG_GELU_TANH);
        if (d == 10) mid = h;
        if (d == 12) kept = h;
    }
    mg_retain_grad(kept);
    mg_tensor *loss = mg_sum(ctx, h);
    size_t before = mg_ctx_used_bytes(ctx);
    mg_backward(ctx, loss);
    size_t used = mg_ctx_used_bytes(ctx) - before;
    ck_assert_msg(used <= 5 * buf, "backward used %zu bytes, %zu buffers' worth", used, used / buf);
    ck_assert_ptr_null(mid->grad); /* dead and handed on */
    ck_assert_ptr_nonnull(kept->grad);
    /* the values are those of a plain chain rule: d loss / d x = prod of the local derivatives */
    float kept_g[8];
    memcpy(kept_g, kept->grad, sizeof kept_g);
    for (int i = 0; i < 8; i++) {
        double gx = 1.0, gkept = 1.0, v = x->data[i];
        for (int d = 0; d < DEPTH; d++) {
            double local;
            if (d % 2) {
                local = 0.9;
                v *= 0.9;
            } else {
                double c = 0.7978845608028654, u = c * (v + 0.044715 * v * v * v), t = tanh(u);
                local = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
                v = 0.5 * v * (1 + t);
            }
            gx *= local;
            if (d > 12) gkept *= local;
        }
        ck_assert_msg(fabs(x->grad[i] - gx) <= 1e-4 * fabs(gx) + 1e-6, "x[%d]: %g, want %g", i, x->grad[i], gx);
        ck_assert_msg(fabs(kept_g[i] - gkept) <= 1e-4 * fabs(gkept) + 1e-6, "kept[%d]: %g, want %g", i,
                      kept_g[i], gkept);
    }
    /* a second pass adds the same flow again (nothing reads a recycled buffer) */
    float first[8];
    memcpy(first, x->grad, sizeof first);
    mg_backward(ctx, loss);
    for (int i = 0; i < 8; i++) ck_assert_float_eq_tol(x->grad[i], 2.0f * first[i], 1e-6f * fabsf(first[i]) + 1e-7f);
    for (int i = 0; i < 8; i++) ck_assert_float_eq_tol(kept->grad[i], kept_g[i], 1e-6f * fabsf(kept_g[i]));
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(grad_for_write_marks_only_the_buffer_it_makes_fresh) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_zeros(ctx, 1, (int64_t[]){5});
    bool fresh = false;
    float *g = mg_grad_for_write(ctx, x, &fresh);
    ck_assert_ptr_nonnull(g);
    ck_assert(fresh);
    ck_assert_ptr_eq(x->grad, g);
    for (int i = 0; i < 5; i++) g[i] = (float)i;
    fresh = true;
    ck_assert_ptr_eq(mg_grad_for_write(ctx, x, &fresh), g);
    ck_assert(!fresh); /* an existing buffer is added to */
    ck_assert_ptr_eq(mg_grad(ctx, x), g);
    ck_assert_float_eq(g[4], 4.0f);
    /* mg_grad still hands out zeros, even where the arena held something before */
    mg_ctx_reset(ctx);
    float *junk = mg_ctx_alloc(ctx, 64 * sizeof(float), "junk");
    for (int i = 0; i < 64; i++) junk[i] = 7.0f;
    mg_ctx_reset(ctx);
    mg_tensor *y = mg_zeros(ctx, 1, (int64_t[]){5});
    float *gy = mg_grad(ctx, y);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(gy[i], 0.0f);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(no_grad_records_nothing) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_zeros(ctx, 1, (int64_t[]){4});
    mg_tensor_set_requires_grad(x, true);
    bool prev = mg_ctx_set_grad_enabled(ctx, false);
    ck_assert(prev);
    mg_tensor *y = mg_scale(ctx, mg_gelu(ctx, x, MG_GELU_TANH), 2.0f);
    ck_assert_int_eq(mg_ctx_tape_len(ctx), 0);
    ck_assert(!mg_requires_grad(y));
    mg_ctx_set_grad_enabled(ctx, true);
    y = mg_scale(ctx, x, 2.0f);
    ck_assert_int_eq(mg_ctx_tape_len(ctx), 1);
    ck_assert(mg_requires_grad(y));
    mg_ctx_free(ctx);
}
END_TEST

static Suite *grad_suite(void) {
    Suite *s = suite_create("ops_grad");
    TCase *tc = tcase_create("finite_differences");
    tcase_add_loop_test(tc, gradcheck, 0, N_CASES);
    tcase_add_test(tc, linear_grads_match_matmul_plus_add);
    tcase_add_test(tc, every_op_has_a_gradcheck);
    tcase_add_test(tc, gradients_accumulate);
    tcase_add_test(tc, backward_reuses_dead_gradients);
    tcase_add_test(tc, grad_for_write_marks_only_the_buffer_it_makes_fresh);
    tcase_add_test(tc, no_grad_records_nothing);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(grad_suite)
