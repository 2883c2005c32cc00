/* Scaled dot-product attention:
 *   S = scale * Q K^T + bias (callback) + bias tensor,  masked (causal: key j hidden from query i when j > q_pos0 + i)
 *   P = softmax_rows(S),  O = P V
 * The kernels live in core/kernels/attention.c: the fused one (default) keeps only O and one
 * log-sum-exp per query row for backward, which recomputes P tile by tile; the reference twin
 * (mg_attn_set_impl(MG_ATTN_REFERENCE)) keeps all of P. A node remembers which one ran its forward.
 * Kernel scratch comes from the step arena.
 * The bias tensor's gradient is dL/dS. The kernels write it per (batch, head) into a (B,H,Tq,Tk)
 * buffer (the gradient itself when the bias has that shape), each element from one work item;
 * broadcast dims are then summed here, batch-major, in a fixed order: bit-identical for any thread
 * count. */
#include "internal.h"
#include "minigrad/kernels.h"
#include "minigrad/testing.h" /* the reference twin and the switch between the two */

#include <string.h>

typedef struct attn_saved {
    mg_attn_desc desc;
    mg_attn_impl impl;
    float *lse; /* fused: (B,H,Tq) */
    float *p;   /* reference: (B,H,Tq,Tk) */
    int64_t bias_b, bias_h; /* the bias tensor's batch and head sizes (1 where broadcast) */
} attn_saved;

/* dS (B,H,Tq,Tk) summed into the bias gradient (bB,bH,Tq,Tk): b-major, then h, in order. */
static void attention_reduce_dbias(const mg_attn_desc *a, const float *ds, int64_t bB, int64_t bH, float *g) {
    const int64_t TT = a->Tq * a->Tk;
#pragma omp parallel for schedule(static) if (bB * bH * TT > 65536)
    for (int64_t x = 0; x < bB * bH * TT; x++) {
        const int64_t bb = x / (bH * TT), hh = x / TT % bH, e = x % TT;
        float acc = 0.0f;
        for (int64_t b = bB == 1 ? 0 : bb; b < (bB == 1 ? a->B : bb + 1); b++)
            for (int64_t h = bH == 1 ? 0 : hh; h < (bH == 1 ? a->H : hh + 1); h++)
                acc += ds[(b * a->H + h) * TT + e];
        g[x] += acc;
    }
}

static void attention_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const attn_saved *s = n->saved[0];
    float *dq = mg_requires_grad(q) ? mg_grad(ctx, q) : NULL;
    float *dk = mg_requires_grad(k) ? mg_grad(ctx, k) : NULL;
    float *dv = mg_requires_grad(v) ? mg_grad(ctx, v) : NULL;
    mg_tensor *bias = n->n_in > 3 ? n->in[3] : NULL;
    float *db = bias && mg_requires_grad(bias) ? mg_grad(ctx, bias) : NULL;
    if (!mg_ctx_ok(ctx)) return;
    mg_attn_desc d = s->desc;
    const bool full = s->bias_b == d.B && s->bias_h == d.H;
    if (db) {
        d.dbias = full ? db : mg_ctx_alloc(ctx, (size_t)(d.B * d.H * d.Tq * d.Tk) * 4, "mg_attention bias gradient scratch");
        if (!d.dbias) return;
        if (!full) memset(d.dbias, 0, (size_t)(d.B * d.H * d.Tq * d.Tk) * 4);
    }
    if (s->impl == MG_ATTN_REFERENCE) {
        const size_t bytes = mg_attn_backward_ref_workspace(&d);
        void *ws = mg_ctx_alloc(ctx, bytes, "mg_attention (reference) backward scratch");
        if (!ws) return;
        mg_attn_backward_ref(&d, q->data, k->data, v->data, s->p, n->out->grad, dq, dk, dv, ws, bytes);
    } else {
        const size_t bytes = mg_attn_backward_workspace(&d);
        void *ws = mg_ctx_alloc(ctx, bytes, "mg_attention backward scratch");
        if (!ws) return;
        mg_attn_backward(&d, q->data, k->data, v->data, n->out->data, s->lse, n->out->grad, dq, dk, dv,
                         ws, bytes);
    }
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
    attn_saved *s = keep ? mg_ctx_alloc(ctx, sizeof *s, "mg_attention saved state") : NULL;
    if (s) *s = (attn_saved){.desc = a, .impl = mg_attn_get_impl(), .bias_b = bias_b, .bias_h = bias_h};
    const int64_t BH = a.B * a.H;
    if ((s ? s->impl : mg_attn_get_impl()) == MG_ATTN_REFERENCE) {
        float *p = mg_ctx_alloc(ctx, (size_t)(BH * a.Tq * a.Tk) * 4, "mg_attention (reference) probabilities");
        if (!p) return mg_ctx_dummy(ctx);
        mg_attn_forward_ref(&a, q->data, k->data, v->data, out->data, p);
        if (s) s->p = p;
    } else {
        const size_t bytes = mg_attn_forward_workspace(&a);
        float *lse = keep ? mg_ctx_alloc(ctx, (size_t)(BH * a.Tq) * 4, "mg_attention log-sum-exp") : NULL;
        void *ws = mg_ctx_alloc(ctx, bytes, "mg_attention scratch");
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
        mg_attn_forward(&a, q->data, k->data, v->data, out->data, lse, ws, bytes);
        if (s) s->lse = lse;
    }
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_node *n = mg_op_record(ctx, &mg_op_def_attention, out, bias ? 4 : 3, (mg_tensor *[]){q, k, v, bias});
    if (n) n->saved[0] = s;
    return out;
}
