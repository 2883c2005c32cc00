/* cat: n tensors joined along dim. All have the same dims except dim. With outer = the product of
 * the dims before dim and inner = the product of those after it, output row o is input 0's row o
 * (shape_0[dim]*inner elements), then input 1's, ... Backward hands each input its part of dy.
 *
 * A node holds at most MG_MAX_INPUTS inputs, so the full list lives in the arena (node->user) and
 * backward reads it from there. node->in lists only inputs that require a gradient (at most
 * MG_MAX_INPUTS of them): mg_op_record decides from those whether a node is needed at all, which
 * must also be true when only an input past the fourth wants a gradient. Nothing in mg_backward
 * depends on node->in beyond that: a dead gradient buffer is recycled from a node's output once its
 * backward has run, and every cat input was made before the cat, so its backward runs later. */
#include "internal.h"

static void cat_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *const *xs = n->user;
    const int count = (int)n->i[0];
    const int64_t outer = n->i[1], row = n->i[3]; /* i[2]: inner, for reading a node */
    const float *dy = n->out->grad;
    int64_t off = 0;
    for (int k = 0; k < count; k++) {
        mg_tensor *x = xs[k];
        const int64_t blk = x->numel / (outer ? outer : 1);
        if (mg_requires_grad(x) && x->numel > 0) {
            float *dx = mg_grad(ctx, x);
            if (!dx) return;
            MG_PAR_FOR(x->numel > 65536 && outer > 1, o, outer, {
                float *d = dx + o * blk;
                const float *s = dy + o * row + off;
                for (int64_t j = 0; j < blk; j++) d[j] += s[j];
            });
        }
        off += blk;
    }
}

const mg_op_def mg_op_def_cat = {"mg_cat", cat_backward};

static const char *dtype_name(mg_dtype t) { return t == MG_F32 ? "float32" : "int32"; }

mg_tensor *mg_cat(mg_ctx *ctx, mg_tensor *const *xs, int n, int64_t dim) {
    MG_BAIL_IF_FAILED(ctx);
    if (n < 1 || !xs) {
        mg_ctx_fail(ctx, "mg_cat: n = %d tensors (%s), need at least one", n, xs ? "xs given" : "xs NULL");
        return mg_ctx_dummy(ctx);
    }
    for (int k = 0; k < n; k++) {
        char arg[24];
        snprintf(arg, sizeof arg, "xs[%d]", k);
        if (!mg_expect_data(ctx, "mg_cat", arg, xs[k])) return mg_ctx_dummy(ctx);
    }
    const mg_tensor *x0 = xs[0];
    if (x0->ndim < 1) {
        mg_ctx_fail(ctx, "mg_cat: x%s has no dims to join along", MG_SHAPE(x0));
        return mg_ctx_dummy(ctx);
    }
    if (dim < -x0->ndim || dim >= x0->ndim) {
        mg_ctx_fail(ctx, "mg_cat: dim %lld out of range for x%s", (long long)dim, MG_SHAPE(x0));
        return mg_ctx_dummy(ctx);
    }
    const int d = (int)(dim < 0 ? dim + x0->ndim : dim);
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        const mg_tensor *x = xs[k];
        if (x->dtype != x0->dtype) {
            mg_ctx_fail(ctx, "mg_cat: xs[%d]%s is %s but xs[0]%s is %s", k, MG_SHAPE(x), dtype_name(x->dtype),
                        MG_SHAPE(x0), dtype_name(x0->dtype));
            return mg_ctx_dummy(ctx);
        }
        bool same = x->ndim == x0->ndim;
        for (int i = 0; same && i < x0->ndim; i++) same = i == d || x->shape[i] == x0->shape[i];
        if (!same) {
            mg_ctx_fail(ctx, "mg_cat: xs[%d]%s does not match xs[0]%s in the dims other than dim %lld", k,
                        MG_SHAPE(x), MG_SHAPE(x0), (long long)dim);
            return mg_ctx_dummy(ctx);
        }
        total += x->shape[d];
    }
    int64_t shape[MG_MAX_DIMS], outer = 1, inner = 1;
    for (int i = 0; i < x0->ndim; i++) {
        shape[i] = i == d ? total : x0->shape[i];
        if (i < d) outer *= x0->shape[i];
        if (i > d) inner *= x0->shape[i];
    }
    mg_tensor *y = x0->dtype == MG_F32 ? mg_op_output(ctx, "mg_cat", x0->ndim, shape)
                                       : mg_tensor_new(ctx, x0->dtype, x0->ndim, shape);
    if (!mg_ctx_ok(ctx)) return y;
    const int64_t row = total * inner;
    char *dst = (char *)y->data;
    MG_PAR_FOR(y->numel > 65536 && outer > 1, o, outer, {
        int64_t off = 0;
        for (int k = 0; k < n; k++) {
            const int64_t blk = xs[k]->shape[d] * inner;
            if (blk)
                memcpy(dst + (size_t)(o * row + off) * 4,
                       (const char *)xs[k]->data + (size_t)(o * blk) * 4, (size_t)blk * 4);
            off += blk;
        }
    });
    if (x0->dtype != MG_F32 || !mg_ctx_grad_enabled(ctx)) return y;
    mg_tensor *want[MG_MAX_INPUTS];
    int n_want = 0;
    for (int k = 0; k < n && n_want < MG_MAX_INPUTS; k++)
        if (mg_requires_grad(xs[k])) want[n_want++] = xs[k];
    if (n_want == 0) return y;
    mg_tensor **list = mg_ctx_alloc(ctx, (size_t)n * sizeof *list, "mg_cat input list");
    if (!list) return mg_ctx_dummy(ctx);
    memcpy(list, xs, (size_t)n * sizeof *list);
    mg_node *nd = mg_op_record(ctx, &mg_op_def_cat, y, n_want, want);
    if (nd) {
        nd->user = list;
        nd->i[0] = n, nd->i[1] = outer, nd->i[2] = inner, nd->i[3] = row;
    }
    return y;
}
