/* Reductions over one dim: sum, mean, max (values) and log-sum-exp. x is viewed as (outer, D,
 * inner) around the dim; the result is (outer, inner), shaped as x without the dim (or with it as
 * size 1 under keepdim: the same elements in the same order either way).
 *
 *   sum_k x[o,k,i]        mean: sum / D        max: the largest, the first one on ties (NaN counts
 *   as the largest, so a NaN propagates)       logsumexp: m + log sum_k exp(x - m), m = max
 *
 * Sums run in double, each output's terms in k order on one thread: bit-identical for any thread
 * count. Backward: dx[o,k,i] += dy[o,i] (sum), dy / D (mean), dy only at the first maximum (max,
 * whose index forward keeps), dy exp(x - y) (logsumexp, from its output y; a lane whose y is -inf,
 * all of x -inf, gets no gradient).
 */
#include "dims.h"

typedef enum { RD_SUM, RD_MEAN, RD_MAX, RD_LSE } rd_kind;

static void rd_forward_lanes(rd_kind kind, mg_dim_view v, const float *x, float *y, int64_t *arg) {
    const int64_t nblk = mg_lane_blocks(v);
    MG_PAR_FOR(v.outer * v.D * v.inner > 32768, it, v.outer * nblk, {
        const int64_t o = it / nblk, i0 = (it % nblk) * MG_LANE_BLOCK;
        const int64_t nb = v.inner - i0 < MG_LANE_BLOCK ? v.inner - i0 : MG_LANE_BLOCK;
        const float *xb = x + o * v.D * v.inner + i0;
        float *yb = y + o * v.inner + i0;
        if (kind == RD_SUM || kind == RD_MEAN) {
            double acc[MG_LANE_BLOCK] = {0};
            for (int64_t k = 0; k < v.D; k++)
                for (int64_t j = 0; j < nb; j++) acc[j] += xb[k * v.inner + j];
            for (int64_t j = 0; j < nb; j++)
                yb[j] = (float)(kind == RD_MEAN ? acc[j] / (double)v.D : acc[j]);
            continue;
        }
        if (v.D == 0) { /* log of an empty sum (max and mean refuse an empty dim) */
            for (int64_t j = 0; j < nb; j++) yb[j] = -INFINITY;
            continue;
        }
        float best[MG_LANE_BLOCK];
        int64_t at[MG_LANE_BLOCK];
        for (int64_t j = 0; j < nb; j++) best[j] = xb[j], at[j] = 0;
        for (int64_t k = 1; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++) {
                float e = xb[k * v.inner + j];
                if (e > best[j] || (isnan(e) && !isnan(best[j]))) best[j] = e, at[j] = k;
            }
        if (kind == RD_MAX) {
            for (int64_t j = 0; j < nb; j++) yb[j] = best[j], arg[o * v.inner + i0 + j] = at[j];
            continue;
        }
        double s[MG_LANE_BLOCK] = {0};
        for (int64_t k = 0; k < v.D; k++)
            for (int64_t j = 0; j < nb; j++) s[j] += expf(xb[k * v.inner + j] - best[j]);
        for (int64_t j = 0; j < nb; j++)
            yb[j] = isinf(best[j]) || isnan(best[j]) ? best[j] : (float)((double)best[j] + log(s[j]));
    });
}

static void reduce_dim_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const rd_kind kind = (rd_kind)n->i[0];
    const mg_dim_view v = {n->i[1], n->i[2], n->i[3]};
    const float *dy = n->out->grad, *y = n->out->data;
    const int64_t *arg = n->saved[0];
    const int64_t nblk = mg_lane_blocks(v);
    MG_PAR_FOR(v.outer * v.D * v.inner > 32768, it, v.outer * nblk, {
        const int64_t o = it / nblk, i0 = (it % nblk) * MG_LANE_BLOCK;
        const int64_t nb = v.inner - i0 < MG_LANE_BLOCK ? v.inner - i0 : MG_LANE_BLOCK;
        const int64_t off = o * v.D * v.inner + i0;
        const float *g = dy + o * v.inner + i0, *yb = y + o * v.inner + i0;
        float *db = dx + off;
        switch (kind) {
        case RD_SUM:
        case RD_MEAN: {
            float gs[MG_LANE_BLOCK];
            for (int64_t j = 0; j < nb; j++)
                gs[j] = kind == RD_MEAN ? (float)((double)g[j] / (double)v.D) : g[j];
            for (int64_t k = 0; k < v.D; k++)
                for (int64_t j = 0; j < nb; j++) db[k * v.inner + j] += gs[j];
            break;
        }
        case RD_MAX:
            for (int64_t j = 0; j < nb; j++) db[arg[o * v.inner + i0 + j] * v.inner + j] += g[j];
            break;
        case RD_LSE: {
            const float *xb = x->data + off;
            for (int64_t k = 0; k < v.D; k++)
                for (int64_t j = 0; j < nb; j++)
                    if (yb[j] != -INFINITY)
                        db[k * v.inner + j] += g[j] * expf(xb[k * v.inner + j] - yb[j]);
            break;
        }
        }
    });
}

const mg_op_def mg_op_def_sum_dim = {"mg_sum_dim", reduce_dim_backward};
const mg_op_def mg_op_def_mean_dim = {"mg_mean_dim", reduce_dim_backward};
const mg_op_def mg_op_def_max_dim = {"mg_max_dim", reduce_dim_backward};
const mg_op_def mg_op_def_logsumexp = {"mg_logsumexp", reduce_dim_backward};

static mg_tensor *reduce_dim(mg_ctx *ctx, const mg_op_def *def, rd_kind kind, mg_tensor *x, int64_t dim, bool keepdim) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = def->name;
    int d;
    if (!mg_expect_f32(ctx, op, "x", x) || !mg_dim_index(ctx, op, x, dim, &d)) return mg_ctx_dummy(ctx);
    const mg_dim_view v = mg_dim_split(x, d);
    if (v.D == 0 && (kind == RD_MEAN || kind == RD_MAX)) {
        mg_ctx_fail(ctx, "%s: dim %lld of x%s is empty", op, (long long)dim, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    int64_t shape[MG_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != d)
            shape[nd++] = x->shape[k];
        else if (keepdim)
            shape[nd++] = 1;
    mg_tensor *y = mg_op_output(ctx, op, nd, shape);
    int64_t *arg = kind == RD_MAX ? mg_ctx_alloc(ctx, (size_t)(v.outer * v.inner) * sizeof(int64_t) + 8, "mg_max_dim indices") : NULL;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    rd_forward_lanes(kind, v, x->data, y->data, arg);
    mg_node *n = mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    if (n) n->i[0] = kind, n->i[1] = v.outer, n->i[2] = v.D, n->i[3] = v.inner, n->saved[0] = arg;
    return y;
}

mg_tensor *mg_sum_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim) {
    return reduce_dim(ctx, &mg_op_def_sum_dim, RD_SUM, x, dim, keepdim);
}
mg_tensor *mg_mean_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim) {
    return reduce_dim(ctx, &mg_op_def_mean_dim, RD_MEAN, x, dim, keepdim);
}
mg_tensor *mg_max_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim) {
    return reduce_dim(ctx, &mg_op_def_max_dim, RD_MAX, x, dim, keepdim);
}
mg_tensor *mg_logsumexp(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim) {
    return reduce_dim(ctx, &mg_op_def_logsumexp, RD_LSE, x, dim, keepdim);
}
