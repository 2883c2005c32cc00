/* Reordered dims, copied into a new contiguous tensor:
 *
 *   mg_permute:   y has shape (x.shape[dims[0]], ..., x.shape[dims[n-1]]), y[i_0..] = x[j] with
 *                 j[dims[k]] = i_k
 *   mg_transpose: the permutation that swaps dim0 and dim1
 *
 * Backward is the inverse gather: every element of dx takes (+=) its one element of dy. Work is
 * split over the rows of the tensor written, each row written by one thread.
 */
#include "dims.h"

/* dst (ndim dims of `shape`, contiguous) = or += src, where dst's element i comes from src at
 * sum_k i_k * src_stride[k]. */
static void strided_gather(int ndim, const int64_t *shape, const int64_t *src_stride, const float *src, float *dst,
                           bool acc) {
    if (ndim == 0) {
        dst[0] = acc ? dst[0] + src[0] : src[0];
        return;
    }
    const int64_t L = shape[ndim - 1], sl = src_stride[ndim - 1];
    int64_t rows = 1;
    for (int k = 0; k < ndim - 1; k++) rows *= shape[k];
    if (L == 0) return;
    MG_PAR_FOR(rows * L > 65536, r, rows, {
        int64_t off = 0, rem = r;
        for (int k = ndim - 2; k >= 0; k--) {
            off += (rem % shape[k]) * src_stride[k];
            rem /= shape[k];
        }
        const float *s = src + off;
        float *d = dst + r * L;
        if (acc)
            for (int64_t j = 0; j < L; j++) d[j] += s[j * sl];
        else
            for (int64_t j = 0; j < L; j++) d[j] = s[j * sl];
    });
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int k = ndim - 1; k >= 0; k--) stride[k] = s, s *= shape[k];
}

static void permute_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0], *y = n->out;
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const int64_t *perm = n->saved[0];
    int64_t ystride[MG_MAX_DIMS], src[MG_MAX_DIMS];
    contiguous_strides(y->ndim, y->shape, ystride);
    for (int k = 0; k < y->ndim; k++) src[perm[k]] = ystride[k];
    strided_gather(x->ndim, x->shape, src, y->grad, dx, true);
}

const mg_op_def mg_op_def_transpose = {"mg_transpose", permute_backward};
const mg_op_def mg_op_def_permute = {"mg_permute", permute_backward};

/* perm is a checked permutation of x's dims. */
static mg_tensor *permute_apply(mg_ctx *ctx, const mg_op_def *def, mg_tensor *x, const int *perm) {
    int64_t shape[MG_MAX_DIMS], xstride[MG_MAX_DIMS], src[MG_MAX_DIMS];
    contiguous_strides(x->ndim, x->shape, xstride);
    for (int k = 0; k < x->ndim; k++) shape[k] = x->shape[perm[k]], src[k] = xstride[perm[k]];
    mg_tensor *y = mg_op_output(ctx, def->name, x->ndim, shape);
    int64_t *saved = mg_ctx_alloc(ctx, sizeof(int64_t) * MG_MAX_DIMS, "mg_permute dims");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    for (int k = 0; k < x->ndim; k++) saved[k] = perm[k];
    if (y->numel > 0) strided_gather(x->ndim, shape, src, x->data, y->data, false);
    mg_node *n = mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    if (n) n->saved[0] = saved;
    return y;
}

mg_tensor *mg_transpose(mg_ctx *ctx, mg_tensor *x, int64_t dim0, int64_t dim1) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = mg_op_def_transpose.name;
    int d0, d1;
    if (!mg_expect_f32(ctx, op, "x", x) || !mg_dim_index(ctx, op, x, dim0, &d0) || !mg_dim_index(ctx, op, x, dim1, &d1))
        return mg_ctx_dummy(ctx);
    int perm[MG_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) perm[k] = k;
    if (x->ndim > 0) perm[d0] = d1, perm[d1] = d0;
    return permute_apply(ctx, &mg_op_def_transpose, x, perm);
}

mg_tensor *mg_permute(mg_ctx *ctx, mg_tensor *x, int ndim, const int64_t *dims) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = mg_op_def_permute.name;
    if (!mg_expect_f32(ctx, op, "x", x)) return mg_ctx_dummy(ctx);
    if (ndim > 0 && !dims) {
        mg_ctx_fail(ctx, "%s: dims is NULL for x%s", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if (ndim != x->ndim) {
        mg_ctx_fail(ctx, "%s: %d dims given for x%s, which has %d", op, ndim, MG_SHAPE(x), x->ndim);
        return mg_ctx_dummy(ctx);
    }
    int perm[MG_MAX_DIMS];
    bool seen[MG_MAX_DIMS] = {false};
    for (int k = 0; k < ndim; k++) {
        if (!mg_dim_index(ctx, op, x, dims[k], &perm[k])) return mg_ctx_dummy(ctx);
        if (seen[perm[k]]) {
            mg_ctx_fail(ctx, "%s: dim %lld appears twice in dims for x%s (dims must be a permutation)", op,
                        (long long)dims[k], MG_SHAPE(x));
            return mg_ctx_dummy(ctx);
        }
        seen[perm[k]] = true;
    }
    return permute_apply(ctx, &mg_op_def_permute, x, perm);
}
