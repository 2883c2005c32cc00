/* Inverted dropout: y = x * m, m = 0 with probability p, else 1/(1-p). Backward: dx += dy * m.
 * The mask is drawn in element order from the caller's generator, so it is the same whatever the
 * thread count. */
#include "internal.h"

static void dropout_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const float *m = n->saved[0], *dy = n->out->grad;
    MG_PAR_FOR(n->out->numel > 65536, i, n->out->numel, dx[i] += dy[i] * m[i]);
}

const mg_op_def mg_op_def_dropout = {"mg_dropout", dropout_backward};

mg_tensor *mg_dropout(mg_ctx *ctx, mg_tensor *x, float p, mg_rng *rng) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_dropout", "x", x)) return mg_ctx_dummy(ctx);
    if (!(p >= 0.0f && p < 1.0f) || (p > 0.0f && !rng)) {
        mg_ctx_fail(ctx, "mg_dropout: x%s: p = %g must be in [0, 1) and a generator is needed when p > 0",
                    MG_SHAPE(x), (double)p);
        return mg_ctx_dummy(ctx);
    }
    if (p == 0.0f) return x;
    mg_tensor *y = mg_op_output(ctx, "mg_dropout", x->ndim, x->shape);
    float *m = mg_ctx_alloc(ctx, (size_t)x->numel * 4, "mg_dropout mask");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    float keep = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < x->numel; i++) m[i] = mg_rng_uniform(rng) < p ? 0.0f : keep;
    MG_PAR_FOR(x->numel > 65536, i, x->numel, y->data[i] = x->data[i] * m[i]);
    mg_node *n = mg_op_record(ctx, &mg_op_def_dropout, y, 1, (mg_tensor *[]){x});
    if (n) n->saved[0] = m;
    return y;
}
