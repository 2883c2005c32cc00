/* gemm_internal.h: the contract between the GEMM driver (gemm.c) and its per-ISA kernels.
 *
 * The driver owns blocking, threading and workspace; a path's kernels (gemm_tmpl.h, compiled once
 * per SIMD path as gemm_ISA.c) only pack panels and run the register micro-kernel over one packed
 * block. A path's getter (isa.h) returns NULL when its unit was built without the path's
 * instructions, so the dispatcher never calls code the build could not produce.
 *
 * Packed layouts (all floats, no ownership: the driver owns the buffers):
 *  - A block, m x kc: ceil(m/mr) panels of mr rows, panel p at dst + p*mr*kc, element (r, k) of the
 *    panel at [k*mr + r]; rows past m are zero. alpha is folded in here.
 *  - B block, kc x n: ceil(n/nr) panels of nr columns, panel q at dst + q*nr*kc, element (k, c) at
 *    [k*nr + c]; columns past n are zero.
 * Every output element is reduced over k in increasing order by one fused multiply-add chain
 * (or one multiply-add chain on the generic path) whatever tile it falls in, which is what makes
 * the result independent of how the driver splits the output among threads.
 */
#ifndef MG_GEMM_INTERNAL_H
#define MG_GEMM_INTERNAL_H

#include "minigrad/kernels.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct mg_gemm_impl {
    mg_isa isa;
    int mr, nr;     /* micro-tile: mr rows of A by nr columns of B */
    int kc, mc, nc; /* cache blocks: kc is the K split (fixed per ISA, never per thread count) */
    int small_m;    /* M at or below this takes the unpacked path (decode steps, GEMV) */
    /* op(A)[0:m, 0:kc] scaled by alpha -> packed A block. A points at element (0, 0) of the block.
     */
    void (*pack_a)(bool ta, const float *A, int64_t lda, int64_t m, int64_t kc, float alpha,
                   float *dst);
    /* op(B)[0:kc, 0:n] -> packed B block. */
    void (*pack_b)(bool tb, const float *B, int64_t ldb, int64_t kc, int64_t n, float *dst);
    /* C[0:m, 0:n] = pa @ pb + beta * C; beta == 0 never reads C. With bias (n floats), each row
     * of C = bias + pa @ pb instead (beta not used, C not read): the bits of C filled with the bias
     * and beta 1. */
    void (*block)(int64_t m, int64_t n, int64_t kc, const float *pa, const float *pb,
                  const float *bias, float beta, float *C, int64_t ldc);
    /* Whole GEMM for m <= small_m without packing: C = alpha op(A) op(B) + beta C. */
    void (*small)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
} mg_gemm_impl;

#endif
