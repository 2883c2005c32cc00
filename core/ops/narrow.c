/* narrow: the slice [start, start+length) of x along dim, as a new tensor (a copy, not a view).
 * With outer = the product of the dims before dim and inner = the product of those after it, x is
 * outer blocks of size*inner elements and y keeps length*inner of each, from offset start*inner.
 * Backward: dx[o, start+l, i] += dy[o, l, i]. */
#include "internal.h"

static void narrow_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const int64_t outer = n->i[0], size = n->i[1], start = n->i[2], inner = n->i[3];
    const int64_t blk = outer ? n->out->numel / outer : 0; /* length * inner */
    const float *dy = n->out->grad;
    MG_PAR_FOR(n->out->numel > 65536 && outer > 1, o, outer, {
        float *d = dx + o * size * inner + start * inner;
        const float *s = dy + o * blk;
        for (int64_t j = 0; j < blk; j++) d[j] += s[j];
    });
}

const mg_op_def mg_op_def_narrow = {"mg_narrow", narrow_backward};

mg_tensor *mg_narrow(mg_ctx *ctx, mg_tensor *x, int64_t dim, int64_t start, int64_t length) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_data(ctx, "mg_narrow", "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim < 1) {
        mg_ctx_fail(ctx, "mg_narrow: x%s has no dims to narrow", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (dim < -x->ndim || dim >= x->ndim) {
        mg_ctx_fail(ctx, "mg_narrow: dim %lld out of range for x%s", (long long)dim, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    const int d = (int)(dim < 0 ? dim + x->ndim : dim);
    const int64_t size = x->shape[d];
    const int64_t s0 = start < 0 ? start + size : start;
    if (s0 < 0 || s0 > size || length < 0 || length > size - s0) {
        mg_ctx_fail(ctx, "mg_narrow: start %lld, length %lld out of range for dim %lld (size %lld) of x%s",
                    (long long)start, (long long)length, (long long)dim, (long long)size, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    int64_t shape[MG_MAX_DIMS], outer = 1, inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = i == d ? length : x->shape[i];
        if (i < d) outer *= x->shape[i];
        if (i > d) inner *= x->shape[i];
    }
    mg_tensor *y = x->dtype == MG_F32 ? mg_op_output(ctx, "mg_narrow", x->ndim, shape)
                                      : mg_tensor_new(ctx, x->dtype, x->ndim, shape);
    if (!mg_ctx_ok(ctx)) return y;
    const int64_t blk = length * inner;
    if (blk > 0) {
        const char *src = (const char *)x->data;
        char *dst = (char *)y->data;
        MG_PAR_FOR(y->numel > 65536 && outer > 1, o, outer,
                   memcpy(dst + (size_t)(o * blk) * 4,
                          src + (size_t)(o * size * inner + s0 * inner) * 4, (size_t)blk * 4));
    }
    if (x->dtype == MG_F32) {
        mg_node *n = mg_op_record(ctx, &mg_op_def_narrow, y, 1, (mg_tensor *[]){x});
        if (n) n->i[0] = outer, n->i[1] = size, n->i[2] = s0, n->i[3] = inner;
    }
    return y;
}
