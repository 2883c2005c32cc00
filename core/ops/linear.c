/* Fused linear layer: y = x @ W + b, x (...,K), W (K,N) (GPT-2's Conv1D layout), b (N) or NULL.
 *
 * The same value as mg_add(mg_matmul(x, W), b) up to rounding, without the intermediate product
 * tensor, its gradient buffer (allocated, zeroed, accumulated into, read back), or the separate
 * bias pass: forward has the GEMM start every row of y from b (mg_sgemm_bias, mg_bgemm_bias: a
 * tile of rows at a time, just before its products, the bits of filling y with b and accumulating);
 * backward hands dy straight to the GEMMs and the bias column sum.
 *   dx += dy @ W^T (written, not added, into a gradient buffer made for it: mg_grad_for_write),
 *   dW += x^T @ dy (all rows of x folded into one GEMM whose K is the row count),
 *   db += sum over rows of dy (fixed chunks, mg_sum_rows)
 * Every piece is bit-identical for any thread count.
 *
 * In bf16 precision (mg_ctx_set_precision) the products run on bf16 copies: x rounded once in
 * forward and kept (in the node, in the arena) for dW, W's per-step copy, dy rounded once in
 * backward for both of its products (in the context's scratch: it dies with the backward; with
 * a bias, in the same pass over dy as the bias gradient, mg_sum_rows_bf16); the
 * bias, the sums and the gradients stay float32. Without a node to record (no gradient wanted) x's
 * copy goes to the scratch too. With kept weights (mg_ctx_keep_bf16_weights) a product of few
 * rows reads W pre-packed (mg_bgemm_packed), the same bits without packing W at every call.
 * mg_linear_bf16 is that forward from an x already in bf16, for the fused ops that write their
 * activation straight in bf16 (fused_linear.c).
 */
#include "internal.h"
#include "minigrad/kernels.h"
#include "minigrad/rowops.h"

static void linear_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *dy = n->out->grad;
    const int64_t M = n->i[0], K = n->i[1], N = n->i[2];
    float *db = NULL;
    if (b && mg_requires_grad(b) && !(db = mg_grad(ctx, b))) return;
    if (n->saved[0]) { /* bf16: saved[0] x, saved[1] W */
        const mg_bf16 *xb = n->saved[0], *wb = n->saved[1];
        mg_bf16 *dyb = mg_ctx_scratch_alloc(ctx, (size_t)(M * N > 0 ? M * N : 1) * sizeof(mg_bf16),
                                            "mg_linear backward: dy in bf16");
        if (!dyb) return;
        if (db) mg_sum_rows_bf16(M, N, dy, db, dyb); /* the bias gradient's pass rounds dy too */
        else mg_f32_to_bf16(M * N, dy, dyb);
        if (mg_requires_grad(x)) {
            bool fresh;
            float *dx = mg_grad_for_write(ctx, x, &fresh);
            if (!dx) return;
            mg_bgemm(false, true, M, K, N, dyb, N, wb, N, !fresh, dx, K);
        }
        if (mg_requires_grad(w)) {
            float *dw = mg_grad(ctx, w);
            if (!dw) return;
            mg_bgemm(true, false, K, N, M, xb, K, dyb, N, true, dw, N);
        }
    } else {
        if (mg_requires_grad(x)) {
            bool fresh;
            float *dx = mg_grad_for_write(ctx, x, &fresh);
            if (!dx) return;
            mg_sgemm(false, true, M, K, N, 1.0f, dy, N, w->data, N, fresh ? 0.0f : 1.0f, dx, K);
        }
        if (mg_requires_grad(w)) {
            float *dw = mg_grad(ctx, w);
            if (!dw) return;
            mg_sgemm(true, false, K, N, M, 1.0f, x->data, K, dy, N, 1.0f, dw, N);
        }
    }
    if (db && !n->saved[0]) {
        mg_sum_rows(M, N, dy, db);
    }
}

const mg_op_def mg_op_def_linear = {"mg_linear", linear_backward};

bool mg_linear_check(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *w, const mg_tensor *b) {
    if (!mg_expect_f32(ctx, op, "x", x) || !mg_expect_f32(ctx, op, "weight", w) ||
        (b && !mg_expect_f32(ctx, op, "bias", b)))
        return false;
    if (x->ndim < 1 || w->ndim != 2 || w->shape[0] != mg_cols(x)) {
        mg_ctx_fail(ctx, "%s: x%s @ weight%s: weight must be (%lld,N) for x's last dim %lld", op, MG_SHAPE(x),
                    MG_SHAPE(w), (long long)mg_cols(x), (long long)mg_cols(x));
        return false;
    }
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[1])) {
        mg_ctx_fail(ctx, "%s: x%s @ weight%s + bias%s: bias must be (%lld)", op, MG_SHAPE(x), MG_SHAPE(w),
                    MG_SHAPE(b), (long long)w->shape[1]);
        return false;
    }
    return true;
}

/* y (x's shape, last dim N) holding b in every row (b NULL: left as allocated, for the products
 * that start from the bias themselves). */
static mg_tensor *linear_output(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *b, int64_t N) {
    int64_t shape[MG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = N;
    mg_tensor *y = mg_op_output(ctx, op, x->ndim, shape);
    if (!mg_ctx_ok(ctx) || !b) return y;
    const int64_t M = mg_rows(x);
    float *Y = y->data;
    const float *B = b->data;
    MG_PAR_FOR(M * N > 65536, r, M, memcpy(Y + r * N, B, (size_t)N * sizeof(float)));
    return y;
}

mg_tensor *mg_linear_bf16(mg_ctx *ctx, const char *op, mg_tensor *x, const mg_bf16 *xb, mg_tensor *w, mg_tensor *b) {
    const int64_t M = mg_rows(x), K = mg_cols(x), N = w->shape[1];
    const uint32_t *wp = mg_bf16_packed(ctx, w, false, M);
    /* y starts from b: filled here for the pre-packed product, by mg_bgemm_bias otherwise */
    mg_tensor *y = linear_output(ctx, op, x, wp ? b : NULL, N);
    if (!mg_ctx_ok(ctx)) return y;
    const mg_bf16 *wb = NULL;
    if (!wp || !mg_bgemm_packed(M, N, K, xb, K, wp, b != NULL, y->data, N)) {
        wb = mg_bf16_operand(ctx, w, "mg_linear: weight in bf16");
        if (!wb) return y;
        mg_bgemm_bias(false, false, M, N, K, xb, K, wb, N, b ? b->data : NULL, y->data, N);
    }
    mg_node *n = mg_op_record(ctx, &mg_op_def_linear, y, 3, (mg_tensor *[]){x, w, b});
    if (n && !wb) wb = mg_bf16_operand(ctx, w, "mg_linear: weight in bf16"); /* for backward */
    if (n) n->i[0] = M, n->i[1] = K, n->i[2] = N, n->saved[0] = (void *)xb, n->saved[1] = (void *)wb;
    return y;
}

mg_tensor *mg_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_linear_check(ctx, "mg_linear", x, w, b)) return mg_ctx_dummy(ctx);
    const int64_t M = mg_rows(x), K = mg_cols(x), N = w->shape[1];
    if (mg_use_bf16(ctx)) {
        const size_t mark = mg_ctx_scratch_mark(ctx);
        const bool keep = mg_will_record(ctx, 3, (mg_tensor *[]){x, w, b});
        const mg_bf16 *xb = keep ? mg_bf16_copy(ctx, x->data, M * K, "mg_linear: x in bf16")
                                 : mg_bf16_scratch(ctx, x->data, M * K, "mg_linear: x in bf16");
        mg_tensor *y = xb ? mg_linear_bf16(ctx, "mg_linear", x, xb, w, b) : mg_ctx_dummy(ctx);
        mg_ctx_scratch_release(ctx, mark);
        return y;
    }
    mg_tensor *y = linear_output(ctx, "mg_linear", x, NULL, N);
    if (!mg_ctx_ok(ctx)) return y;
    mg_sgemm_bias(false, false, M, N, K, x->data, K, w->data, N, b ? b->data : NULL, y->data, N);
    mg_node *n = mg_op_record(ctx, &mg_op_def_linear, y, 3, (mg_tensor *[]){x, w, b});
    if (n) n->i[0] = M, n->i[1] = K, n->i[2] = N, n->saved[0] = NULL, n->saved[1] = NULL;
    return y;
}
