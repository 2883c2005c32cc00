/* Scaled dot-product attention:
 *   S = scale * Q K^T + bias (callback) + bias tensor,  masked (causal: key j hidden from query i when j > q_pos0 + i)
 *   P = softmax_rows(S),  O = P V
 * The kernels live in core/kernels/attention.c: the fused one (default) keeps only O and one
 * log-sum-exp per query row for backward, which recomputes P tile by tile; the reference twin
 * (mg_attn_set_impl(MG_ATTN_REFERENCE)) keeps all of P. A node remembers which one ran its forward.
 * Kernel workspaces come from the context's scratch (mg_ctx_scratch_alloc): they die with the call.
 * The bias tensor's gradient is dL/dS. The kernels write it per (batch, head) into a (B,H,Tq,Tk)
 * buffer (the gradient itself when the bias has that shape), each element from one work item;
 * broadcast dims are then summed here, batch-major, in a fixed order: bit-identical for any thread
 * count. */
#include "internal.h"
#include "minigrad/kernels.h"
#include "minigrad/testing.h" /* the reference twin and the switch between the two */

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct attn_saved {
    mg_attn_desc desc;
    mg_attn_impl impl;
    float *lse; /* fused: (B,H,Tq) */
    float *p;   /* reference and bf16: (B,H,Tq,Tk) */
    int64_t bias_b, bias_h; /* the bias tensor's batch and head sizes (1 where broadcast) */
    const mg_bf16 *qb, *kb, *vb; /* bf16: the operands rounded once in forward */
} attn_saved;

/* ---- bf16 products (mg_attn_set_impl(MG_ATTN_BF16_PRODUCTS), testing.h) ------------------------
 * Selected by that switch, with mg_ctx_set_precision(ctx, MG_PRECISION_BF16) and packed keys (not
 * on a KV cache), the six products of forward and backward run on mg_bgemm, one (batch, head) at a
 * time:
 *   S = bf16(Q) bf16(K)^T,  O = bf16(P) bf16(V),
 *   dV += bf16(P)^T bf16(dO),  dP = bf16(dO) bf16(V)^T,  dQ += bf16(dS') bf16(K),  dK += bf16(dS')^T bf16(Q)
 * with dS' = scale * P * (dP - rowsum(dP * P)). Everything between the products is float32 and
 * plain scalar code in a fixed order: logits = scale * S, the bias callback, the bias tensor, the
 * mask, a softmax per row (max, expf, sum left to right, times 1/sum). The probabilities are kept
 * for backward, (B,H,Tq,Tk) floats, as in the reference twin. Each (batch, head) writes only its
 * own rows and mg_bgemm's sums depend on the shapes only, so results are bit-identical for any
 * thread count. */

static int attn_bf16_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int attn_bf16_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Row i of head bh: raw products -> probabilities, in place. */
static void attn_bf16_softmax_row(const mg_attn_desc *a, int64_t bh, int64_t i, float *row) {
    const int64_t Tk = a->Tk, H = a->H;
    const int64_t visible = a->causal ? (a->q_pos0 + i + 1 < Tk ? a->q_pos0 + i + 1 : Tk) : Tk;
    for (int64_t j = 0; j < Tk; j++) row[j] *= a->scale;
    if (a->bias && visible > 0) a->bias(a->bias_user, bh % H, a->q_pos0 + i, 0, visible, row);
    if (a->bias_data) {
        const float *b = a->bias_data + (bh / H) * a->bias_bstride + (bh % H) * a->bias_hstride + i * Tk;
        for (int64_t j = 0; j < visible; j++) row[j] += b[j];
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < visible; j++) mx = row[j] > mx ? row[j] : mx;
    if (mx == -INFINITY) {
        memset(row, 0, (size_t)Tk * sizeof(float));
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < visible; j++) sum += (row[j] = expf(row[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < visible; j++) row[j] *= inv;
    for (int64_t j = visible; j < Tk; j++) row[j] = 0.0f;
}

static bool attn_bf16_forward(mg_ctx *ctx, const mg_attn_desc *a, const mg_tensor *q, const mg_tensor *k,
                              const mg_tensor *v, float *o, attn_saved *s) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, BH = a->B * a->H;
    const mg_bf16 *qb = mg_bf16_copy(ctx, q->data, q->numel, "mg_attention: q in bf16");
    const mg_bf16 *kb = mg_bf16_copy(ctx, k->data, k->numel, "mg_attention: k in bf16");
    const mg_bf16 *vb = mg_bf16_copy(ctx, v->data, v->numel, "mg_attention: v in bf16");
    const int nt = attn_bf16_threads();
    float *P = s ? mg_ctx_alloc(ctx, (size_t)(BH * Tq * Tk) * 4, "mg_attention (bf16) probabilities")
                 : mg_ctx_alloc(ctx, (size_t)nt * (size_t)(Tq * Tk) * 4, "mg_attention (bf16) scratch");
    mg_bf16 *pb = mg_ctx_alloc(ctx, (size_t)nt * (size_t)(Tq * Tk) * 2, "mg_attention (bf16) probabilities in bf16");
    if (!mg_ctx_ok(ctx)) return false;
    MG_PAR_FOR_NT(nt > 1 && BH > 1 ? nt : 1, (dynamic, 1), bh, BH, {
        const int tid = attn_bf16_tid();
        float *p = s ? P + bh * Tq * Tk : P + (size_t)tid * (size_t)(Tq * Tk);
        mg_bf16 *pbh = pb + (size_t)tid * (size_t)(Tq * Tk);
        mg_bgemm(false, true, Tq, Tk, D, qb + bh * Tq * D, D, kb + bh * Tk * D, D, false, p, Tk);
        for (int64_t i = 0; i < Tq; i++) attn_bf16_softmax_row(a, bh, i, p + i * Tk);
        mg_f32_to_bf16(Tq * Tk, p, pbh);
        mg_bgemm(false, false, Tq, D, Tk, pbh, Tk, vb + bh * Tk * D, D, false, o + bh * Tq * D, D);
    });
    if (s) s->p = P, s->qb = qb, s->kb = kb, s->vb = vb;
    return true;
}

static void attn_bf16_backward(mg_ctx *ctx, const mg_attn_desc *a, const attn_saved *s, const float *dO,
                               float *dq, float *dk, float *dv) {
    const int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, BH = a->B * a->H;
    const int nt = attn_bf16_threads();
    const mg_bf16 *dob = mg_bf16_scratch(ctx, dO, BH * Tq * D, "mg_attention backward: dO in bf16");
    float *ds = mg_ctx_scratch_alloc(ctx, (size_t)nt * (size_t)(Tq * Tk) * 4, "mg_attention (bf16) backward scratch");
    mg_bf16 *tb =
        mg_ctx_scratch_alloc(ctx, (size_t)nt * (size_t)(Tq * Tk) * 2, "mg_attention (bf16) backward bf16 scratch");
    if (!mg_ctx_ok(ctx)) return;
    MG_PAR_FOR_NT(nt > 1 && BH > 1 ? nt : 1, (dynamic, 1), bh, BH, {
        const int tid = attn_bf16_tid();
        const float *p = s->p + bh * Tq * Tk;
        float *r = ds + (size_t)tid * (size_t)(Tq * Tk);
        mg_bf16 *t = tb + (size_t)tid * (size_t)(Tq * Tk);
        const mg_bf16 *go = dob + bh * Tq * D, *qs = s->qb + bh * Tq * D, *ks = s->kb + bh * Tk * D,
                      *vs = s->vb + bh * Tk * D;
        if (dv) {
            mg_f32_to_bf16(Tq * Tk, p, t);
            mg_bgemm(true, false, Tk, D, Tq, t, Tk, go, D, true, dv + bh * Tk * D, D);
        }
        if (!dq && !dk && !a->dbias) continue;
        mg_bgemm(false, true, Tq, Tk, D, go, D, vs, D, false, r, Tk); /* dP */
        for (int64_t i = 0; i < Tq; i++) {
            float *ri = r + i * Tk;
            const float *pr = p + i * Tk;
            float dot = 0.0f;
            for (int64_t j = 0; j < Tk; j++) dot += ri[j] * pr[j];
            for (int64_t j = 0; j < Tk; j++) ri[j] = pr[j] * (ri[j] - dot);
            if (a->dbias)
                for (int64_t j = 0; j < Tk; j++) a->dbias[(bh * Tq + i) * Tk + j] += ri[j];
            for (int64_t j = 0; j < Tk; j++) ri[j] *= a->scale;
        }
        if (!dq && !dk) continue;
        mg_f32_to_bf16(Tq * Tk, r, t);
        if (dq) mg_bgemm(false, false, Tq, D, Tk, t, Tk, ks, D, true, dq + bh * Tq * D, D);
        if (dk) mg_bgemm(true, false, Tk, D, Tq, t, Tk, qs, D, true, dk + bh * Tk * D, D);
    });
}

/* dS (B,H,Tq,Tk) summed into the bias gradient (bB,bH,Tq,Tk): b-major, then h, in order. */
static void attention_reduce_dbias(const mg_attn_desc *a, const float *ds, int64_t bB, int64_t bH, float *g) {
    const int64_t TT = a->Tq * a->Tk;
    MG_PAR_FOR(bB * bH * TT > 65536, x, bB * bH * TT, {
        const int64_t bb = x / (bH * TT), hh = x / TT % bH, e = x % TT;
        float acc = 0.0f;
        for (int64_t b = bB == 1 ? 0 : bb; b < (bB == 1 ? a->B : bb + 1); b++)
            for (int64_t h = bH == 1 ? 0 : hh; h < (bH == 1 ? a->H : hh + 1); h++)
                acc += ds[(b * a->H + h) * TT + e];
        g[x] += acc;
    });
}

/* The gradient buffers this backward made (fresh), zeroed: what mg_grad would have given. */
static void zero_new_grads(float *const g[3], const bool fresh[3], mg_tensor *const in[3]) {
    for (int i = 0; i < 3; i++)
        if (g[i] && fresh[i]) memset(g[i], 0, (size_t)in[i]->numel * sizeof(float));
}

static void attention_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const attn_saved *s = n->saved[0];
    /* Gradient buffers made here are written by the kernels (grads_fresh), not zeroed and added
     * to, when all three are new (q, k and v may be one tensor) and the fused kernels or the
     * reference run; otherwise, and on every early return, the new ones are zeroed. */
    bool fresh[3] = {false, false, false};
    mg_tensor *const in[3] = {q, k, v};
    float *g[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if (mg_requires_grad(in[i])) g[i] = mg_grad_for_write(ctx, in[i], &fresh[i]);
    float *dq = g[0], *dk = g[1], *dv = g[2];
    mg_tensor *bias = n->n_in > 3 ? n->in[3] : NULL;
    float *db = bias && mg_requires_grad(bias) ? mg_grad(ctx, bias) : NULL;
    mg_attn_desc d = s->desc;
    const bool full = s->bias_b == d.B && s->bias_h == d.H;
    if (mg_ctx_ok(ctx) && db) {
        d.dbias = full ? db : mg_ctx_alloc(ctx, (size_t)(d.B * d.H * d.Tq * d.Tk) * 4, "mg_attention bias gradient scratch");
        if (d.dbias && !full) memset(d.dbias, 0, (size_t)(d.B * d.H * d.Tq * d.Tk) * 4);
    }
    size_t bytes = 0;
    void *ws = NULL;
    if (mg_ctx_ok(ctx) && !s->qb) {
        const bool ref = s->impl == MG_ATTN_REFERENCE;
        bytes = ref ? mg_attn_backward_ref_workspace(&d) : mg_attn_backward_workspace(&d);
        ws = mg_ctx_scratch_alloc(ctx, bytes, ref ? "mg_attention (reference) backward scratch"
                                                  : "mg_attention backward scratch");
    }
    if (!mg_ctx_ok(ctx)) {
        zero_new_grads(g, fresh, in);
        return;
    }
    const bool mine[3] = {!g[0] || fresh[0], !g[1] || fresh[1], !g[2] || fresh[2]};
    d.grads_fresh = !s->qb && mine[0] && mine[1] && mine[2];
    if (!d.grads_fresh) zero_new_grads(g, fresh, in);
    if (s->qb)
        attn_bf16_backward(ctx, &d, s, n->out->grad, dq, dk, dv);
    else if (s->impl == MG_ATTN_REFERENCE)
        mg_attn_backward_ref(&d, q->data, k->data, v->data, s->p, n->out->grad, dq, dk, dv, ws, bytes);
    else
        mg_attn_backward(&d, q->data, k->data, v->data, n->out->data, s->lse, n->out->grad, dq, dk, dv,
                         ws, bytes);
    if (db && !full) attention_reduce_dbias(&d, d.dbias, s->bias_b, s->bias_h, db);
}

const mg_op_def mg_op_def_attention = {"mg_attention", attention_backward};

mg_tensor *mg_attention(mg_ctx *ctx, mg_tensor *q, mg_tensor *k, mg_tensor *v, const mg_attn_opts *opts) {
    MG_BAIL_IF_FAILED(ctx);
    const char *op = "mg_attention";
    if (!mg_expect_f32(ctx, op, "q", q) || !mg_expect_f32(ctx, op, "k", k) || !mg_expect_f32(ctx, op, "v", v))
        return mg_ctx_dummy(ctx);
    bool ok = q->ndim == 4 && mg_same_shape(k, v) && k->ndim == 4 && q->shape[0] == k->shape[0] &&
              q->shape[1] == k->shape[1] && q->shape[3] == k->shape[3];
    if (!ok) {
        mg_ctx_fail(ctx, "%s: q%s, k%s, v%s: need q (B,H,Tq,D) and k, v (B,H,Tk,D)", op, MG_SHAPE(q),
                    MG_SHAPE(k), MG_SHAPE(v));
        return mg_ctx_dummy(ctx);
    }
    const mg_attn_opts o = opts ? *opts : (mg_attn_opts){0};
    mg_attn_desc a = {
        .B = q->shape[0], .H = q->shape[1], .Tq = q->shape[2], .Tk = k->shape[2], .D = q->shape[3],
        .causal = o.causal, .q_pos0 = o.q_pos0, .bias = o.bias, .bias_user = o.bias_user,
    };
    a.scale = o.scale != 0.0f ? o.scale : 1.0f / sqrtf((float)a.D);
    mg_tensor *bias = o.bias_tensor;
    const bool keep = mg_ctx_grad_enabled(ctx) && (mg_requires_grad(q) || mg_requires_grad(k) || mg_requires_grad(v) ||
                                                   (bias && mg_requires_grad(bias)));
    if (o.kv_len) {
        if (o.kv_len < 0 || o.kv_len > k->shape[2]) {
            mg_ctx_fail(ctx, "%s: kv_len %lld is outside the cache k%s (1..%lld rows)", op, (long long)o.kv_len,
                        MG_SHAPE(k), (long long)k->shape[2]);
            return mg_ctx_dummy(ctx);
        }
        if (keep) {
            mg_ctx_fail(ctx, "%s: kv_len reads a KV cache in place, for inference; no gradient can flow "
                             "through it (disable gradients, or pass packed k and v)", op);
            return mg_ctx_dummy(ctx);
        }
        a.Tk = o.kv_len;
        a.kv_stride = k->shape[2] * a.D;
    }
    int64_t bias_b = 1, bias_h = 1;
    if (bias) {
        if (!mg_expect_f32(ctx, op, "bias_tensor", bias)) return mg_ctx_dummy(ctx);
        const int nd = bias->ndim;
        bias_h = nd >= 3 ? bias->shape[nd - 3] : 1;
        bias_b = nd == 4 ? bias->shape[0] : 1;
        if (nd < 2 || nd > 4 || bias->shape[nd - 2] != a.Tq || bias->shape[nd - 1] != a.Tk ||
            (bias_h != 1 && bias_h != a.H) || (bias_b != 1 && bias_b != a.B)) {
            mg_ctx_fail(ctx, "%s: bias_tensor%s does not broadcast to the logits (B,H,Tq,Tk) = (%lld,%lld,%lld,%lld): "
                             "need (Tq,Tk), (H or 1,Tq,Tk) or (B or 1,H or 1,Tq,Tk)",
                        op, MG_SHAPE(bias), (long long)a.B, (long long)a.H, (long long)a.Tq, (long long)a.Tk);
            return mg_ctx_dummy(ctx);
        }
        a.bias_data = bias->data;
        a.bias_hstride = bias_h == 1 ? 0 : a.Tq * a.Tk;
        a.bias_bstride = bias_b == 1 ? 0 : bias_h * a.Tq * a.Tk;
    }
    if (o.q_pos0 < 0) {
        mg_ctx_fail(ctx, "%s: q_pos0 %lld is negative", op, (long long)o.q_pos0);
        return mg_ctx_dummy(ctx);
    }
    if (a.causal && a.q_pos0 + a.Tq > a.Tk) {
        mg_ctx_fail(ctx, "%s: causal with q_pos0 %lld and %lld queries needs at least %lld keys, k has %lld", op,
                    (long long)a.q_pos0, (long long)a.Tq, (long long)(a.q_pos0 + a.Tq), (long long)a.Tk);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *out = mg_op_output(ctx, op, 4, q->shape);
    if (!mg_ctx_ok(ctx)) return out;
    a.bf16 = mg_use_bf16(ctx); /* products in bf16 where the fused kernel has them */
    attn_saved *s = keep ? mg_ctx_alloc(ctx, sizeof *s, "mg_attention saved state") : NULL;
    if (s) *s = (attn_saved){.desc = a, .impl = mg_attn_get_impl(), .bias_b = bias_b, .bias_h = bias_h};
    const int64_t BH = a.B * a.H;
    if (mg_use_bf16(ctx) && !o.kv_len && mg_attn_get_impl() == MG_ATTN_BF16_PRODUCTS) {
        if (!attn_bf16_forward(ctx, &a, q, k, v, out->data, s)) return mg_ctx_dummy(ctx);
    } else if ((s ? s->impl : mg_attn_get_impl()) == MG_ATTN_REFERENCE) {
        float *p = mg_ctx_alloc(ctx, (size_t)(BH * a.Tq * a.Tk) * 4, "mg_attention (reference) probabilities");
        if (!p) return mg_ctx_dummy(ctx);
        mg_attn_forward_ref(&a, q->data, k->data, v->data, out->data, p);
        if (s) s->p = p;
    } else {
        const size_t bytes = mg_attn_forward_workspace(&a);
        float *lse = keep ? mg_ctx_alloc(ctx, (size_t)(BH * a.Tq) * 4, "mg_attention log-sum-exp") : NULL;
        const size_t mark = mg_ctx_scratch_mark(ctx);
        void *ws = mg_ctx_scratch_alloc(ctx, bytes, "mg_attention scratch");
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
        mg_attn_forward(&a, q->data, k->data, v->data, out->data, lse, ws, bytes);
        mg_ctx_scratch_release(ctx, mark);
        if (s) s->lse = lse;
    }
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_node *n = mg_op_record(ctx, &mg_op_def_attention, out, bias ? 4 : 3, (mg_tensor *[]){q, k, v, bias});
    if (n) n->saved[0] = s;
    return out;
}
