/* self_attention: multi-head attention with a fused qkv projection (GPT-2's c_attn [dim, 3 dim],
 * q = columns 0..dim-1, k = dim..2dim-1, v = 2dim..3dim-1, head h = columns h*hd..h*hd+hd-1 of
 * each), then c_proj [dim, dim] and dropout. The positional scheme in mg_fwd.pos may rotate q and
 * k (rotate_qk) and bias the logits (attn_bias, attn_bias_tensor); this layer does not know which
 * scheme it is.
 * With a KV cache (mg_fwd.kv, incremental decoding) the new keys and values are appended to the
 * cache and the queries attend over everything cached, at q_pos0 = the cache length.
 * Keys: dim, n_head (required); causal (true); bias (true); dropout (0); scale of the logits
 * (0: 1/sqrt(head dim)); std (0.02); proj_std (std: GPT-2 scales it by 1/sqrt(2 n_layer)). */
#include "registry_internal.h"

#include <string.h>

typedef struct {
    int64_t dim, n_head;
    bool causal;
    float dropout, scale;
    mg_layer *c_attn, *c_proj;
} attn;

static mg_status attn_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    attn *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    s->n_head = mg_config_int(cfg, "n_head", 0, 1, INT32_MAX);
    s->causal = mg_config_bool(cfg, "causal", true);
    bool bias = mg_config_bool(cfg, "bias", true);
    s->dropout = (float)mg_config_float(cfg, "dropout", 0.0, 0.0, 0.999);
    s->scale = (float)mg_config_float(cfg, "scale", 0.0, 0.0, 1e6);
    double std = mg_config_float(cfg, "std", 0.02, 0.0, 1e6);
    double proj_std = mg_config_float(cfg, "proj_std", std, 0.0, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    if (s->dim % s->n_head)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (self_attention): dim %lld is not a multiple of n_head %lld",
                            mg_layer_prefix(self), (long long)s->dim, (long long)s->n_head);
    st = mg_layer_child_linear(self, "c_attn", s->dim, 3 * s->dim, bias, std, params, &s->c_attn);
    if (st == MG_OK) st = mg_layer_child_linear(self, "c_proj", s->dim, s->dim, bias, proj_std, params, &s->c_proj);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return st;
}

/* Writes x (B,H,T,D) into the cache rows [len, len+T) of each head and returns the whole cache
 * as a (B,H,cap,D) tensor over it: attention reads its first len+T rows in place (kv_len). */
static mg_tensor *cache_append(mg_ctx *ctx, const mg_tensor *x, float *cache, const mg_kv_cache *kv) {
    int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    for (int64_t bh = 0; bh < B * H; bh++)
        memcpy(cache + (bh * kv->cap + kv->len) * D, x->data + bh * T * D, (size_t)(T * D) * sizeof(float));
    return mg_tensor_wrap(ctx, MG_F32, 4, (int64_t[]){B, H, kv->cap, D}, cache);
}

/* ln: NULL, or a norm to apply to x first (taken into c_attn where both are built-ins). */
static mg_tensor *attn_run(mg_layer *self, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    attn *s = mg_layer_state(self);
    if (x->dtype != MG_F32 || x->ndim != 3 || x->shape[2] != s->dim) {
        mg_layer_fail(self, ctx, "x%s: need float32 (B,T,%lld)", MG_LSHAPE(x), (long long)s->dim);
        return mg_ctx_dummy(ctx);
    }
    int64_t B = x->shape[0], T = x->shape[1], H = s->n_head, C = s->dim, D = C / H;
    mg_tensor *qkv = ln ? mg_layer_norm_linear(ln, s->c_attn, ctx, x, args) : mg_layer_forward(s->c_attn, ctx, x, args);
    mg_tensor *q = mg_split_heads(ctx, qkv, H, 0, C), *k = mg_split_heads(ctx, qkv, H, C, C);
    mg_tensor *v = mg_split_heads(ctx, qkv, H, 2 * C, C);
    const mg_layer_vtable *pvt = args->pos ? mg_layer_vt(args->pos) : NULL;
    if (pvt && pvt->rotate_qk) {
        const mg_tensor *q0 = q, *k0 = k; /* a scheme from a plugin must give back q and k as they were shaped */
        pvt->rotate_qk(args->pos, ctx, &q, &k, args->pos0, args->pos0);
        if (!q || !k || (mg_ctx_ok(ctx) && (!mg_same_shape(q, q0) || !mg_same_shape(k, k0)))) {
            mg_layer_fail(self, ctx, "positional layer '%s' (%s, from %s): rotate_qk gave back q %s and k %s for %s",
                          mg_layer_prefix(args->pos), pvt->name, mg_layer_origin(pvt->name),
                          q ? MG_LSHAPE(q) : "NULL", k ? MG_LSHAPE(k) : "NULL", MG_LSHAPE(q0));
            return mg_ctx_dummy(ctx);
        }
    }
    mg_attn_opts o = {.causal = s->causal, .scale = s->scale};
    mg_kv_cache *kv = args->kv;
    if (kv) {
        if (kv->B != B || kv->H != H || kv->D != D || kv->len + T > kv->cap || kv->len != args->pos0) {
            mg_layer_fail(self, ctx,
                          "KV cache (B %lld, H %lld, D %lld, %lld of %lld filled) cannot take x%s at pos0 %lld "
                          "(needs B %lld, H %lld, D %lld, pos0 == filled)",
                          (long long)kv->B, (long long)kv->H, (long long)kv->D, (long long)kv->len, (long long)kv->cap,
                          MG_LSHAPE(x), (long long)args->pos0, (long long)B, (long long)H, (long long)D);
            return mg_ctx_dummy(ctx);
        }
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
        k = cache_append(ctx, k, kv->k, kv);
        v = cache_append(ctx, v, kv->v, kv);
        o.q_pos0 = kv->len;
        kv->len += T;
        o.kv_len = kv->len;
    }
    if (pvt && pvt->attn_bias) pvt->attn_bias(args->pos, ctx, H, &o);
    if (pvt && pvt->attn_bias_tensor && mg_ctx_ok(ctx)) {
        const int64_t Tk = o.kv_len ? o.kv_len : T;
        mg_tensor *b = pvt->attn_bias_tensor(args->pos, ctx, H, T, Tk, &o);
        if (mg_ctx_ok(ctx) && b &&
            !(b->dtype == MG_F32 && (b->ndim == 3 || (b->ndim == 4 && b->shape[0] == 1)) &&
              b->shape[b->ndim - 3] == H && b->shape[b->ndim - 2] == T && b->shape[b->ndim - 1] == Tk)) {
            mg_layer_fail(self, ctx, "positional layer '%s' (%s, from %s): attn_bias_tensor gave back %s%s, "
                          "need float32 (%lld,%lld,%lld) or (1,%lld,%lld,%lld)",
                          mg_layer_prefix(args->pos), pvt->name, mg_layer_origin(pvt->name),
                          b->dtype == MG_F32 ? "" : "int32 ", MG_LSHAPE(b), (long long)H, (long long)T,
                          (long long)Tk, (long long)H, (long long)T, (long long)Tk);
            return mg_ctx_dummy(ctx);
        }
        o.bias_tensor = b;
    }
    /* in bf16 the merged heads are kept only as c_proj's bf16 copy where c_proj is the built-in */
    mg_tensor *y = mg_layer_merge_heads_linear(s->c_proj, ctx, mg_attention(ctx, q, k, v, &o), args);
    return mg_layer_dropout(self, ctx, y, s->dropout, args);
}

static mg_tensor *attn_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    return attn_run(self, NULL, ctx, x, args);
}

mg_tensor *mg_self_attention_normed(mg_layer *self, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    return attn_run(self, ln, ctx, x, args);
}

const mg_layer_vtable mg_layer_self_attention = {
    MG_LAYER_VT_HEADER,
    .name = "self_attention",
    .summary = "multi-head self-attention, fused qkv (c_attn) and output projection (c_proj)",
    .instance_size = sizeof(attn),
    .create = attn_create,
    .forward = attn_forward,
};
