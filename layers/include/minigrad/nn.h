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

#ifdef __cplusplus
}
#endif
#endif
