/* Binary elementwise ops with NumPy/PyTorch broadcasting: mg_sub, mg_div, mg_maximum, mg_minimum,
 * and the general path of mg_add and mg_mul (add.c, mul.c keep their own fast path for b of a's
 * shape or a's trailing dims).
 *
 * Forward c = a (op) b over the broadcast shape; maximum/minimum propagate NaN (either operand).
 * Backward, for g = dc at each output position, the local gradients as PyTorch forms them:
 *   add  da = g            db = g
 *   sub  da = g            db = -g
 *   mul  da = g b          db = g a
 *   div  da = g / b        db = -g ((a / b) / b)
 *   max  da = g where a > b, g/2 where a == b, 0 where a < b (db the mirror image; both get g
 *        where either is NaN); min the same with the comparisons reversed.
 * An operand of the output's shape accumulates its local gradient directly; one broadcast to it
 * gets the local gradient summed over the broadcast dims (mg_bcast_reduce: fixed order, any
 * thread count gives the same bits). */
#include "broadcast.h"

static const char *const ab_names[2] = {"a", "b"};

mg_tensor *mg_binary_broadcast(mg_ctx *ctx, const mg_op_def *def, mg_binary_kind kind, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, def->name, "a", a) || !mg_expect_f32(ctx, def->name, "b", b)) return mg_ctx_dummy(ctx);
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    mg_tensor *in[2] = {a, b};
    if (!mg_broadcast_shape(ctx, def->name, 2, ab_names, in, &ndim, shape)) return mg_ctx_dummy(ctx);
    mg_tensor *c = mg_op_output(ctx, def->name, ndim, shape);
    if (!mg_ctx_ok(ctx)) return c;
    mg_bcast bc;
    mg_bcast_plan(&bc, ndim, shape, 2, in);
    const float *A = a->data, *B = b->data;
    float *C = c->data;
    const int64_t sa = bc.stride[0][bc.ndim - 1], sb = bc.stride[1][bc.ndim - 1];
    /* One segment: x, y the operands' values at the segment's j-th element; the inner strides are
     * 0 or 1, spelled out so that each loop vectorizes. */
#define SEG(EXPR)                                                                                  \
    do {                                                                                           \
        const float *pa = A + off[0], *pb = B + off[1];                                            \
        float *pc = C + o;                                                                         \
        if (sa && sb)                                                                              \
            for (int64_t j = 0; j < len; j++) { const float x = pa[j], y = pb[j]; pc[j] = (EXPR); } \
        else if (sa)                                                                               \
            for (int64_t j = 0; j < len; j++) { const float x = pa[j], y = pb[0]; pc[j] = (EXPR); } \
        else if (sb)                                                                               \
            for (int64_t j = 0; j < len; j++) { const float x = pa[0], y = pb[j]; pc[j] = (EXPR); } \
        else                                                                                       \
            for (int64_t j = 0; j < len; j++) { const float x = pa[0], y = pb[0]; pc[j] = (EXPR); } \
    } while (0)
    switch (kind) {
    case MG_BIN_ADD: MG_BC_FOR_SEGMENTS(&bc, SEG(x + y)); break;
    case MG_BIN_SUB: MG_BC_FOR_SEGMENTS(&bc, SEG(x - y)); break;
    case MG_BIN_MUL: MG_BC_FOR_SEGMENTS(&bc, SEG(x * y)); break;
    case MG_BIN_DIV: MG_BC_FOR_SEGMENTS(&bc, SEG(x / y)); break;
    case MG_BIN_MAX: MG_BC_FOR_SEGMENTS(&bc, SEG(isnan(x) ? x : isnan(y) ? y : x < y ? y : x)); break;
    case MG_BIN_MIN: MG_BC_FOR_SEGMENTS(&bc, SEG(isnan(x) ? x : isnan(y) ? y : x > y ? y : x)); break;
    }
#undef SEG
    mg_op_record(ctx, def, c, 2, in);
    return c;
}

/* Local gradient of operand `which` (0: a, 1: b) at every output position into out (+= when acc,
 * = otherwise). */
static void local_grad(const mg_bcast *bc, mg_binary_kind kind, int which, const float *A, const float *B,
                       const float *G, float *out, bool acc) {
    const int64_t sa = bc->stride[0][bc->ndim - 1], sb = bc->stride[1][bc->ndim - 1];
#define SEG(DA, DB)                                                                                \
    do {                                                                                           \
        const float *pa = A + off[0], *pb = B + off[1], *pg = G + o;                               \
        float *pd = out + o;                                                                       \
        for (int64_t j = 0; j < len; j++) {                                                        \
            const float x = pa[j * sa], y = pb[j * sb], g = pg[j];                                 \
            (void)x, (void)y;                                                                      \
            const float v = which == 0 ? (DA) : (DB);                                              \
            if (acc)                                                                               \
                pd[j] += v;                                                                        \
            else                                                                                   \
                pd[j] = v;                                                                         \
        }                                                                                          \
    } while (0)
    switch (kind) {
    case MG_BIN_ADD: MG_BC_FOR_SEGMENTS(bc, SEG(g, g)); break;
    case MG_BIN_SUB: MG_BC_FOR_SEGMENTS(bc, SEG(g, -g)); break;
    case MG_BIN_MUL: MG_BC_FOR_SEGMENTS(bc, SEG(g * y, g * x)); break;
    case MG_BIN_DIV: MG_BC_FOR_SEGMENTS(bc, SEG(g / y, -g * ((x / y) / y))); break;
    case MG_BIN_MAX:
        MG_BC_FOR_SEGMENTS(bc, SEG(x == y ? g / 2 : x < y ? 0.0f : g, x == y ? g / 2 : x > y ? 0.0f : g));
        break;
    case MG_BIN_MIN:
        MG_BC_FOR_SEGMENTS(bc, SEG(x == y ? g / 2 : x > y ? 0.0f : g, x == y ? g / 2 : x < y ? 0.0f : g));
        break;
    }
#undef SEG
}

void mg_binary_broadcast_backward(mg_ctx *ctx, mg_node *n, mg_binary_kind kind) {
    mg_tensor *out = n->out;
    mg_bcast bc;
    mg_bcast_plan(&bc, out->ndim, out->shape, 2, n->in);
    for (int which = 0; which < 2; which++) {
        mg_tensor *t = n->in[which];
        if (!mg_requires_grad(t)) continue;
        float *dt = mg_grad(ctx, t);
        if (!dt) return;
        if (t->numel == out->numel) { /* t has the output's shape */
            local_grad(&bc, kind, which, n->in[0]->data, n->in[1]->data, out->grad, dt, true);
        } else if (kind == MG_BIN_ADD || kind == MG_BIN_SUB) { /* the local gradient is +-g itself */
            if (!mg_bcast_reduce(ctx, t, out->ndim, out->shape, out->grad, which && kind == MG_BIN_SUB ? -1.0f : 1.0f, dt))
                return;
        } else {
            float *tmp = mg_ctx_alloc(ctx, (size_t)out->numel * sizeof(float), "broadcast gradient scratch");
            if (!tmp) return;
            local_grad(&bc, kind, which, n->in[0]->data, n->in[1]->data, out->grad, tmp, false);
            if (!mg_bcast_reduce(ctx, t, out->ndim, out->shape, tmp, 1.0f, dt)) return;
        }
    }
}

#define BINARY_OP(name, KIND)                                                                      \
    static void name##_backward(mg_ctx *ctx, mg_node *n) { mg_binary_broadcast_backward(ctx, n, KIND); } \
    const mg_op_def mg_op_def_##name = {"mg_" #name, name##_backward};                             \
    mg_tensor *mg_##name(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) {                                \
        return mg_binary_broadcast(ctx, &mg_op_def_##name, KIND, a, b);                            \
    }

BINARY_OP(sub, MG_BIN_SUB)
BINARY_OP(div, MG_BIN_DIV)
BINARY_OP(maximum, MG_BIN_MAX)
BINARY_OP(minimum, MG_BIN_MIN)
