/* Scaled dot-product attention, the straightforward version (the probabilities are kept):
 *   S = scale * Q K^T + bias,  masked (causal: key j hidden from query i when j > q_pos0 + i)
 *   P = softmax_rows(S),  O = P V
 * Backward:
 *   dP = dO V^T,  dS = P * (dP - rowsum(dP * P))
 *   dQ += scale * dS K,  dK += scale * dS^T Q,  dV += P^T dO
 * Work is split over (batch, head) pairs: each writes only its own slices, so there are no races
 * and the result does not depend on the thread count. */
#include "internal.h"
#include "minigrad/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void mg_softmax_row(const float *x, float *y, int64_t n);

typedef struct {
    int64_t B, H, Tq, Tk, D;
    float scale;
    mg_attn_opts o;
} attn_info;

static void attention_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const attn_info *a = n->saved[1];
    const float *P = n->saved[0], *dO = n->out->grad;
    int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, BH = a->B * a->H;
    float *dq = mg_requires_grad(q) ? mg_grad(ctx, q) : NULL;
    float *dk = mg_requires_grad(k) ? mg_grad(ctx, k) : NULL;
    float *dv = mg_requires_grad(v) ? mg_grad(ctx, v) : NULL;
    int nt = mg_get_num_threads();
    float *scratch = mg_ctx_alloc(ctx, (size_t)(nt * Tq * Tk) * 4, "mg_attention backward scratch");
    if (!mg_ctx_ok(ctx)) return;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        const float *p = P + bh * Tq * Tk, *go = dO + bh * Tq * D;
        const float *qs = q->data + bh * Tq * D, *ks = k->data + bh * Tk * D, *vs = v->data + bh * Tk * D;
        if (dv) mg_sgemm(true, false, Tk, D, Tq, 1.0f, p, Tk, go, D, 1.0f, dv + bh * Tk * D, D);
        if (!dq && !dk) continue;
        float *ds = scratch + (int64_t)tid * Tq * Tk;
        mg_sgemm(false, true, Tq, Tk, D, 1.0f, go, D, vs, D, 0.0f, ds, Tk); /* dP */
        for (int64_t i = 0; i < Tq; i++) {
            float *r = ds + i * Tk;
            const float *pr = p + i * Tk;
            float dot = 0.0f;
            for (int64_t j = 0; j < Tk; j++) dot += r[j] * pr[j];
            for (int64_t j = 0; j < Tk; j++) r[j] = pr[j] * (r[j] - dot);
        }
        if (dq) mg_sgemm(false, false, Tq, D, Tk, a->scale, ds, Tk, ks, D, 1.0f, dq + bh * Tq * D, D);
        if (dk) mg_sgemm(true, false, Tk, D, Tq, a->scale, ds, Tk, qs, D, 1.0f, dk + bh * Tk * D, D);
    }
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
    attn_info *a = mg_ctx_alloc(ctx, sizeof *a, "mg_attention info");
    if (!a) return mg_ctx_dummy(ctx);
    a->B = q->shape[0], a->H = q->shape[1], a->Tq = q->shape[2], a->Tk = k->shape[2], a->D = q->shape[3];
    a->o = opts ? *opts : (mg_attn_opts){0};
    a->scale = a->o.scale != 0.0f ? a->o.scale : 1.0f / sqrtf((float)a->D);
    if (a->o.causal && a->o.q_pos0 + a->Tq > a->Tk) {
        mg_ctx_fail(ctx, "%s: causal with q_pos0 %lld and %lld queries needs at least %lld keys, k has %lld", op,
                    (long long)a->o.q_pos0, (long long)a->Tq, (long long)(a->o.q_pos0 + a->Tq), (long long)a->Tk);
        return mg_ctx_dummy(ctx);
    }
    int64_t Tq = a->Tq, Tk = a->Tk, D = a->D, H = a->H, BH = a->B * a->H;
    mg_tensor *out = mg_op_output(ctx, op, 4, q->shape);
    float *P = mg_ctx_alloc(ctx, (size_t)(BH * Tq * Tk) * 4, "mg_attention probabilities");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        float *p = P + bh * Tq * Tk;
        mg_sgemm(false, true, Tq, Tk, D, a->scale, q->data + bh * Tq * D, D, k->data + bh * Tk * D, D, 0.0f, p, Tk);
        for (int64_t i = 0; i < Tq; i++) {
            float *row = p + i * Tk;
            int64_t visible = a->o.causal ? a->o.q_pos0 + i + 1 : Tk;
            if (a->o.bias) a->o.bias(a->o.bias_user, bh % H, a->o.q_pos0 + i, 0, visible, row);
            for (int64_t j = visible; j < Tk; j++) row[j] = -INFINITY;
            mg_softmax_row(row, row, Tk);
        }
        mg_sgemm(false, false, Tq, D, Tk, 1.0f, p, Tk, v->data + bh * Tk * D, D, 0.0f, out->data + bh * Tq * D, D);
    }
    mg_node *n = mg_op_record(ctx, &mg_op_def_attention, out, 3, (mg_tensor *[]){q, k, v});
    if (n) n->saved[0] = P, n->saved[1] = a;
    return out;
}
