/* bgemm_internal.h: the contract between the bf16 GEMM driver (bgemm.c) and its per-path kernels
 * (bgemm_emulated.c and its vector kernels bgemm_emulated_ISA.c, bgemm_avx512bf16.c, bgemm_amx.c,
 * each a static library of its own built with its flags only, see meson.build). The driver owns
 * blocking, threading and workspace; a path packs panels and runs its micro-kernel over one packed
 * block. A path's getter returns NULL
 * when its unit was built without the path's instructions; isa.c picks the path at run time.
 *
 * Packed data are 32-bit words, each one pair of bf16: element k = 2p in the low half and
 * k = 2p + 1 in the high half (the VNNI pair layout both VDPBF16PS and TDPBF16PS read). A slice of
 * kc values of K packs into kp pairs, kc rounded up to the path's kalign (2, or 32 for AMX) and
 * halved; the values past kc, rows past m and columns past n are zero.
 *  - B block, kc x n: ceil(n/nr) panels of nr columns, panel q at dst + q*nr*kp, pair (p, c) at
 *    [p*nr + c]. (For AMX each 16-pair step of two adjacent 16-column halves is one B tile each.)
 *  - A block, m x kc: ceil(m/mr) panels of mr rows, panel at dst + panel*mr*kp, pair (r, p) at
 *      a_tiled == 0: [p*mr + r]                                  (one broadcast word per row)
 *      a_tiled == 1: [(p/16)*mr*16 + r*16 + p%16]                (AMX: 16-row x 16-pair tiles)
 * Every output element is one float32 chain over p in increasing order whatever tile, block or
 * thread it falls in; a K slice after the first continues the chain from the value in C.
 *
 * Pre-packed B (mg_bgemm_pack_b, for products with few rows against weights kept across calls):
 * all of K in one slice, ceil(n/16) panels of 16 columns, panel q at dst + q*16*kp with kp =
 * ceil(K/2), pair (p, c) at [p*16 + c]; zeros past K and n. A path's `packed` kernel reads it with
 * A unpacked (row-major bf16, pairs read in place) and adds the pairs in the same order as its
 * `block`, so its results are mg_bgemm's bits.
 */
#ifndef MG_BGEMM_INTERNAL_H
#define MG_BGEMM_INTERNAL_H

#include "minigrad/kernels.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct mgk_bgemm_impl {
    mg_bf16_path path;
    int mr, nr;     /* micro-tile: mr rows of A by nr columns of B */
    int kalign;     /* a K slice other than the last is a multiple of this many values */
    int kc, mc, nc; /* cache blocks in values of K, rows, columns */
    int a_tiled;    /* A panel layout, see above */
    /* op(A)[0:m, 0:kc] -> packed A block; A points at element (0, 0) of the block. */
    void (*pack_a)(bool ta, const mg_bf16 *A, int64_t lda, int64_t m, int64_t kc, uint32_t *dst);
    /* op(B)[0:kc, 0:n] -> packed B block. */
    void (*pack_b)(bool tb, const mg_bf16 *B, int64_t ldb, int64_t kc, int64_t n, uint32_t *dst);
    /* C[0:m, 0:n] = (acc ? C : 0) + pa @ pb, kp pairs deep. */
    void (*block)(int64_t m, int64_t n, int64_t kp, const uint32_t *pa, const uint32_t *pb,
                  bool acc, float *C, int64_t ldc);
    /* Optional (NULL: A is always packed). The same as block on A packed from op(A) = A, with A
     * read in place instead: C[0:m, 0:n] = (acc ? C : 0) + A[0:m, 0:kc] @ pb, A row-major with row
     * stride lda, kc values deep (the B block packed from the same kc); the same sums, the same
     * bits, without the pass that transposes A's pairs into panels. With bias (n floats; acc
     * false): each row of C = bias + the product, every sum starting from its column's bias, the
     * bits of filling C with the bias first and accumulating onto it. */
    void (*block_rm)(int64_t m, int64_t n, int64_t kc, const mg_bf16 *A, int64_t lda,
                     const uint32_t *pb, const float *bias, bool acc, float *C, int64_t ldc);
    /* Optional (NULL: the path has none, mg_bgemm runs instead). C[0:m, 0:n] = (acc ? C : 0) +
     * A[0:m, 0:K] @ the pre-packed B whose panel of column 0 is at pb, K values deep (kp pairs);
     * A row-major with row stride lda; n need not be a multiple of 16. */
    void (*packed)(int64_t m, int64_t n, int64_t K, const mg_bf16 *A, int64_t lda,
                   const uint32_t *pb, bool acc, float *C, int64_t ldc);
} mgk_bgemm_impl;

/* bgemm.c's driver on one thread with the given path's kernels (no choice of path, no hand-off of
 * small products); and its reference loops for exactly that path (mg_bgemm_ref without the
 * hand-off). For the AMX start-up check (amx_check.c). */
void mgk_bgemm_run_impl(const mgk_bgemm_impl *im, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                        float *C, int64_t ldc);
void mgk_bgemm_ref_loops(mg_bf16_path path, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                         float *C, int64_t ldc);

#define MGK_BGEMM_PANEL 16 /* columns per panel of a pre-packed B */

/* The paths, in the order of mg_bf16_path. */
const mgk_bgemm_impl *mgk_bgemm_emulated(void);
/* The emulated path's vector kernels (bgemm_emu_vec_tmpl.h) on the AVX-512F and the AVX2 float32
 * paths: the same bits as mgk_bgemm_emulated's; NULL where the unit was built without the ISA. */
const mgk_bgemm_impl *mgk_bgemm_emulated_avx512(void);
const mgk_bgemm_impl *mgk_bgemm_emulated_avx2(void);
const mgk_bgemm_impl *mgk_bgemm_avx512bf16(void);
const mgk_bgemm_impl *mgk_bgemm_amx(void);

#endif
