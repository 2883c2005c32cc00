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
 * Everything an op allocates comes from the step arena and dies at mg_ctx_reset; what it needs
 * only while it runs comes from the context's scratch (mg_ctx_scratch_alloc).
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

/* Arena memory, 64-byte aligned, held until mg_ctx_reset. NULL (with an error raised naming `what`)
 * on exhaustion. */
MG_API void *mg_ctx_alloc(mg_ctx *ctx, size_t bytes, const char *what);

/* Scratch for what lives only while one op runs (a backward's bf16 copy of its output gradient,
 * a kernel's workspace): 64-byte aligned, held by the context beside the arena and reused by every
 * op, so transients do not pile up in the arena until the reset. Take the mark, allocate, release
 * to the mark before returning; uses nest (release in reverse order). mg_backward releases what a
 * node's backward left, mg_ctx_reset everything. The block grows to the largest need (kept
 * across resets, freed with the context); use it from the thread that runs the op, never from
 * inside a parallel region. A context with a fixed arena (mg_ctx_new(bytes > 0)) serves it from
 * that arena instead, until the reset, so that its bytes bound everything a step takes. NULL
 * (with an error raised naming `what`) when memory runs out. */
MG_API size_t mg_ctx_scratch_mark(const mg_ctx *ctx);
MG_API void *mg_ctx_scratch_alloc(mg_ctx *ctx, size_t bytes, const char *what);
MG_API void mg_ctx_scratch_release(mg_ctx *ctx, size_t mark);

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
 * count). Uses arena memory (mg_ctx_alloc). */
MG_API void mg_reduce_rows_add(mg_ctx *ctx, const float *src, int64_t R, int64_t N, float *dst);

#ifdef __cplusplus
}
#endif
#endif
