/* Softmax over the last dim: y_j = exp(x_j - max) / sum_k exp(x_k - max).
 * Backward: dx_j += y_j (dy_j - sum_k dy_k y_k). The output y is what backward keeps.
 * A row that is all -inf (fully masked) gives zeros. Kernels: mg_softmax_fwd/_bwd (rowops.h). */
#include "internal.h"
#include "minigrad/rowops.h"

void mg_softmax_row(const float *x, float *y, int64_t n); /* shared with attention */

/* One row on the calling thread (inside a parallel region the kernel does not fork). */
void mg_softmax_row(const float *x, float *y, int64_t n) { mg_softmax_fwd(1, n, x, y); }

static void softmax_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    mg_softmax_bwd(mg_rows(x), mg_cols(x), n->out->data, n->out->grad, dx);
}

const mg_op_def mg_op_def_softmax = {"mg_softmax", softmax_backward};

mg_tensor *mg_softmax(mg_ctx *ctx, mg_tensor *x) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_softmax", "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim < 1) {
        mg_ctx_fail(ctx, "mg_softmax: x%s needs at least one dim", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_softmax", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    mg_softmax_fwd(mg_rows(x), mg_cols(x), x->data, y->data);
    mg_op_record(ctx, &mg_op_def_softmax, y, 1, (mg_tensor *[]){x});
    return y;
}
