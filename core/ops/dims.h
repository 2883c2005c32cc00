/* Private helpers for the ops that take a dim argument (reductions, softmax over a dim, transpose,
 * permute, index_select): PyTorch's negative dims, and the (outer, D, inner) view of a tensor
 * around one dim. */
#ifndef MG_OPS_DIMS_H
#define MG_OPS_DIMS_H

#include "internal.h"

/* dim in [-ndim, ndim) made non-negative into *out; a 0-d x takes dim 0 or -1 (as PyTorch does,
 * a scalar has one virtual dim of size 1), *out is then 0. Fails the op otherwise with
 * "<op>: dim <dim> out of range for x(2,3)". */
static inline bool mg_dim_index(mg_ctx *ctx, const char *op, const mg_tensor *x, int64_t dim, int *out) {
    int64_t n = x->ndim > 0 ? x->ndim : 1;
    if (dim < -n || dim >= n) {
        mg_ctx_fail(ctx, "%s: dim %lld out of range for x%s", op, (long long)dim, MG_SHAPE(x));
        return false;
    }
    *out = (int)(dim < 0 ? dim + n : dim);
    return true;
}

/* x viewed as (outer, D, inner) around dim d: element (o, k, i) is at (o * D + k) * inner + i. */
typedef struct {
    int64_t outer, D, inner;
} mg_dim_view;

static inline mg_dim_view mg_dim_split(const mg_tensor *x, int d) {
    mg_dim_view v = {1, 1, 1};
    if (x->ndim == 0) return v;
    for (int k = 0; k < d; k++) v.outer *= x->shape[k];
    v.D = x->shape[d];
    for (int k = d + 1; k < x->ndim; k++) v.inner *= x->shape[k];
    return v;
}

/* Lanes of the (outer, D, inner) view go to threads in blocks of this many adjacent inner
 * positions: a lane's k-loop always runs on one thread in order, so results do not depend on the
 * thread count, and the inner loop over a block is contiguous. */
enum { MG_LANE_BLOCK = 64 };

static inline int64_t mg_lane_blocks(mg_dim_view v) { return (v.inner + MG_LANE_BLOCK - 1) / MG_LANE_BLOCK; }

#endif
