/* ReLU: y = max(x, 0). Backward: dx += dy where x > 0 (0 at x == 0, as PyTorch). */
#include "internal.h"

static void relu_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const float *xv = x->data, *dy = n->out->grad;
    MG_PAR_FOR(x->numel > 65536, i, x->numel, dx[i] += xv[i] > 0.0f ? dy[i] : 0.0f);
}

const mg_op_def mg_op_def_relu = {"mg_relu", relu_backward};

mg_tensor *mg_relu(mg_ctx *ctx, mg_tensor *x) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_relu", "x", x)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "mg_relu", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    const float *xv = x->data;
    float *yv = y->data;
    MG_PAR_FOR(x->numel > 65536, i, x->numel, yv[i] = xv[i] > 0.0f ? xv[i] : 0.0f);
    mg_op_record(ctx, &mg_op_def_relu, y, 1, (mg_tensor *[]){x});
    return y;
}
