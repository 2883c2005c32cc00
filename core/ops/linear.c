/* Fused linear layer: y = x @ W + b, x (...,K), W (K,N) (GPT-2's Conv1D layout), b (N) or NULL.
 *
 * The same value as mg_add(mg_matmul(x, W), b) up to rounding, without the intermediate product
 * tensor, its gradient buffer (allocated, zeroed, accumulated into, read back), or the separate
 * bias pass: forward writes b into every row of y and lets the GEMM accumulate onto it (beta = 1);
 * backward hands dy straight to the GEMMs and the bias column sum.
 *   dx += dy @ W^T,  dW += x^T @ dy (all rows of x folded into one GEMM whose K is the row count),
 *   db += sum over rows of dy (fixed chunks, mg_sum_rows)
 * Every piece is bit-identical for any thread count.
 */
#include "internal.h"
#include "minigrad/kernels.h"
#include "minigrad/rowops.h"

static void linear_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *dy = n->out->grad;
    const int64_t M = n->i[0], K = n->i[1], N = n->i[2];
    if (mg_requires_grad(x)) {
        float *dx = mg_grad(ctx, x);
        if (!dx) return;
        mg_sgemm(false, true, M, K, N, 1.0f, dy, N, w->data, N, 1.0f, dx, K);
    }
    if (mg_requires_grad(w)) {
        float *dw = mg_grad(ctx, w);
        if (!dw) return;
        mg_sgemm(true, false, K, N, M, 1.0f, x->data, K, dy, N, 1.0f, dw, N);
    }
    if (b && mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        mg_sum_rows(M, N, dy, db);
    }
}

const mg_op_def mg_op_def_linear = {"mg_linear", linear_backward};

mg_tensor *mg_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_linear", "x", x) || !mg_expect_f32(ctx, "mg_linear", "weight", w) ||
        (b && !mg_expect_f32(ctx, "mg_linear", "bias", b)))
        return mg_ctx_dummy(ctx);
    if (x->ndim < 1 || w->ndim != 2 || w->shape[0] != mg_cols(x)) {
        mg_ctx_fail(ctx, "mg_linear: x%s @ weight%s: weight must be (%lld,N) for x's last dim %lld",
                    MG_SHAPE(x), MG_SHAPE(w), (long long)mg_cols(x), (long long)mg_cols(x));
        return mg_ctx_dummy(ctx);
    }
    const int64_t M = mg_rows(x), K = mg_cols(x), N = w->shape[1];
    if (b && (b->ndim != 1 || b->shape[0] != N)) {
        mg_ctx_fail(ctx, "mg_linear: x%s @ weight%s + bias%s: bias must be (%lld)", MG_SHAPE(x),
                    MG_SHAPE(w), MG_SHAPE(b), (long long)N);
        return mg_ctx_dummy(ctx);
    }
    int64_t shape[MG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = N;
    mg_tensor *y = mg_op_output(ctx, "mg_linear", x->ndim, shape);
    if (!mg_ctx_ok(ctx)) return y;
    if (b) {
        float *Y = y->data;
        const float *B = b->data;
#pragma omp parallel for schedule(static) if (M * N > 65536)
        for (int64_t r = 0; r < M; r++) memcpy(Y + r * N, B, (size_t)N * sizeof(float));
    }
    mg_sgemm(false, false, M, N, K, 1.0f, x->data, K, w->data, N, b ? 1.0f : 0.0f, y->data, N);
    mg_node *n = mg_op_record(ctx, &mg_op_def_linear, y, 3, (mg_tensor *[]){x, w, b});
    if (n) n->i[0] = M, n->i[1] = K, n->i[2] = N;
    return y;
}
