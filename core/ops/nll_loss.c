/* Negative log-likelihood of log-probabilities, mean over the positions that count:
 *   loss = -(1/n) sum_r logp[r, y_r],  n = #{r : y_r != ignore}
 * logp (...,C) has the class dim last (PyTorch's nll_loss takes it as dim 1). Backward:
 * dlogp[r, y_r] += -dloss / n on counted rows. The row terms are summed in double, in row order. */
#include "targets.h"

static void nll_loss_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *y = n->in[1];
    const int64_t count = n->i[0];
    if (count == 0) return;
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const int32_t ignore = (int32_t)n->i[1];
    const int64_t R = mg_rows(x), C = mg_cols(x);
    const float g = -n->out->grad[0] / (float)count;
    MG_PAR_FOR(R > 65536, r, R, {
        if (y->i32[r] != ignore) dx[r * C + y->i32[r]] += g;
    });
}

const mg_op_def mg_op_def_nll_loss = {"mg_nll_loss", nll_loss_backward};

mg_tensor *mg_nll_loss(mg_ctx *ctx, mg_tensor *logp, mg_tensor *targets, int32_t ignore_index) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = mg_op_def_nll_loss.name;
    int64_t count;
    if (!mg_check_class_targets(ctx, op, "logp", logp, targets, ignore_index, &count)) return mg_ctx_dummy(ctx);
    mg_tensor *loss = mg_op_output(ctx, op, 0, NULL);
    if (!mg_ctx_ok(ctx)) return loss;
    const int64_t R = mg_rows(logp), C = mg_cols(logp);
    double total = 0.0;
    for (int64_t r = 0; r < R; r++)
        if (targets->i32[r] != ignore_index) total -= logp->data[r * C + targets->i32[r]];
    loss->data[0] = count ? (float)(total / (double)count) : 0.0f;
    mg_node *n = mg_op_record(ctx, &mg_op_def_nll_loss, loss, 2, (mg_tensor *[]){logp, targets});
    if (n) n->i[0] = count, n->i[1] = ignore_index;
    return loss;
}
