/* minigrad/op.h: what an op is made of. For writing new ops (in core/ops/ or in a plugin that
 * ships a fused op): an op function validates shapes, allocates its output, computes the forward
 * result, and records a node whose backward accumulates (+=) into the inputs' gradients.
 *
 *   mg_tensor *my_op(mg_ctx *ctx, mg_tensor *x) {
 *       if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
 *       mg_tensor *y = mg_op_output(ctx, "my_op", x->ndim, x->shape);
 *       if (!mg_ctx_ok(ctx)) return y;
 *       ...forward...
 *       mg_node *n = mg_op_record(ctx, &my_op_def, y, 1, (mg_tensor *[]){x});
 *       if (n) n->f[0] = ...; // scalars backward needs
 *       return y;
 *   }
 *
 * Everything an op allocates comes from the step arena and dies at mg_ctx_reset.
 */
#ifndef MINIGRAD_OP_H
#define MINIGRAD_OP_H

#include "minigrad/export.h"

#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MG_MAX_INPUTS 4

typedef struct mg_op_def {
    const char *name;
    /* Accumulates into the gradients of inputs that require them; NULL = not differentiable. */
    void (*backward)(mg_ctx *ctx, mg_node *node);
} mg_op_def;

struct mg_node {
    const mg_op_def *op;
    mg_tensor *in[MG_MAX_INPUTS];
    int n_in;
    mg_tensor *out;
    mg_node *prev;     /* previous node on the tape */
    float f[4];        /* op scalars (eps, scale, p, ...) */
    int64_t i[4];      /* op integers (head count, offsets, ...) */
    void *saved[4];    /* arena buffers kept for backward (LayerNorm mean/rstd, probabilities, ...) */
    const void *user;  /* op-specific pointer (retained until the step ends) */
};

static inline bool mg_ctx_ok(const mg_ctx *ctx) { return mg_ctx_error(ctx) == NULL; }

/* The placeholder returned by ops once the context has failed (one element, never NULL). */
MG_API mg_tensor *mg_ctx_dummy(mg_ctx *ctx);

/* Allocates an op's float32 output in the arena; on exhaustion raises an error naming `op` and the
 * shape, and returns the placeholder. */
MG_API mg_tensor *mg_op_output(mg_ctx *ctx, const char *op, int ndim, const int64_t *shape);

/* Arena scratch, 64-byte aligned. NULL (with an error raised naming `what`) on exhaustion. */
MG_API void *mg_ctx_alloc(mg_ctx *ctx, size_t bytes, const char *what);

/* Appends a node when gradients are enabled and some input requires one; marks `out` as requiring
 * a gradient. Returns NULL when nothing was recorded (then backward data need not be saved).
 * `out` must be a tensor this op has just made (mg_op_output), never one of its inputs: once the
 * node's backward has run, mg_backward hands out's gradient buffer on to later gradients. A
 * backward reads only its own out->grad and writes only through mg_grad of its inputs. */
MG_API mg_node *mg_op_record(mg_ctx *ctx, const mg_op_def *def, mg_tensor *out, int n_in, mg_tensor *const *in);

/* The gradient buffer of t, allocated zeroed in the arena on first use (parameters already have one).
 * NULL only if the arena is exhausted (an error has then been raised). */
MG_API float *mg_grad(mg_ctx *ctx, mg_tensor *t);

/* mg_grad for a backward that can write its whole contribution in one pass: when the buffer is
 * made by this call, *fresh is set and it is NOT zeroed; the caller must then write every element
 * (as 0 + value, e.g. mg_accumulate_fresh, a GEMM with beta 0) instead of adding. Otherwise the
 * existing buffer, *fresh false, to be added to as with mg_grad. Saves the zeroing pass. */
MG_API float *mg_grad_for_write(mg_ctx *ctx, mg_tensor *t, bool *fresh);

/* Rows of a tensor: product of all dims but the last. */
static inline int64_t mg_rows(const mg_tensor *t) {
    int64_t r = 1; /* the product, not numel / last dim: a last dim of 0 is allowed */
    for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
    return r;
}
static inline int64_t mg_cols(const mg_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* dst[N] += sum over R rows of src[R][N], in a fixed chunked order (bit-identical for any thread
 * count). Uses arena scratch. */
MG_API void mg_reduce_rows_add(mg_ctx *ctx, const float *src, int64_t R, int64_t N, float *dst);

#ifdef __cplusplus
}
#endif
#endif
