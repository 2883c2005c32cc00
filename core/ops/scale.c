/* y = s * x. Backward: dx += s * dy. */
#include "internal.h"

static void scale_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const float *dy = n->out->grad;
    float s = n->f[0];
    MG_PAR_FOR(n->out->numel > 65536, i, n->out->numel, dx[i] += s * dy[i]);
}

const mg_op_def mg_op_def_scale = {"mg_scale", scale_backward};

mg_tensor *mg_scale(mg_ctx *ctx, mg_tensor *x, float s) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_scale", "x", x)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "mg_scale", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    MG_PAR_FOR(x->numel > 65536, i, x->numel, y->data[i] = s * x->data[i]);
    mg_node *n = mg_op_record(ctx, &mg_op_def_scale, y, 1, (mg_tensor *[]){x});
    if (n) n->f[0] = s;
    return y;
}
