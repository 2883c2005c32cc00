/* minigrad/testing.h: the switches and reference twins the tests and benchmarks use.
 *
 * NOT part of the installed API: this header lives in the source tree only (core/testing/) and is
 * never installed. The functions stay exported from libminigrad, because the tests and benchmarks
 * link the shared library, but they may change or go away in any release. Programs outside this
 * repository must not call them.
 *
 * Every fast kernel keeps a plain reference twin (`*_ref`: straightforward single-threaded loops,
 * libm math) with the same inputs, outputs and conventions as the kernel it shadows; tests compare
 * the two. The switches are process-wide and read once on each kernel (or op) call; they let a
 * test run a whole model on the reference twins, or on one instruction-set path, and compare.
 */
#ifndef MINIGRAD_TESTING_H
#define MINIGRAD_TESTING_H

#include "minigrad/export.h"

#include "minigrad/kernels.h"
#include "minigrad/rowops.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- instruction-set paths (kernels.h) ------------------------------------------------------- */

/* Forces a path. Returns false, changing nothing, if the CPU lacks it. Paths round differently,
 * so their results agree only within rounding (each path is bit-identical across thread counts). */
MG_API bool mg_isa_force(mg_isa isa);

/* ---- GEMM (kernels.h) ------------------------------------------------------------------------ */

MG_API void mg_sgemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);

/* true makes mg_sgemm and mg_sgemm_batched run the plain reference loops. */
MG_API void mg_sgemm_set_reference(bool on);
MG_API bool mg_sgemm_get_reference(void);

/* ---- bf16 GEMM (kernels.h) -------------------------------------------------------------------- */

/* Forces a bf16 path; false, changing nothing, if the CPU or the build lacks it. */
MG_API bool mg_bf16_path_force(mg_bf16_path path);
/* Whether the CPU and the build offer the path (AMX: also granted by the OS), without forcing it. */
MG_API bool mg_bf16_path_available(mg_bf16_path path);
/* Whether this build holds the path's kernels (the compiler had its flags), whatever the CPU. */
MG_API bool mg_bf16_path_compiled(mg_bf16_path path);

/* While on, the AMX path runs the AMX kernel (core/kernels/bgemm_amx.c) built a second time on a
 * software model of the tile instructions (core/kernels/amx_emu.c), on any CPU: the path counts as
 * available, mg_bf16_path_force(MG_BF16_AMX) succeeds, and every product stays on it (no hand-off
 * of small products to AVX512-BF16). For tests of the kernel's logic; slow. mg_bf16_path_detected
 * still reports the CPU's path. Turning it on or off sends an active AMX path back to detection. */
MG_API void mg_bf16_amx_emulation(bool on);
/* The calling thread's tiles on that model, whatever the switch, as other code on the thread may
 * leave them between two products: LDTILECFG of the 64 bytes at cfg (another library's shapes),
 * or TILERELEASE with cfg NULL; and STTILECFG into the 64 bytes at cfg (all zero while the tiles
 * are unconfigured). Like the CPU, the model ends the process on a configuration LDTILECFG
 * rejects. */
MG_API void mg_bf16_amx_emulation_load_tiles(const void *cfg);
MG_API void mg_bf16_amx_emulation_store_tiles(void *cfg);
/* While on, the model gets TDPBF16PS wrong (it leaves out the odd products), so that the AMX path's
 * start-up check fails: forcing or offering the AMX path under the emulation then fails, with a
 * warning logged once. Like mg_bf16_amx_emulation, it sends an active AMX path back to detection. */
MG_API void mg_bf16_amx_emulation_fault(bool on);
/* The AMX path's start-up check, which decides whether a process uses the path: small products on
 * the AMX GEMM kernels in the transposition forms of gemm_forms (bit 0: A B, 1: A^T B, 2: A B^T,
 * 3: A^T B^T; 15 all, as at start-up; 0 none) and, with attention, the attention's tile product,
 * against the reference loops. On the model, or on the instructions (false, with why saying so,
 * where mg_bf16_amx_on_cpu is false). why receives what was wrong. */
MG_API bool mg_bf16_amx_check(bool on_model, unsigned gemm_forms, bool attention, char *why, size_t why_len);
/* Whether the CPU, Linux and the build offer AMX, whatever the start-up check found: where it is
 * true and the check fails, the AMX path is not available, and the AMX tests run and fail. */
MG_API bool mg_bf16_amx_on_cpu(void);
/* Where AMX is active, products of fewer than this many rows run on AVX512-BF16 (16 by default:
 * one tile's rows). m > 0 sets it (1: every product on the tiles) and returns the old value; m <= 0
 * only reads it. For bench_gemm --small-m, which measures where AMX starts to win. */
MG_API int mg_bf16_amx_min_m(int m);
/* The threads mg_bgemm_packed would share an M x N x K product out to now (thread count, active
 * path and OMP_WAIT_POLICY as they are): for tests that must know their products are split. */
MG_API int mg_bgemm_packed_threads(int64_t M, int64_t N, int64_t K);

/* mg_bgemm's arithmetic on plain floats for the given path: DAZ inputs, fmaf per product, FTZ
 * sums; VDPBF16PS's order (one chain, the odd product of a pair first) or TDPBF16PS's (per 16
 * pairs, the even and the odd products in two chains from zero, their sum added on). Equal to
 * mg_bgemm's result with the path active (zeros may differ in sign where padding adds a +0
 * product), so for AMX a product of fewer than 16 rows follows AVX512-BF16 where the CPU has it. */
MG_API void mg_bgemm_ref(mg_bf16_path path, bool trans_a, bool trans_b, int64_t M, int64_t N,
                         int64_t K, const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb,
                         bool accumulate, float *C, int64_t ldc);

/* ---- fused attention (kernels.h) ------------------------------------------------------------- */

/* The straightforward version that materialises the probabilities p (B,H,Tq,Tk) in forward and
 * keeps them for backward. */
MG_API void mg_attn_forward_ref(const mg_attn_desc *a, const float *q, const float *k,
                                const float *v, float *o, float *p);
MG_API size_t mg_attn_backward_ref_workspace(const mg_attn_desc *a);
MG_API void mg_attn_backward_ref(const mg_attn_desc *a, const float *q, const float *k,
                                 const float *v, const float *p, const float *dO, float *dq,
                                 float *dk, float *dv, void *ws, size_t ws_bytes);

/* Which implementation mg_attention uses (default fused); backward follows its forward.
 * MG_ATTN_BF16_PRODUCTS: in bf16 precision (on packed keys), the six products on mg_bgemm with the
 * probabilities materialised (core/ops/attention.c); otherwise, and in float32, the fused kernel
 * (with bf16 products in bf16 precision where mg_attn_bf16_fused says so). A slower twin kept for
 * its exact reference (docs/bf16.md). */
typedef enum mg_attn_impl { MG_ATTN_FUSED = 0, MG_ATTN_REFERENCE = 1, MG_ATTN_BF16_PRODUCTS = 2 } mg_attn_impl;
MG_API void mg_attn_set_impl(mg_attn_impl impl);
MG_API mg_attn_impl mg_attn_get_impl(void);

/* ---- row and elementwise kernels (rowops.h) -------------------------------------------------- */

/* Which kernels the fast entry points (and so the ops) run: the fast ones (default) or their
 * reference twins. */
typedef enum mg_rowops_impl { MG_ROWOPS_FAST = 0, MG_ROWOPS_REFERENCE = 1 } mg_rowops_impl;
MG_API void mg_rowops_set_impl(mg_rowops_impl impl);
MG_API mg_rowops_impl mg_rowops_get_impl(void);

MG_API void mg_layernorm_fwd_ref(int64_t R, int64_t C, const float *x, const float *w,
                                 const float *b, float eps, float *y, float *mean, float *rstd);
MG_API void mg_layernorm_bwd_ref(int64_t R, int64_t C, const float *x, const float *w,
                                 const float *mean, const float *rstd, const float *dy, float *dx,
                                 float *dw, float *db);
MG_API void mg_gelu_fwd_ref(mg_gelu_kind kind, int64_t n, const float *x, float *y);
MG_API void mg_gelu_bwd_ref(mg_gelu_kind kind, int64_t n, const float *x, const float *dy,
                            float *dx);
MG_API void mg_add_rows_ref(int64_t R, int64_t N, const float *a, const float *b, float *c);
MG_API void mg_add_residual_ref(int64_t R, int64_t N, const float *x, const float *h,
                                const float *b, float *y);
MG_API void mg_accumulate_ref(int64_t n, float *dst, const float *src);
MG_API void mg_sum_rows_ref(int64_t R, int64_t N, const float *src, float *dst);
MG_API void mg_softmax_fwd_ref(int64_t R, int64_t C, const float *x, float *y);
MG_API void mg_softmax_bwd_ref(int64_t R, int64_t C, const float *y, const float *dy, float *dx);
MG_API void mg_xent_fwd_ref(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                            float *mx, float *ls, double *loss);
MG_API void mg_xent_bwd_ref(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                            const float *mx, const float *ls, float g, float *dx);
MG_API void mg_embedding_fwd_ref(int64_t n, int64_t C, const float *W, const int32_t *ids,
                                 float *y);
MG_API void mg_embedding_bwd_ref(int64_t n, int64_t C, const int32_t *ids, const float *dy,
                                 float *dW);
MG_API void mg_adamw_update_ref(int64_t n, float *w, const float *g, float *m, float *v,
                                const mg_adamw_hyper *h);
MG_API void mg_sgd_update_ref(int64_t n, float *w, const float *g, float *buf, float lr,
                              float momentum, float weight_decay, bool first);

#ifdef __cplusplus
}
#endif
#endif
