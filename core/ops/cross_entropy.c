/* Fused log-softmax + negative log-likelihood, mean over the positions that count:
 *   loss = (1/n) sum_r [ lse_r - x[r, y_r] ],  lse_r = log sum_j exp x[r, j],  n = #{r : y_r != ignore}
 * Backward: dx[r, j] += (dloss / n) (softmax_j - [j == y_r]) for counted rows, 0 for ignored ones.
 * Only lse (one float per row) is kept; backward recomputes the softmax from the logits.
 * Row losses are summed in double, in row order. */
#include "internal.h"

static void cross_entropy_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *y = n->in[1];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const float *lse = n->saved[0];
    int64_t R = mg_rows(x), V = mg_cols(x), count = n->i[0];
    int32_t ignore = (int32_t)n->i[1];
    if (count == 0) return;
    float g = n->out->grad[0] / (float)count;
#pragma omp parallel for schedule(static) if (x->numel > 16384)
    for (int64_t r = 0; r < R; r++) {
        int32_t t = y->i32[r];
        if (t == ignore) continue;
        const float *xr = x->data + r * V;
        float *dr = dx + r * V;
        for (int64_t j = 0; j < V; j++) dr[j] += g * expf(xr[j] - lse[r]);
        dr[t] -= g;
    }
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
    float *lse = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_cross_entropy log-sum-exp");
    double *row = mg_ctx_alloc(ctx, (size_t)R * 8, "mg_cross_entropy row losses");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
#pragma omp parallel for schedule(static) if (x->numel > 16384)
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x->data + r * V;
        float mx = -INFINITY;
        for (int64_t j = 0; j < V; j++) mx = xr[j] > mx ? xr[j] : mx;
        float s = 0.0f;
        for (int64_t j = 0; j < V; j++) s += expf(xr[j] - mx);
        lse[r] = mx + logf(s);
        row[r] = y->i32[r] == ignore ? 0.0 : (double)lse[r] - (double)xr[y->i32[r]];
    }
    double total = 0.0;
    for (int64_t r = 0; r < R; r++) total += row[r];
    loss->data[0] = count ? (float)(total / (double)count) : 0.0f;
    mg_node *n = mg_op_record(ctx, &mg_op_def_cross_entropy, loss, 2, (mg_tensor *[]){x, y});
    if (n) n->saved[0] = lse, n->i[0] = count, n->i[1] = ignore;
    return loss;
}
