/* Fused scaled dot-product attention (forward and backward) and its reference twin.
 *
 * Forward, per item (batch*head, query tile of AT_BR rows): walk the key tiles of AT_BC keys that
 * some query of the tile can see (causal: tiles past the diagonal are skipped), with an online
 * softmax: a running max m and sum l per query, the output accumulator rescaled by exp(m_old - m_new)
 * whenever the max grows. Keeps o and lse = m + log l per row: O(T) per head.
 *
 * Backward recomputes P = exp(logits - lse) tile by tile. With D_i = rowsum(dO_i * O_i):
 *   dV = P^T dO,  dS = P * (dO V^T - D_i) * scale,  dK = dS^T Q,  dQ = dS K.
 * Two ways to split it, giving the same bits (each gradient element sums its tile contributions
 * in the same order through the same code):
 *  - per head: one item per (batch, head) walks key tiles j in order and, inside, query tiles i in
 *    order; dK_j and dV_j live in tile accumulators, dQ in a head-sized accumulator. Least work
 *    (five products per tile pair), parallel over B*H only.
 *  - two passes: items (batch, head, key tile) produce dK and dV, then items (batch, head, query
 *    tile) produce dQ; two products are done twice, but there are many more items.
 * The automatic choice looks at B*H and the thread count; tests force each (desc.backward_split).
 * Every item writes only its own rows, items are handed out dynamically (most expensive first for
 * causal masks, whose tiles have very different costs), and nothing is reduced across threads, so
 * the result never depends on the schedule or the thread count.
 *
 * SIMD: attention_tmpl.h holds the tile code once; it is compiled once per path as
 * attention_ISA.c, and isa.c hands the drivers here the active path's table, as for GEMM. */
#include "attention_internal.h"
#include "isa.h"
#include "threads.h"
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/testing.h" /* the reference twin and the switch: exported, not installed */

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define AT_PREFETCH_MAX (512 * 1024) /* bytes of a head's rows worth prefetching (a guess at L2/2) */

/* The kernels keep their scratch on 64-byte boundaries, a vector to a cache line (on a workspace
 * 16 bytes off one, float32 forward ran about a quarter slower). The caller's workspace may start
 * anywhere: the *_workspace sizes include AT_WS_SLACK bytes, and each call starts its scratch at
 * the first 64-byte boundary in the workspace (at_ws_start, which takes the bytes skipped off
 * *bytes and says how many in *skip). */
#define AT_WS_SLACK 64

static float *at_ws_start(void *ws, size_t *bytes, size_t *skip) {
    *skip = ws ? (size_t)(-(uintptr_t)ws & (AT_WS_SLACK - 1)) : 0;
    *bytes = *bytes > *skip ? *bytes - *skip : 0;
    return ws ? (float *)((char *)ws + *skip) : NULL;
}

static size_t at_take(size_t *off, int64_t floats) {
    size_t at = *off;
    *off += (size_t)at_round_up(at_max(floats, 0), 16);
    return at;
}

/* Backward needs packed keys and values; says so (as `who`) when they are not. */
static bool at_kv_packed(const mg_attn_desc *a, const char *who) {
    if (at_kv_stride(a) == a->Tk * a->D) return true;
    mg_log(MG_LOG_ERROR, "%s: keys and values must be packed (kv_stride %lld given)", who,
           (long long)a->kv_stride);
    return false;
}

static int at_threads(void);

static void at_job_init(at_job *J, const mg_attn_desc *a) {
    memset(J, 0, sizeof *J);
    J->a = a;
    J->BH = a->B * a->H;
    J->nqt = (a->Tq + AT_BR - 1) / AT_BR;
    J->nkt = (a->Tk + AT_BC - 1) / AT_BC;
    J->dp = at_round_up(a->D, 16);
    J->pad = a->D % 16 != 0;
    mgk_attn_tile_product tiles = NULL;
    /* bf16 products for packed keys and values and more than a few queries: a decoding step (one
     * query, keys usually read in place from a cache) takes the float32 few-query path whatever
     * the stride, so every step of a generation runs the same kernel */
    const mgk_attention_impl *bim = a->bf16 && a->Tq > AT_FEW_QUERIES && at_kv_stride(a) == a->Tk * a->D
                                        ? mgk_attention_bf16(&tiles)
                                        : NULL;
    J->bf16 = bim != NULL;
    J->impl = bim ? bim : mgk_attention_active();
    J->tiles = tiles;
    J->dw = (a->D + 1) / 2;
    J->kw = tiles ? at_round_up(J->dw, 16) : J->dw;
    J->qtw = AT_BR * at_max(a->D, J->kw);
    const int64_t dp = J->dp, pad = J->pad, bf16 = J->bf16;
    size_t off = 0;
    at_fwd_layout *f = &J->fl;
    f->qt = at_take(&off, J->qtw);
    f->st = at_take(&off, AT_BC * AT_BR);
    f->o = at_take(&off, AT_BR * dp);
    f->m = at_take(&off, AT_BR);
    f->l = at_take(&off, AT_BR);
    f->al = at_take(&off, AT_BR);
    f->vp = at_take(&off, pad ? AT_BC * dp : 0);
    f->tmp = at_take(&off, AT_BC);
    f->pw = at_take(&off, bf16 ? AT_BC / 2 * AT_BR : 0);
    f->pa = at_take(&off, tiles ? AT_BR * AT_BC / 2 : 0);
    /* enough heads to share among the threads whole (a heuristic: the result is the same) */
    J->head_pack = bf16 && J->BH >= 2 * (int64_t)at_threads();
    /* AMX: the last tile's keys in pairs padded with zeros to a tile's 16 pairs */
    const int64_t kvrows = J->head_pack ? at_round_up(a->Tk, tiles ? 32 : 2) : AT_BC;
    f->kb = at_take(&off, bf16 ? kvrows * J->kw : 0);
    f->vv = at_take(&off, bf16 ? kvrows / 2 * dp : 0);
    f->total = off;
    off = 0;
    at_qpack_layout *ql = &J->ql;
    ql->qt = at_take(&off, J->nqt * J->qtw);
    ql->dot = at_take(&off, J->nqt * J->qtw);
    ql->qp = at_take(&off, pad || bf16 ? J->nqt * AT_BR * dp : 0);
    ql->dop = at_take(&off, pad || bf16 ? J->nqt * AT_BR * dp : 0);
    ql->lse = at_take(&off, J->nqt * AT_BR);
    ql->di = at_take(&off, J->nqt * AT_BR);
    ql->total = off;
}

/* Per-thread backward scratch for a split (1: two passes, 2: per head). */
static void at_bwd_layout_for(at_job *J, int split) {
    const int64_t dp = J->dp;
    size_t off = 0;
    at_bwd_layout *b = &J->bl;
    b->st = at_take(&off, AT_BC * AT_BR);
    b->dpt = at_take(&off, AT_BC * AT_BR);
    b->tmp = at_take(&off, AT_BC);
    b->dk = at_take(&off, AT_BC * dp);
    b->dv = at_take(&off, AT_BC * dp);
    b->kp = at_take(&off, J->pad ? AT_BC * dp : 0);
    b->dq = at_take(&off, (split == 2 ? J->nqt * AT_BR : AT_BR) * dp);
    b->pb = at_take(&off, J->bf16 ? AT_BC * AT_BR / 2 : 0);
    b->kb = at_take(&off, J->bf16 ? AT_BC * J->kw : 0);
    b->vb = at_take(&off, J->bf16 ? AT_BC * J->kw : 0);
    b->kv = at_take(&off, J->bf16 ? AT_BC / 2 * dp : 0);
    b->pack = off;
    if (split == 2) off += J->ql.total;
    b->total = off;
}

/* ---- drivers -------------------------------------------------------------------------------- */

static int at_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

static int at_team(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static int at_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Forward item `it` of B*H*(query tiles): causal, the last query tiles go first (they see the most
 * keys). */
static void at_fwd_item(const at_job *J, int64_t it, float *ws) {
    const int64_t BH = J->BH, qt = J->a->causal ? J->nqt - 1 - it / BH : it / BH;
    J->impl->fwd_item(J, it % BH, qt, ws);
}

size_t mg_attn_forward_workspace(const mg_attn_desc *a) {
    at_job J;
    at_job_init(&J, a);
    return (size_t)at_threads() * J.fl.total * sizeof(float) + AT_WS_SLACK;
}

void mg_attn_forward(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                     float *o, float *lse, void *ws, size_t ws_bytes) {
    at_job J;
    at_job_init(&J, a);
    J.q = q, J.k = k, J.v = v, J.o = o, J.lse = lse;
    const size_t per = J.fl.total, given = ws_bytes;
    size_t skip;
    float *base = at_ws_start(ws, &ws_bytes, &skip);
    int nt = at_threads();
    while (nt > 1 && (size_t)nt * per * sizeof(float) > ws_bytes) nt--;
    if (per * sizeof(float) > ws_bytes || !ws) {
        mg_log(MG_LOG_ERROR, "mg_attn_forward: workspace of %zu bytes is too small (needs %zu)",
               given, per * sizeof(float) + skip);
        return;
    }
    /* A decoding step (one query over a short cache) is a few microseconds of work, less than
     * waking a second thread costs: below about a million FLOPs per thread, use fewer. */
    const double flops = 4.0 * (double)a->B * (double)a->H * (double)a->Tq * (double)a->Tk * (double)a->D;
    nt = threads_for(nt, flops, 1.0e6);
    const int64_t BH = J.BH, nqt = J.nqt, items = BH * nqt;
    if (J.head_pack) { /* whole heads, each thread packing a head's keys and values once */
        MG_PAR_FOR_NT(nt > 1 && BH > 1 ? nt : 1, (dynamic, 1), bh, BH, {
            float *w = base + (size_t)at_tid() * per;
            J.impl->pack_kv_tile(&J, bh, 0, a->Tk, (uint32_t *)(w + J.fl.kb), NULL, NULL,
                                 (uint32_t *)(w + J.fl.vv));
            for (int64_t qt = 0; qt < nqt; qt++) J.impl->fwd_item(&J, bh, qt, w);
        });
        return;
    }
    /* a decoding step (one item, or one thread) enters no OpenMP region */
    MG_PAR_FOR_NT(items > 1 ? nt : 1, (dynamic, 1), it, items,
                  at_fwd_item(&J, it, base + (size_t)at_tid() * per));
}

/* The tile pair (qt, kt) of head bh with the operands in place; dq/dk/dv accumulators or NULL;
 * db: this pair adds its dL/dlogits to the desc's dbias (when there is one). */
static void at_run_pair(const at_job *J, int64_t bh, int64_t qt, int64_t kt, const float *pk,
                        const float *kp, int64_t ldk, float *scratch, float *dq, float *dk,
                        float *dv, bool db) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, Tq = a->Tq, Tk = a->Tk, dp = J->dp;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, Tq - i0), j0 = kt * AT_BC;
    const int64_t row0 = bh * Tq + i0;
    at_pair p = {
        .bh = bh, .i0 = i0, .m = m, .j0 = j0, .nc = at_min(AT_BC, at_kend(a, i0, m) - j0),
        .kj = J->k + (bh * Tk + j0) * D, .vj = J->v + (bh * Tk + j0) * D, .kp = kp, .ldk = ldk,
        .qt = pk + J->ql.qt + qt * J->qtw, .dot = pk + J->ql.dot + qt * J->qtw,
        .qp = J->pad || J->bf16 ? pk + J->ql.qp + qt * AT_BR * dp : J->q + row0 * D,
        .dop = J->pad || J->bf16 ? pk + J->ql.dop + qt * AT_BR * dp : J->dO + row0 * D,
        .ldq = J->pad || J->bf16 ? dp : D,
        .lse = pk + J->ql.lse + qt * AT_BR, .di = pk + J->ql.di + qt * AT_BR,
        .st = scratch + J->bl.st, .dpt = scratch + J->bl.dpt, .tmp = scratch + J->bl.tmp,
        .dq = dq, .dk = dk, .dv = dv,
        .db = db && a->dbias ? a->dbias + row0 * Tk + j0 : NULL,
        .pb = J->bf16 ? (uint32_t *)(scratch + J->bl.pb) : NULL,
        .kbt = (const uint32_t *)(scratch + J->bl.kb), .vbt = (const uint32_t *)(scratch + J->bl.vb),
        .kvt = (const uint32_t *)(scratch + J->bl.kv),
    };
    J->impl->bwd_pair(J, &p);
}

static bool at_pair_visible(const mg_attn_desc *a, int64_t qt, int64_t kt) {
    const int64_t i0 = qt * AT_BR;
    return kt * AT_BC < at_kend(a, i0, at_min(AT_BR, a->Tq - i0));
}

/* Keys of tile kt as a product operand (dQ += dS K): in place, or padded into scratch. */
static const float *at_key_rows(const at_job *J, int64_t bh, int64_t kt, float *scratch,
                                int64_t *ld) {
    const mg_attn_desc *a = J->a;
    const float *k = J->k + (bh * a->Tk + kt * AT_BC) * a->D;
    *ld = a->D;
    if (!J->pad) return k;
    *ld = J->dp;
    at_pad_rows(k, at_min(AT_BC, a->Tk - kt * AT_BC), a->D, J->dp, scratch + J->bl.kp);
    return scratch + J->bl.kp;
}

/* bf16 kernels: key tile kt of head bh as product operands into the thread's scratch (rows and
 * values always, keys in pairs for dQ when kv), once per use of the tile by a thread. */
static void at_bf16_key_tile(const at_job *J, int64_t bh, int64_t kt, float *scratch, bool kv) {
    if (!J->bf16) return;
    const int64_t j0 = kt * AT_BC;
    J->impl->pack_kv_tile(J, bh, j0, at_min(AT_BC, J->a->Tk - j0), (uint32_t *)(scratch + J->bl.kb),
                          (uint32_t *)(scratch + J->bl.vb), kv ? (uint32_t *)(scratch + J->bl.kv) : NULL,
                          NULL);
}

/* dst (rows x D) += acc (row stride dp); with mg_attn_desc.grads_fresh, dst = 0 + acc (the same
 * bits as zeroing dst first). A backward that runs brings every row of dq here exactly once, and
 * every row of dk and dv of a key some query sees; mg_attn_backward zeroes the others. */
static void at_add_rows(const at_job *J, float *dst, const float *acc, int64_t rows, int64_t D, int64_t dp) {
    if (J->a->grads_fresh)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t d = 0; d < D; d++) dst[r * D + d] = 0.0f + acc[r * dp + d];
    else
        for (int64_t r = 0; r < rows; r++)
            for (int64_t d = 0; d < D; d++) dst[r * D + d] += acc[r * dp + d];
}

/* Software prefetch of the rows the next head will read and update, spread over this head's tile
 * pairs, so its first touches of memory overlap with compute (for short sequences a head is done in
 * tens of microseconds, and a cold head's rows are a third of that). */
typedef struct at_prefetch {
    const char *base[8];
    size_t bytes[8];
    bool write[8];
    int n, cur;
    size_t off, quota; /* bytes per step */
} at_prefetch;

static void at_prefetch_add(at_prefetch *pf, const float *p, int64_t floats, bool write) {
    if (p && floats > 0) {
        pf->base[pf->n] = (const char *)p;
        pf->bytes[pf->n] = (size_t)floats * sizeof(float);
        pf->write[pf->n++] = write;
    }
}

static void at_prefetch_step(at_prefetch *pf) {
    if (!pf) return;
    for (size_t left = pf->quota; left > 0 && pf->cur < pf->n;) {
        const char *b = pf->base[pf->cur];
        const size_t len = pf->bytes[pf->cur];
        for (; pf->off < len && left > 0; pf->off += 64, left = left > 64 ? left - 64 : 0) {
            if (pf->write[pf->cur]) __builtin_prefetch(b + pf->off, 1, 2);
            else __builtin_prefetch(b + pf->off, 0, 2);
        }
        if (pf->off >= len) pf->cur++, pf->off = 0;
    }
}

/* dK and dV of key tile kt of head bh, over every query tile that sees it, in order (and the
 * pairs' dL/dlogits when db). */
static void at_key_tile(const at_job *J, int64_t bh, int64_t kt, const float *pk, float *scratch,
                        float *dq_head, at_prefetch *pf, bool db) {
    const mg_attn_desc *a = J->a;
    const int64_t D = a->D, dp = J->dp, j0 = kt * AT_BC;
    const int64_t rows = at_min(AT_BC, at_kend(a, 0, a->Tq) - j0);
    float *dk = J->dk ? scratch + J->bl.dk : NULL, *dv = J->dv ? scratch + J->bl.dv : NULL;
    if (dk) memset(dk, 0, (size_t)(rows * dp) * sizeof(float));
    if (dv) memset(dv, 0, (size_t)(rows * dp) * sizeof(float));
    int64_t ldk = 0;
    /* float32 keys for dQ; the bf16 kernels read the tile packed below instead */
    const float *kp = dq_head && !J->bf16 ? at_key_rows(J, bh, kt, scratch, &ldk) : NULL;
    at_bf16_key_tile(J, bh, kt, scratch, dq_head != NULL);
    for (int64_t qt = 0; qt < J->nqt; qt++) {
        if (!at_pair_visible(a, qt, kt)) continue;
        at_prefetch_step(pf);
        at_run_pair(J, bh, qt, kt, pk, kp, ldk, scratch,
                    dq_head ? dq_head + qt * AT_BR * dp : NULL, dk, dv, db);
    }
    const int64_t row0 = bh * a->Tk + j0;
    if (dk) at_add_rows(J, J->dk + row0 * D, dk, rows, D, dp);
    if (dv) at_add_rows(J, J->dv + row0 * D, dv, rows, D, dp);
}

/* Per-head split: the whole backward of head bh; `next` is the head this thread does next (or -1). */
static void at_bwd_head(const at_job *J, int64_t bh, int64_t next, float *scratch) {
    const mg_attn_desc *a = J->a;
    const int64_t nq = a->Tq * a->D, nk = a->Tk * a->D;
    float *pk = scratch + J->bl.pack, *dq = J->dq ? scratch + J->bl.dq : NULL;
    const int64_t nkt_vis = (at_kend(a, 0, a->Tq) + AT_BC - 1) / AT_BC;
    at_prefetch pf = {0}, *pfp = NULL;
    if (next >= 0) {
        at_prefetch_add(&pf, J->q + next * nq, nq, false);
        at_prefetch_add(&pf, J->dO + next * nq, nq, false);
        at_prefetch_add(&pf, J->oin + next * nq, nq, false);
        at_prefetch_add(&pf, J->k + next * nk, nk, false);
        at_prefetch_add(&pf, J->v + next * nk, nk, false);
        at_prefetch_add(&pf, J->dk ? J->dk + next * nk : NULL, nk, true);
        at_prefetch_add(&pf, J->dv ? J->dv + next * nk : NULL, nk, true);
        at_prefetch_add(&pf, J->dq ? J->dq + next * nq : NULL, nq, true);
        size_t total = 0;
        for (int i = 0; i < pf.n; i++) total += pf.bytes[i];
        /* A long head's rows would not fit in L2 beside its own working set (and its compute
         * dwarfs them anyway): leave those to the hardware prefetcher. */
        if (total <= AT_PREFETCH_MAX) {
            size_t pairs = 0;
            for (int64_t kt = 0; kt < nkt_vis; kt++)
                for (int64_t qt = 0; qt < J->nqt; qt++) pairs += at_pair_visible(a, qt, kt);
            pf.quota = pairs ? (total / pairs + 63) / 64 * 64 : 0;
            pfp = &pf;
        }
    }
    for (int64_t qt = 0; qt < J->nqt; qt++) J->impl->pack_query_tile(J, bh, qt, pk);
    if (dq) memset(dq, 0, (size_t)(J->nqt * AT_BR * J->dp) * sizeof(float));
    for (int64_t kt = 0; kt < nkt_vis; kt++) at_key_tile(J, bh, kt, pk, scratch, dq, pfp, true);
    if (dq) at_add_rows(J, J->dq + bh * nq, dq, a->Tq, a->D, J->dp);
}

/* Two-pass, second pass: dQ of query tile qt of head bh over the key tiles it sees, in order,
 * and the pairs' dL/dlogits (each pair's once: the first pass leaves them). */
static void at_bwd_query_tile(const at_job *J, int64_t bh, int64_t qt, float *scratch) {
    const mg_attn_desc *a = J->a;
    const float *pk = J->shared + (size_t)bh * J->ql.total;
    float *dq = J->dq ? scratch + J->bl.dq : NULL;
    const int64_t i0 = qt * AT_BR, m = at_min(AT_BR, a->Tq - i0);
    if (dq) memset(dq, 0, (size_t)(m * J->dp) * sizeof(float));
    for (int64_t kt = 0; kt * AT_BC < at_kend(a, i0, m); kt++) {
        int64_t ldk = 0;
        const float *kp = dq && !J->bf16 ? at_key_rows(J, bh, kt, scratch, &ldk) : NULL;
        at_bf16_key_tile(J, bh, kt, scratch, dq != NULL);
        at_run_pair(J, bh, qt, kt, pk, kp, ldk, scratch, dq, NULL, NULL, true);
    }
    if (dq) at_add_rows(J, J->dq + (bh * a->Tq + i0) * a->D, dq, m, a->D, J->dp);
}

static int at_choose_split(const mg_attn_desc *a, int nt) {
    if (a->backward_split == 1 || a->backward_split == 2) return a->backward_split;
    const int64_t BH = a->B * a->H;
    /* Per head does the least work; it needs enough heads to keep every thread busy. */
    return nt == 1 || BH % nt == 0 || BH >= 4 * (int64_t)nt ? 2 : 1;
}

static size_t at_bwd_floats(at_job *J, int split, int nt) {
    at_bwd_layout_for(J, split);
    const size_t shared = (split == 1 ? (size_t)J->BH * J->ql.total : 0);
    return shared + (size_t)nt * J->bl.total;
}

size_t mg_attn_backward_workspace(const mg_attn_desc *a) {
    at_job J;
    at_job_init(&J, a);
    const int nt = at_threads();
    return at_bwd_floats(&J, at_choose_split(a, nt), nt) * sizeof(float) + AT_WS_SLACK;
}

/* With grads_fresh, the parts no tile writes, set to zero: all of dq, and of every head the rows of
 * dk and dv from key kfrom on (kfrom 0: all of them, for a backward that cannot run). */
static void at_zero_grads(const mg_attn_desc *a, float *dq, float *dk, float *dv, int64_t kfrom) {
    if (dq) memset(dq, 0, (size_t)(a->B * a->H * a->Tq * a->D) * sizeof(float));
    const size_t n = (size_t)((a->Tk - kfrom) * a->D);
    for (int64_t bh = 0; bh < a->B * a->H && kfrom < a->Tk; bh++) {
        const size_t off = (size_t)((bh * a->Tk + kfrom) * a->D);
        if (dk) memset(dk + off, 0, n * sizeof(float));
        if (dv) memset(dv + off, 0, n * sizeof(float));
    }
}

void mg_attn_backward(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                      const float *o, const float *lse, const float *dO, float *dq, float *dk,
                      float *dv, void *ws, size_t ws_bytes) {
    if (!dq && !dk && !dv && !a->dbias) return;
    if (!at_kv_packed(a, "mg_attn_backward")) {
        if (a->grads_fresh) at_zero_grads(a, dq, dk, dv, 0);
        return;
    }
    at_job J;
    at_job_init(&J, a);
    J.q = q, J.k = k, J.v = v, J.oin = o, J.lse_in = lse, J.dO = dO;
    J.dq = dq, J.dk = dk, J.dv = dv;
    const size_t given = ws_bytes;
    size_t skip;
    float *base = at_ws_start(ws, &ws_bytes, &skip);
    int nt = at_threads(), split = at_choose_split(a, nt);
    size_t need = at_bwd_floats(&J, split, nt) * sizeof(float);
    while (nt > 1 && need > ws_bytes) {
        nt--;
        split = at_choose_split(a, nt);
        need = at_bwd_floats(&J, split, nt) * sizeof(float);
    }
    const int64_t BH = J.BH, nqt = J.nqt, nkt = J.nkt;
    if (a->grads_fresh) { /* what no tile writes: all of it below, or keys no query sees */
        const bool none = need > ws_bytes || !ws;
        at_zero_grads(a, none ? dq : NULL, dk, dv, none ? 0 : at_kend(a, 0, a->Tq));
    }
    if (need > ws_bytes || !ws) {
        mg_log(MG_LOG_ERROR, "mg_attn_backward: workspace of %zu bytes is too small (needs %zu)",
               given, need + skip);
        return;
    }
    const bool causal = a->causal;
    if (split == 2) {
        /* Heads all cost the same, so a round-robin share is balanced, and each thread knows
         * which head comes next (for prefetching). */
        const size_t per = J.bl.total;
#pragma omp parallel num_threads(nt) if (nt > 1 && BH > 1)
        {
            const int64_t step = at_team();
            for (int64_t bh = at_tid(); bh < BH; bh += step)
                at_bwd_head(&J, bh, bh + step < BH ? bh + step : -1, base + (size_t)at_tid() * per);
        }
        return;
    }
    J.shared = base;
    float *thread0 = base + (size_t)BH * J.ql.total;
    const size_t per = J.bl.total;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *scratch = thread0 + (size_t)at_tid() * per;
#pragma omp for schedule(static)
        for (int64_t it = 0; it < BH * nqt; it++)
            J.impl->pack_query_tile(&J, it / nqt, it % nqt, J.shared + (size_t)(it / nqt) * J.ql.total);
        /* (implicit barrier) Causal: early key tiles and late query tiles cost the most. */
        if (dk || dv) {
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < BH * nkt; it++) {
                const int64_t kt = it / BH, bh = it % BH;
                if (kt * AT_BC < at_kend(a, 0, a->Tq))
                    at_key_tile(&J, bh, kt, J.shared + (size_t)bh * J.ql.total, scratch, NULL, NULL,
                                false);
            }
        }
        if (dq || a->dbias) {
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < BH * nqt; it++) {
                const int64_t qt = causal ? nqt - 1 - it / BH : it / BH, bh = it % BH;
                at_bwd_query_tile(&J, bh, qt, scratch);
            }
        }
    }
}

/* ---- reference twin: the probabilities materialised ------------------------------------------ */

static void at_softmax_row(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    if (mx == -INFINITY) { /* no visible key: a row of zeros, not NaN */
        for (int64_t j = 0; j < n; j++) x[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += (x[j] = expf(x[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) x[j] *= inv;
}

void mg_attn_forward_ref(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                         float *o, float *P) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, H = a->H, BH = a->B * a->H;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        float *p = P + bh * Tq * Tk;
        mg_sgemm(false, true, Tq, Tk, D, a->scale, q + bh * Tq * D, D, k + bh * at_kv_stride(a), D,
                 0.0f, p, Tk);
        for (int64_t i = 0; i < Tq; i++) {
            float *row = p + i * Tk;
            const int64_t visible = at_nvis(a, a->q_pos0 + i, 0, Tk);
            if (a->bias && visible > 0) a->bias(a->bias_user, bh % H, a->q_pos0 + i, 0, visible, row);
            if (a->bias_data) {
                const float *b = a->bias_data + (bh / H) * a->bias_bstride + (bh % H) * a->bias_hstride + i * Tk;
                for (int64_t j = 0; j < visible; j++) row[j] += b[j];
            }
            for (int64_t j = visible; j < Tk; j++) row[j] = -INFINITY;
            at_softmax_row(row, Tk);
        }
        mg_sgemm(false, false, Tq, D, Tk, 1.0f, p, Tk, v + bh * at_kv_stride(a), D, 0.0f, o + bh * Tq * D,
                 D);
    }
}

size_t mg_attn_backward_ref_workspace(const mg_attn_desc *a) {
    return (size_t)at_threads() * (size_t)(a->Tq * a->Tk) * sizeof(float) + AT_WS_SLACK;
}

void mg_attn_backward_ref(const mg_attn_desc *a, const float *q, const float *k, const float *v,
                          const float *P, const float *dO, float *dq, float *dk, float *dv,
                          void *ws, size_t ws_bytes) {
    if (a->grads_fresh) at_zero_grads(a, dq, dk, dv, 0); /* the products below add onto them */
    if (!at_kv_packed(a, "mg_attn_backward_ref")) return;
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, BH = a->B * a->H;
    const size_t per = (size_t)(Tq * Tk), given = ws_bytes;
    size_t skip;
    float *scratch = at_ws_start(ws, &ws_bytes, &skip);
    int nt = at_threads();
    while (nt > 1 && (size_t)nt * per * sizeof(float) > ws_bytes) nt--;
    if (per * sizeof(float) > ws_bytes || !ws) {
        mg_log(MG_LOG_ERROR, "mg_attn_backward_ref: workspace of %zu bytes is too small (needs %zu)",
               given, per * sizeof(float) + skip);
        return;
    }
    MG_PAR_FOR_NT(nt, (dynamic, 1), bh, BH, {
        const float *p = P + bh * Tq * Tk, *go = dO + bh * Tq * D;
        const float *qs = q + bh * Tq * D, *ks = k + bh * Tk * D, *vs = v + bh * Tk * D;
        if (dv) mg_sgemm(true, false, Tk, D, Tq, 1.0f, p, Tk, go, D, 1.0f, dv + bh * Tk * D, D);
        if (!dq && !dk && !a->dbias) continue;
        float *ds = scratch + (size_t)at_tid() * per;
        mg_sgemm(false, true, Tq, Tk, D, 1.0f, go, D, vs, D, 0.0f, ds, Tk); /* dP */
        for (int64_t i = 0; i < Tq; i++) {
            float *r = ds + i * Tk;
            const float *pr = p + i * Tk;
            float dot = 0.0f;
            for (int64_t j = 0; j < Tk; j++) dot += r[j] * pr[j];
            for (int64_t j = 0; j < Tk; j++) r[j] = pr[j] * (r[j] - dot);
            if (a->dbias)
                for (int64_t j = 0; j < Tk; j++) a->dbias[(bh * Tq + i) * Tk + j] += r[j];
        }
        if (dq)
            mg_sgemm(false, false, Tq, D, Tk, a->scale, ds, Tk, ks, D, 1.0f, dq + bh * Tq * D, D);
        if (dk)
            mg_sgemm(true, false, Tk, D, Tq, a->scale, ds, Tk, qs, D, 1.0f, dk + bh * Tk * D, D);
    });
}

/* ---- which one mg_attention uses -------------------------------------------------------------- */

static atomic_int at_impl = MG_ATTN_FUSED;

void mg_attn_set_impl(mg_attn_impl impl) {
    atomic_store_explicit(&at_impl,
                          impl == MG_ATTN_REFERENCE || impl == MG_ATTN_BF16_PRODUCTS ? impl : MG_ATTN_FUSED,
                          memory_order_relaxed);
}

bool mg_attn_bf16_fused(void) {
    return mgk_attention_bf16_usable();
}

mg_attn_impl mg_attn_get_impl(void) {
    return (mg_attn_impl)atomic_load_explicit(&at_impl, memory_order_relaxed);
}
