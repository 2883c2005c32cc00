/* GELU, two forms:
 *   tanh: y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *         dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3*0.044715 x^2),  t = tanh(u)
 *   erf:  y = 0.5 x (1 + erf(x / sqrt 2))
 *         dy/dx = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
 */
#include "internal.h"

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

static inline float gelu_tanh(float x) {
    float u = GELU_S * (x + GELU_C * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
static inline float gelu_tanh_grad(float x) {
    float u = GELU_S * (x + GELU_C * x * x * x), t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_S * (1.0f + 3.0f * GELU_C * x * x);
}
static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static inline float gelu_erf_grad(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * expf(-0.5f * x * x) * 0.3989422804014327f;
}

static void gelu_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const float *dy = n->out->grad;
    if (n->i[0] == MG_GELU_ERF) {
#pragma omp parallel for schedule(static) if (x->numel > 16384)
        for (int64_t i = 0; i < x->numel; i++) dx[i] += dy[i] * gelu_erf_grad(x->data[i]);
    } else {
#pragma omp parallel for schedule(static) if (x->numel > 16384)
        for (int64_t i = 0; i < x->numel; i++) dx[i] += dy[i] * gelu_tanh_grad(x->data[i]);
    }
}

const mg_op_def mg_op_def_gelu = {"mg_gelu", gelu_backward};

mg_tensor *mg_gelu(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_gelu", "x", x)) return mg_ctx_dummy(ctx);
    if (kind != MG_GELU_TANH && kind != MG_GELU_ERF) {
        mg_ctx_fail(ctx, "mg_gelu: unknown kind %d (MG_GELU_TANH or MG_GELU_ERF)", (int)kind);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_op_output(ctx, "mg_gelu", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    if (kind == MG_GELU_ERF) {
#pragma omp parallel for schedule(static) if (x->numel > 16384)
        for (int64_t i = 0; i < x->numel; i++) y->data[i] = gelu_erf(x->data[i]);
    } else {
#pragma omp parallel for schedule(static) if (x->numel > 16384)
        for (int64_t i = 0; i < x->numel; i++) y->data[i] = gelu_tanh(x->data[i]);
    }
    mg_node *n = mg_op_record(ctx, &mg_op_def_gelu, y, 1, (mg_tensor *[]){x});
    if (n) n->i[0] = kind;
    return y;
}
