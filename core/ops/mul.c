/* c = a * b with broadcasting. Fast path as in mg_add: one operand has the other's shape or its
 * trailing dims, recorded second. Backward: da += dc * b; db += sum over broadcast rows of dc * a.
 * Any other broadcast takes the general path (binary.c). */
#include "broadcast.h"

static void mul_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    if (!mg_is_suffix_shape(a, b)) {
        mg_binary_broadcast_backward(ctx, n, MG_BIN_MUL);
        return;
    }
    const float *dc = n->out->grad;
    int64_t nb = b->numel, rows = nb ? a->numel / nb : 0;
    if (mg_requires_grad(a)) {
        float *da = mg_grad(ctx, a);
        if (!da) return;
        MG_PAR_FOR(a->numel > 65536, r, rows, {
            for (int64_t j = 0; j < nb; j++) da[r * nb + j] += dc[r * nb + j] * b->data[j];
        });
    }
    if (mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        float *prod = rows > 1 ? mg_ctx_alloc(ctx, (size_t)a->numel * 4, "mg_mul backward scratch") : NULL;
        if (!db || (rows > 1 && !prod)) return;
        if (rows <= 1) {
            for (int64_t j = 0; j < nb; j++) db[j] += dc[j] * a->data[j];
            return;
        }
        MG_PAR_FOR(a->numel > 65536, i, a->numel, prod[i] = dc[i] * a->data[i]);
        mg_reduce_rows_add(ctx, prod, rows, nb, db);
    }
}

const mg_op_def mg_op_def_mul = {"mg_mul", mul_backward};

mg_tensor *mg_mul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_mul", "a", a) || !mg_expect_f32(ctx, "mg_mul", "b", b)) return mg_ctx_dummy(ctx);
    if (!mg_is_suffix_shape(a, b)) {
        if (!mg_is_suffix_shape(b, a)) return mg_binary_broadcast(ctx, &mg_op_def_mul, MG_BIN_MUL, a, b);
        mg_tensor *t = a;
        a = b, b = t;
    }
    mg_tensor *c = mg_op_output(ctx, "mg_mul", a->ndim, a->shape);
    if (!mg_ctx_ok(ctx)) return c;
    int64_t nb = b->numel, rows = nb ? a->numel / nb : 0;
    MG_PAR_FOR(a->numel > 65536, r, rows, {
        for (int64_t j = 0; j < nb; j++) c->data[r * nb + j] = a->data[r * nb + j] * b->data[j];
    });
    mg_op_record(ctx, &mg_op_def_mul, c, 2, (mg_tensor *[]){a, b});
    return c;
}
