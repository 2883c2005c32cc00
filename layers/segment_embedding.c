/* segment_embedding: BERT's token-type embedding, a [n_segments, dim] table gathered at int32
 * segment ids (sentence A = 0, B = 1, ...), to be added to the token and position embeddings.
 * Keys: dim (required); n_segments (2); init normal|uniform (normal), std (0.02), bound (0.1). */
#include "registry_internal.h"

typedef struct {
    int64_t n, dim;
    mg_tensor *w;
} segment;

static mg_status segment_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    segment *s = mg_layer_state(self);
    s->n = mg_config_int(cfg, "n_segments", 2, 1, 1 << 20);
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    mg_init init = mg_layer_init_from(cfg, "normal", 0.02, 0.1);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->w = mg_layer_param(self, params, "weight", 2, (int64_t[]){s->n, s->dim}, init, MG_NO_DECAY);
    if (!s->w) return MG_ERR_INVALID;
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_tensor *segment_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *seg, const mg_fwd *args) {
    (void)args;
    segment *s = mg_layer_state(self);
    if (seg->dtype != MG_I32) {
        mg_layer_fail(self, ctx, "segment ids%s must be int32", MG_LSHAPE(seg));
        return mg_ctx_dummy(ctx);
    }
    return mg_embedding(ctx, s->w, seg);
}

const mg_layer_vtable mg_layer_segment_embedding = {
    MG_LAYER_VT_HEADER,
    .name = "segment_embedding",
    .summary = "segment (token type) embedding: W[segment ids], W [n_segments, dim]",
    .instance_size = sizeof(segment),
    .create = segment_create,
    .forward = segment_forward,
};
