/* embedding: rows of a [vocab, dim] table gathered at int32 ids, times `scale` (1; the posenc
 * classifier uses sqrt(dim)). Keys: vocab, dim (required); scale (1); init normal|uniform
 * (normal), std (0.02), bound (0.1); frozen (false). The weight is not decayed. */
#include "registry_internal.h"
#include "minigrad/nn.h"

typedef struct {
    int64_t vocab, dim;
    float scale;
    mg_tensor *w;
} embedding;

static mg_status embedding_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_embedding_cfg *cfg = cfgp;
    embedding *s = mg_layer_state(self);
    if (cfg->vocab < 1 || cfg->vocab > INT32_MAX || cfg->dim < 1 || cfg->dim > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (embedding): vocab = %lld and dim = %lld must be in [1, %d]",
                            mg_layer_prefix(self), (long long)cfg->vocab, (long long)cfg->dim, INT32_MAX);
    if (!isfinite(cfg->scale))
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (embedding): scale %g is not finite", mg_layer_prefix(self),
                            (double)cfg->scale);
    s->vocab = cfg->vocab, s->dim = cfg->dim;
    s->scale = cfg->scale != 0.0f ? cfg->scale : 1.0f;
    mg_init init = cfg->init ? *cfg->init : mg_init_normal(0.0f, 0.02f);
    s->w = mg_layer_param(self, params, "weight", 2, (int64_t[]){s->vocab, s->dim}, init,
                          MG_NO_DECAY | (cfg->frozen ? MG_FROZEN : 0u));
    if (!s->w) return MG_ERR_INVALID;
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_status embedding_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_embedding_cfg c = {0};
    c.vocab = mg_config_int(cfg, "vocab", 0, 1, INT32_MAX);
    c.dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    c.scale = (float)mg_config_float(cfg, "scale", 1.0, -1e6, 1e6);
    mg_init init = mg_layer_init_from(cfg, "normal", 0.02, 0.1);
    c.init = &init;
    c.frozen = mg_config_bool(cfg, "frozen", false);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return embedding_init(self, &c, params);
}

static mg_tensor *embedding_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *ids, const mg_fwd *args) {
    (void)args;
    embedding *s = mg_layer_state(self);
    if (ids->dtype != MG_I32) {
        mg_layer_fail(self, ctx, "ids%s must be int32 token ids", MG_LSHAPE(ids));
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *y = mg_embedding(ctx, s->w, ids);
    return s->scale != 1.0f ? mg_scale(ctx, y, s->scale) : y;
}

const mg_layer_vtable mg_layer_embedding = {
    MG_LAYER_VT_HEADER,
    .name = "embedding",
    .summary = "token embedding: scale * W[ids], W [vocab, dim]",
    .instance_size = sizeof(embedding),
    .create = embedding_create,
    .forward = embedding_forward,
};

mg_layer *mg_embedding_new(mg_params *params, const char *name, const mg_embedding_cfg *cfg) {
    return mg_layer_new(&mg_layer_embedding, name, params, embedding_init, cfg);
}
