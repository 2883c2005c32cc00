/* RMSNorm over the last dim C (PyTorch's nn.RMSNorm):
 *   y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps)
 * Backward, per row, with xhat = x * rstd and g = dy * w (g = dy without a weight):
 *   dx = rstd * (g - xhat * mean(g * xhat))
 *   dw += sum_rows dy * xhat
 * The mean of squares is summed in double, in order, per row; rstd is kept per row for backward.
 * dw sums the per-row products over fixed chunks of rows, then the chunks in order
 * (mg_reduce_rows_add), so every result is bit-identical for any thread count. */
#include "internal.h"

static void rms_norm_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1];
    const int64_t R = mg_rows(x), C = mg_cols(x);
    const float *rstd = n->saved[0], *dy = n->out->grad, *xd = x->data, *wd = w ? w->data : NULL;
    float *dx = mg_requires_grad(x) ? mg_grad(ctx, x) : NULL;
    float *dw = w && mg_requires_grad(w) ? mg_grad(ctx, w) : NULL;
    float *prod = dw ? mg_ctx_alloc(ctx, (size_t)(R * C) * sizeof(float), "mg_rms_norm backward scratch") : NULL;
    if (!mg_ctx_ok(ctx)) return;
    MG_PAR_FOR(R * C > 32768, r, R, {
        const float *xr = xd + r * C, *gr = dy + r * C;
        const float s = rstd[r];
        if (dx) {
            double dot = 0.0; /* sum of g * xhat */
            for (int64_t j = 0; j < C; j++)
                dot += (double)(gr[j] * (wd ? wd[j] : 1.0f)) * (double)(xr[j] * s);
            const float m = (float)(dot / (double)C);
            float *dxr = dx + r * C;
            for (int64_t j = 0; j < C; j++) {
                float g = gr[j] * (wd ? wd[j] : 1.0f);
                dxr[j] += s * (g - xr[j] * s * m);
            }
        }
        if (prod)
            for (int64_t j = 0; j < C; j++) prod[r * C + j] = gr[j] * xr[j] * s;
    });
    if (prod) mg_reduce_rows_add(ctx, prod, R, C, dw);
}

const mg_op_def mg_op_def_rms_norm = {"mg_rms_norm", rms_norm_backward};

mg_tensor *mg_rms_norm(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, float eps) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_rms_norm", "x", x)) return mg_ctx_dummy(ctx);
    if (w && !mg_expect_f32(ctx, "mg_rms_norm", "weight", w)) return mg_ctx_dummy(ctx);
    const int64_t C = mg_cols(x), R = mg_rows(x);
    if (x->ndim < 1 || C == 0) {
        mg_ctx_fail(ctx, "mg_rms_norm: x%s needs a non-empty last dim", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (w && (w->ndim != 1 || w->shape[0] != C)) {
        mg_ctx_fail(ctx, "mg_rms_norm: x%s with weight%s: weight must be (%lld), the size of x's last dim",
                    MG_SHAPE(x), MG_SHAPE(w), (long long)C);
        return mg_ctx_dummy(ctx);
    }
    if (!(eps >= 0.0f) || isinf(eps)) {
        mg_ctx_fail(ctx, "mg_rms_norm: eps %g must be finite and >= 0", (double)eps);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_rms_norm", x->ndim, x->shape);
    float *rstd = mg_ctx_alloc(ctx, (size_t)(R ? R : 1) * sizeof(float), "mg_rms_norm rstd");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    const float *xd = x->data, *wd = w ? w->data : NULL;
    float *yd = y->data;
    MG_PAR_FOR(R * C > 32768, r, R, {
        const float *xr = xd + r * C;
        double ss = 0.0;
        for (int64_t j = 0; j < C; j++) ss += (double)xr[j] * (double)xr[j];
        const float s = (float)(1.0 / sqrt(ss / (double)C + (double)eps));
        rstd[r] = s;
        float *yr = yd + r * C;
        for (int64_t j = 0; j < C; j++) yr[j] = xr[j] * s * (wd ? wd[j] : 1.0f);
    });
    mg_node *n = mg_op_record(ctx, &mg_op_def_rms_norm, y, 2, (mg_tensor *[]){x, w});
    if (n) n->saved[0] = rstd, n->f[0] = eps;
    return y;
}
