/* LayerNorm over the last dim C (biased variance):
 *   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  y = xhat * w + b
 * Backward, per row, with g = dy * w:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dw += sum_rows dy * xhat,  db += sum_rows dy
 * mean and rstd are kept per row for backward; dw/db sum over fixed chunks of rows, then the
 * chunks in order (bit-identical for any thread count). The kernels are mg_layernorm_fwd/_bwd
 * (minigrad/rowops.h); the mean is refined on the centred row, so a large offset keeps its variance.
 */
#include "internal.h"
#include "minigrad/rowops.h"

static void layernorm_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const int64_t R = mg_rows(x), C = mg_cols(x);
    float *dx = mg_requires_grad(x) ? mg_grad(ctx, x) : NULL;
    float *dw = w && mg_requires_grad(w) ? mg_grad(ctx, w) : NULL;
    float *db = b && mg_requires_grad(b) ? mg_grad(ctx, b) : NULL;
    float *ws = (dw || db) ? mg_ctx_alloc(ctx, mg_layernorm_bwd_workspace(R, C), "mg_layernorm backward scratch")
                           : NULL;
    if (!mg_ctx_ok(ctx)) return;
    mg_layernorm_bwd(R, C, x->data, w ? w->data : NULL, n->saved[0], n->saved[1], n->out->grad, dx, dw, db, ws);
}

const mg_op_def mg_op_def_layernorm = {"mg_layernorm", layernorm_backward};

mg_tensor *mg_layernorm(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, mg_tensor *b, float eps) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_layernorm", "x", x) || (w && !mg_expect_f32(ctx, "mg_layernorm", "weight", w)) ||
        (b && !mg_expect_f32(ctx, "mg_layernorm", "bias", b)))
        return mg_ctx_dummy(ctx);
    int64_t C = mg_cols(x), R = mg_rows(x);
    if (x->ndim < 1 || C == 0) {
        mg_ctx_fail(ctx, "mg_layernorm: x%s needs a non-empty last dim", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if ((w && (w->ndim != 1 || w->shape[0] != C)) || (b && (b->ndim != 1 || b->shape[0] != C))) {
        mg_ctx_fail(ctx, "mg_layernorm: x%s with weight%s, bias%s: weight and bias must be (%lld)",
                    MG_SHAPE(x), w ? MG_SHAPE(w) : "(none)", b ? MG_SHAPE(b) : "(none)", (long long)C);
        return mg_ctx_dummy(ctx);
    }
    if (!(eps >= 0.0f)) {
        mg_ctx_fail(ctx, "mg_layernorm: eps %g must be >= 0", (double)eps);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_layernorm", x->ndim, x->shape);
    float *mean = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm mean");
    float *rstd = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm rstd");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_layernorm_fwd(R, C, x->data, w ? w->data : NULL, b ? b->data : NULL, eps, y->data, mean, rstd);
    mg_node *n = mg_op_record(ctx, &mg_op_def_layernorm, y, 3, (mg_tensor *[]){x, w, b});
    if (n) n->saved[0] = mean, n->saved[1] = rstd, n->f[0] = eps;
    return y;
}
