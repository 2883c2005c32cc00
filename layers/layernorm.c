/* layernorm: over the last dim, biased variance, y = (x - mean) / sqrt(var + eps) * weight + bias.
 * Keys: dim (required); eps (1e-5); affine (true: weight ones, bias zeros, not decayed). */
#include "registry_internal.h"

typedef struct {
    int64_t dim;
    float eps;
    mg_tensor *w, *b;
} layernorm;

static mg_status layernorm_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    layernorm *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    s->eps = (float)mg_config_float(cfg, "eps", 1e-5, 0.0, 1.0);
    bool affine = mg_config_bool(cfg, "affine", true);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    if (affine) {
        s->w = mg_layer_param(self, params, "weight", 1, (int64_t[]){s->dim}, mg_init_ones(), MG_NO_DECAY);
        s->b = mg_layer_param(self, params, "bias", 1, (int64_t[]){s->dim}, mg_init_zeros(), MG_NO_DECAY);
        if (!s->w || !s->b) return MG_ERR_INVALID;
    }
    mg_layer_set_shape(self, "(...,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_tensor *layernorm_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    layernorm *s = mg_layer_state(self);
    if (x->dtype != MG_F32 || x->ndim < 1 || x->shape[x->ndim - 1] != s->dim) {
        mg_layer_fail(self, ctx, "x%s: need float32 with last dim %lld", MG_LSHAPE(x), (long long)s->dim);
        return mg_ctx_dummy(ctx);
    }
    return mg_layernorm(ctx, x, s->w, s->b, s->eps);
}

const mg_layer_vtable mg_layer_layernorm = {
    MG_LAYER_VT_HEADER,
    .name = "layernorm",
    .summary = "LayerNorm over the last dim",
    .instance_size = sizeof(layernorm),
    .create = layernorm_create,
    .forward = layernorm_forward,
};
