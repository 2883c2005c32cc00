/* minigrad/nn.h: typed constructors for the built-in layers, the main way to build a model from C.
 * Each layer kind has a config struct; fields left zero take the default given beside them (note
 * that a zeroed bool is false, so a bias is asked for with `.bias = true`):
 *
 *   mg_layer *fc = mg_linear_new(params, "fc", &(mg_linear_cfg){.in = 784, .out = 10, .bias = true});
 *
 * A constructor declares the layer's parameters in `params` (allocate the store with
 * mg_params_alloc before the first forward) and returns a layer the caller frees with
 * mg_layer_free, or NULL with mg_last_error() naming the layer and the bad field. Run it with
 * mg_layer_forward. The string configs of model files (mg_layer_create) fill the same structs.
 */
#ifndef MINIGRAD_NN_H
#define MINIGRAD_NN_H

#include "minigrad/export.h"
#include "minigrad/layer.h"
#include "minigrad/params.h"
#include "minigrad/rnn.h" /* lstm, gru */

#ifdef __cplusplus
extern "C" {
#endif

/* linear: y = x W + b, x (...,in) -> (...,out). W is stored (in, out), the transpose of PyTorch's
 * nn.Linear weight. Parameters "weight" and, with bias, "bias". */
typedef struct mg_linear_cfg {
    int64_t in, out;             /* required, >= 1 */
    bool bias;                   /* add a bias (false when left zero) */
    const mg_init *weight_init;  /* NULL: PyTorch's uniform(-1/sqrt(in), 1/sqrt(in)) */
    const mg_init *bias_init;    /* NULL: the same uniform when the weight's is uniform, else zeros */
    bool frozen;                 /* declare the parameters frozen (not trained; params.h) */
} mg_linear_cfg;
MG_API mg_layer *mg_linear_new(mg_params *params, const char *name, const mg_linear_cfg *cfg);

/* embedding: rows of the table "weight" (vocab, dim) at int32 ids, times scale: ids (...) ->
 * (..., dim), as PyTorch's nn.Embedding (same weight layout). The weight is not decayed. */
typedef struct mg_embedding_cfg {
    int64_t vocab, dim;   /* required, >= 1 */
    float scale;          /* 0: 1 (a transformer may use sqrt(dim)) */
    const mg_init *init;  /* NULL: normal(0, 0.02) (GPT-2's; PyTorch's nn.Embedding uses normal(0, 1)) */
    bool frozen;          /* declare the weight frozen (a fixed, pretrained table; params.h) */
} mg_embedding_cfg;
MG_API mg_layer *mg_embedding_new(mg_params *params, const char *name, const mg_embedding_cfg *cfg);

/* layernorm: over the last dim, biased variance, y = (x - mean) / sqrt(var + eps) * weight + bias,
 * x (...,dim) -> (...,dim), as PyTorch's nn.LayerNorm(dim). Parameters "weight" (ones) and "bias"
 * (zeros), not decayed. */
typedef struct mg_layernorm_cfg {
    int64_t dim;     /* required, >= 1 */
    float eps;       /* 0: 1e-5 (PyTorch's default) */
    bool zero_eps;   /* true: eps exactly 0 (a constant row then divides by zero) */
    bool no_affine;  /* true: no weight and bias (PyTorch's elementwise_affine=False) */
    bool frozen;     /* declare weight and bias frozen */
} mg_layernorm_cfg;
MG_API mg_layer *mg_layernorm_new(mg_params *params, const char *name, const mg_layernorm_cfg *cfg);

/* rms_norm: y = x / sqrt(mean(x^2) + eps) * weight over the last dim (mg_rms_norm), as PyTorch's
 * nn.RMSNorm(dim). Parameter "weight" (ones), not decayed. */
typedef struct mg_rms_norm_cfg {
    int64_t dim;     /* required, >= 1 */
    float eps;       /* 0: 1.1920929e-07, float32's machine epsilon (PyTorch's default, eps=None) */
    bool zero_eps;   /* true: eps exactly 0 */
    bool no_affine;  /* true: no weight (PyTorch's elementwise_affine=False) */
    bool frozen;     /* declare the weight frozen */
} mg_rms_norm_cfg;
MG_API mg_layer *mg_rms_norm_new(mg_params *params, const char *name, const mg_rms_norm_cfg *cfg);

/* dropout: zeroes each element with probability p and scales the rest by 1/(1-p) while training
 * (mg_fwd.train, masks from mg_fwd.rng), the identity otherwise: PyTorch's nn.Dropout. No
 * parameters. Unlike PyTorch, a zeroed cfg means p = 0 (no dropout); the string config's default
 * is PyTorch's 0.5. */
typedef struct mg_dropout_cfg {
    float p; /* in [0, 1) */
} mg_dropout_cfg;
MG_API mg_layer *mg_dropout_new(mg_params *params, const char *name, const mg_dropout_cfg *cfg);

/* conv2d: PyTorch's nn.Conv2d over mg_conv2d (minigrad/ops.h): x (N,in,H,W) -> (N,out,OH,OW).
 * Parameters "weight" (out, in/groups, kernel[0], kernel[1]) and, with bias, "bias" (out), shaped
 * as PyTorch's. Index 0 of each pair is the height, 1 the width. */
typedef struct mg_conv2d_cfg {
    int64_t in, out;             /* required, >= 1, both divisible by groups */
    int64_t kernel[2];           /* required, >= 1 */
    int64_t stride[2];           /* 0: 1 */
    int64_t padding[2];          /* zeros on each side; 0: none */
    int64_t dilation[2];         /* 0: 1 */
    int64_t groups;              /* 0: 1 */
    bool bias;                   /* add a bias (false when left zero) */
    const mg_init *weight_init;  /* NULL: PyTorch's uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)),
                                    fan_in = in/groups * kernel[0] * kernel[1] */
    const mg_init *bias_init;    /* NULL: the same uniform when the weight's is uniform, else zeros */
} mg_conv2d_cfg;
MG_API mg_layer *mg_conv2d_new(mg_params *params, const char *name, const mg_conv2d_cfg *cfg);

/* conv1d: PyTorch's nn.Conv1d over mg_conv1d: x (N,in,L) -> (N,out,OL). Parameters "weight"
 * (out, in/groups, kernel) and, with bias, "bias" (out). */
typedef struct mg_conv1d_cfg {
    int64_t in, out;             /* required, >= 1, both divisible by groups */
    int64_t kernel;              /* required, >= 1 */
    int64_t stride;              /* 0: 1 */
    int64_t padding;             /* zeros on each side; 0: none (must be 0 with causal) */
    int64_t dilation;            /* 0: 1 */
    int64_t groups;              /* 0: 1 */
    bool causal;                 /* pad (kernel-1)*dilation on the left only */
    bool bias;                   /* add a bias (false when left zero) */
    const mg_init *weight_init;  /* NULL: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kernel */
    const mg_init *bias_init;    /* NULL: the same uniform when the weight's is uniform, else zeros */
} mg_conv1d_cfg;
MG_API mg_layer *mg_conv1d_new(mg_params *params, const char *name, const mg_conv1d_cfg *cfg);

#ifdef __cplusplus
}
#endif
#endif
