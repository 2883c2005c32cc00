/* GELU, two forms:
 *   tanh: y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *         dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3*0.044715 x^2),  t = tanh(u)
 *   erf:  y = 0.5 x (1 + erf(x / sqrt 2))
 *         dy/dx = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
 * Kernels: mg_gelu_fwd/_bwd (minigrad/rowops.h).
 */
#include "internal.h"
#include "minigrad/rowops.h"

static void gelu_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    bool fresh;
    float *dx = mg_grad_for_write(ctx, x, &fresh);
    if (!dx) return;
    (fresh ? mg_gelu_bwd_fresh : mg_gelu_bwd)((mg_gelu_kind)n->i[0], x->numel, x->data, n->out->grad, dx);
}

const mg_op_def mg_op_def_gelu = {"mg_gelu", gelu_backward};

mg_tensor *mg_gelu(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_gelu", "x", x)) return mg_ctx_dummy(ctx);
    if (kind != MG_GELU_TANH && kind != MG_GELU_ERF) {
        mg_ctx_fail(ctx, "mg_gelu: unknown kind %d (MG_GELU_TANH or MG_GELU_ERF)", (int)kind);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_gelu", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    mg_gelu_fwd(kind, x->numel, x->data, y->data);
    mg_node *n = mg_op_record(ctx, &mg_op_def_gelu, y, 1, (mg_tensor *[]){x});
    if (n) n->i[0] = kind;
    return y;
}
