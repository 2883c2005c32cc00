/* out[..., :] = W[ids[...], :]. Backward: dW[ids[t], :] += dout[t, :].
 * The scatter-add is split over column blocks, each thread walking all tokens in order: no two
 * threads touch the same element and the order of additions is fixed (race-free, deterministic). */
#include "internal.h"

enum { EMB_COLS = 16 };

static void embedding_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *W = n->in[0], *ids = n->in[1];
    float *dW = mg_grad(ctx, W);
    if (!dW) return;
    const float *dy = n->out->grad;
    int64_t C = W->shape[1], T = ids->numel, nblk = (C + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for schedule(static) if (T * C > 16384)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t c0 = blk * EMB_COLS, c1 = c0 + EMB_COLS < C ? c0 + EMB_COLS : C;
        for (int64_t t = 0; t < T; t++) {
            float *dst = dW + (int64_t)ids->i32[t] * C;
            const float *src = dy + t * C;
            for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

const mg_op_def mg_op_def_embedding = {"mg_embedding", embedding_backward};

mg_tensor *mg_embedding(mg_ctx *ctx, mg_tensor *W, mg_tensor *ids) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_embedding", "weight", W)) return mg_ctx_dummy(ctx);
    if (W->ndim != 2 || ids->dtype != MG_I32 || ids->ndim >= MG_MAX_DIMS) {
        mg_ctx_fail(ctx, "mg_embedding: weight%s must be (V,C) and ids%s int32 with at most %d dims%s",
                    MG_SHAPE(W), MG_SHAPE(ids), MG_MAX_DIMS - 1, ids->dtype != MG_I32 ? " (got float32 ids)" : "");
        return mg_ctx_dummy(ctx);
    }
    int64_t V = W->shape[0], C = W->shape[1];
    for (int64_t t = 0; t < ids->numel; t++)
        if (ids->i32[t] < 0 || ids->i32[t] >= V) {
            mg_ctx_fail(ctx, "mg_embedding: token id %d at flat position %lld of ids%s is out of range [0, %lld)",
                        ids->i32[t], (long long)t, MG_SHAPE(ids), (long long)V);
            return mg_ctx_dummy(ctx);
        }
    int64_t shape[MG_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = C;
    mg_tensor *y = mg_op_output(ctx, "mg_embedding", ids->ndim + 1, shape);
    if (!mg_ctx_ok(ctx)) return y;
#pragma omp parallel for schedule(static) if (ids->numel * C > 16384)
    for (int64_t t = 0; t < ids->numel; t++)
        memcpy(y->data + t * C, W->data + (int64_t)ids->i32[t] * C, (size_t)C * 4);
    mg_op_record(ctx, &mg_op_def_embedding, y, 2, (mg_tensor *[]){W, ids});
    return y;
}
