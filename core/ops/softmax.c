/* Softmax over the last dim: y_j = exp(x_j - max) / sum_k exp(x_k - max).
 * Backward: dx_j += y_j (dy_j - sum_k dy_k y_k). The output y is what backward keeps. */
#include "internal.h"

void mg_softmax_row(const float *x, float *y, int64_t n); /* shared with attention */

void mg_softmax_row(const float *x, float *y, int64_t n) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    if (mx == -INFINITY) { /* every entry masked: a row of zeros, not NaN */
        for (int64_t j = 0; j < n; j++) y[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += (y[j] = expf(x[j] - mx));
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) y[j] *= inv;
}

static void softmax_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const float *y = n->out->data, *dy = n->out->grad;
    int64_t R = mg_rows(x), C = mg_cols(x);
#pragma omp parallel for schedule(static) if (x->numel > 16384)
    for (int64_t r = 0; r < R; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += gr[j] * yr[j];
        for (int64_t j = 0; j < C; j++) dx[r * C + j] += yr[j] * (gr[j] - dot);
    }
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
    int64_t R = mg_rows(x), C = mg_cols(x);
#pragma omp parallel for schedule(static) if (x->numel > 16384)
    for (int64_t r = 0; r < R; r++) mg_softmax_row(x->data + r * C, y->data + r * C, C);
    mg_op_record(ctx, &mg_op_def_softmax, y, 1, (mg_tensor *[]){x});
    return y;
}
