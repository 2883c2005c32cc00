/* Fused log-softmax + negative log-likelihood, mean over the positions that count:
 *   loss = (1/n) sum_r [ lse_r - x[r, y_r] ],  lse_r = log sum_j exp x[r, j],  n = #{r : y_r != ignore}
 * Backward: dx[r, j] += (dloss / n) (softmax_j - [j == y_r]) for counted rows, 0 for ignored ones.
 * Per row only the max logit mx and ls = log sum exp(x - mx) are kept (lse = mx + ls, never rounded
 * as one float, so logits near 1e4 keep their O(1) loss exact); backward recomputes the softmax
 * from the logits. Row losses are summed in double, in row order. Kernels: mg_xent_fwd/_bwd. */
#include "internal.h"
#include "minigrad/rowops.h"

static void cross_entropy_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *y = n->in[1];
    const int64_t count = n->i[0];
    if (count == 0) return;
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    mg_xent_bwd(mg_rows(x), mg_cols(x), x->data, y->i32, (int32_t)n->i[1], n->saved[0], n->saved[1],
                n->out->grad[0] / (float)count, dx);
}

const mg_op_def mg_op_def_cross_entropy = {"mg_cross_entropy", cross_entropy_backward};

mg_tensor *mg_cross_entropy(mg_ctx *ctx, mg_tensor *x, mg_tensor *y, int32_t ignore) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_cross_entropy", "logits", x)) return mg_ctx_dummy(ctx);
    bool ok = x->ndim >= 1 && y->dtype == MG_I32 && y->ndim == x->ndim - 1;
    for (int i = 0; ok && i < y->ndim; i++) ok = y->shape[i] == x->shape[i];
    if (!ok) {
        mg_ctx_fail(ctx, "mg_cross_entropy: logits%s, targets%s: targets must be int32 with the logits' shape minus the last dim",
                    MG_SHAPE(x), MG_SHAPE(y));
        return mg_ctx_dummy(ctx);
    }
    int64_t R = mg_rows(x), V = mg_cols(x), count = 0;
    for (int64_t r = 0; r < R; r++) {
        int32_t t = y->i32[r];
        if (t == ignore) continue;
        if (t < 0 || t >= V) {
            mg_ctx_fail(ctx, "mg_cross_entropy: target %d at flat position %lld of targets%s is out of range [0, %lld) (ignore_index %d)",
                        t, (long long)r, MG_SHAPE(y), (long long)V, ignore);
            return mg_ctx_dummy(ctx);
        }
        count++;
    }
    mg_tensor *loss = mg_op_output(ctx, "mg_cross_entropy", 0, NULL);
    float *mx = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_cross_entropy row max");
    float *ls = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_cross_entropy log-sum");
    double *row = mg_ctx_alloc(ctx, (size_t)R * 8, "mg_cross_entropy row losses");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_xent_fwd(R, V, x->data, y->i32, ignore, mx, ls, row);
    double total = 0.0;
    for (int64_t r = 0; r < R; r++) total += row[r];
    loss->data[0] = count ? (float)(total / (double)count) : 0.0f;
    mg_node *n = mg_op_record(ctx, &mg_op_def_cross_entropy, loss, 2, (mg_tensor *[]){x, y});
    if (n) n->saved[0] = mx, n->saved[1] = ls, n->i[0] = count, n->i[1] = ignore;
    return loss;
}
