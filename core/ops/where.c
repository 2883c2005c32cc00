/* Selection with broadcasting: mg_where(cond, x, y) and mg_masked_fill(x, mask, value).
 * cond and mask are int32 or float32, nonzero = true (NaN counts as true).
 *   where        out = cond ? x : y      dx = g where cond, dy = g where !cond
 *   masked_fill  out = mask ? value : x  dx = g where !mask
 * The output has the broadcast shape of all the operands (as PyTorch's out-of-place forms); an
 * operand broadcast to it gets its gradient summed over the broadcast dims (fixed order). */
#include "broadcast.h"

/* A condition's values, either dtype. */
typedef struct {
    const int32_t *i;
    const float *f;
} truth_src;

static inline truth_src truth_of(const mg_tensor *t) {
    return t->dtype == MG_I32 ? (truth_src){t->i32, NULL} : (truth_src){NULL, t->data};
}
static inline bool truth_at(truth_src s, int64_t k) { return s.i ? s.i[k] != 0 : s.f[k] != 0.0f; }

static bool expect_condition(mg_ctx *ctx, const char *op, const char *arg, const mg_tensor *t) {
    if (!mg_expect_data(ctx, op, arg, t)) return false;
    if (t->dtype == MG_I32 || t->dtype == MG_F32) return true;
    mg_ctx_fail(ctx, "%s: %s%s must be int32 or float32", op, arg, MG_SHAPE(t));
    return false;
}

/* dt += the local gradient of operand `which` of the node: g where the condition (operand
 * `cond_k`) is `when`, 0 elsewhere, summed to t's shape when t is broadcast. */
static void select_backward(mg_ctx *ctx, mg_node *n, int which, int cond_k, bool when) {
    mg_tensor *t = n->in[which], *out = n->out;
    if (!mg_requires_grad(t)) return;
    float *dt = mg_grad(ctx, t);
    if (!dt) return;
    const bool direct = t->numel == out->numel; /* t has the output's shape */
    float *dst = direct ? dt : mg_ctx_alloc(ctx, (size_t)out->numel * sizeof(float), "broadcast gradient scratch");
    if (!dst) return;
    mg_bcast bc;
    mg_bcast_plan(&bc, out->ndim, out->shape, n->n_in, n->in);
    const truth_src c = truth_of(n->in[cond_k]);
    const int64_t sc = bc.stride[cond_k][bc.ndim - 1];
    const float *G = out->grad;
    MG_BC_FOR_SEGMENTS(&bc, {
        for (int64_t j = 0; j < len; j++) {
            const float v = truth_at(c, off[cond_k] + j * sc) == when ? G[o + j] : 0.0f;
            if (direct)
                dst[o + j] += v;
            else
                dst[o + j] = v;
        }
    });
    if (!direct) mg_bcast_reduce(ctx, t, out->ndim, out->shape, dst, 1.0f, dt);
}

static void where_backward(mg_ctx *ctx, mg_node *n) {
    select_backward(ctx, n, 1, 0, true);
    select_backward(ctx, n, 2, 0, false);
}

const mg_op_def mg_op_def_where = {"mg_where", where_backward};

mg_tensor *mg_where(mg_ctx *ctx, mg_tensor *cond, mg_tensor *x, mg_tensor *y) {
    MG_BAIL_IF_FAILED(ctx);
    if (!expect_condition(ctx, "mg_where", "cond", cond) || !mg_expect_f32(ctx, "mg_where", "x", x) ||
        !mg_expect_f32(ctx, "mg_where", "y", y))
        return mg_ctx_dummy(ctx);
    mg_tensor *in[3] = {cond, x, y};
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    if (!mg_broadcast_shape(ctx, "mg_where", 3, (const char *const[]){"cond", "x", "y"}, in, &ndim, shape))
        return mg_ctx_dummy(ctx);
    mg_tensor *out = mg_op_output(ctx, "mg_where", ndim, shape);
    if (!mg_ctx_ok(ctx)) return out;
    mg_bcast bc;
    mg_bcast_plan(&bc, ndim, shape, 3, in);
    const truth_src c = truth_of(cond);
    const int64_t last = bc.ndim - 1;
    const int64_t sc = bc.stride[0][last], sx = bc.stride[1][last], sy = bc.stride[2][last];
    const float *X = x->data, *Y = y->data;
    float *O = out->data;
    MG_BC_FOR_SEGMENTS(&bc, {
        for (int64_t j = 0; j < len; j++)
            O[o + j] = truth_at(c, off[0] + j * sc) ? X[off[1] + j * sx] : Y[off[2] + j * sy];
    });
    mg_op_record(ctx, &mg_op_def_where, out, 3, in);
    return out;
}

static void masked_fill_backward(mg_ctx *ctx, mg_node *n) { select_backward(ctx, n, 0, 1, false); }

const mg_op_def mg_op_def_masked_fill = {"mg_masked_fill", masked_fill_backward};

mg_tensor *mg_masked_fill(mg_ctx *ctx, mg_tensor *x, mg_tensor *mask, float value) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_masked_fill", "x", x) || !expect_condition(ctx, "mg_masked_fill", "mask", mask))
        return mg_ctx_dummy(ctx);
    mg_tensor *in[2] = {x, mask};
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    if (!mg_broadcast_shape(ctx, "mg_masked_fill", 2, (const char *const[]){"x", "mask"}, in, &ndim, shape))
        return mg_ctx_dummy(ctx);
    mg_tensor *out = mg_op_output(ctx, "mg_masked_fill", ndim, shape);
    if (!mg_ctx_ok(ctx)) return out;
    mg_bcast bc;
    mg_bcast_plan(&bc, ndim, shape, 2, in);
    const truth_src m = truth_of(mask);
    const int64_t last = bc.ndim - 1, sx = bc.stride[0][last], sm = bc.stride[1][last];
    const float *X = x->data;
    float *O = out->data;
    MG_BC_FOR_SEGMENTS(&bc, {
        for (int64_t j = 0; j < len; j++) O[o + j] = truth_at(m, off[1] + j * sm) ? value : X[off[0] + j * sx];
    });
    mg_op_record(ctx, &mg_op_def_masked_fill, out, 2, in);
    return out;
}
