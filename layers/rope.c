/* rope (pos=rope): rotary position embedding. Adds nothing to the embedding (forward is the
 * identity); attention calls rotate_qk, which rotates each head's q and k on interleaved pairs
 * (2i, 2i+1) by angle pos * base^(-2i/head_dim) (mg_rope). Values are not rotated.
 * Keys: base (10000); head_dim (offered by a model: checked to be even). */
#include "registry_internal.h"

typedef struct {
    float base;
} rope;

static mg_status rope_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    rope *s = mg_layer_state(self);
    s->base = (float)mg_config_float(cfg, "base", 10000.0, 1.000001, 1e12);
    int64_t hd = mg_config_int(cfg, "head_dim", 0, 0, INT32_MAX);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    if (hd % 2)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (rope): head dimension %lld is odd; RoPE rotates pairs",
                            mg_layer_prefix(self), (long long)hd);
    mg_layer_set_shape(self, "(B,T,C)");
    return MG_OK;
}

static mg_tensor *rope_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

static void rope_rotate(mg_layer *self, mg_ctx *ctx, mg_tensor **q, mg_tensor **k, int64_t q_pos0, int64_t k_pos0) {
    rope *s = mg_layer_state(self);
    *q = mg_rope(ctx, *q, q_pos0, s->base);
    *k = mg_rope(ctx, *k, k_pos0, s->base);
}

const mg_layer_vtable mg_layer_rope = {
    MG_LAYER_VT_HEADER,
    .name = "rope",
    .summary = "rotary position embedding of q and k inside attention",
    .pos_scheme = "rope",
    .instance_size = sizeof(rope),
    .create = rope_create,
    .forward = rope_forward,
    .rotate_qk = rope_rotate,
};
