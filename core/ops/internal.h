/* Private helpers shared by the op files. */
#ifndef MG_OPS_INTERNAL_H
#define MG_OPS_INTERNAL_H

#include "minigrad/op.h"
#include "minigrad/ops.h"
#include "../kernels/threads.h" /* MG_PAR_FOR */

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "(2,128,256)" in a temporary that lives until the end of the enclosing full expression's block. */
#define MG_SHAPE(t) mg_shape_str((t), (char[80]){0}, 80)

/* Returns the placeholder from the calling op if the context has already failed. */
#define MG_BAIL_IF_FAILED(ctx)                                                                     \
    do {                                                                                           \
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);                                             \
    } while (0)

/* Fails the op naming `arg` when t is NULL or has elements but no data (a parameter whose store
 * was never allocated: mg_params_alloc); true otherwise. */
static inline bool mg_expect_data(mg_ctx *ctx, const char *op, const char *arg, const mg_tensor *t) {
    if (t && (t->data || t->numel == 0)) return true;
    if (!t)
        mg_ctx_fail(ctx, "%s: %s is NULL", op, arg);
    else if (t->flags & MG_PARAM)
        mg_ctx_fail(ctx, "%s: %s%s (parameter '%s') has no data: its store is not allocated (call "
                    "mg_params_alloc first)", op, arg, MG_SHAPE(t), t->name ? t->name : "?");
    else
        mg_ctx_fail(ctx, "%s: %s%s has no data", op, arg, MG_SHAPE(t));
    return false;
}

/* Fails the op unless t is a float tensor with its data (mg_expect_data). */
static inline bool mg_expect_f32(mg_ctx *ctx, const char *op, const char *arg, const mg_tensor *t) {
    if (t && t->dtype == MG_F32 && (t->data || t->numel == 0)) return true;
    if (!mg_expect_data(ctx, op, arg, t)) return false;
    mg_ctx_fail(ctx, "%s: %s%s must be float32 (got int32 ids)", op, arg, MG_SHAPE(t));
    return false;
}

/* True if b's shape is a's shape or a's trailing dims (the fast path of mg_add and mg_mul). */
static inline bool mg_is_suffix_shape(const mg_tensor *a, const mg_tensor *b) {
    if (b->ndim > a->ndim) return false;
    for (int i = 0; i < b->ndim; i++)
        if (b->shape[b->ndim - 1 - i] != a->shape[a->ndim - 1 - i]) return false;
    return true;
}

static inline void mg_acc(float *restrict dst, const float *restrict src, int64_t n) {
    MG_PAR_FOR(n > 65536, i, n, dst[i] += src[i]);
}

/* ---- bf16 precision (mg_ctx_set_precision; ctx.c) ---- */

#include "minigrad/kernels.h"

static inline bool mg_use_bf16(const mg_ctx *ctx) {
    return mg_ctx_precision(ctx) == MG_PRECISION_BF16;
}
/* n floats rounded to bf16 in the arena; NULL (error raised naming `what`) on exhaustion. */
mg_bf16 *mg_bf16_copy(mg_ctx *ctx, const float *src, int64_t n, const char *what);
/* The same in the context's scratch (mg_ctx_scratch_alloc): for a copy that dies with the op. */
mg_bf16 *mg_bf16_scratch(mg_ctx *ctx, const float *src, int64_t n, const char *what);
/* Whether mg_op_record would record a node for these inputs now: where it will not, what an op
 * would keep for backward can go to the scratch instead of the arena. */
static inline bool mg_will_record(const mg_ctx *ctx, int n_in, mg_tensor *const *in) {
    if (!mg_ctx_ok(ctx) || !mg_ctx_grad_enabled(ctx)) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && mg_requires_grad(in[i])) return true;
    return false;
}
/* t's data in bf16: a parameter's copy is made once per step (until mg_ctx_reset) and shared by
 * every product that reads it; other tensors are converted on each call. */
const mg_bf16 *mg_bf16_operand(mg_ctx *ctx, const mg_tensor *t, const char *what);
/* Products of at most this many rows read kept weights pre-packed (mg_bf16_packed). */
#define MG_BF16_PACKED_MAX_ROWS 16
/* With kept weights (mg_ctx_keep_bf16_weights) and a 2-D parameter t, t rounded to bf16 and packed
 * for mg_bgemm_packed as the B of a product (trans: B = t^T, t N x K; else t is K x N), made at
 * its first use and kept like the plain copies (which are then made only if something asks for
 * them: mg_bf16_operand); NULL otherwise (weights not kept, not a parameter, no room, no memory, no
 * packed kernel for M rows on this path, or M above MG_BF16_PACKED_MAX_ROWS): then
 * mg_bf16_operand and mg_bgemm give the same bits. */
const uint32_t *mg_bf16_packed(mg_ctx *ctx, const mg_tensor *t, bool trans, int64_t M);

/* linear.c: mg_linear's checks, raising as `op`; its bf16 forward from xb, x's values already
 * rounded to bf16 (kept in the node for backward: in the arena when a node will be recorded),
 * recording the node; returns y. */
bool mg_linear_check(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *w, const mg_tensor *b);
mg_tensor *mg_linear_bf16(mg_ctx *ctx, const char *op, mg_tensor *x, const mg_bf16 *xb, mg_tensor *w, mg_tensor *b);

#endif
