/* Private: the class targets of the losses over a class dim (cross-entropy, NLL). */
#ifndef MG_OPS_TARGETS_H
#define MG_OPS_TARGETS_H

#include "internal.h"

/* x (...,C) float32 (named `xname`) and targets int32 of shape (...): every target is ignore or in
 * [0, C). *count gets the number of targets that are not ignore. Fails the op otherwise. */
static inline bool mg_check_class_targets(mg_ctx *ctx, const char *op, const char *xname, const mg_tensor *x,
                                          const mg_tensor *y, int32_t ignore, int64_t *count) {
    if (!mg_expect_f32(ctx, op, xname, x) || !mg_expect_data(ctx, op, "targets", y)) return false;
    bool ok = x->ndim >= 1 && y->dtype == MG_I32 && y->ndim == x->ndim - 1;
    for (int i = 0; ok && i < y->ndim; i++) ok = y->shape[i] == x->shape[i];
    if (!ok) {
        mg_ctx_fail(ctx, "%s: %s%s, targets%s: targets must be int32 with the shape of %s minus its last dim", op,
                    xname, MG_SHAPE(x), MG_SHAPE(y), xname);
        return false;
    }
    int64_t R = mg_rows(x), V = mg_cols(x), n = 0;
    for (int64_t r = 0; r < R; r++) {
        int32_t t = y->i32[r];
        if (t == ignore) continue;
        if (t < 0 || t >= V) {
            mg_ctx_fail(ctx, "%s: target %d at flat position %lld of targets%s is out of range [0, %lld) (ignore_index %d)",
                        op, t, (long long)r, MG_SHAPE(y), (long long)V, ignore);
            return false;
        }
        n++;
    }
    *count = n;
    return true;
}

#endif
