/* c = a + b, b of a's shape or a's trailing dims (bias (C), row table (T,C)) broadcast over the rest.
 * Backward: da += dc; db += dc summed over the broadcast rows (fixed chunk order). */
#include "internal.h"
#include "minigrad/rowops.h"

static void add_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    const float *dc = n->out->grad;
    if (mg_requires_grad(a)) {
        float *da = mg_grad(ctx, a);
        if (!da) return;
        mg_accumulate(a->numel, da, dc);
    }
    if (mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        if (b->numel == a->numel)
            mg_accumulate(b->numel, db, dc);
        else if (b->numel > 0)
            mg_sum_rows(a->numel / b->numel, b->numel, dc, db);
    }
}

const mg_op_def mg_op_def_add = {"mg_add", add_backward};

mg_tensor *mg_add(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_add", "a", a) || !mg_expect_f32(ctx, "mg_add", "b", b)) return mg_ctx_dummy(ctx);
    if (!mg_is_suffix_shape(a, b)) {
        mg_ctx_fail(ctx, "mg_add: a%s + b%s: b must have a's shape or a's trailing dims", MG_SHAPE(a), MG_SHAPE(b));
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *c = mg_op_output(ctx, "mg_add", a->ndim, a->shape);
    if (!mg_ctx_ok(ctx)) return c;
    int64_t nb = b->numel, rows = nb ? a->numel / nb : 0;
    mg_add_rows(rows, nb, a->data, b->data, c->data);
    mg_op_record(ctx, &mg_op_def_add, c, 2, (mg_tensor *[]){a, b});
    return c;
}
