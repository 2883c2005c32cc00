/* c = a + b with broadcasting. Fast path: one operand has the other's shape or its trailing dims
 * (bias (C), row table (T,C)) and is broadcast over the rest; the node then records the larger
 * operand first (a + b == b + a bit for bit). Backward: da += dc; db += dc summed over the
 * broadcast rows (fixed chunk order). Any other broadcast takes the general path (binary.c). */
#include "broadcast.h"
#include "minigrad/rowops.h"

static void add_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    if (!mg_is_suffix_shape(a, b)) {
        mg_binary_broadcast_backward(ctx, n, MG_BIN_ADD);
        return;
    }
    const float *dc = n->out->grad;
    bool fresh;
    if (mg_requires_grad(a)) {
        float *da = mg_grad_for_write(ctx, a, &fresh);
        if (!da) return;
        (fresh ? mg_accumulate_fresh : mg_accumulate)(a->numel, da, dc);
    }
    if (mg_requires_grad(b)) {
        if (b->numel == a->numel) {
            float *db = mg_grad_for_write(ctx, b, &fresh);
            if (!db) return;
            (fresh ? mg_accumulate_fresh : mg_accumulate)(b->numel, db, dc);
        } else {
            float *db = mg_grad(ctx, b);
            if (!db) return;
            if (b->numel > 0) mg_sum_rows(a->numel / b->numel, b->numel, dc, db);
        }
    }
}

const mg_op_def mg_op_def_add = {"mg_add", add_backward};

mg_tensor *mg_add(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_add", "a", a) || !mg_expect_f32(ctx, "mg_add", "b", b)) return mg_ctx_dummy(ctx);
    if (!mg_is_suffix_shape(a, b)) {
        if (!mg_is_suffix_shape(b, a)) return mg_binary_broadcast(ctx, &mg_op_def_add, MG_BIN_ADD, a, b);
        mg_tensor *t = a;
        a = b, b = t;
    }
    mg_tensor *c = mg_op_output(ctx, "mg_add", a->ndim, a->shape);
    if (!mg_ctx_ok(ctx)) return c;
    int64_t nb = b->numel, rows = nb ? a->numel / nb : 0;
    mg_add_rows(rows, nb, a->data, b->data, c->data);
    mg_op_record(ctx, &mg_op_def_add, c, 2, (mg_tensor *[]){a, b});
    return c;
}
