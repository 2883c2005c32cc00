/* embedding: rows of a [vocab, dim] table gathered at int32 ids, times `scale` (1; the posenc
 * classifier uses sqrt(dim)). Keys: vocab, dim (required); scale (1); init normal|uniform
 * (normal), std (0.02), bound (0.1). The weight is not decayed. */
#include "registry_internal.h"

typedef struct {
    int64_t vocab, dim;
    float scale;
    mg_tensor *w;
} embedding;

static mg_status embedding_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    embedding *s = mg_layer_state(self);
    s->vocab = mg_config_int(cfg, "vocab", 0, 1, INT32_MAX);
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    s->scale = (float)mg_config_float(cfg, "scale", 1.0, -1e6, 1e6);
    mg_init init = mg_layer_init_from(cfg, "normal", 0.02, 0.1);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->w = mg_layer_param(self, params, "weight", 2, (int64_t[]){s->vocab, s->dim}, init, MG_NO_DECAY);
    if (!s->w) return MG_ERR_INVALID;
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
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
