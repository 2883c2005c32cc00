/* minigrad/gradcheck.h: checks a backward against central finite differences.
 *
 * What it computes. For a forward function f (an op, a layer, a whole model applied to fixed
 * inputs) and fixed random weights R in [-1, 1) of f's output, the scalar
 *
 *     L = sum_i f_i * R_i
 *
 * is accumulated in float64 from the float32 output. The analytic gradient dL/dx comes from
 * mg_backward (its seed into f is exactly R); the numeric one from the central difference
 *
 *     (L(x_plus) - L(x_minus)) / (x_plus - x_minus)
 *
 * where x_plus and x_minus are x +- eps rounded to float32 (at least one float32 step away from
 * x), so the denominator is the step actually taken, about 2 eps. The numerator is summed term by
 * term, sum_i (f_i(x_plus) - f_i(x_minus)) R_i in float64: each difference of two floats is exact,
 * so the parts of L an element does not move cancel exactly. Every element of every float input is checked, and, when a parameter store
 * is given, every element of every trainable parameter (opts.max_per_tensor > 0 checks that many
 * elements per tensor instead, evenly spread). An element passes when
 *
 *     |analytic - numeric| <= atol + rtol * |numeric|
 *
 * and the report names the worst one: its tensor ("input 0", or the parameter's name), its
 * coordinates, both values and the tolerance.
 *
 * Inputs are the caller's float32 tensors, from any context (or mg_tensor_wrap of the caller's
 * buffers). For each evaluation the checker makes fresh views of them (same shape, same data) on a
 * context of its own, marked as requiring a gradient, and hands those to fn; fn must build the
 * output from the views, not from the caller's tensors, or the inputs get no analytic gradient.
 * The checker perturbs the caller's data in place, one element at a time, and restores it bit for
 * bit; inputs must not share memory with each other or with a parameter. Integer tensors (token
 * ids, targets) are not differentiable: pass them to fn through `user`. Parameters are used as
 * they are; their values are perturbed and restored the same way, and their gradients are left as
 * the checker found them. fn runs many times (twice per checked element plus once for the
 * analytic pass), so it must be deterministic: a dropout mask, for one, from a generator fn seeds
 * afresh on every call.
 *
 * Picking eps, atol and rtol for float32. Two errors compete in the numeric derivative: the
 * truncation error of the central difference, about eps^2 |f'''| / 6 (it grows with eps and with
 * the curvature: softmax, LayerNorm, GELU, deep stacks), and the rounding error of the float32
 * forward, about 1e-7 |L| / eps (it grows as eps shrinks and as the output grows). The defaults,
 * eps 1e-2 with atol 1e-3 and rtol 1e-2, suit a single op on inputs of order 1. For composites
 * (attention, an MLP, a block) loosen to atol 3e-3, rtol 3e-2; for a model several blocks deep,
 * or with large activations, take a smaller eps (3e-3) so truncation stays below rounding. A
 * wrong backward is usually off by far more than any of these (a factor, a sign, a missing
 * term): if a check fails by a ratio near 1, try another eps before suspecting the backward; if
 * it fails by 10x or more, the backward is wrong. Large tensors can be sampled with
 * max_per_tensor (two forward passes per checked element).
 *
 * Example: a custom op written with the public op API (minigrad/op.h), y = x^3, checked on a
 * (3, 4) input:
 *
 *   static void cube_backward(mg_ctx *ctx, mg_node *n) {
 *       float *dx = mg_grad(ctx, n->in[0]);
 *       if (!dx) return;
 *       const float *x = n->in[0]->data, *dy = n->out->grad;
 *       for (int64_t i = 0; i < n->out->numel; i++) dx[i] += 3.0f * x[i] * x[i] * dy[i];
 *   }
 *   static const mg_op_def cube_def = {"cube", cube_backward};
 *   static mg_tensor *cube(mg_ctx *ctx, mg_tensor *x) {
 *       if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
 *       mg_tensor *y = mg_op_output(ctx, "cube", x->ndim, x->shape);
 *       if (!mg_ctx_ok(ctx)) return y;
 *       for (int64_t i = 0; i < x->numel; i++) y->data[i] = x->data[i] * x->data[i] * x->data[i];
 *       mg_op_record(ctx, &cube_def, y, 1, (mg_tensor *[]){x});
 *       return y;
 *   }
 *   static mg_tensor *cube_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
 *       (void)user;
 *       return cube(ctx, in[0]);
 *   }
 *
 *   float xs[12] = {...};
 *   mg_ctx *ctx = mg_ctx_new(0);
 *   mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){3, 4}, xs);
 *   mg_gradcheck_report rep;
 *   if (mg_gradcheck(cube_fn, NULL, &x, 1, NULL, NULL, &rep) != MG_OK)
 *       fprintf(stderr, "%s\n", mg_last_error()); // "input 0[2,1]: analytic ... vs numeric ..."
 *
 * Example: a layer, its input and every parameter of its store (mg_params), with the tolerances of
 * a composite. The layer and the ids (an int32 input) travel through `user`:
 *
 *   typedef struct { mg_layer *mlp; } run;
 *   static mg_tensor *mlp_fn(mg_ctx *ctx, mg_tensor *const *in, void *user) {
 *       return mg_layer_forward(((run *)user)->mlp, ctx, in[0], NULL);
 *   }
 *
 *   mg_params *P = mg_params_new();
 *   ... mg_layer_create("mlp", "mlp", cfg, P, &r.mlp); mg_params_alloc(P, &rng); ...
 *   mg_gradcheck_opts o = mg_gradcheck_defaults();
 *   o.atol = 3e-3, o.rtol = 3e-2;
 *   mg_status st = mg_gradcheck(mlp_fn, &r, &x, 1, P, &o, &rep);
 *   // on failure rep.worst_tensor is e.g. "mlp.c_fc.weight", rep.worst_coord its row and column
 *
 * Errors never abort: a NULL fn, n_inputs < 0, a NULL or non-float input, an unallocated store or
 * bad options give MG_ERR_INVALID with nothing checked (report->checked == 0); a forward that
 * returns NULL, fails on its context (shape mismatch, missing backward, ...) or gives an output
 * with no gradient path to anything gives MG_ERR_INVALID too, with report->failed == 0 (an element
 * over tolerance is the one MG_ERR_INVALID with report->failed > 0); a non-finite output at the unperturbed
 * point gives MG_ERR_NONFINITE; memory gives MG_ERR_NOMEM. The message (mg_last_error) says which,
 * and the caller's data is restored in every case.
 */
#ifndef MINIGRAD_GRADCHECK_H
#define MINIGRAD_GRADCHECK_H

#include "minigrad/export.h"

#include "minigrad/params.h"
#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds the checked computation on ctx. `inputs` are fresh views (same shape, same data) of the
 * caller's input tensors, created by the checker for this call with gradients enabled; parameters
 * are used as they are. Returns the output tensor (any shape). */
typedef mg_tensor *(*mg_gradcheck_fn)(mg_ctx *ctx, mg_tensor *const *inputs, void *user);

typedef struct mg_gradcheck_opts {
    double eps;              /* central-difference step on each element (default 1e-2) */
    double atol, rtol;       /* an element passes when |analytic - numeric| <= atol + rtol*|numeric|
                                (defaults 1e-3 and 1e-2) */
    int64_t max_per_tensor;  /* elements checked per tensor, evenly spread (0 = all; default 0) */
    uint64_t seed;           /* the fixed random weights that reduce the output to a scalar */
} mg_gradcheck_opts;

typedef struct mg_gradcheck_report {
    int64_t checked, failed;          /* elements compared, elements over tolerance */
    char worst_tensor[64];            /* "input 0" or the parameter's name */
    int64_t worst_index;              /* flat index of the worst element */
    int worst_ndim;
    int64_t worst_coord[MG_MAX_DIMS]; /* its coordinates */
    double worst_analytic, worst_numeric;
    double worst_ratio;               /* |a - n| / (atol + rtol |n|); > 1 means it failed */
    char message[256];                /* e.g. "fc.weight[3,1]: analytic 0.512 vs numeric 0.498 ..." */
    /* Added fields: */
    double worst_tolerance;           /* atol + rtol |numeric| of the worst element */
    int tensors;                      /* tensors checked (inputs, then trainable parameters) */
    double max_abs_error;             /* the largest |analytic - numeric| over all elements */
} mg_gradcheck_report;

/* eps 1e-2, atol 1e-3, rtol 1e-2, every element, a fixed seed. */
MG_API mg_gradcheck_opts mg_gradcheck_defaults(void);

/* L = sum_i out_i * R_i with fixed random R, accumulated in float64 from the float32 output;
 * analytic gradients from mg_backward, numeric ones (L(x+eps) - L(x-eps)) / 2eps in float64, for
 * elements of every input (float32 tensors, any context) and, when params is not NULL, of every
 * trainable parameter. Returns MG_OK when every element passes; MG_ERR_INVALID when one does not
 * (mg_last_error() = report->message, naming the worst element); another error status when the
 * forward or backward fails (message from the context). report and opts may be NULL.
 * The report is filled in every case: on success it names the worst element all the same (its
 * worst_ratio <= 1), so a caller can see how close the check came. */
MG_API mg_status mg_gradcheck(mg_gradcheck_fn fn, void *user, mg_tensor *const *inputs,
                              int n_inputs, mg_params *params, const mg_gradcheck_opts *opts,
                              mg_gradcheck_report *report);

#ifdef __cplusplus
}
#endif
#endif
