/* A view with a new shape over the same data (no copy). Backward: dx += dy (same element order). */
#include "internal.h"

static void reshape_backward(mg_ctx *ctx, mg_node *n) {
    float *dx = mg_grad(ctx, n->in[0]);
    if (dx) mg_acc(dx, n->out->grad, n->out->numel);
}

const mg_op_def mg_op_def_reshape = {"mg_reshape", reshape_backward};

mg_tensor *mg_reshape(mg_ctx *ctx, mg_tensor *x, int ndim, const int64_t *shape) {
    MG_BAIL_IF_FAILED(ctx);
    if (ndim < 0 || ndim > MG_MAX_DIMS) {
        mg_ctx_fail(ctx, "mg_reshape: x%s: ndim %d is out of range 0..%d (MG_MAX_DIMS)", MG_SHAPE(x), ndim,
                    MG_MAX_DIMS);
        return mg_ctx_dummy(ctx);
    }
    if (ndim > 0 && !shape) {
        mg_ctx_fail(ctx, "mg_reshape: x%s: shape is NULL for %d dims", MG_SHAPE(x), ndim);
        return mg_ctx_dummy(ctx);
    }
    int64_t s[MG_MAX_DIMS], known = 1;
    int infer = -1;
    bool ok = true;
    for (int i = 0; ok && i < ndim; i++) {
        s[i] = shape[i];
        if (shape[i] == -1 && infer < 0)
            infer = i;
        else if (shape[i] < 0 || __builtin_mul_overflow(known, shape[i], &known))
            ok = false;
    }
    if (ok && infer >= 0) {
        ok = known > 0 && x->numel % known == 0;
        if (ok) s[infer] = x->numel / known, known *= s[infer];
    }
    if (!ok || known != x->numel) {
        char want[96];
        int off = snprintf(want, sizeof want, "(");
        for (int i = 0; i < ndim && off < 80; i++)
            off += snprintf(want + off, sizeof want - (size_t)off, i ? ",%lld" : "%lld", (long long)shape[i]);
        snprintf(want + off, sizeof want - (size_t)off, ")");
        mg_ctx_fail(ctx, "mg_reshape: x%s (%lld elements) cannot be viewed as %s", MG_SHAPE(x),
                    (long long)x->numel, want);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_tensor_wrap(ctx, x->dtype, ndim, s, x->data);
    if (!mg_ctx_ok(ctx)) return y;
    if (x->dtype == MG_F32) mg_op_record(ctx, &mg_op_def_reshape, y, 1, (mg_tensor *[]){x});
    return y;
}
