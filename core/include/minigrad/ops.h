/* minigrad/ops.h: the differentiable ops. Each lives in one file of core/ops/ with its forward and
 * backward side by side. Shapes follow PyTorch order: the last dimension is contiguous; comments
 * write them as (B,T,C). Every op returns a new arena tensor (see tensor.h for ownership and errors).
 */
#ifndef MINIGRAD_OPS_H
#define MINIGRAD_OPS_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#include "minigrad/rng.h"
#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a (...,M,K) @ b (K,N) -> (...,M,N); or batched: b (...,K,N) whose leading (batch) dims broadcast
 * against a's by NumPy rules, as torch.matmul for operands of 2 dims or more: (2,1,M,K) @ (3,K,N)
 * -> (2,3,M,N). b 2-D and b with a's very batch dims take the fastest paths; the gradient of a
 * broadcast operand sums over the dims it was stretched along, in a fixed order. */
MG_API mg_tensor *mg_matmul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
/* a (...,M,K) @ b^T where b is (N,K) or batched (...,N,K) -> (...,M,N). (Tied LM head, q k^T.) */
MG_API mg_tensor *mg_matmul_nt(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);

/* Elementwise a + b / a * b with NumPy/PyTorch broadcasting (see mg_sub below). The common case,
 * one operand of the other's shape or its trailing dims (a bias (C) or a row table (T,C) broadcast
 * over the leading dims), has a fast path. */
MG_API mg_tensor *mg_add(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
MG_API mg_tensor *mg_mul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
MG_API mg_tensor *mg_scale(mg_ctx *ctx, mg_tensor *x, float s);

typedef enum mg_gelu_kind { MG_GELU_TANH = 0, MG_GELU_ERF = 1 } mg_gelu_kind;
MG_API mg_tensor *mg_gelu(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind);

/* Softmax over the last dimension. */
MG_API mg_tensor *mg_softmax(mg_ctx *ctx, mg_tensor *x);

/* LayerNorm over the last dimension C (biased variance); weight and bias (C) may be NULL. */
MG_API mg_tensor *mg_layernorm(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias, float eps);

/* weight (V,C) gathered at ids (I32, any shape) -> ids.shape + (C). An id outside [0,V) is an error
 * naming the position and the value. Backward scatter-adds (race-free, deterministic). */
MG_API mg_tensor *mg_embedding(mg_ctx *ctx, mg_tensor *weight, mg_tensor *ids);

/* Mean over non-ignored positions of -log softmax(logits)[target]. logits (...,V), targets I32 of
 * shape (...). Positions whose target == ignore_index do not count. Returns a one-element tensor
 * (0 when every position is ignored). A target outside [0,V) (and != ignore_index) is an error. */
MG_API mg_tensor *mg_cross_entropy(mg_ctx *ctx, mg_tensor *logits, mg_tensor *targets, int32_t ignore_index);

/* Same data, new shape; one dim may be -1. ndim outside 0..MG_MAX_DIMS, a NULL shape with
 * ndim > 0, or a shape whose element count differs from x's is raised on the context. */
MG_API mg_tensor *mg_reshape(mg_ctx *ctx, mg_tensor *x, int ndim, const int64_t *shape);

/* x (B,T,W): columns [col0, col0+width) split into H heads -> (B,H,T,width/H).
 * (Splitting a fused qkv projection: q = col0 0, k = C, v = 2C, each width C.) */
MG_API mg_tensor *mg_split_heads(mg_ctx *ctx, mg_tensor *x, int64_t H, int64_t col0, int64_t width);
/* (B,H,T,D) -> (B,T,H*D). */
MG_API mg_tensor *mg_merge_heads(mg_ctx *ctx, mg_tensor *x);

/* Adds a constant (non-trainable) bias to attention logits: for head `head` and the query at
 * absolute position qpos, logits[j] += bias for keys at positions kpos0 .. kpos0+n-1. */
typedef void (*mg_attn_bias_fn)(const void *user, int64_t head, int64_t qpos, int64_t kpos0,
                                int64_t n, float *logits);

typedef struct mg_attn_opts {
    bool causal;       /* key j visible to query i iff j <= q_pos0 + i */
    float scale;       /* 0: 1/sqrt(D) */
    int64_t q_pos0;    /* absolute position of the first query (incremental decoding); keys start at 0 */
    mg_attn_bias_fn bias; /* optional (ALiBi and other additive schemes) */
    const void *bias_user; /* retained until the step ends */
    /* > 0: k and v are KV caches (B,H,cap,D) and the keys are the first kv_len rows of each head,
     * read in place (incremental decoding without copying the cache). Inference only: an error if
     * a gradient would be recorded. */
    int64_t kv_len;
    /* Optional additive bias TENSOR, float32, (Tq,Tk), (H,Tq,Tk) or (B|1, H|1, Tq, Tk), added to
     * the scaled logits (after the bias callback, before the mask) of query i (0..Tq-1, not its
     * absolute position) and key j; Tk is kv_len when that is set. It may require a gradient: it
     * receives dL/dlogits, summed over its broadcast dims in a fixed order (a learned relative
     * position bias, e.g. T5's, is a table gathered into this tensor by ops). Appended last, so a
     * caller that zero-initialises the struct and leaves it NULL gets exactly the old op. */
    mg_tensor *bias_tensor;
} mg_attn_opts;

/* Scaled dot-product attention: q (B,H,Tq,D), k and v (B,H,Tk,D) -> (B,H,Tq,D).
 * opts may be NULL (non-causal, 1/sqrt(D), no bias). */
MG_API mg_tensor *mg_attention(mg_ctx *ctx, mg_tensor *q, mg_tensor *k, mg_tensor *v, const mg_attn_opts *opts);

/* Rotary embedding on interleaved pairs (2i, 2i+1) of the last dim D of x (B,H,T,D): the pair at
 * position pos0+t is rotated by angle (pos0+t) * base^(-2i/D). D must be even. */
MG_API mg_tensor *mg_rope(mg_ctx *ctx, mg_tensor *x, int64_t pos0, float base);

/* Inverted dropout: zeroes each element with probability p, scales the rest by 1/(1-p). The mask
 * is drawn sequentially from rng (same mask whatever the thread count). p == 0 returns x itself. */
MG_API mg_tensor *mg_dropout(mg_ctx *ctx, mg_tensor *x, float p, mg_rng *rng);

/* Sum / mean of all elements -> one-element tensor (accumulated in double, fixed order). */
MG_API mg_tensor *mg_sum(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_mean(mg_ctx *ctx, mg_tensor *x);

/* Fused linear layer: x (...,K) @ weight (K,N) + bias (N) -> (...,N); bias may be NULL. The value
 * of mg_add(mg_matmul(x, weight), bias) up to rounding, without the intermediate tensor and its
 * gradient (less arena memory) or the separate bias pass. */
MG_API mg_tensor *mg_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias);

/* An activation made only to feed a linear layer, fused with it (core/ops/fused_linear.c):
 *   mg_gelu_linear(x, kind, weight, bias)         = mg_linear(mg_gelu(x, kind), weight, bias)
 *   mg_layernorm_linear(x, ln_weight, ln_bias, eps, weight, bias)
 *                                                 = mg_linear(mg_layernorm(x, ln_weight, ln_bias, eps), weight, bias)
 *   mg_merge_heads_linear(x, weight, bias)        = mg_linear(mg_merge_heads(x), weight, bias)
 * with the same outputs and gradients, bit for bit, in either precision (x (...,K), or (B,H,T,D)
 * with K = H*D for merge_heads; weight (K,N), ln_weight, ln_bias (K) or NULL, bias (N) or NULL).
 * In fp32 they are those calls. In a bf16
 * context (mg_ctx_set_precision) the activation is written once, rounded straight to the bf16
 * copy mg_linear keeps for its weight gradient, and never stored in float32: x's size in float32
 * less arena per call; the tape's node for the activation then has an output with a shape and
 * data NULL (mg_backward_hook). Use them where nothing else reads the activation. */
MG_API mg_tensor *mg_gelu_linear(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind, mg_tensor *weight, mg_tensor *bias);
MG_API mg_tensor *mg_layernorm_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *ln_weight, mg_tensor *ln_bias, float eps,
                                      mg_tensor *weight, mg_tensor *bias);
MG_API mg_tensor *mg_merge_heads_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias);

/* ---- elementwise ops (PyTorch names and semantics) ----
 * Binary ops broadcast as NumPy/PyTorch: shapes align at the last dim, a size-1 or missing dim
 * stretches; the output has the broadcast shape. Shapes that cannot broadcast are an error naming
 * both, e.g. "mg_sub: a(2,3) and b(4) cannot broadcast: dim -1 is 3 vs 4". An operand broadcast to
 * the output gets its gradient summed over the broadcast dims in a fixed order (the same bits for
 * any thread count). Inputs are float32 (conditions and masks: int32 or float32, nonzero = true).
 * mg_maximum / mg_minimum propagate NaN; on ties each operand gets half the gradient (as PyTorch). */
MG_API mg_tensor *mg_sub(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
MG_API mg_tensor *mg_div(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
MG_API mg_tensor *mg_maximum(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
MG_API mg_tensor *mg_minimum(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);

/* Unary, same shape out. Gradients as PyTorch: abs'(0) = 0; sqrt'(0) and ln'(0) = inf;
 * silu(x) = x sigmoid(x). mg_pow: x^exponent with a float exponent, gradient 0 for exponent 0.
 * mg_clamp: min(max(x, min), max) (every element max when min > max, as PyTorch); -INFINITY /
 * INFINITY for no bound; the gradient passes where min <= x <= max. Unlike PyTorch a NaN bound is
 * an error. */
MG_API mg_tensor *mg_silu(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_exp(mg_ctx *ctx, mg_tensor *x);
/* torch.log. mg_log is also the logger (base.h); in C the one name serves both, picked by the type
 * of the first argument: mg_log(ctx, x) is this op, mg_log(MG_LOG_INFO, "fmt", ...) the logger. */
MG_API mg_tensor *mg_ln(mg_ctx *ctx, mg_tensor *x);
#ifndef __cplusplus
#define mg_log(first, ...) _Generic((first), mg_ctx *: mg_ln, default: mg_log)((first), __VA_ARGS__)
#endif
MG_API mg_tensor *mg_sqrt(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_neg(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_abs(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_pow(mg_ctx *ctx, mg_tensor *x, float exponent);
MG_API mg_tensor *mg_clamp(mg_ctx *ctx, mg_tensor *x, float min, float max);

/* cond ? x : y elementwise, broadcasting over all three (output: their broadcast shape). cond is
 * int32 or float32, nonzero = true. Gradients flow to x where cond holds, to y elsewhere. */
MG_API mg_tensor *mg_where(mg_ctx *ctx, mg_tensor *cond, mg_tensor *x, mg_tensor *y);
/* x with `value` wherever mask (int32 or float32, nonzero = true) holds; mask and x broadcast
 * (output: their broadcast shape, x's when mask broadcasts to x). x's gradient is 0 at filled
 * positions. */
MG_API mg_tensor *mg_masked_fill(mg_ctx *ctx, mg_tensor *x, mg_tensor *mask, float value);
/* ---- reductions over one dim, softmax over a dim, shape ops, batched matmul, losses ----
 * A dim is counted from the end when negative (-1 is the last), as in PyTorch (a 0-d x takes dim 0
 * or -1); out of range is an error naming the op, the dim and x's shape, e.g.
 * `mg_transpose: dim 3 out of range for x(2,3)`. Float inputs must be float32. Results are the same
 * bits for any thread count. */

/* Sum / mean / max of x over dim -> x's shape without that dim, or with it as 1 when keepdim.
 * Sums and means accumulate in double. mg_max_dim returns the values only (torch.max(x, dim)[0]);
 * its gradient goes to the first maximum of each lane, a NaN counting as the largest. Mean and
 * max of an empty dim are errors. */
MG_API mg_tensor *mg_sum_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim);
MG_API mg_tensor *mg_mean_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim);
MG_API mg_tensor *mg_max_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim);
/* log sum_k exp x_k over dim, computed as m + log sum exp(x - m) with m the max (-inf for a lane
 * that is all -inf or empty, as PyTorch). */
MG_API mg_tensor *mg_logsumexp(mg_ctx *ctx, mg_tensor *x, int64_t dim, bool keepdim);

/* Softmax / log-softmax over dim (mg_softmax is the last dim). A lane that is all -inf gives zeros
 * / -inf (PyTorch gives NaN); over the last dim mg_softmax_dim gives mg_softmax's very bits. */
MG_API mg_tensor *mg_softmax_dim(mg_ctx *ctx, mg_tensor *x, int64_t dim);
MG_API mg_tensor *mg_log_softmax(mg_ctx *ctx, mg_tensor *x, int64_t dim);

/* x with dims dim0 and dim1 swapped / with its dims reordered: y.shape[k] = x.shape[dims[k]],
 * dims a permutation of x's ndim dims (negative allowed). Unlike PyTorch's views, the result is a
 * contiguous copy. */
MG_API mg_tensor *mg_transpose(mg_ctx *ctx, mg_tensor *x, int64_t dim0, int64_t dim1);
MG_API mg_tensor *mg_permute(mg_ctx *ctx, mg_tensor *x, int ndim, const int64_t *dims);

/* The entries of x (at least 1-D) at positions index (int32, 1-D, repeats allowed) along dim: y has
 * x's shape with dim's size replaced by index's length. An index outside [0, size of dim) is an error naming its
 * position and value (no negative indices, as PyTorch). Backward scatter-adds, deterministically. */
MG_API mg_tensor *mg_index_select(mg_ctx *ctx, mg_tensor *x, int64_t dim, mg_tensor *index);

/* Batched matrix product: a (B,M,K) @ b (B,K,N) -> (B,M,N) (torch.bmm: no broadcasting). */
MG_API mg_tensor *mg_bmm(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);

/* Mean of (input - target)^2 over all elements (one-element tensor); the shapes must be equal (no
 * broadcasting) and not empty. Both may require gradients. */
MG_API mg_tensor *mg_mse_loss(mg_ctx *ctx, mg_tensor *input, mg_tensor *target);
/* Mean over non-ignored positions of -logp[..., target]. logp (...,C) holds log-probabilities with
 * the class dim LAST (PyTorch's nll_loss has it at dim 1: move it with mg_permute), targets int32
 * of shape (...). 0 when every position is ignored (PyTorch gives NaN). A target outside [0,C)
 * (and != ignore_index) is an error naming its position and value. */
MG_API mg_tensor *mg_nll_loss(mg_ctx *ctx, mg_tensor *logp, mg_tensor *targets, int32_t ignore_index);
/* mg_cross_entropy with label smoothing eps in [0, 1], PyTorch's formula: per counted position
 * (1 - eps) (-log p[target]) + eps * mean over the C classes of (-log p), the mean over counted
 * positions (0 when every position is ignored, as mg_cross_entropy). mg_cross_entropy is this with
 * eps 0 (the same bits). */
MG_API mg_tensor *mg_cross_entropy_smooth(mg_ctx *ctx, mg_tensor *logits, mg_tensor *targets, int32_t ignore_index,
                                          float label_smoothing);
/* RMSNorm over the last dimension C, as PyTorch's nn.RMSNorm / F.rms_norm with normalized_shape
 * (C): y = x / sqrt(mean(x^2) + eps) * weight. weight (C) may be NULL (no scaling). eps must be
 * finite and >= 0; unlike PyTorch there is no "None" default (PyTorch's None is float32's machine
 * epsilon, 1.1920929e-07). The mean of squares is summed in double. */
MG_API mg_tensor *mg_rms_norm(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, float eps);
/* ---- recurrent-cell ops: sigmoid, tanh, narrow, cat ---- */

/* Elementwise logistic sigmoid 1 / (1 + exp(-x)) and hyperbolic tangent, any shape (as
 * torch.sigmoid and torch.tanh). The sigmoid never overflows for large |x|. */
MG_API mg_tensor *mg_sigmoid(mg_ctx *ctx, mg_tensor *x);
MG_API mg_tensor *mg_tanh(mg_ctx *ctx, mg_tensor *x);

/* The slice [start, start+length) of x along dim: x's shape with that dim set to length. As
 * torch.narrow, dim and start may be negative (counted from the end), but the result is a copy, not
 * a view sharing x's storage. float32 or int32 x (only float32 is differentiated). An error names
 * dim, start, length and x's shape when they do not fit. */
MG_API mg_tensor *mg_narrow(mg_ctx *ctx, mg_tensor *x, int64_t dim, int64_t start, int64_t length);

/* xs[0..n-1] joined along dim (as torch.cat): all of one dtype and equal in every dim but dim; any
 * n >= 1 (more inputs than a node holds is fine). dim may be negative, counted from the end of
 * xs[0]'s dims. A size-0 input along dim contributes nothing. */
MG_API mg_tensor *mg_cat(mg_ctx *ctx, mg_tensor *const *xs, int n, int64_t dim);
/* ---- convolution, pooling and ReLU (NCHW / NCL, as PyTorch) ---- */

/* max(x, 0) elementwise, any shape. The gradient at x == 0 is 0 (as PyTorch). */
MG_API mg_tensor *mg_relu(mg_ctx *ctx, mg_tensor *x);

/* Options of mg_conv2d. Zero fields take PyTorch's defaults: stride 1, padding 0, dilation 1,
 * groups 1; opts may be NULL for all defaults. Index 0 is the height, 1 the width. */
typedef struct mg_conv2d_opts {
    int64_t stride[2], padding[2], dilation[2];
    int64_t groups;
} mg_conv2d_opts;

/* 2-d convolution (cross-correlation, as F.conv2d): x (N,C,H,W), weight (O,C/groups,KH,KW), bias (O)
 * or NULL -> (N,O,OH,OW), OH = (H + 2 padding - dilation (KH-1) - 1) / stride + 1 (rounded down),
 * likewise OW. Zero padding. Input channels and output channels split into `groups` independent
 * groups (O divisible by groups). Unlike PyTorch, x must be batched (4-d) and padding is a number
 * per side, never "same". Deterministic for any thread count. Arena use: the input unfolded,
 * C*KH*KW * N*OH*OW floats, kept for backward. */
MG_API mg_tensor *mg_conv2d(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias, const mg_conv2d_opts *opts);

/* Options of mg_conv1d. Zero fields: stride 1, padding 0, dilation 1, groups 1; opts may be NULL.
 * causal: pads (k-1)*dilation zeros on the left only (padding must then be 0), so output t sees
 * inputs up to t (with stride 1 the output has x's length). */
typedef struct mg_conv1d_opts {
    int64_t stride, padding, dilation, groups;
    bool causal;
} mg_conv1d_opts;

/* 1-d convolution (as F.conv1d): x (N,C,L), weight (O,C/groups,K), bias (O) or NULL -> (N,O,OL),
 * OL = (L + 2 padding - dilation (K-1) - 1) / stride + 1. x must be batched (3-d). */
MG_API mg_tensor *mg_conv1d(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias, const mg_conv1d_opts *opts);

/* Options of the 2-d pools: kernel is required (>= 1); stride 0 means the kernel size (PyTorch's
 * default); padding (default 0) must be at most half the kernel, as in PyTorch. */
typedef struct mg_pool2d_opts {
    int64_t kernel[2], stride[2], padding[2];
} mg_pool2d_opts;

/* Max / average over KHxKW windows: x (N,C,H,W) -> (N,C,OH,OW), OH = (H + 2 padding - KH) / stride + 1
 * (rounded down: PyTorch's ceil_mode=False). Max pooling pads with -infinity and sends the gradient
 * to the first maximum of each window (row-major); average pooling pads with zeros and divides by
 * KH*KW (PyTorch's count_include_pad=True). x must be batched (4-d). */
MG_API mg_tensor *mg_max_pool2d(mg_ctx *ctx, mg_tensor *x, const mg_pool2d_opts *opts);
MG_API mg_tensor *mg_avg_pool2d(mg_ctx *ctx, mg_tensor *x, const mg_pool2d_opts *opts);

/* ---- the op table (for introspection and the gradient-check coverage test) ---- */
typedef struct mg_op_def mg_op_def;
extern MG_API const mg_op_def *const mg_op_table[];
extern MG_API const int mg_op_count;

#ifdef __cplusplus
}
#endif
#endif
