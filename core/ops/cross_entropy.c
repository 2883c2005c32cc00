/* Fused log-softmax + negative log-likelihood, mean over the positions that count, with optional
 * label smoothing eps (PyTorch's formula):
 *   loss = (1/n) sum_r [ (1 - eps) (lse_r - x[r, y_r]) + eps (lse_r - (1/V) sum_j x[r, j]) ]
 *   lse_r = log sum_j exp x[r, j],  n = #{r : y_r != ignore}
 * Backward: dx[r, j] += (dloss / n) (softmax_j - (1 - eps) [j == y_r] - eps / V) for counted rows,
 * 0 for ignored ones.
 * Per row only the max logit mx and ls = log sum exp(x - mx) are kept (lse = mx + ls, never rounded
 * as one float, so logits near 1e4 keep their O(1) loss exact); backward recomputes the softmax
 * from the logits. Row losses are summed in double, in row order. Kernels: mg_xent_fwd/_bwd; the
 * smoothing term (eps > 0 only: eps == 0, mg_cross_entropy, runs the kernels alone) is one more
 * pass over each counted row, forward and backward. */
#include "targets.h"
#include "minigrad/rowops.h"

static void cross_entropy_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *y = n->in[1];
    const int64_t count = n->i[0];
    if (count == 0) return;
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const int32_t ignore = (int32_t)n->i[1];
    const int64_t R = mg_rows(x), V = mg_cols(x);
    const float g = n->out->grad[0] / (float)count, eps = n->f[0];
    mg_xent_bwd(R, V, x->data, y->i32, ignore, n->saved[0], n->saved[1], g, dx);
    if (eps == 0.0f) return;
    const float on = g * eps, all = (float)((double)g * eps / (double)V);
    MG_PAR_FOR(R * V > 65536, r, R, {
        if (y->i32[r] == ignore) continue;
        float *d = dx + r * V;
        for (int64_t j = 0; j < V; j++) d[j] -= all;
        d[y->i32[r]] += on;
    });
}

const mg_op_def mg_op_def_cross_entropy = {"mg_cross_entropy", cross_entropy_backward};
const mg_op_def mg_op_def_cross_entropy_smooth = {"mg_cross_entropy_smooth", cross_entropy_backward};

static mg_tensor *cross_entropy(mg_ctx *ctx, const mg_op_def *def, mg_tensor *x, mg_tensor *y, int32_t ignore,
                                float eps) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = def->name;
    int64_t count;
    if (!mg_check_class_targets(ctx, op, "logits", x, y, ignore, &count)) return mg_ctx_dummy(ctx);
    if (!(eps >= 0.0f && eps <= 1.0f)) {
        mg_ctx_fail(ctx, "%s: label_smoothing %g must be in [0, 1]", op, (double)eps);
        return mg_ctx_dummy(ctx);
    }
    int64_t R = mg_rows(x), V = mg_cols(x);
    mg_tensor *loss = mg_op_output(ctx, op, 0, NULL);
    float *mx = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_cross_entropy row max");
    float *ls = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_cross_entropy log-sum");
    double *row = mg_ctx_alloc(ctx, (size_t)R * 8, "mg_cross_entropy row losses");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_xent_fwd(R, V, x->data, y->i32, ignore, mx, ls, row);
    if (eps > 0.0f) {
        MG_PAR_FOR(R * V > 65536, r, R, {
            if (y->i32[r] == ignore) continue;
            const float *xr = x->data + r * V;
            double s = 0.0;
            for (int64_t j = 0; j < V; j++) s += xr[j];
            double smooth = ((double)mx[r] + (double)ls[r]) - s / (double)V;
            row[r] = (1.0 - (double)eps) * row[r] + (double)eps * smooth;
        });
    }
    double total = 0.0;
    for (int64_t r = 0; r < R; r++) total += row[r];
    loss->data[0] = count ? (float)(total / (double)count) : 0.0f;
    mg_node *n = mg_op_record(ctx, def, loss, 2, (mg_tensor *[]){x, y});
    if (n) n->saved[0] = mx, n->saved[1] = ls, n->i[0] = count, n->i[1] = ignore, n->f[0] = eps;
    return loss;
}

mg_tensor *mg_cross_entropy(mg_ctx *ctx, mg_tensor *x, mg_tensor *y, int32_t ignore) {
    return cross_entropy(ctx, &mg_op_def_cross_entropy, x, y, ignore, 0.0f);
}

mg_tensor *mg_cross_entropy_smooth(mg_ctx *ctx, mg_tensor *x, mg_tensor *y, int32_t ignore, float label_smoothing) {
    return cross_entropy(ctx, &mg_op_def_cross_entropy_smooth, x, y, ignore, label_smoothing);
}
