/* The two gate nonlinearities of recurrent cells, elementwise:
 *   sigmoid: y = 1 / (1 + exp(-x)), computed as exp(x) / (1 + exp(x)) for x < 0 so that no
 *            exp overflows;                                   dy/dx = y (1 - y)
 *   tanh:    y = tanh(x);                                     dy/dx = 1 - y^2
 * Both backward passes read the output y, not x. */
#include "internal.h"

static inline float sigmoid1(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static void sigmoid_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const float *y = n->out->data, *dy = n->out->grad;
    const int64_t N = n->out->numel;
    MG_PAR_FOR(N > 65536, i, N, dx[i] += dy[i] * y[i] * (1.0f - y[i]));
}

static void tanh_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (!dx) return;
    const float *y = n->out->data, *dy = n->out->grad;
    const int64_t N = n->out->numel;
    MG_PAR_FOR(N > 65536, i, N, dx[i] += dy[i] * (1.0f - y[i] * y[i]));
}

const mg_op_def mg_op_def_sigmoid = {"mg_sigmoid", sigmoid_backward};
const mg_op_def mg_op_def_tanh = {"mg_tanh", tanh_backward};

mg_tensor *mg_sigmoid(mg_ctx *ctx, mg_tensor *x) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_sigmoid", "x", x)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "mg_sigmoid", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    const int64_t N = x->numel;
    MG_PAR_FOR(N > 65536, i, N, y->data[i] = sigmoid1(x->data[i]));
    mg_op_record(ctx, &mg_op_def_sigmoid, y, 1, (mg_tensor *[]){x});
    return y;
}

mg_tensor *mg_tanh(mg_ctx *ctx, mg_tensor *x) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_tanh", "x", x)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "mg_tanh", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    const int64_t N = x->numel;
    MG_PAR_FOR(N > 65536, i, N, y->data[i] = tanhf(x->data[i]));
    mg_op_record(ctx, &mg_op_def_tanh, y, 1, (mg_tensor *[]){x});
    return y;
}
