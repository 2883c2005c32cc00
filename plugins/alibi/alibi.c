/* alibi: ALiBi (Press et al., "Train Short, Test Long") as a plugin positional scheme, pos=alibi.
 *
 * Adds nothing to the embedding; biases the attention logit of query i and key j by
 *     -m_h * |i - j|,   m_h = 2^(-8 (h+1) / H),  h = 0 .. H-1
 * (causally only keys j <= i are visible, where this is -m_h (i - j); bidirectionally the bias is
 * symmetric, so a model with it is reflection-equivariant). Positions are absolute (mg_attention
 * passes the query's position and the first key's), so it works unchanged with a KV cache.
 * Keys: n_head (required; a model offers it). */
#include "minigrad/plugin.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int64_t n_head;
    float *slopes; /* [n_head], owned */
} alibi;

static mg_status alibi_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    alibi *s = mg_layer_state(self);
    s->n_head = mg_config_int(cfg, "n_head", 0, 1, 1 << 16);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->slopes = malloc((size_t)s->n_head * sizeof *s->slopes);
    if (!s->slopes) return mg_set_error(MG_ERR_NOMEM, "layer '%s' (alibi): out of memory", mg_layer_prefix(self));
    for (int64_t h = 0; h < s->n_head; h++)
        s->slopes[h] = (float)exp2(-8.0 * (double)(h + 1) / (double)s->n_head);
    mg_layer_set_shape(self, "(B,T,C)");
    return MG_OK;
}

static void alibi_destroy(mg_layer *self) {
    alibi *s = mg_layer_state(self);
    free(s->slopes);
}

static mg_tensor *alibi_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

static void alibi_add(const void *user, int64_t head, int64_t qpos, int64_t kpos0, int64_t n, float *logits) {
    const alibi *s = user;
    float m = s->slopes[head];
    for (int64_t j = 0; j < n; j++) {
        int64_t d = qpos - (kpos0 + j);
        logits[j] -= m * (float)(d < 0 ? -d : d);
    }
}

static void alibi_bias(mg_layer *self, mg_ctx *ctx, int64_t n_head, mg_attn_opts *opts) {
    alibi *s = mg_layer_state(self);
    if (n_head != s->n_head) {
        mg_ctx_fail(ctx, "layer '%s' (alibi): made for %lld heads, asked to bias attention with %lld",
                    mg_layer_prefix(self), (long long)s->n_head, (long long)n_head);
        return;
    }
    opts->bias = alibi_add;
    opts->bias_user = s;
}

static const mg_layer_vtable alibi_layer = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "alibi",
    .summary = "ALiBi: linear distance bias on attention logits, slopes 2^(-8(h+1)/H)",
    .pos_scheme = "alibi",
    .instance_size = sizeof(alibi),
    .create = alibi_create,
    .forward = alibi_forward,
    .destroy = alibi_destroy,
    .attn_bias = alibi_bias,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    return host->register_layer(host, &alibi_layer);
}
