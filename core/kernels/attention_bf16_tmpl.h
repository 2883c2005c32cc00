/* attention_bf16_tmpl.h: the tile kernels of fused attention with their products on VDPBF16PS
 * (bf16 pairs multiplied and added onto float32 sums), included by attention_tmpl.h in a unit built
 * with AVX512-BF16 (attention_avx512bf16.c; with AT_AMX, attention_avx512bf16_amx.c), after the
 * shared pieces (exp, pack_tile, logits).
 *
 * The algorithm and the tiles are the float32 kernel's; what changes is the operands of the
 * products. A product over K runs over pairs of K: per pair, one broadcast 32-bit word of A (two
 * bf16 values, the lower index in the low half) times a vector of 16 words of B, each holding the
 * same pair for one output column. So A needs its pairs adjacent along K, and B its two rows of a
 * pair interleaved column by column. Per product:
 *
 *   forward   S^T = K Q^T      A: key rows in bf16 (kb)         B: Q rows' words, transposed (qw)
 *             O  += P V        A: P words, pairs of keys (pw)   B: V in key pairs (vv)
 *   backward  S^T = K Q^T      as in forward
 *             dV += P^T dO     A: P^T rows in bf16 (pb)         B: dO in query-row pairs (dov)
 *             dP^T = V dO^T    A: value rows in bf16 (vb)       B: dO rows' words, transposed (dow)
 *             dK += dS^T Q     A: dS^T rows in bf16 (pb)        B: Q in query-row pairs (qv)
 *             dQ += dS K       A: dS words, pairs of keys       B: K in key pairs (kv)
 *
 * Keys and values are converted per key tile where they are used (pack_kv_tile: in forward per
 * tile pair, in backward once per key tile and thread), the query side once per query tile
 * (pack_query_tile), P and dS once per tile pair: each while its data is in cache. The softmax, the running max and sum (of
 * the float32 probabilities), the output rescaling, D_i and dS = P (dP - D_i) scale stay float32.
 * Padding (a query tile's rows past m, keys past the causal end or Tk, columns past D) is zero in
 * at least one operand of every pair, so an odd count adds exact zeros. Sums still run over K in
 * increasing pairs whatever the tile or thread: results are bit-identical for any thread count
 * and either backward split.
 *
 * With AT_AMX (attention_avx512bf16_amx.c) the six products run on AMX tiles instead, through the
 * tile kernel J->tiles (attention_amx.c, on the instructions or on their software model); all the
 * rest is this same code. A tile product reads A as rows of K pairs and B as above, both in place
 * with their strides (TILELOADD), in whole tiles of 16 rows or columns by 16 pairs, so:
 *   - key and value rows (kb, vb) and the transposed query words (qw, dow) have J->kw words or
 *     rows, dw rounded up to 16, zero past dw;
 *   - O += P V and dQ += dS K need A as rows of queries by key pairs (pa): the key-pair words are
 *     written as above and then transposed as 32-bit words (bw_to_rows), zero past the keys;
 *   - P^T and dS^T rows (pb) are zero from the m queries to the tile's 32, and zero in the rows
 *     from nc to the next 16, so a pair whose keys stop short of the key tile's adds nothing to
 *     the rows of dK and dV it does not reach; keys in pairs (kv, vv) are zero up to 32 keys;
 *   - O's rescaling by exp(m_old - m_new) is a multiplication of its own before the product.
 * TDPBF16PS sums each group of 16 pairs in two chains from +0 (even and odd products), adds them
 * and adds that onto C: each product runs its groups from pair 0 in increasing order and starts
 * from C or +0 as the VDPBF16PS version does, so the results are bit-identical for any thread
 * count too; they differ from VDPBF16PS's in rounding. */

#ifndef AT_AMX
#define AT_AMX 0
#endif

typedef uint32_t at_word;

/* 32 bf16 lanes (x[0..16) then y[0..16)) -> 16 words (x[i], y[i]). */
static inline __m512i MGK_FN(bw_interleave)(__m512i xy) {
    _Alignas(64) static const uint16_t idx[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                  8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return _mm512_permutexvar_epi16(_mm512_load_si512(idx), xy);
}

/* 16 words, lane i = (bf16(lo[i]), bf16(hi[i])): the pairs of two rows, column by column. */
static inline __m512i MGK_FN(bw_pair)(mgk_v lo, mgk_v hi) {
    return MGK_FN(bw_interleave)((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* A row of n floats -> ceil(n/2) words (the row in bf16, zero-padded to even). */
static inline void MGK_FN(bw_row)(const float *x, int64_t n, at_word *dst) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512(dst + i / 2, (__m512i)_mm512_cvtne2ps_pbh(v_load(x + i + 16), v_load(x + i)));
    if (i < n) {
        const int64_t k = n - i;
        const mgk_v lo = v_load_n(x + i, at_min(16, k)), hi = k > 16 ? v_load_n(x + i + 16, k - 16) : v_zero();
        const __m512i w = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        _mm512_mask_storeu_epi32(dst + i / 2, (__mmask16)((1u << ((k + 1) / 2)) - 1u), w);
    }
}

/* rows x D floats (row stride D; rows past `rows` up to `prows` read as zero) -> (prows/2) x dp
 * words: word (p, d) = (x[2p][d], x[2p+1][d]), zero for d >= D. */
static void MGK_FN(bw_row_pairs)(const float *x, int64_t rows, int64_t prows, int64_t D, int64_t dp,
                                  at_word *dst) {
    const int64_t Dv = D / MGK_W * MGK_W;
    for (int64_t p = 0; 2 * p < prows; p++) {
        const float *r0 = x + 2 * p * D, *r1 = r0 + D;
        at_word *o = dst + p * dp;
        const bool h0 = 2 * p < rows, h1 = 2 * p + 1 < rows;
        int64_t d = 0;
        if (h1)
            for (; d < Dv; d += MGK_W) _mm512_storeu_si512(o + d, MGK_FN(bw_pair)(v_load(r0 + d), v_load(r1 + d)));
        for (; d < dp; d += MGK_W) {
            const int64_t n = at_max(0, at_min(MGK_W, D - d));
            const mgk_v lo = h0 && n ? v_load_n(r0 + d, n) : v_zero();
            const mgk_v hi = h1 && n ? v_load_n(r1 + d, n) : v_zero();
            _mm512_storeu_si512(o + d, MGK_FN(bw_pair)(lo, hi));
        }
    }
}

/* rows x D floats -> the transposed words: dst[p * AT_BR + r] = (x[r][2p], x[r][2p+1]) for
 * p < ceil(D/2), zero for r from rows up to a multiple of MGK_W, and zero rows from ceil(D/2) to
 * kw. tmp: rows x dw words. */
static void MGK_FN(bw_pack_tile)(const float *x, int64_t rows, int64_t D, int64_t kw, at_word *tmp,
                                 at_word *dst) {
    const int64_t dw = (D + 1) / 2;
    for (int64_t r = 0; r < rows; r++) MGK_FN(bw_row)(x + r * D, D, tmp + r * dw);
    /* words are moved, never computed on: pack_tile's float transposition keeps their bits */
    MGK_FN(pack_tile)((const float *)tmp, rows, dw, (float *)dst);
    memset(dst + dw * AT_BR, 0, (size_t)((kw - dw) * AT_BR) * sizeof(at_word));
}

#if AT_AMX
/* np rows of AT_BR words (pairs of keys by queries) -> mp rows of AT_BC/2 words (queries by pairs
 * of keys), the pairs from np up to kp zero; mp and kp multiples of MGK_W. */
static void MGK_FN(bw_to_rows)(const at_word *src, int64_t np, int64_t mp, int64_t kp, at_word *dst) {
    for (int64_t p0 = 0; p0 < kp; p0 += MGK_W)
        for (int64_t r0 = 0; r0 < mp; r0 += MGK_W) {
            mgk_v x[MGK_W];
            for (int i = 0; i < MGK_W; i++)
                x[i] = p0 + i < np ? v_load((const float *)src + (p0 + i) * AT_BR + r0) : v_zero();
            v_transpose(x); /* bits moved, as in bw_pack_tile */
            for (int i = 0; i < MGK_W; i++) v_store((float *)dst + (r0 + i) * (AT_BC / 2) + p0, x[i]);
        }
}

/* The tile product (attention_amx.c) on whole tiles: m rows and n columns rounded up to 16, kp
 * pairs to 16; the caller's operands are zero or finite in the padding. */
static inline void MGK_FN(tprod)(const at_job *J, int64_t m, int64_t n, int64_t kp, const at_word *A,
                                 int64_t lda, const at_word *B, int64_t ldb, float *C, int64_t ldc,
                                 bool acc, int band, int64_t off) {
    J->tiles(at_round_up(m, 16), at_round_up(n, 16), at_round_up(kp, 16), A, lda, B, ldb, C, ldc,
             acc, band, off);
}
#endif

#if !AT_AMX
/* The small matrix products on bf16 pairs (attention_mk.h): bmk, bmk_any, bgemm_rs, bgemm, whose
 * K counts pairs. */
#define AT_MK_ELEM at_word
#define AT_MK_BVEC __m512bh
#define AT_MK_LOAD_B(p) ((__m512bh)_mm512_loadu_si512(p))
#define AT_MK_BCAST_A(x) ((__m512bh)_mm512_set1_epi32((int)(x)))
#define AT_MK_MAC(a, b, c) _mm512_dpbf16_ps(c, a, b)
#define AT_MK_PAIRS 1
#define AT_MK_NAME(n) b##n
#include "attention_mk.h"
#endif

/* C (m x n, ldc) (= or +=) A B: A m rows of kp pairs (row-major words, lda), B kp pairs of n words
 * (ldb); band and off as gemm_rs. On VDPBF16PS, or on the tiles. */
static inline void MGK_FN(bprod)(const at_job *J, int64_t m, int64_t n, int64_t kp, const at_word *A,
                                 int64_t lda, const at_word *B, int64_t ldb, float *C, int64_t ldc,
                                 bool acc, int band, int64_t off) {
#if AT_AMX
    MGK_FN(tprod)(J, m, n, kp, A, lda, B, ldb, C, ldc, acc, band, off);
#else
    (void)J;
    MGK_FN(bgemm)(m, n, kp, A, lda, 1, B, ldb, C, ldc, acc, band, off);
#endif
}

/* C (m x n, ldc) = scale * A B (a tile's logits), as bprod; on VDPBF16PS the scale is applied as
 * the sums are stored, on the tiles by a pass over C after them (the same bits). */
static inline void MGK_FN(bprod_scaled)(const at_job *J, int64_t m, int64_t n, int64_t kp,
                                        const at_word *A, int64_t lda, const at_word *B,
                                        int64_t ldb, float *C, int64_t ldc, float scale, int band,
                                        int64_t off) {
#if AT_AMX
    MGK_FN(tprod)(J, m, n, kp, A, lda, B, ldb, C, ldc, false, band, off);
    const mgk_v sc = v_set1(scale);
    for (int64_t r = 0; r < m; r++)
        for (int64_t v = 0; v < n; v += MGK_W)
            v_store(C + r * ldc + v, v_mul(v_load(C + r * ldc + v), sc));
#else
    (void)J;
    MGK_FN(bgemm_scaled)(m, n, kp, A, lda, 1, B, ldb, C, ldc, scale, band, off);
#endif
}

/* Keys and values j0 .. j0+nc-1 of head bh as product operands (mgk_attention_impl). */
static void MGK_FN(pack_kv_tile)(const at_job *J, int64_t bh, int64_t j0, int64_t nc, at_word *kb,
                                 at_word *vb, at_word *kv, at_word *vv) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, dw = J->dw, kw = J->kw, dp = J->dp;
    const float *k = J->k + bh * at_kv_stride(a) + j0 * D, *v = J->v + bh * at_kv_stride(a) + j0 * D;
    /* AMX: rows of kw words and whole tiles of 16 rows, keys in pairs up to 32 keys, zero-padded */
    const int64_t rows = AT_AMX ? at_round_up(nc, 16) : nc, prows = at_round_up(nc, AT_AMX ? 32 : 2);
    at_word *const dst[2] = {kb, vb};
    const float *const src[2] = {k, v};
    for (int t = 0; t < 2; t++) {
        if (!dst[t]) continue;
        for (int64_t r = 0; r < nc; r++) {
            MGK_FN(bw_row)(src[t] + r * D, D, dst[t] + r * kw);
            if (kw > dw) memset(dst[t] + r * kw + dw, 0, (size_t)(kw - dw) * sizeof(at_word));
        }
        if (rows > nc) memset(dst[t] + nc * kw, 0, (size_t)((rows - nc) * kw) * sizeof(at_word));
    }
    if (kv) MGK_FN(bw_row_pairs)(k, nc, prows, D, dp, kv);
    if (vv) MGK_FN(bw_row_pairs)(v, nc, prows, D, dp, vv);
}

/* The query side of tile qt of head bh, for backward: qt and dot hold the transposed words of Q
 * and dO (dw x AT_BR), qp and dop their query-row pairs (AT_BR/2 x dp words), then lse and D_i
 * as in float32. */
static void MGK_FN(pack_query_tile)(const at_job *J, int64_t bh, int64_t qt, float *pk) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, dp = J->dp, Dv = D / MGK_W * MGK_W;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), row0 = bh * Tq + i0;
    const float *q = J->q + row0 * D, *dO = J->dO + row0 * D, *o = J->oin + row0 * D;
    at_word *qv = (at_word *)(pk + J->ql.qp + qt * AT_BR * dp);
    at_word *dov = (at_word *)(pk + J->ql.dop + qt * AT_BR * dp);
    /* the row pairs' space serves as the scratch of the transposed words first */
    MGK_FN(bw_pack_tile)(q, m, D, J->kw, qv, (at_word *)(pk + J->ql.qt + qt * J->qtw));
    MGK_FN(bw_pack_tile)(dO, m, D, J->kw, dov, (at_word *)(pk + J->ql.dot + qt * J->qtw));
    MGK_FN(bw_row_pairs)(q, m, AT_BR, D, dp, qv);
    MGK_FN(bw_row_pairs)(dO, m, AT_BR, D, dp, dov);
    float *lse = pk + J->ql.lse + qt * AT_BR, *di = pk + J->ql.di + qt * AT_BR;
    for (int64_t r = 0; r < m; r++) {
        const float l = J->lse_in[row0 + r];
        lse[r] = l == -INFINITY ? INFINITY : l;
        const float *x = dO + r * D, *y = o + r * D;
        mgk_v acc = v_zero();
        for (int64_t d = 0; d < Dv; d += MGK_W) acc = v_fma(v_load(x + d), v_load(y + d), acc);
        float s = v_hsum(acc);
        for (int64_t d = Dv; d < D; d++) s = fmaf(x[d], y[d], s); /* one rounding, as documented */
        di[r] = s;
    }
    /* rows past m: an lse of +inf makes their probabilities 0 */
    for (int64_t r = m; r < AT_BR; r++) lse[r] = INFINITY, di[r] = 0.0f;
}

/* st (keys x queries, float32, ld AT_BR) -> its rows c < nc in bf16 as words along the queries
 * (pairs of query rows): dst[c * AT_BR/2 + p], for the first mp columns. AMX: zero words up to a
 * whole 16 pairs, and zero rows from nc up to a multiple of 16. */
static void MGK_FN(bw_tile_rows)(const float *st, int64_t nc, int64_t mp, at_word *dst) {
    for (int64_t c = 0; c < nc; c++) MGK_FN(bw_row)(st + c * AT_BR, mp, dst + c * (AT_BR / 2));
#if AT_AMX
    const int64_t kq = at_round_up(mp / 2, 16);
    if (kq > mp / 2)
        for (int64_t c = 0; c < nc; c++)
            memset(dst + c * (AT_BR / 2) + mp / 2, 0, (size_t)(kq - mp / 2) * sizeof(at_word));
    for (int64_t c = nc; c < at_round_up(nc, 16); c++)
        memset(dst + c * (AT_BR / 2), 0, (size_t)kq * sizeof(at_word));
#endif
}

/* st's columns (queries) v .. v+W of keys c and c + 1 -> the words of pair c/2 (key pairs). */
static inline void MGK_FN(bw_key_pairs)(const float *st, int64_t nc, int64_t mp, at_word *dst) {
    for (int64_t c = 0; c < nc; c += 2)
        for (int64_t v = 0; v < mp; v += MGK_W) {
            const mgk_v hi = c + 1 < nc ? v_load(st + (c + 1) * AT_BR + v) : v_zero();
            _mm512_storeu_si512(dst + (c / 2) * AT_BR + v, MGK_FN(bw_pair)(v_load(st + c * AT_BR + v), hi));
        }
}

/* Forward for query tile qt of head bh (the float32 kernel's fwd_item, with bf16 products). */
static void MGK_FN(fwd_item)(const at_job *J, int64_t bh, int64_t qt, float *ws) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, DP = J->dp, dw = J->dw, kw = J->kw;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), mp = at_round_up(m, MGK_W);
    const float *q = J->q + (bh * Tq + i0) * D;
    at_word *qw = (at_word *)(ws + J->fl.qt), *pw = (at_word *)(ws + J->fl.pw);
    /* the head's keys and values, packed by the driver (head_pack), or tile by tile here */
    at_word *kb = (at_word *)(ws + J->fl.kb), *vv = (at_word *)(ws + J->fl.vv);
    float *st = ws + J->fl.st, *O = ws + J->fl.o, *mv = ws + J->fl.m, *lv = ws + J->fl.l,
          *al = ws + J->fl.al, *tmp = ws + J->fl.tmp;
    MGK_FN(bw_pack_tile)(q, m, D, kw, (at_word *)O, qw); /* O is free until the memset */
    memset(O, 0, (size_t)((AT_AMX ? mp : m) * DP) * sizeof(float));
    for (int64_t r = 0; r < mp; r++) mv[r] = -INFINITY, lv[r] = 0.0f;
    const int64_t kend = at_kend(a, i0, m);
    for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
        const int64_t nc = at_min(AT_BC, kend - j0);
        const int64_t delta = j0 - a->q_pos0 - i0; /* key c visible to query r iff r >= c + delta */
        const int band = a->causal ? AT_COLS_FROM : 0;
        const at_word *kbj = kb + j0 * kw, *vvj = vv + (j0 / 2) * DP;
        if (!J->head_pack) {
            MGK_FN(pack_kv_tile)(J, bh, j0, nc, kb, NULL, NULL, vv);
            kbj = kb, vvj = vv;
        }
        MGK_FN(bprod_scaled)(J, nc, mp, dw, kbj, kw, qw, AT_BR, st, AT_BR, a->scale, band, delta);
        MGK_FN(logits)(a, st, bh, i0, m, j0, nc, tmp);
        mgk_v mx[AT_BR / MGK_W];
        MGK_FN(col_max)(st, nc, mp, mx);
        for (int64_t v = 0; v < mp; v += MGK_W) {
            mgk_v alpha;
            const mgk_v mu = MGK_FN(online_max)(mx[v / MGK_W], mv + v, &alpha);
            mgk_v sum = v_zero();
            for (int64_t c = 0; c < nc; c += 2) {
                const mgk_v p0 = MGK_FN(exp)(v_sub(v_load(st + c * AT_BR + v), mu));
                sum = v_add(sum, p0);
                mgk_v p1 = v_zero();
                if (c + 1 < nc) {
                    p1 = MGK_FN(exp)(v_sub(v_load(st + (c + 1) * AT_BR + v), mu));
                    sum = v_add(sum, p1);
                }
                _mm512_storeu_si512(pw + (c / 2) * AT_BR + v, MGK_FN(bw_pair)(p0, p1));
            }
            v_store(lv + v, v_fma(v_load(lv + v), alpha, sum));
            v_store(al + v, alpha);
        }
#if AT_AMX
        for (int64_t r = 0; r < mp; r++) { /* the rescaling, then the product from O */
            const mgk_v s = v_set1(al[r]);
            for (int64_t d = 0; d < DP; d += MGK_W) v_store(O + r * DP + d, v_mul(v_load(O + r * DP + d), s));
        }
        const int64_t np = (nc + 1) / 2, kp = at_round_up(np, 16);
        at_word *pa = (at_word *)(ws + J->fl.pa);
        MGK_FN(bw_to_rows)(pw, np, mp, kp, pa);
        MGK_FN(tprod)(J, mp, DP, kp, pa, AT_BC / 2, vvj, DP, O, DP, true, band ? AT_K_TO : 0, -delta);
#else
        MGK_FN(bgemm_rs)(m, DP, (nc + 1) / 2, pw, 1, AT_BR, vvj, DP, O, DP, true, al,
                         band ? AT_K_TO : 0, -delta, NULL);
#endif
    }
    MGK_FN(fwd_finish)(J, bh, i0, m, O, mv, lv);
}

/* One (query tile, key tile) pair of backward (the float32 kernel's bwd_pair, bf16 products). */
static void MGK_FN(bwd_pair)(const at_job *J, const at_pair *p) {
    const mg_attn_desc *a = J->a;
    const int64_t DP = J->dp, dw = J->dw, kw = J->kw;
    const int64_t m = p->m, mp = at_round_up(m, MGK_W), nc = p->nc, mpairs = (m + 1) / 2;
    const at_word *kb = p->kbt, *vb = p->vbt, *kv = p->kvt;
    const at_word *qw = (const at_word *)p->qt, *dow = (const at_word *)p->dot;
    const at_word *qv = (const at_word *)p->qp, *dov = (const at_word *)p->dop;
    float *st = p->st, *dpt = p->dpt;
    at_word *pb = p->pb;
    const int64_t delta = p->j0 - a->q_pos0 - p->i0;
    const int cols = a->causal ? AT_COLS_FROM : 0, kfrom = a->causal ? AT_K_FROM : 0;
    MGK_FN(bprod_scaled)(J, nc, mp, dw, kb, kw, qw, AT_BR, st, AT_BR, a->scale, cols, delta);
    MGK_FN(logits)(a, st, p->bh, p->i0, m, p->j0, nc, p->tmp);
    MGK_FN(probs)(p, st, mp);
    if (p->dv) {
        MGK_FN(bw_tile_rows)(st, nc, mp, pb);
        MGK_FN(bprod)(J, nc, DP, mpairs, pb, AT_BR / 2, dov, DP, p->dv, DP, true, kfrom, delta);
    }
    if (!p->dk && !p->dq && !p->db) return;
    MGK_FN(bprod)(J, nc, mp, dw, vb, kw, dow, AT_BR, dpt, AT_BR, false, cols, delta);
    MGK_FN(ds_tile)(a, p, st, dpt, mp);
    if (p->dk) {
        MGK_FN(bw_tile_rows)(st, nc, mp, pb);
        MGK_FN(bprod)(J, nc, DP, mpairs, pb, AT_BR / 2, qv, DP, p->dk, DP, true, kfrom, delta);
    }
    if (p->dq) {
        at_word *sw = (at_word *)dpt; /* dP is spent */
        MGK_FN(bw_key_pairs)(st, nc, mp, sw);
#if AT_AMX
        const int64_t np = (nc + 1) / 2, kp = at_round_up(np, 16);
        MGK_FN(bw_to_rows)(sw, np, mp, kp, pb); /* pb is spent too */
        MGK_FN(tprod)(J, mp, DP, kp, pb, AT_BC / 2, kv, DP, p->dq, DP, true,
                      a->causal ? AT_K_TO : 0, -delta);
#else
        MGK_FN(bgemm)(m, DP, (nc + 1) / 2, sw, 1, AT_BR, kv, DP, p->dq, DP, true,
                      a->causal ? AT_K_TO : 0, -delta);
#endif
    }
}

const mgk_attention_impl *MGK_FN(mgk_attention)(void) {
    static const mgk_attention_impl impl = {MGK_FN(fwd_item), MGK_FN(bwd_pair),
                                            MGK_FN(pack_query_tile), MGK_FN(pack_kv_tile)};
    return &impl;
}
