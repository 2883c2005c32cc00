/* logbias: a positional scheme that joins the posenc comparison as a plugin, with no change to
 * the program (the README shows how; tests/test_posenc.c does it). It biases the attention logit
 * of query i and key j by a logarithm of their distance, a fixed-parameter form of KERPLE's
 * logarithmic kernel:
 *     bias[h, i, j] = -m_h * log(1 + |i - j|),   m_h = 2^(-h)  (1, 1/2, 1/4, ... for h = 0, 1, ...)
 * Like ALiBi it adds nothing to the embedding, works at any length and, bidirectionally, is
 * symmetric in i and j. Keys: n_head (required; a model offers it). */
#include "minigrad/plugin.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int64_t n_head;
    float *slopes; /* [n_head], owned */
} logbias;

static mg_status logbias_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    logbias *s = mg_layer_state(self);
    s->n_head = mg_config_int(cfg, "n_head", 0, 1, 1 << 16);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->slopes = malloc((size_t)s->n_head * sizeof *s->slopes);
    if (!s->slopes)
        return mg_set_error(MG_ERR_NOMEM, "layer '%s' (logbias): out of memory",
                            mg_layer_prefix(self));
    for (int64_t h = 0; h < s->n_head; h++) s->slopes[h] = (float)exp2(-(double)h);
    mg_layer_set_shape(self, "(B,T,C)");
    return MG_OK;
}

static void logbias_destroy(mg_layer *self) {
    logbias *s = mg_layer_state(self);
    free(s->slopes);
}

static mg_tensor *logbias_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

static void logbias_add(const void *user, int64_t head, int64_t qpos, int64_t kpos0, int64_t n,
                        float *logits) {
    const logbias *s = user;
    for (int64_t j = 0; j < n; j++) {
        int64_t d = qpos - (kpos0 + j);
        logits[j] -= s->slopes[head] * (float)log1p((double)(d < 0 ? -d : d));
    }
}

static void logbias_bias(mg_layer *self, mg_ctx *ctx, int64_t n_head, mg_attn_opts *opts) {
    logbias *s = mg_layer_state(self);
    if (n_head != s->n_head) {
        mg_ctx_fail(ctx,
                    "layer '%s' (logbias): made for %lld heads, asked to bias attention with %lld",
                    mg_layer_prefix(self), (long long)s->n_head, (long long)n_head);
        return;
    }
    opts->bias = logbias_add;
    opts->bias_user = s;
}

static const mg_layer_vtable logbias_layer = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "logbias",
    .summary = "logarithmic distance bias on attention logits, slopes 2^-h",
    .pos_scheme = "logbias",
    .instance_size = sizeof(logbias),
    .create = logbias_create,
    .forward = logbias_forward,
    .destroy = logbias_destroy,
    .attn_bias = logbias_bias,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    return host->register_layer(host, &logbias_layer);
}
