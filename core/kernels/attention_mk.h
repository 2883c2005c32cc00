/* attention_mk.h: the small matrix products of the fused attention tiles, included by
 * attention_tmpl.h (float32 operands: mk, mk_any, gemm_rs, gemm, gemm_scaled) and by
 * attention_bf16_tmpl.h (bf16 pairs: bmk, bmk_any, bgemm_rs, bgemm, bgemm_scaled), each time
 * after defining
 *   AT_MK_NAME(n)       the functions' names (n, or b##n)
 *   AT_MK_ELEM          an element of A and B: float, or a 32-bit word of two bf16 values
 *   AT_MK_BVEC          a vector of B: MGK_W of its elements
 *   AT_MK_LOAD_B(p)     that vector from p
 *   AT_MK_BCAST_A(x)    one element of A in every lane
 *   AT_MK_MAC(a, b, c)  c + a * b lane by lane: one fused multiply-add, or VDPBF16PS's pair
 *   AT_MK_PAIRS         0, or 1 where an element holds two values of K (the causal bands below
 *                       are then widened to whole pairs)
 * and undefines them at its end. */

/* C[0:mr, 0:nv*W] (= or +=) sum over k < K of A(r, k) * B[k][..], A(r, k) = A[r*ars + k*aks];
 * with rs, the old C rows are first scaled by rs[r] (the online softmax's rescaling, for free);
 * with os (and no acc), each sum is multiplied by *os as it is stored (the logit scale: the same
 * bits as scaling C in a pass of its own afterwards, without that pass). Every element is one
 * multiply-add chain over k in increasing order, whatever the tile it falls in: that is what makes
 * results independent of how work is cut. */
MGK_ALWAYS_INLINE void MGK_FN(AT_MK_NAME(mk))(const int mr, const int nv, int64_t K,
                                              const AT_MK_ELEM *A, int64_t ars, int64_t aks,
                                              const AT_MK_ELEM *B, int64_t ldb, float *C,
                                              int64_t ldc, bool acc, const float *rs,
                                              const float *os) {
    mgk_v c[AT_MR][AT_NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        const mgk_v s = v_set1(rs ? rs[r] : 1.0f);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            c[r][v] = acc ? v_load(C + r * ldc + v * MGK_W) : v_zero();
            if (rs) c[r][v] = v_mul(c[r][v], s);
        }
    }
    for (int64_t k = 0; k < K; k++) {
        const AT_MK_ELEM *b = B + k * ldb, *ak = A + k * aks;
        AT_MK_BVEC bv[AT_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) bv[v] = AT_MK_LOAD_B(b + v * MGK_W);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const AT_MK_BVEC av = AT_MK_BCAST_A(ak[r * ars]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) c[r][v] = AT_MK_MAC(av, bv[v], c[r][v]);
        }
    }
    if (os) {
        const mgk_v s = v_set1(*os);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) c[r][v] = v_mul(c[r][v], s);
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) v_store(C + r * ldc + v * MGK_W, c[r][v]);
}

static void MGK_FN(AT_MK_NAME(mk_any))(int mr, int nv, int64_t K, const AT_MK_ELEM *A, int64_t ars,
                                       int64_t aks, const AT_MK_ELEM *B, int64_t ldb, float *C,
                                       int64_t ldc, bool acc, const float *rs, const float *os) {
#define AT_MK_CASE(MR_, NV_)                                                                       \
    case (MR_)*8 + (NV_):                                                                          \
        MGK_FN(AT_MK_NAME(mk))(MR_, NV_, K, A, ars, aks, B, ldb, C, ldc, acc, rs, os);             \
        return;
    switch (mr * 8 + nv) { AT_MK_CASES(AT_MK_CASE) }
#undef AT_MK_CASE
}

/* C[0:m, 0:n] (= or +=) A(m x K) B(K x n); n a multiple of MGK_W, B rows hold n readable elements.
 * rs and os: see mk. band and off skip what a causal mask zeroes: with AT_COLS_FROM the columns
 * of row i below i + off (rounded down to a vector) are set to 0 instead of computed (and not
 * scaled: the mask hides them); with AT_K_FROM and AT_K_TO row i sums only k >= i + off, or
 * k < i + off + 1, the terms whose A entries can be nonzero (off and the bands count values of K;
 * with pairs, whole pairs: the other value of a pair has a zero operand). A register block of
 * rows takes the widest range any of its rows needs. */
static void MGK_FN(AT_MK_NAME(gemm_rs))(int64_t m, int64_t n, int64_t K, const AT_MK_ELEM *A,
                                        int64_t ars, int64_t aks, const AT_MK_ELEM *B, int64_t ldb,
                                        float *C, int64_t ldc, bool acc, const float *rs, int band,
                                        int64_t off, const float *os) {
    for (int64_t j = 0; j < n; j += AT_NV * MGK_W) {
        const int64_t jend = j + at_min(AT_NV * MGK_W, n - j);
        for (int64_t r = 0; r < m; r += AT_MR) {
            const int mr = m - r < AT_MR ? (int)(m - r) : AT_MR;
            int64_t k0 = 0, k1 = K, j0 = j;
            if (band == AT_K_FROM) k0 = at_max(0, at_min(K, (r + off) >> AT_MK_PAIRS));
            if (band == AT_K_TO) k1 = at_max(0, at_min(K, (r + mr + off + AT_MK_PAIRS) >> AT_MK_PAIRS));
            if (band == AT_COLS_FROM) {
                j0 = at_max(j, at_min(jend, (r + off) / MGK_W * MGK_W));
                for (int i = 0; i < mr; i++)
                    for (int64_t c = j; c < j0; c += MGK_W)
                        v_store(C + (r + i) * ldc + c, v_zero());
                if (j0 == jend) continue;
            }
            MGK_FN(AT_MK_NAME(mk_any))(mr, (int)((jend - j0) / MGK_W), k1 - k0,
                                       A + r * ars + k0 * aks, ars, aks, B + k0 * ldb + j0, ldb,
                                       C + r * ldc + j0, ldc, acc, rs ? rs + r : NULL, os);
        }
    }
}

static void MGK_FN(AT_MK_NAME(gemm))(int64_t m, int64_t n, int64_t K, const AT_MK_ELEM *A,
                                     int64_t ars, int64_t aks, const AT_MK_ELEM *B, int64_t ldb,
                                     float *C, int64_t ldc, bool acc, int band, int64_t off) {
    MGK_FN(AT_MK_NAME(gemm_rs))(m, n, K, A, ars, aks, B, ldb, C, ldc, acc, NULL, band, off, NULL);
}

/* C = scale * A B (the logits of a tile before the bias and mask), band and off as gemm_rs. */
static void MGK_FN(AT_MK_NAME(gemm_scaled))(int64_t m, int64_t n, int64_t K, const AT_MK_ELEM *A,
                                            int64_t ars, int64_t aks, const AT_MK_ELEM *B,
                                            int64_t ldb, float *C, int64_t ldc, float scale,
                                            int band, int64_t off) {
    MGK_FN(AT_MK_NAME(gemm_rs))(m, n, K, A, ars, aks, B, ldb, C, ldc, false, NULL, band, off, &scale);
}

#undef AT_MK_ELEM
#undef AT_MK_BVEC
#undef AT_MK_LOAD_B
#undef AT_MK_BCAST_A
#undef AT_MK_MAC
#undef AT_MK_PAIRS
#undef AT_MK_NAME
