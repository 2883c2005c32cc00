/* minigrad/kernels.h: low-level compute kernels (GEMM and friends) with run-time ISA dispatch.
 *
 * Ops call these; programs may call them directly. Each fast kernel also keeps a plain reference
 * twin that the tests compare against; the twins and the switches that select them are not part of
 * the installed API (they are declared in the source tree's core/testing/minigrad/testing.h).
 * All matrices are row-major float32 with leading dimensions in elements. Parallel kernels split
 * work over output rows/tiles only, so the result is bit-identical whatever the number of threads.
 * Called from inside an OpenMP parallel region they run on the calling thread alone.
 */
#ifndef MINIGRAD_KERNELS_H
#define MINIGRAD_KERNELS_H

#include "minigrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mg_isa { MG_ISA_GENERIC = 0, MG_ISA_AVX2 = 1, MG_ISA_AVX512 = 2 } mg_isa;

MG_API mg_isa mg_isa_detected(void); /* best path this CPU (and this build) supports */
MG_API mg_isa mg_isa_active(void);   /* path in use now: detected, or named by MINIGRAD_ISA */
MG_API const char *mg_isa_name(mg_isa isa);

/* C = alpha * op(A) @ op(B) + beta * C.
 * op(A) is M x K: A itself (lda >= K) or, when trans_a, the transpose of A stored K x M (lda >= M).
 * op(B) is K x N: B itself (ldb >= N) or, when trans_b, the transpose of B stored N x K (ldb >= K).
 * beta == 0 means C is write-only (it may hold garbage or NaN on entry). With K == 0 or
 * alpha == 0, C = beta * C and A and B are not read (they may be NULL).
 * Packed and cache-blocked, split over output tiles among the OpenMP threads
 * (core/kernels/gemm.c); M <= 4 (decode steps) streams B without packing. */
MG_API void mg_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);
/* C = bias + op(A) @ op(B): every row of C starts from bias (N values; NULL: from zero), the same
 * bits as filling C's rows with bias and calling mg_sgemm with alpha 1 and beta 1, without that
 * separate pass over C (the rows are filled a tile of rows at a time, just before the products
 * read them). */
MG_API void mg_sgemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                          int64_t lda, const float *B, int64_t ldb, const float *bias, float *C,
                          int64_t ldc);

/* `batch` independent GEMMs; matrix i starts at A + i*stride_a, B + i*stride_b, C + i*stride_c.
 * A stride of 0 shares one matrix across the batch; stride_c == 0 accumulates the products into
 * one C in batch order (beta applies at each step, so use beta = 1 to sum them). Threads take
 * whole matrices when the batch is long or divides evenly among them, else split each in turn. */
MG_API void mg_sgemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, int64_t stride_a, const float *B,
                      int64_t ldb, int64_t stride_b, float beta, float *C, int64_t ldc,
                      int64_t stride_c);

/* ==== Fused attention (core/kernels/attention.c) =============================================== *
 * The kernels behind mg_attention (ops.h), on flat buffers: q (B,H,Tq,D), k and v (B,H,Tk,D),
 * o (B,H,Tq,D), all contiguous. Logits are s = scale * q.k, then the optional bias callback and
 * bias rows (bias_data) add to them, then the mask hides key j from query i when causal and
 * j > q_pos0 + i.
 *
 * The fused forward tiles over keys with an online softmax and keeps only o and the per-row
 * log-sum-exp `lse` (B,H,Tq): the natural log of the row's softmax denominator, -inf for a row in
 * which no key is visible (its output is then zero). Backward recomputes the probabilities tile by
 * tile from q, k and lse. Neither ever holds a Tq x Tk matrix. Work and scratch are split over
 * (batch, head, tile) items that each write only their own rows, and every sum runs in an order
 * fixed by the shapes, so results are bit-identical whatever the thread count.
 *
 * Memory: the caller passes a workspace (any memory at any address; the op uses its scratch) of
 * the size the *_workspace function returns for the current thread count; a smaller one runs on
 * fewer threads. The kernels start their scratch at its first 64-byte boundary (the sizes include
 * the 64 bytes that may cost).
 * None is kept after the call. The bias callback is called concurrently from several threads, on
 * row segments of at most 64 keys, and again during backward: it must be a pure function. */
typedef struct mg_attn_desc {
    int64_t B, H, Tq, Tk, D;
    float scale;    /* the logit scale itself (the op turns its "0 means 1/sqrt(D)" into a value) */
    bool causal;    /* key j visible to query i iff j <= q_pos0 + i */
    int64_t q_pos0; /* absolute position of query 0 (keys start at 0) */
    /* Optional; same signature as mg_attn_bias_fn in ops.h: adds to logits[0..n) of the query at
     * position qpos for the keys at kpos0 .. kpos0+n-1, in head `head`. */
    void (*bias)(const void *user, int64_t head, int64_t qpos, int64_t kpos0, int64_t n,
                 float *logits);
    const void *bias_user;
    /* Floats from one (batch, head)'s keys to the next's, and likewise for values; 0 means Tk * D
     * (packed). A larger stride reads the first Tk rows of each head of a KV cache in place.
     * Forward only: backward needs packed keys. */
    int64_t kv_stride;
    /* Backward work split, for tests (0 = automatic): 1 = two passes (keys tiles -> dK, dV, then
     * query tiles -> dQ), 2 = one (batch, head) per item. Both give the same bits. */
    int backward_split;
    /* Optional additive bias on the logits, added after the callback and before the mask: the
     * Tq x Tk rows (row stride Tk) of batch b, head h start at bias_data + b * bias_bstride +
     * h * bias_hstride (a stride of 0 shares them). */
    const float *bias_data;
    int64_t bias_bstride, bias_hstride;
    /* Backward only, optional: accumulates (+=) dL/dlogits, a (B,H,Tq,Tk) buffer, into it (each
     * element written by one item: no reduction across threads). Entries of keys a causal mask
     * hides get nothing. */
    float *dbias;
    /* Backward only: dq, dk and dv hold nothing yet (gradient buffers just made, contents
     * undefined): every element is written (as 0 + its sum; zero where nothing reaches it, or
     * everywhere when the backward cannot run) instead of added to, which spares the caller
     * zeroing them first. They must then be three separate buffers. False: added to, as always. */
    bool grads_fresh;
    /* Products in bf16: Q, K, V, dO, the probabilities and dS rounded to bf16 (nearest even),
     * every sum, the softmax and its gradient in float32. Taken where the active bf16 path is
     * AVX512-BF16 (products on VDPBF16PS) or AMX on a CPU that also has AVX512-BF16 (products on
     * AMX tiles, TDPBF16PS: other roundings), mg_bf16_path_active, for keys and values packed
     * (kv_stride 0 or Tk * D) and more than two queries; elsewhere (and so in a decoding step) the
     * float32 kernel runs, as if it were false. Results are then bit-identical for any thread
     * count and backward split as in float32. */
    bool bf16;
} mg_attn_desc;

/* Forward. lse may be NULL (inference: nothing for backward to keep). */
MG_API size_t mg_attn_forward_workspace(const mg_attn_desc *a);
MG_API void mg_attn_forward(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                     float *o, float *lse, void *ws, size_t ws_bytes);

/* Whether mg_attn_desc.bf16 (and so mg_attention in a bf16 context) runs its products in bf16 now:
 * the build has the kernels and the active bf16 path (mg_bf16_path_active) is AVX512-BF16, or AMX
 * with AVX512-BF16 beside it. */
MG_API bool mg_attn_bf16_fused(void);

/* Backward from dO (B,H,Tq,D): accumulates (+=) into dq, dk, dv, or writes them with
 * mg_attn_desc.grads_fresh; any of them may be NULL. o and lse are what mg_attn_forward produced
 * for the same q, k, v. */
MG_API size_t mg_attn_backward_workspace(const mg_attn_desc *a);
MG_API void mg_attn_backward(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                      const float *o, const float *lse, const float *dO, float *dq, float *dk,
                      float *dv, void *ws, size_t ws_bytes);
/* ==== end of fused attention ==================================================================== */


/* ==== bfloat16 (core/kernels/bgemm.c) ============================================================ *
 * bf16: the top 16 bits of a float32 (sign, 8 exponent bits, 7 fraction bits), stored as uint16_t.
 * Conversion from float32 rounds to nearest, ties to even; NaN stays NaN (quiet), infinities stay.
 *
 * The bf16 products have their own run-time paths, chosen from the CPU's features apart from the
 * float32 path (mg_isa): Intel AMX tiles (TDPBF16PS, Sapphire Rapids and later, once Linux grants
 * the tile state), AVX512-BF16 (VDPBF16PS, AMD Zen 4/5, Intel Cooper Lake and later), or an
 * emulation of the AVX512-BF16 arithmetic on any CPU (on the float32 vector FMAs of the active
 * float32 path, AVX-512F or AVX2, or in portable C; the same bits). Every path accumulates in
 * float32 the way its instruction does, with denormal inputs read as zero, denormal results
 * flushed to zero and every step rounded to nearest even. AVX512-BF16 and the emulation: per output element, the pairs
 * of products k = 2p, 2p + 1 are added onto the float32 sum one fused multiply-add at a time, the
 * odd product 2p + 1 first, in increasing p (one chain). AMX, as the Operation section of
 * TDPBF16PS in Intel's SDM gives it: per instruction (16 pairs), the even products and the odd
 * products go into two chains of fused multiply-adds that start from +0; the two sums are added
 * together, then onto the float32 sum (an AMX product of fewer than 16 rows runs on AVX512-BF16
 * where the CPU has it). The order depends on the shape only, so the result is bit-identical
 * whatever the thread count; the paths' results can differ from each other in the last bits. */
typedef uint16_t mg_bf16;

typedef enum mg_bf16_path {
    MG_BF16_EMULATED = 0, /* the AVX512-BF16 arithmetic exactly, on float32 FMAs */
    MG_BF16_AVX512 = 1,   /* AVX512-BF16: VDPBF16PS */
    MG_BF16_AMX = 2       /* AMX-BF16: TDPBF16PS on 16 x 32 tiles */
} mg_bf16_path;

/* The fastest path this CPU and build offer; AMX only once its start-up check (a few small
 * products on the tiles against the reference loops, once per process) has passed: a failure is
 * logged as a warning and AMX is left out. */
MG_API mg_bf16_path mg_bf16_path_detected(void);
/* The path in use now: the detected one, or the one MINIGRAD_BF16_PATH names (amx, avx512bf16,
 * emulated; read when the path is first chosen, a warning where it names no available path). */
MG_API mg_bf16_path mg_bf16_path_active(void);
MG_API const char *mg_bf16_path_name(mg_bf16_path path); /* "emulated", "avx512bf16", "amx" */

MG_API mg_bf16 mg_f32_to_bf16_1(float x);
MG_API float mg_bf16_to_f32_1(mg_bf16 x);
/* n values, round to nearest even; split among the OpenMP threads when long. */
MG_API void mg_f32_to_bf16(int64_t n, const float *src, mg_bf16 *dst);
MG_API void mg_bf16_to_f32(int64_t n, const mg_bf16 *src, float *dst);

/* C = op(A) @ op(B), or C += op(A) @ op(B) when accumulate (the float32 sum of each element then
 * starts from C's value, read as zero if denormal), with op(A) M x K and op(B) K x N in bf16 as in
 * mg_sgemm (trans_a: A stored K x M; trans_b: B stored N x K) and C float32. Packed, cache-blocked,
 * split over output tiles among the OpenMP threads. */
MG_API void mg_bgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const mg_bf16 *A,
                     int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate, float *C,
                     int64_t ldc);
/* C = bias + op(A) @ op(B): every row of C starts from bias (N values; NULL: from zero) and the
 * products are added onto it, the same bits as filling C's rows with bias and calling mg_bgemm
 * with accumulate, without that separate pass over C (the rows are filled a tile of rows at a
 * time, just before the products read them). */
MG_API void mg_bgemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const mg_bf16 *A,
                          int64_t lda, const mg_bf16 *B, int64_t ldb, const float *bias, float *C,
                          int64_t ldc);

/* Products of few rows against a B used many times (the weights of KV-cache decoding): op(B) packed
 * once, then C = A @ B with A read in place. mg_bgemm packs B at every call, which for one row
 * costs as much as the product.
 * Layout: all of K in one run, ceil(N/16) panels of 16 columns; panel q holds, for each pair
 * p < ceil(K/2), the 16 32-bit words of its columns, op(B)(2p, c) in the low half and op(B)(2p+1, c)
 * in the high (the pair layout VDPBF16PS reads), zeros past K and N. mg_bgemm_packed_words(K, N)
 * words, best 64-byte aligned (mg_aligned_alloc). */
MG_API size_t mg_bgemm_packed_words(int64_t K, int64_t N);
MG_API void mg_bgemm_pack_b(bool trans_b, int64_t K, int64_t N, const mg_bf16 *B, int64_t ldb,
                            uint32_t *dst);
/* The same from float32 B, each value rounded as mg_f32_to_bf16 does (no bf16 copy needed). */
MG_API void mg_bgemm_pack_b_f32(bool trans_b, int64_t K, int64_t N, const float *B, int64_t ldb,
                                uint32_t *dst);
/* Whether the active path has a kernel for the packed B at M rows: AVX512-BF16 and the emulation
 * do; AMX's own products (16 rows or more) do not. */
MG_API bool mg_bgemm_packed_available(int64_t M);
/* C = A @ op(B), or C += when accumulate, with A M x K row-major (lda) and Bp from mg_bgemm_pack_b:
 * the same bits as mg_bgemm(false, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc), for any
 * thread count (the columns are split among the OpenMP threads). Returns false, doing nothing, where
 * mg_bgemm_packed_available(M) is false. */
MG_API bool mg_bgemm_packed(int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                            const uint32_t *Bp, bool accumulate, float *C, int64_t ldc);
/* ==== end of bfloat16 ============================================================================ */

#ifdef __cplusplus
}
#endif
#endif
