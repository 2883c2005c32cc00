/* LayerNorm over the last dim C (biased variance):
 *   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps),  y = xhat * w + b
 * Backward, per row, with g = dy * w:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dw += sum_rows dy * xhat,  db += sum_rows dy
 * mean and rstd are kept per row for backward; dw/db sum over fixed chunks of rows, then the
 * chunks in order (bit-identical for any thread count).
 */
#include "internal.h"

enum { LN_CHUNK = 64 };

static void layernorm_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *mean = n->saved[0], *rstd = n->saved[1], *dy = n->out->grad;
    int64_t R = mg_rows(x), C = mg_cols(x);
    float *dx = mg_requires_grad(x) ? mg_grad(ctx, x) : NULL;
    float *dw = w && mg_requires_grad(w) ? mg_grad(ctx, w) : NULL;
    float *db = b && mg_requires_grad(b) ? mg_grad(ctx, b) : NULL;
    int64_t nchunk = (R + LN_CHUNK - 1) / LN_CHUNK;
    float *part = (dw || db) ? mg_ctx_alloc(ctx, (size_t)(2 * nchunk * C) * 4, "mg_layernorm backward scratch") : NULL;
    if (!mg_ctx_ok(ctx)) return;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
        float *pw = part ? part + 2 * c * C : NULL, *pb = part ? pw + C : NULL;
        if (part)
            for (int64_t j = 0; j < C; j++) pw[j] = pb[j] = 0.0f;
        int64_t r1 = (c + 1) * LN_CHUNK < R ? (c + 1) * LN_CHUNK : R;
        for (int64_t r = c * LN_CHUNK; r < r1; r++) {
            const float *xr = x->data + r * C, *gr = dy + r * C;
            float m = mean[r], s = rstd[r];
            if (part)
                for (int64_t j = 0; j < C; j++) {
                    pw[j] += gr[j] * (xr[j] - m) * s;
                    pb[j] += gr[j];
                }
            if (!dx) continue;
            float sg = 0.0f, sgx = 0.0f;
            for (int64_t j = 0; j < C; j++) {
                float g = gr[j] * (w ? w->data[j] : 1.0f), xh = (xr[j] - m) * s;
                sg += g;
                sgx += g * xh;
            }
            sg /= (float)C;
            sgx /= (float)C;
            for (int64_t j = 0; j < C; j++) {
                float g = gr[j] * (w ? w->data[j] : 1.0f), xh = (xr[j] - m) * s;
                dx[r * C + j] += s * (g - sg - xh * sgx);
            }
        }
    }
    for (int64_t c = 0; part && c < nchunk; c++)
        for (int64_t j = 0; j < C; j++) {
            if (dw) dw[j] += part[2 * c * C + j];
            if (db) db[j] += part[2 * c * C + C + j];
        }
}

const mg_op_def mg_op_def_layernorm = {"mg_layernorm", layernorm_backward};

mg_tensor *mg_layernorm(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, mg_tensor *b, float eps) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_layernorm", "x", x)) return mg_ctx_dummy(ctx);
    int64_t C = mg_cols(x), R = mg_rows(x);
    if (x->ndim < 1 || C == 0) {
        mg_ctx_fail(ctx, "mg_layernorm: x%s needs a non-empty last dim", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if ((w && (w->ndim != 1 || w->shape[0] != C)) || (b && (b->ndim != 1 || b->shape[0] != C))) {
        mg_ctx_fail(ctx, "mg_layernorm: x%s with weight%s, bias%s: weight and bias must be (%lld)",
                    MG_SHAPE(x), w ? MG_SHAPE(w) : "(none)", b ? MG_SHAPE(b) : "(none)", (long long)C);
        return mg_ctx_dummy(ctx);
    }
    if (!(eps >= 0.0f)) {
        mg_ctx_fail(ctx, "mg_layernorm: eps %g must be >= 0", (double)eps);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_layernorm", x->ndim, x->shape);
    float *mean = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm mean");
    float *rstd = mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm rstd");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
#pragma omp parallel for schedule(static) if (x->numel > 16384)
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x->data + r * C;
        float m = 0.0f, v = 0.0f;
        for (int64_t j = 0; j < C; j++) m += xr[j];
        m /= (float)C;
        for (int64_t j = 0; j < C; j++) v += (xr[j] - m) * (xr[j] - m);
        v /= (float)C;
        float s = 1.0f / sqrtf(v + eps);
        mean[r] = m;
        rstd[r] = s;
        float *yr = y->data + r * C;
        for (int64_t j = 0; j < C; j++)
            yr[j] = (xr[j] - m) * s * (w ? w->data[j] : 1.0f) + (b ? b->data[j] : 0.0f);
    }
    mg_node *n = mg_op_record(ctx, &mg_op_def_layernorm, y, 3, (mg_tensor *[]){x, w, b});
    if (n) n->saved[0] = mean, n->saved[1] = rstd, n->f[0] = eps;
    return y;
}
