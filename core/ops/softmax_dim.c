/* Softmax and log-softmax over any dim. x is viewed as (outer, D, inner) around the dim; each lane
 * (o, i) is normalised over k:
 *
 *   softmax:     y_k = exp(x_k - m) / s          m = max_k x_k, s = sum_k exp(x_k - m) (in double)
 *   log_softmax: y_k = (x_k - m) - log s
 *
 * A lane that is all -inf (fully masked) gives zeros (softmax) or -inf (log_softmax); a NaN makes
 * its lane NaN. Softmax over the last dim runs the kernels of mg_softmax (same bits). Backward, from
 * the output y: softmax dx_k += y_k (dy_k - sum_j dy_j y_j); log_softmax dx_k += dy_k - exp(y_k)
 * sum_j dy_j. Every lane runs on one thread in k order: bit-identical for any thread count.
 */
#include "dims.h"
#include "minigrad/rowops.h"

static void lanes_forward(bool log_out, mg_dim_view v, const float *x, float *y) {
    const int64_t nblk = mg_lane_blocks(v);
    MG_PAR_FOR(v.outer * v.D * v.inner > 32768, it, v.outer * nblk, {
        const int64_t o = it / nblk, i0 = (it % nblk) * MG_LANE_BLOCK;
        const int64_t nb = v.inner - i0 < MG_LANE_BLOCK ? v.inner - i0 : MG_LANE_BLOCK;
        const int64_t off = o * v.D * v.inner + i0;
        const float *xb = x + off;
        float *yb = y + off;
        float m[MG_LANE_BLOCK];
        double s[MG_LANE_BLOCK] = {0};
        for (int64_t j = 0; j < nb; j++) m[j] = -INFINITY;
        for (int64_t k = 0; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++) {
                float e = xb[k * v.inner + j];
                if (e > m[j] || isnan(e)) m[j] = isnan(m[j]) ? m[j] : e;
            }
        for (int64_t k = 0; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++)
                if (m[j] != -INFINITY) s[j] += expf(xb[k * v.inner + j] - m[j]);
        for (int64_t j = 0; j < nb; j++) {
            double ls = log(s[j]);
            for (int64_t k = 0; k < v.D; k++) {
                float e = xb[k * v.inner + j], *out = &yb[k * v.inner + j];
                if (m[j] == -INFINITY)
                    *out = log_out ? -INFINITY : 0.0f;
                else if (log_out)
                    *out = (float)((double)(e - m[j]) - ls);
                else
                    *out = (float)(expf(e - m[j]) / s[j]);
            }
        }
    });
}

static void lanes_backward(bool log_out, mg_dim_view v, const float *y, const float *dy, float *dx) {
    const int64_t nblk = mg_lane_blocks(v);
    MG_PAR_FOR(v.outer * v.D * v.inner > 32768, it, v.outer * nblk, {
        const int64_t o = it / nblk, i0 = (it % nblk) * MG_LANE_BLOCK;
        const int64_t nb = v.inner - i0 < MG_LANE_BLOCK ? v.inner - i0 : MG_LANE_BLOCK;
        const int64_t off = o * v.D * v.inner + i0;
        const float *yb = y + off, *gb = dy + off;
        float *db = dx + off;
        double dot[MG_LANE_BLOCK] = {0};
        for (int64_t k = 0; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++) {
                int64_t e = k * v.inner + j;
                dot[j] += log_out ? (double)gb[e] : (double)gb[e] * yb[e];
            }
        for (int64_t k = 0; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++) {
                int64_t e = k * v.inner + j;
                if (log_out)
                    db[e] += gb[e] - expf(yb[e]) * (float)dot[j];
                else
                    db[e] += yb[e] * (gb[e] - (float)dot[j]);
            }
    });
}

static void softmax_dim_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const mg_dim_view v = {n->i[1], n->i[2], n->i[3]};
    const bool log_out = n->i[0] != 0;
    if (n->out->numel == 0) return;
    if (!log_out && v.inner == 1)
        mg_softmax_bwd(v.outer, v.D, n->out->data, n->out->grad, dx);
    else
        lanes_backward(log_out, v, n->out->data, n->out->grad, dx);
}

const mg_op_def mg_op_def_softmax_dim = {"mg_softmax_dim", softmax_dim_backward};
const mg_op_def mg_op_def_log_softmax = {"mg_log_softmax", softmax_dim_backward};

static mg_tensor *softmax_dim(mg_ctx *ctx, const mg_op_def *def, bool log_out, mg_tensor *x, int64_t dim) {
    MG_BAIL_IF_FAILED(ctx);
    int d;
    if (!mg_expect_f32(ctx, def->name, "x", x) || !mg_dim_index(ctx, def->name, x, dim, &d)) return mg_ctx_dummy(ctx);
    const mg_dim_view v = mg_dim_split(x, d);
    mg_tensor *y = mg_op_output(ctx, def->name, x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    if (x->numel == 0)
        ;
    else if (!log_out && v.inner == 1)
        mg_softmax_fwd(v.outer, v.D, x->data, y->data);
    else
        lanes_forward(log_out, v, x->data, y->data);
    mg_node *n = mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    if (n) n->i[0] = log_out, n->i[1] = v.outer, n->i[2] = v.D, n->i[3] = v.inner;
    return y;
}

mg_tensor *mg_softmax_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim) {
    return softmax_dim(ctx, &mg_op_def_softmax_dim, false, x, dim);
}
mg_tensor *mg_log_softmax(mg_ctx *ctx, mg_tensor *x, int64_t dim) {
    return softmax_dim(ctx, &mg_op_def_log_softmax, true, x, dim);
}
