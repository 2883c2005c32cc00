/* out[..., :] = W[ids[...], :]. Backward: dW[ids[t], :] += dout[t, :].
 * The scatter-add (mg_embedding_bwd, rowops.h) splits the columns among threads, each walking all
 * tokens in order: no two threads touch the same element and the order of additions is fixed
 * (race-free, deterministic, the same bits as a plain loop). */
#include "internal.h"
#include "minigrad/rowops.h"

static void embedding_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *W = n->in[0], *ids = n->in[1];
    float *dW = mg_grad(ctx, W);
    if (!dW) return;
    mg_embedding_bwd(ids->numel, W->shape[1], ids->i32, n->out->grad, dW);
}

const mg_op_def mg_op_def_embedding = {"mg_embedding", embedding_backward};

mg_tensor *mg_embedding(mg_ctx *ctx, mg_tensor *W, mg_tensor *ids) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_embedding", "weight", W) || !mg_expect_data(ctx, "mg_embedding", "ids", ids))
        return mg_ctx_dummy(ctx);
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
    mg_embedding_fwd(ids->numel, C, W->data, ids->i32, y->data);
    mg_op_record(ctx, &mg_op_def_embedding, y, 2, (mg_tensor *[]){W, ids});
    return y;
}
