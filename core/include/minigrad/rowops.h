/* minigrad/rowops.h: the row and elementwise kernels behind LayerNorm, GELU, bias and residual
 * adds, softmax, cross-entropy, embedding gather/scatter and the AdamW/SGD updates
 * (core/kernels/rowops.c).
 *
 * Ops call these kernels; programs may call them directly. Each also keeps a plain reference twin
 * (single-threaded loops, libm math) that the tests compare against; the twins and the switch that
 * selects them are not part of the installed API (core/testing/minigrad/testing.h in the source
 * tree). All buffers are flat, contiguous, row-major float32 owned by the caller; nothing is
 * allocated or kept. "dst +=" kernels accumulate, as backward does.
 *
 * Fast kernels run on the SIMD path mg_isa_active() names (AVX-512 / AVX2 / portable C, kernels.h),
 * read once per call. They split work over rows (or over whole elements, or columns for the
 * scatter-adds), never inside a row, and every sum over rows goes through fixed chunks of
 * MG_ROWOPS_CHUNK rows combined in chunk order, so a path gives bit-identical results whatever
 * the thread count. Paths differ from each other and from the references by float rounding:
 * exp, tanh and erf are polynomial approximations (a few ulp; erf's absolute error is about 2e-7),
 * and the exp behind softmax / cross-entropy flushes results below e^-87 to zero.
 * Called from inside an OpenMP parallel region a kernel runs on the calling thread alone.
 */
#ifndef MINIGRAD_ROWOPS_H
#define MINIGRAD_ROWOPS_H

#include "minigrad/export.h"

#include "minigrad/kernels.h" /* mg_bf16 */
#include "minigrad/ops.h"     /* mg_gelu_kind */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per partial sum in the reductions over rows (LayerNorm dw/db, bias gradients). */
#define MG_ROWOPS_CHUNK 64

/* ---- LayerNorm over rows of C: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + eps) ----------
 * w and b may be NULL (1 and 0); mean and rstd (R each) may be NULL when backward will not run.
 * The mean is refined by a second pass over the centred row, so a large common offset (or a
 * constant row) keeps its variance. */
MG_API void mg_layernorm_fwd(int64_t R, int64_t C, const float *x, const float *w, const float *b,
                      float eps, float *y, float *mean, float *rstd);

/* Backward from dy: dx += ..., dw += sum_rows dy * xhat, db += sum_rows dy. Any of dx, dw, db may
 * be NULL; w NULL means 1. ws is scratch of mg_layernorm_bwd_workspace(R, C) bytes (any alignment
 * of float), needed only when dw or db is given. */
MG_API size_t mg_layernorm_bwd_workspace(int64_t R, int64_t C);
MG_API void mg_layernorm_bwd(int64_t R, int64_t C, const float *x, const float *w, const float *mean,
                      const float *rstd, const float *dy, float *dx, float *dw, float *db,
                      float *ws);

/* ---- GELU, elementwise over n (formulas in core/ops/gelu.c) ---------------------------------- */
MG_API void mg_gelu_fwd(mg_gelu_kind kind, int64_t n, const float *x, float *y);
/* dx += dy * gelu'(x) */
MG_API void mg_gelu_bwd(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx);
/* dx = dy * gelu'(x) into a dx that holds nothing yet (a fresh buffer of mg_grad_for_write): the
 * bits mg_gelu_bwd gives on a zeroed dx, without the zeroing pass or reading dx. */
MG_API void mg_gelu_bwd_fresh(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx);

/* ---- adds ------------------------------------------------------------------------------------ */
/* c[r, j] = a[r, j] + b[j] for R rows of N (a bias; R = 1 is a plain elementwise add). c may be a.
 */
MG_API void mg_add_rows(int64_t R, int64_t N, const float *a, const float *b, float *c);
/* y[r, j] = x[r, j] + h[r, j] + b[j] in one pass (bias + residual); b may be NULL. y may be x or h.
 */
MG_API void mg_add_residual(int64_t R, int64_t N, const float *x, const float *h, const float *b,
                     float *y);
/* dst[i] += src[i] */
MG_API void mg_accumulate(int64_t n, float *dst, const float *src);
/* dst[i] = 0 + src[i] (a -0 becomes +0): mg_accumulate's bits on a zeroed dst, for a fresh buffer
 * of mg_grad_for_write. */
MG_API void mg_accumulate_fresh(int64_t n, float *dst, const float *src);
/* dst[j] += sum over R rows of src[r, j] (a bias gradient). Each column is summed in row order
 * within chunks of MG_ROWOPS_CHUNK rows, the chunk sums added to dst in order (for few columns the
 * chunks run in parallel into a buffer of the calling thread, kept for its next calls). */
MG_API void mg_sum_rows(int64_t R, int64_t N, const float *src, float *dst);
/* mg_sum_rows (the same bits), and src rounded to bf16 into bdst (R x N, as mg_f32_to_bf16 rounds)
 * in the same pass: a bf16 Linear's backward reads dy once for its bias gradient and its products. */
MG_API void mg_sum_rows_bf16(int64_t R, int64_t N, const float *src, float *dst, mg_bf16 *bdst);

/* ---- softmax over rows of C ---------------------------------------------------------------------
 * A row that is all -inf gives zeros (a fully masked row), not NaN; a NaN anywhere in a row makes
 * the whole row NaN. */
MG_API void mg_softmax_fwd(int64_t R, int64_t C, const float *x, float *y);
/* dx += y * (dy - sum_j dy_j y_j), from the forward output y. */
MG_API void mg_softmax_bwd(int64_t R, int64_t C, const float *y, const float *dy, float *dx);

/* ---- cross-entropy: log-softmax + NLL per row of V logits
 * ------------------------------------------ Forward keeps per row the max logit mx[r] and ls[r] =
 * log sum_j exp(x[r,j] - mx[r]), and writes loss[r] = (mx - x[r, t_r]) + ls in double (0 where t_r
 * == ignore): the log-sum-exp is never rounded to float before the target logit is taken off, so
 * large logits lose nothing. Targets other than `ignore` must lie in [0, V) (the op checks). */
MG_API void mg_xent_fwd(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore, float *mx,
                 float *ls, double *loss);
/* dx[r, j] += g * (softmax(x[r])_j - [j == t_r]) on rows with t_r != ignore. */
MG_API void mg_xent_bwd(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                 const float *mx, const float *ls, float g, float *dx);

/* ---- embedding: y[i, :] = W[ids[i], :]; backward dW[ids[i], :] += dy[i, :]
 * ------------------------ ids must lie in [0, V) (the op checks). The scatter-add splits columns
 * among threads and walks the ids in order, so every element of dW receives its additions in id
 * order: the fast kernel gives the same bits as the reference on every path. */
MG_API void mg_embedding_fwd(int64_t n, int64_t C, const float *W, const int32_t *ids, float *y);
MG_API void mg_embedding_bwd(int64_t n, int64_t C, const int32_t *ids, const float *dy, float *dW);

/* ---- optimizer updates over n parameters (formulas in minigrad/optim.h) -------------------------
 * The vector paths do the reference's operations in the reference's order (no fused multiply-add),
 * so they agree with it bit for bit wherever the compiler does not contract the reference. */
typedef struct mg_adamw_hyper {
    float lr, beta1, beta2, eps, weight_decay;
    float bc1, bc2; /* bias corrections 1 - beta1^t, 1 - beta2^t */
} mg_adamw_hyper;
MG_API void mg_adamw_update(int64_t n, float *w, const float *g, float *m, float *v,
                     const mg_adamw_hyper *h);
/* buf = (momentum != 0 && !first) ? momentum buf + d : d,  d = g + wd w;  w -= lr buf */
MG_API void mg_sgd_update(int64_t n, float *w, const float *g, float *buf, float lr, float momentum,
                   float weight_decay, bool first);

#ifdef __cplusplus
}
#endif
#endif
