/* Sum and mean of all elements to one value. Forward sums fixed chunks in double, then the chunks
 * in order. Backward: dx += dy (sum) or dy / n (mean). */
#include "internal.h"

enum { SUM_CHUNK = 4096 };

static double sum_all(const float *x, int64_t n) {
    int64_t nchunk = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    double total = 0.0;
    if (nchunk <= 1) {
        for (int64_t i = 0; i < n; i++) total += x[i];
        return total;
    }
    double part[256];
    for (int64_t c0 = 0; c0 < nchunk; c0 += 256) {
        int64_t c1 = c0 + 256 < nchunk ? c0 + 256 : nchunk;
#pragma omp parallel for schedule(static)
        for (int64_t c = c0; c < c1; c++) {
            double s = 0.0;
            int64_t i1 = (c + 1) * SUM_CHUNK < n ? (c + 1) * SUM_CHUNK : n;
            for (int64_t i = c * SUM_CHUNK; i < i1; i++) s += x[i];
            part[c - c0] = s;
        }
        for (int64_t c = c0; c < c1; c++) total += part[c - c0];
    }
    return total;
}

static void reduce_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    float g = n->out->grad[0] * n->f[0];
    MG_PAR_FOR(x->numel > 65536, i, x->numel, dx[i] += g);
}

const mg_op_def mg_op_def_sum = {"mg_sum", reduce_backward};
const mg_op_def mg_op_def_mean = {"mg_mean", reduce_backward};

static mg_tensor *reduce(mg_ctx *ctx, mg_tensor *x, const mg_op_def *def, bool mean) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, def->name, "x", x)) return mg_ctx_dummy(ctx);
    if (mean && x->numel == 0) {
        mg_ctx_fail(ctx, "mg_mean: x%s is empty", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, def->name, 0, NULL);
    if (!mg_ctx_ok(ctx)) return y;
    double s = sum_all(x->data, x->numel);
    y->data[0] = (float)(mean ? s / (double)x->numel : s);
    mg_node *n = mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    if (n) n->f[0] = mean ? 1.0f / (float)x->numel : 1.0f;
    return y;
}

mg_tensor *mg_sum(mg_ctx *ctx, mg_tensor *x) { return reduce(ctx, x, &mg_op_def_sum, false); }
mg_tensor *mg_mean(mg_ctx *ctx, mg_tensor *x) { return reduce(ctx, x, &mg_op_def_mean, true); }
