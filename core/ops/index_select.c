/* Entries of x along one dim picked by an int32 index (1-D, any order, repeats allowed): with x
 * viewed as (outer, D, inner) around the dim, y (outer, n, inner) has y[o,j,:] = x[o,index[j],:].
 * Backward scatter-adds dx[o,index[j],:] += dy[o,j,:]. The work is split over (o, block of inner
 * columns) items, each walking j in order: no two threads touch the same element and a repeated
 * index adds in index order, so the result is the same bits for any thread count. */
#include "dims.h"

enum { IS_COLS = 256 };

static void index_select_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *index = n->in[1];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const mg_dim_view v = {n->i[0], n->i[1], n->i[2]};
    const int64_t cnt = index->numel, nblk = (v.inner + IS_COLS - 1) / IS_COLS;
    const int32_t *idx = index->i32;
    const float *dy = n->out->grad;
    MG_PAR_FOR(v.outer * cnt * v.inner > 65536, it, v.outer * nblk, {
        const int64_t o = it / nblk, c0 = (it % nblk) * IS_COLS;
        const int64_t nc = v.inner - c0 < IS_COLS ? v.inner - c0 : IS_COLS;
        for (int64_t j = 0; j < cnt; j++) {
            float *d = dx + (o * v.D + idx[j]) * v.inner + c0;
            const float *g = dy + (o * cnt + j) * v.inner + c0;
            for (int64_t c = 0; c < nc; c++) d[c] += g[c];
        }
    });
}

const mg_op_def mg_op_def_index_select = {"mg_index_select", index_select_backward};

mg_tensor *mg_index_select(mg_ctx *ctx, mg_tensor *x, int64_t dim, mg_tensor *index) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = mg_op_def_index_select.name;
    int d;
    if (!mg_expect_f32(ctx, op, "x", x) || !mg_expect_data(ctx, op, "index", index)) return mg_ctx_dummy(ctx);
    if (x->ndim == 0) {
        mg_ctx_fail(ctx, "%s: x%s needs at least one dim", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (!mg_dim_index(ctx, op, x, dim, &d)) return mg_ctx_dummy(ctx);
    if (index->dtype != MG_I32 || index->ndim != 1) {
        mg_ctx_fail(ctx, "%s: index%s must be a 1-D int32 tensor%s", op, MG_SHAPE(index),
                    index->dtype != MG_I32 ? " (got float32)" : "");
        return mg_ctx_dummy(ctx);
    }
    const mg_dim_view v = mg_dim_split(x, d);
    const int64_t cnt = index->numel;
    for (int64_t j = 0; j < cnt; j++)
        if (index->i32[j] < 0 || index->i32[j] >= v.D) {
            mg_ctx_fail(ctx, "%s: index %d at position %lld of index%s is out of range [0, %lld) for dim %lld of x%s", op,
                        index->i32[j], (long long)j, MG_SHAPE(index), (long long)v.D, (long long)dim, MG_SHAPE(x));
            return mg_ctx_dummy(ctx);
        }
    int64_t shape[MG_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) shape[k] = k == d ? cnt : x->shape[k];
    mg_tensor *y = mg_op_output(ctx, op, x->ndim, shape);
    if (!mg_ctx_ok(ctx)) return y;
    const int32_t *idx = index->i32;
    MG_PAR_FOR(v.outer * cnt * v.inner > 65536, it, v.outer * cnt, {
        const int64_t o = it / cnt, j = it % cnt;
        memcpy(y->data + it * v.inner, x->data + (o * v.D + idx[j]) * v.inner, (size_t)v.inner * sizeof(float));
    });
    mg_node *n = mg_op_record(ctx, &mg_op_def_index_select, y, 2, (mg_tensor *[]){x, index});
    if (n) n->i[0] = v.outer, n->i[1] = v.D, n->i[2] = v.inner;
    return y;
}
