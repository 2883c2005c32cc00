/* Mean squared error over all elements: loss = (1/n) sum_i (x_i - t_i)^2, x and t of one shape.
 * The squares are summed in double over fixed chunks, the chunks in order (bit-identical for any
 * thread count). Backward: dx += (2 dloss / n)(x - t), dt -= the same; either may need no
 * gradient. */
#include "internal.h"

enum { MSE_CHUNK = 4096 };

static void mse_loss_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *t = n->in[1];
    const float c = (float)(2.0 * (double)n->out->grad[0] / (double)x->numel);
    float *dx = mg_requires_grad(x) ? mg_grad(ctx, x) : NULL;
    float *dt = mg_requires_grad(t) ? mg_grad(ctx, t) : NULL;
    if (!mg_ctx_ok(ctx)) return;
    MG_PAR_FOR(x->numel > 65536, i, x->numel, {
        float g = c * (x->data[i] - t->data[i]);
        if (dx) dx[i] += g;
        if (dt) dt[i] -= g;
    });
}

const mg_op_def mg_op_def_mse_loss = {"mg_mse_loss", mse_loss_backward};

mg_tensor *mg_mse_loss(mg_ctx *ctx, mg_tensor *input, mg_tensor *target) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = mg_op_def_mse_loss.name;
    if (!mg_expect_f32(ctx, op, "input", input) || !mg_expect_f32(ctx, op, "target", target)) return mg_ctx_dummy(ctx);
    if (!mg_same_shape(input, target) || input->numel == 0) {
        mg_ctx_fail(ctx, "%s: input%s, target%s: %s", op, MG_SHAPE(input), MG_SHAPE(target),
                    input->numel == 0 && mg_same_shape(input, target) ? "no elements" : "shapes differ (no broadcasting)");
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *loss = mg_op_output(ctx, op, 0, NULL);
    const int64_t n = input->numel, nchunk = (n + MSE_CHUNK - 1) / MSE_CHUNK;
    double *part = mg_ctx_alloc(ctx, (size_t)nchunk * sizeof(double), "mg_mse_loss partial sums");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    const float *x = input->data, *t = target->data;
    MG_PAR_FOR(nchunk > 1, c, nchunk, {
        int64_t i1 = (c + 1) * MSE_CHUNK < n ? (c + 1) * MSE_CHUNK : n;
        double s = 0.0;
        for (int64_t i = c * MSE_CHUNK; i < i1; i++) {
            double d = (double)x[i] - (double)t[i];
            s += d * d;
        }
        part[c] = s;
    });
    double total = 0.0;
    for (int64_t c = 0; c < nchunk; c++) total += part[c];
    loss->data[0] = (float)(total / (double)n);
    mg_op_record(ctx, &mg_op_def_mse_loss, loss, 2, (mg_tensor *[]){input, target});
    return loss;
}
