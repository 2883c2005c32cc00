/* minigrad/ops.h: the differentiable ops. Each lives in one file of core/ops/ with its forward and
 * backward side by side. Shapes follow PyTorch order: the last dimension is contiguous; comments
 * write them as (B,T,C). Every op returns a new arena tensor (see tensor.h for ownership and errors).
 */
#ifndef MINIGRAD_OPS_H
#define MINIGRAD_OPS_H

#include "minigrad/export.h"

#include "minigrad/rng.h"
#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a (...,M,K) @ b (K,N) -> (...,M,N); or batched: b (...,K,N) with the same leading dims as a. */
MG_API mg_tensor *mg_matmul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);
/* a (...,M,K) @ b^T where b is (N,K) or batched (...,N,K) -> (...,M,N). (Tied LM head, q k^T.) */
MG_API mg_tensor *mg_matmul_nt(mg_ctx *ctx, mg_tensor *a, mg_tensor *b);

/* Elementwise a + b / a * b. b has a's shape or a's trailing dims (a bias (C) or a row table (T,C)
 * broadcast over the leading dims). */
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

/* Same data, new shape; one dim may be -1. */
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
