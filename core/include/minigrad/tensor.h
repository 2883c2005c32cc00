/* minigrad/tensor.h: tensors, the per-step context (arena + tape), and reverse-mode autodiff.
 *
 * Ownership:
 *  - An mg_ctx owns its arena. Every tensor made by an op or by mg_tensor_new/mg_zeros/mg_tensor_wrap
 *    lives in the arena and dies at mg_ctx_reset or mg_ctx_free; never free one by hand.
 *  - mg_tensor_wrap borrows the caller's data: it must outlive the step.
 *  - Parameters are not arena tensors: they live in an mg_params store (params.h).
 *
 * Autodiff is define-by-run: each op computes its result at once and, when gradients are enabled
 * and some input requires a gradient, appends a node to the context's tape. mg_backward(ctx, loss)
 * walks the tape in reverse; gradients accumulate (+=) into each tensor's `grad`.
 *
 * Programming errors (shape mismatch, missing backward, arena exhausted) go to the context's error
 * handler. The default handler prints the message and aborts. With a handler of your own installed,
 * the context becomes sticky-failed: later ops return a harmless placeholder tensor and do nothing,
 * so a program can run a whole step and check mg_ctx_error() once.
 */
#ifndef MINIGRAD_TENSOR_H
#define MINIGRAD_TENSOR_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mg_ctx mg_ctx;
typedef struct mg_node mg_node;

typedef enum mg_dtype { MG_F32 = 0, MG_I32 = 1 } mg_dtype; /* I32: token ids and targets only */

enum {
    MG_REQUIRES_GRAD = 1u << 0, /* gradient wanted (set on parameters and on op outputs) */
    MG_PARAM = 1u << 1,         /* lives in an mg_params store */
    MG_NO_DECAY = 1u << 2,      /* optimizer: no weight decay (biases, LayerNorm, embeddings) */
    MG_RETAIN_GRAD = 1u << 3,   /* an op output whose gradient mg_backward keeps (mg_retain_grad) */
    MG_BUFFER = 1u << 4,        /* params store: a buffer, state that is saved but never trained (params.h) */
    MG_FROZEN = 1u << 5,        /* params store: a parameter not trained now (mg_params_set_trainable) */
};

typedef struct mg_tensor {
    union {
        float *data;  /* MG_F32; NULL for the activation inside a fused op in bf16 (below) */
        int32_t *i32; /* MG_I32 */
    };
    float *grad; /* same shape as data; NULL until a gradient reaches it (and again after backward
                  * for op outputs, unless mg_retain_grad) */
    int64_t shape[MG_MAX_DIMS];
    int ndim;
    int64_t numel;
    mg_dtype dtype;
    uint32_t flags;
    mg_node *node;    /* tape node that produced it; NULL for leaves and untracked results */
    const char *name; /* parameters: their dotted name; NULL otherwise */
} mg_tensor;

/* ---- context ---- */

/* arena_bytes > 0: a fixed arena; running out is an error naming the op and the sizes.
 * arena_bytes == 0: the arena grows as needed; at the next reset it is re-made as one block of the
 * peak size plus a quarter (pages never touched cost no memory), so from the second step on a
 * training loop does no malloc, and steps that grow a little each time re-make it only rarely.
 * Returns NULL (with mg_last_error) if memory cannot be had. */
MG_API mg_ctx *mg_ctx_new(size_t arena_bytes);
MG_API void mg_ctx_free(mg_ctx *ctx);

/* Frees every arena tensor and the tape (start of a step). The error state is kept. */
MG_API void mg_ctx_reset(mg_ctx *ctx);

MG_API size_t mg_ctx_used_bytes(const mg_ctx *ctx);
MG_API size_t mg_ctx_peak_bytes(const mg_ctx *ctx); /* high-water mark since creation */
/* The high-water mark of the scratch the ops take for what lives only while one runs (op.h),
 * held beside the arena and kept across resets (0 with a fixed arena, which serves it). */
MG_API size_t mg_ctx_scratch_bytes(const mg_ctx *ctx);
MG_API size_t mg_ctx_capacity(const mg_ctx *ctx);
MG_API int64_t mg_ctx_tape_len(const mg_ctx *ctx);

/* Gradient recording on/off ("no_grad" for evaluation and generation). Returns the previous state. */
MG_API bool mg_ctx_set_grad_enabled(mg_ctx *ctx, bool enabled);
MG_API bool mg_ctx_grad_enabled(const mg_ctx *ctx);

/* Arithmetic precision of the products run in this context: mg_linear, mg_matmul / mg_matmul_nt
 * with a 2-D second operand, mg_conv1d / mg_conv2d, the fused mg_gelu_linear, mg_layernorm_linear
 * and mg_merge_heads_linear, and mg_attention where its fused kernel has bf16 products
 * (mg_attn_bf16_fused, minigrad/kernels.h). MG_PRECISION_FP32 (the default) is float32 throughout.
 * MG_PRECISION_BF16 is mixed precision: the products' inputs, weights and activations alike, are
 * rounded to bfloat16 (to nearest even) and multiplied on the CPU's bf16 units (mg_bgemm,
 * minigrad/kernels.h) with float32 accumulation; parameters, gradients, optimizer state,
 * normalisation, softmax and the loss stay float32, and no loss scaling is needed (bf16 has
 * float32's exponent range). A parameter (MG_PARAM) is converted once, at its first use after
 * mg_ctx_reset, and that copy is reused until the next reset: update parameters only between a
 * step's backward and the reset, as the training loops do. Results are bit-identical for any
 * thread count in both precisions. */
typedef enum mg_precision { MG_PRECISION_FP32 = 0, MG_PRECISION_BF16 = 1 } mg_precision;
MG_API void mg_ctx_set_precision(mg_ctx *ctx, mg_precision precision);
MG_API mg_precision mg_ctx_precision(const mg_ctx *ctx);
/* Inference in bf16 (KV-cache decoding): with keep, the parameters' bf16 copies are made once, on
 * the heap, and kept across mg_ctx_reset until keep is turned off, the precision is set again or
 * the context is freed; when the parameters change meanwhile, call mg_ctx_refresh_bf16_weights. Products of few rows (decoding)
 * read a weight through a second kept copy, packed once for mg_bgemm_packed (minigrad/kernels.h),
 * with the same bits as mg_bgemm. Turning keep on or off drops the copies made so far. */
MG_API void mg_ctx_keep_bf16_weights(mg_ctx *ctx, bool keep);
MG_API bool mg_ctx_keeps_bf16_weights(const mg_ctx *ctx);
/* With kept bf16 weights: the parameters may have changed since their copies were made (a context
 * kept from one generation call to the next, with training in between). Each kept copy is made
 * again, into the buffer it already has, at its next use; nothing is freed or allocated. */
MG_API void mg_ctx_refresh_bf16_weights(mg_ctx *ctx);
/* mg_precision_name: "fp32", "bf16", or "unknown" for a value outside the enum. mg_precision_parse
 * accepts "fp32" or "float32", "bf16" or "bfloat16" (lower case) and sets *out; anything else,
 * NULL included, returns false and leaves *out as it was. */
MG_API const char *mg_precision_name(mg_precision precision);
MG_API bool mg_precision_parse(const char *name, mg_precision *out);

typedef void (*mg_error_handler)(mg_ctx *ctx, const char *msg, void *user);
/* NULL restores the default (print to stderr, abort). */
MG_API void mg_ctx_set_error_handler(mg_ctx *ctx, mg_error_handler fn, void *user);
MG_API const char *mg_ctx_error(const mg_ctx *ctx); /* NULL while all is well */
MG_API void mg_ctx_clear_error(mg_ctx *ctx);
/* Raise a programming error on the context (for ops and layers): formats, then calls the handler.
 * Inside an error scope the message starts with the innermost scope's label and ": ". */
MG_API void mg_ctx_fail(mg_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Error scopes: a stack of labels on the context saying where the program is, so that an op that
 * fails deep inside a model names the place, e.g. "h.3.attn (self_attention): mg_matmul: ...".
 * mg_layer_forward pushes "<prefix> (<kind>)" around every layer's forward; a program may push
 * its own ("eval batch 3"). Only the innermost label is shown. An empty label (or NULL) is a scope
 * without a prefix, for code whose message already names the place. Labels are copied (at most
 * MG_SCOPE_LABEL_MAX - 1 bytes kept); scopes nest up to MG_SCOPE_DEPTH_MAX deep, and deeper ones
 * are counted but show the label of the deepest stored one. Push and pop never fail and never
 * allocate; popping an empty stack does nothing. Every push must be matched by a pop, also when
 * the code in between failed. */
enum { MG_SCOPE_DEPTH_MAX = 32, MG_SCOPE_LABEL_MAX = 128 };
MG_API void mg_ctx_push_scope(mg_ctx *ctx, const char *label);
MG_API void mg_ctx_pop_scope(mg_ctx *ctx);
/* The innermost scope's label ("" for a scope without one), or NULL outside every scope. */
MG_API const char *mg_ctx_scope(const mg_ctx *ctx);
MG_API int mg_ctx_scope_depth(const mg_ctx *ctx);

/* ---- tensors in the arena ---- */
/* A dtype other than MG_F32 / MG_I32, a bad ndim or dimension, or a NULL shape with ndim > 0 is
 * raised on the context (the result is then the context's dummy tensor). */
MG_API mg_tensor *mg_tensor_new(mg_ctx *ctx, mg_dtype dtype, int ndim, const int64_t *shape); /* uninitialised */
MG_API mg_tensor *mg_zeros(mg_ctx *ctx, int ndim, const int64_t *shape);
MG_API mg_tensor *mg_tensor_wrap(mg_ctx *ctx, mg_dtype dtype, int ndim, const int64_t *shape, void *data);
MG_API void mg_tensor_set_requires_grad(mg_tensor *t, bool on);
static inline bool mg_requires_grad(const mg_tensor *t) { return (t->flags & MG_REQUIRES_GRAD) != 0; }

/* Writes "(2,128,256)" into buf and returns buf. */
MG_API char *mg_shape_str(const mg_tensor *t, char *buf, size_t n);
MG_API bool mg_same_shape(const mg_tensor *a, const mg_tensor *b);

/* ---- autodiff ---- */
/* loss must be a one-element float32 tensor that requires a gradient (anything else, NULL
 * included, is raised on the context). Seeds d(loss) = 1 and runs every
 * recorded node's backward in reverse order. Leaves (parameters, and arena tensors marked with
 * mg_tensor_set_requires_grad) keep their gradients. An op output's gradient is dead once its own
 * node's backward has run, so its buffer is handed to gradients still to come and t->grad is set
 * back to NULL: the arena then holds a few live gradients at a time instead of one per
 * activation. Call mg_retain_grad on an op output before backward to read its gradient after. */
MG_API void mg_backward(mg_ctx *ctx, mg_tensor *loss);
MG_API void mg_retain_grad(mg_tensor *t);

/* Called by mg_backward after each node of the tape, in the order backward visits them (a node
 * nothing flowed back into included): once the last node that reads a parameter has been passed,
 * that parameter's gradient is final. For work that overlaps the rest of backward (the trainer
 * sends finished gradients meanwhile). NULL removes it.
 * A hook that reads a node's tensors must allow for out->data (and the next node's in[0]->data)
 * being NULL: in a bf16 context mg_gelu_linear, mg_layernorm_linear and mg_merge_heads_linear
 * (which the built-in mlp, self_attention and decoder_block layers use) record their activation's
 * node with a tensor that has a shape but no float32 values; those exist only as the Linear's bf16
 * copy. */
typedef void (*mg_backward_hook)(mg_ctx *ctx, const mg_node *node, void *user);
MG_API void mg_ctx_set_backward_hook(mg_ctx *ctx, mg_backward_hook fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
