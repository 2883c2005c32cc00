/* attention.h: private to core/kernels/attention.c. The per-ISA body of the fused attention
 * kernels, included once per instruction set. Before including it, attention.c defines:
 *   AT_SUFFIX       name suffix of this instantiation (avx512, avx2, generic)
 *   AT_ATTR         the function attribute that enables the instructions (or nothing)
 *   at_v, AT_W      the vector type and its width in floats
 *   AT_MR, AT_NV    the register tile of the small matrix product: AT_MR rows x AT_NV vectors
 *   AT_MK_CASES(X)  X(mr, nv) for every row count 1..AT_MR and vector count 1..AT_NV
 *   v_zero v_load v_store v_set1 v_fma(a,b,c)=a*b+c v_add v_sub v_mul v_max v_sel_neginf v_hsum
 *   v_exp           (v_max(a, b) must return b when b is NaN, so NaN inputs stay visible)
 * and the shared types and helpers (at_job, at_pair, AT_BR, AT_BC, at_kend, at_nvis, ...).
 *
 * Tiles are held transposed, keys by queries: st[c * AT_BR + r] is the logit of query i0 + r for
 * key j0 + c. The softmax then runs down columns, so the running max and sum of AT_W query rows sit
 * in one vector and no horizontal reduction is needed; and S^T = K Q^T takes K straight from memory,
 * so only the query tile (packed once per item) is ever transposed.
 */

#define AT_CAT2(a, b) a##_##b
#define AT_CAT(a, b) AT_CAT2(a, b)
#define FN(name) AT_CAT(name, AT_SUFFIX)

/* C[0:mr, 0:nv*W] (= or +=) sum over k < K of A(r, k) * B[k][..], A(r, k) = A[r*ars + k*aks];
 * with rs, the old C rows are first scaled by rs[r] (the online softmax's rescaling, for free).
 * Every element is one multiply-add chain over k in increasing order, whatever the tile it falls
 * in: that is what makes results independent of how work is cut. */
static inline AT_ATTR __attribute__((always_inline)) void
FN(mk)(const int mr, const int nv, int64_t K, const float *A, int64_t ars, int64_t aks,
       const float *B, int64_t ldb, float *C, int64_t ldc, bool acc, const float *rs) {
    at_v c[AT_MR][AT_NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        const at_v s = v_set1(rs ? rs[r] : 1.0f);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            c[r][v] = acc ? v_load(C + r * ldc + v * AT_W) : v_zero();
            if (rs) c[r][v] = v_mul(c[r][v], s);
        }
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb, *ak = A + k * aks;
        at_v bv[AT_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) bv[v] = v_load(b + v * AT_W);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const at_v av = v_set1(ak[r * ars]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) c[r][v] = v_fma(av, bv[v], c[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) v_store(C + r * ldc + v * AT_W, c[r][v]);
}

static AT_ATTR void FN(mk_any)(int mr, int nv, int64_t K, const float *A, int64_t ars, int64_t aks,
                               const float *B, int64_t ldb, float *C, int64_t ldc, bool acc,
                               const float *rs) {
#define AT_MK_CASE(MR_, NV_)                                                                       \
    case (MR_) * 8 + (NV_): FN(mk)(MR_, NV_, K, A, ars, aks, B, ldb, C, ldc, acc, rs); return;
    switch (mr * 8 + nv) { AT_MK_CASES(AT_MK_CASE) }
#undef AT_MK_CASE
}

/* C[0:m, 0:n] (= or +=) A(m x K) B(K x n); n a multiple of AT_W, B rows hold n readable floats.
 * rs: see mk. band and off skip what a causal mask zeroes: with AT_COLS_FROM the columns of row i
 * below i + off (rounded down to a vector) are set to 0 instead of computed; with AT_K_FROM and
 * AT_K_TO row i sums only k >= i + off, or k <= i + off, the terms whose A entries can be nonzero.
 * A register block of rows takes the widest range any of its rows needs. */
static AT_ATTR void FN(gemm_rs)(int64_t m, int64_t n, int64_t K, const float *A, int64_t ars,
                                int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc,
                                bool acc, const float *rs, int band, int64_t off) {
    for (int64_t j = 0; j < n; j += AT_NV * AT_W) {
        const int64_t jend = j + at_min(AT_NV * AT_W, n - j);
        for (int64_t r = 0; r < m; r += AT_MR) {
            const int mr = m - r < AT_MR ? (int)(m - r) : AT_MR;
            int64_t k0 = 0, k1 = K, j0 = j;
            if (band == AT_K_FROM) k0 = at_max(0, at_min(K, r + off));
            if (band == AT_K_TO) k1 = at_max(0, at_min(K, r + mr + off));
            if (band == AT_COLS_FROM) {
                j0 = at_max(j, at_min(jend, (r + off) / AT_W * AT_W));
                for (int i = 0; i < mr; i++)
                    for (int64_t c = j; c < j0; c += AT_W) v_store(C + (r + i) * ldc + c, v_zero());
                if (j0 == jend) continue;
            }
            FN(mk_any)(mr, (int)((jend - j0) / AT_W), k1 - k0, A + r * ars + k0 * aks, ars, aks,
                       B + k0 * ldb + j0, ldb, C + r * ldc + j0, ldc, acc, rs ? rs + r : NULL);
        }
    }
}

static AT_ATTR void FN(gemm)(int64_t m, int64_t n, int64_t K, const float *A, int64_t ars,
                             int64_t aks, const float *B, int64_t ldb, float *C, int64_t ldc,
                             bool acc, int band, int64_t off) {
    FN(gemm_rs)(m, n, K, A, ars, aks, B, ldb, C, ldc, acc, NULL, band, off);
}

/* The query side of tile qt of head bh, for backward (see at_qpack_layout in attention.c). */
static AT_ATTR void FN(pack_query_tile)(const at_job *J, int64_t bh, int64_t qt, float *pk) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, dp = J->dp, Dv = D / AT_W * AT_W;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), row0 = bh * Tq + i0;
    const float *q = J->q + row0 * D, *dO = J->dO + row0 * D, *o = J->oin + row0 * D;
    at_pack_tile(q, m, D, pk + J->ql.qt + qt * D * AT_BR);
    at_pack_tile(dO, m, D, pk + J->ql.dot + qt * D * AT_BR);
    if (J->pad) {
        at_pad_rows(q, m, D, dp, pk + J->ql.qp + qt * AT_BR * dp);
        at_pad_rows(dO, m, D, dp, pk + J->ql.dop + qt * AT_BR * dp);
    }
    float *lse = pk + J->ql.lse + qt * AT_BR, *di = pk + J->ql.di + qt * AT_BR;
    for (int64_t r = 0; r < m; r++) {
        const float l = J->lse_in[row0 + r];
        lse[r] = l == -INFINITY ? INFINITY : l;
        const float *x = dO + r * D, *y = o + r * D;
        at_v acc = v_zero();
        for (int64_t d = 0; d < Dv; d += AT_W) acc = v_fma(v_load(x + d), v_load(y + d), acc);
        float s = v_hsum(acc);
        for (int64_t d = Dv; d < D; d++) s += x[d] * y[d];
        di[r] = s;
    }
    for (int64_t r = m; r < AT_BR; r++) lse[r] = di[r] = 0.0f;
}

/* Logits of a few queries (decoding) by dot products, which needs no transposed query tile:
 * st[c][r] = q_r . k_c for r < m, zero for the padding columns up to mp. */
static AT_ATTR void FN(dots)(int64_t m, int64_t mp, int64_t nc, int64_t D, const float *q,
                             const float *kj, float *st) {
    const int64_t Dv = D / AT_W * AT_W;
    for (int64_t c = 0; c < nc; c++) {
        const float *kr = kj + c * D;
        for (int64_t r = 0; r < m; r++) {
            const float *qr = q + r * D;
            at_v acc = v_zero();
            for (int64_t d = 0; d < Dv; d += AT_W) acc = v_fma(v_load(qr + d), v_load(kr + d), acc);
            float s = v_hsum(acc);
            for (int64_t d = Dv; d < D; d++) s += qr[d] * kr[d];
            st[c * AT_BR + r] = s;
        }
        for (int64_t r = m; r < mp; r++) st[c * AT_BR + r] = 0.0f;
    }
}

/* Raw products -> logits: scale, the bias callback on each query's visible keys, the causal mask. */
static AT_ATTR void FN(logits)(const mg_attn_desc *a, float *st, int64_t bh, int64_t i0, int64_t m,
                               int64_t mp, int64_t j0, int64_t nc, float *tmp) {
    const at_v sc = v_set1(a->scale);
    for (int64_t c = 0; c < nc; c++)
        for (int64_t v = 0; v < mp; v += AT_W)
            v_store(st + c * AT_BR + v, v_mul(v_load(st + c * AT_BR + v), sc));
    if (a->bias) {
        const int64_t h = bh % a->H;
        for (int64_t r = 0; r < m; r++) {
            const int64_t qpos = a->q_pos0 + i0 + r, n = at_nvis(a, qpos, j0, nc);
            if (n <= 0) continue;
            for (int64_t c = 0; c < n; c++) tmp[c] = st[c * AT_BR + r];
            a->bias(a->bias_user, h, qpos, j0, n, tmp);
            for (int64_t c = 0; c < n; c++) st[c * AT_BR + r] = tmp[c];
        }
    }
    if (a->causal) /* key j0 + c is hidden from the queries before position j0 + c */
        for (int64_t c = 0; c < nc; c++) {
            const int64_t lim = j0 + c - (a->q_pos0 + i0);
            for (int64_t r = 0; r < lim && r < m; r++) st[c * AT_BR + r] = -INFINITY;
        }
}

/* Forward for query tile qt of head bh: online softmax over the visible key tiles. */
static AT_ATTR void FN(fwd_item)(const at_job *J, int64_t bh, int64_t qt, float *ws) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, DP = J->dp, Dn = at_round_up(D, AT_W);
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), mp = at_round_up(m, AT_W);
    const float *q = J->q + (bh * Tq + i0) * D, *kb = J->k + bh * at_kv_stride(a), *vb = J->v + bh * at_kv_stride(a);
    float *qt_ = ws + J->fl.qt, *st = ws + J->fl.st, *O = ws + J->fl.o, *mv = ws + J->fl.m,
          *lv = ws + J->fl.l, *al = ws + J->fl.al, *vp = ws + J->fl.vp, *tmp = ws + J->fl.tmp;
    const bool few = m <= AT_FEW_QUERIES;
    if (!few) at_pack_tile(q, m, D, qt_);
    memset(O, 0, (size_t)(m * DP) * sizeof(float));
    for (int64_t r = 0; r < mp; r++) mv[r] = -INFINITY, lv[r] = 0.0f;
    const int64_t kend = at_kend(a, i0, m);
    for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
        const int64_t nc = at_min(AT_BC, kend - j0);
        const float *kj = kb + j0 * D;
        /* key j0 + c is visible to query i0 + r iff r >= c + delta */
        const int64_t delta = j0 - a->q_pos0 - i0;
        const int band = a->causal ? AT_COLS_FROM : 0;
        if (few) FN(dots)(m, mp, nc, D, q, kj, st);
        else FN(gemm)(nc, mp, D, kj, D, 1, qt_, AT_BR, st, AT_BR, false, band, delta);
        FN(logits)(a, st, bh, i0, m, mp, j0, nc, tmp);
        for (int64_t v = 0; v < mp; v += AT_W) {
            at_v mx = v_set1(-INFINITY);
            for (int64_t c = 0; c < nc; c++) mx = v_max(mx, v_load(st + c * AT_BR + v));
            const at_v mo = v_load(mv + v), mn = v_max(mo, mx);
            /* A column that has seen no visible key yet keeps max -inf: exponentiate against 0
             * instead, so its probabilities come out 0 rather than NaN. */
            const at_v mu = v_sel_neginf(mn, v_zero());
            const at_v alpha = v_exp(v_sub(mo, mu));
            at_v sum = v_zero();
            for (int64_t c = 0; c < nc; c++) {
                const at_v p = v_exp(v_sub(v_load(st + c * AT_BR + v), mu));
                v_store(st + c * AT_BR + v, p);
                sum = v_add(sum, p);
            }
            v_store(lv + v, v_fma(v_load(lv + v), alpha, sum));
            v_store(mv + v, mn);
            v_store(al + v, alpha);
        }
        const float *vj = vb + j0 * D;
        int64_t ldv = D;
        if (J->pad) at_pad_rows(vj, nc, D, DP, vp), vj = vp, ldv = DP;
        FN(gemm_rs)(m, Dn, nc, st, 1, AT_BR, vj, ldv, O, DP, true, al, band ? AT_K_TO : 0, -delta);
    }
    float *o = J->o + (bh * Tq + i0) * D;
    for (int64_t r = 0; r < m; r++) {
        const float l = lv[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t d = 0; d < D; d++) o[r * D + d] = O[r * DP + d] * inv;
        if (J->lse) J->lse[bh * Tq + i0 + r] = l > 0.0f ? mv[r] + logf(l) : -INFINITY;
    }
}

/* One (query tile, key tile) pair of backward: recompute P^T from the logits and lse, then
 *   dV_j += P^T dO_i,  dP^T = V_j dO_i^T,  dS^T = P^T * (dP^T - D_i) * scale,
 *   dK_j += dS^T Q_i,  dQ_i += dS K_j. */
static AT_ATTR void FN(bwd_pair)(const at_job *J, const at_pair *p) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, DP = J->dp, Dn = at_round_up(D, AT_W);
    const int64_t m = p->m, mp = at_round_up(m, AT_W), nc = p->nc;
    float *st = p->st, *dpt = p->dpt;
    const int64_t delta = p->j0 - a->q_pos0 - p->i0; /* key c visible to query r iff r >= c + delta */
    const int cols = a->causal ? AT_COLS_FROM : 0, kfrom = a->causal ? AT_K_FROM : 0;
    FN(gemm)(nc, mp, D, p->kj, D, 1, p->qt, AT_BR, st, AT_BR, false, cols, delta);
    FN(logits)(a, st, p->bh, p->i0, m, mp, p->j0, nc, p->tmp);
    for (int64_t v = 0; v < mp; v += AT_W) {
        const at_v L = v_load(p->lse + v); /* +inf for a row that saw no key: P = 0 there */
        for (int64_t c = 0; c < nc; c++)
            v_store(st + c * AT_BR + v, v_exp(v_sub(v_load(st + c * AT_BR + v), L)));
    }
    if (p->dv) FN(gemm)(nc, Dn, m, st, AT_BR, 1, p->dop, p->ldq, p->dv, DP, true, kfrom, delta);
    if (!p->dk && !p->dq) return;
    FN(gemm)(nc, mp, D, p->vj, D, 1, p->dot, AT_BR, dpt, AT_BR, false, cols, delta);
    const at_v sc = v_set1(a->scale);
    for (int64_t v = 0; v < mp; v += AT_W) {
        const at_v Di = v_load(p->di + v);
        for (int64_t c = 0; c < nc; c++) {
            const at_v pv = v_load(st + c * AT_BR + v), dp = v_load(dpt + c * AT_BR + v);
            v_store(st + c * AT_BR + v, v_mul(v_mul(pv, v_sub(dp, Di)), sc));
        }
    }
    if (p->dk) FN(gemm)(nc, Dn, m, st, AT_BR, 1, p->qp, p->ldq, p->dk, DP, true, kfrom, delta);
    if (p->dq)
        FN(gemm)(m, Dn, nc, st, 1, AT_BR, p->kp, p->ldk, p->dq, DP, true,
                 a->causal ? AT_K_TO : 0, -delta);
}

static const at_isa FN(at_isa_table) = {FN(fwd_item), FN(bwd_pair), FN(pack_query_tile)};

#undef FN
#undef AT_CAT
#undef AT_CAT2
