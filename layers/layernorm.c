/* layernorm: over the last dim, biased variance, y = (x - mean) / sqrt(var + eps) * weight + bias.
 * Keys: dim (required); eps (1e-5); affine (true: weight ones, bias zeros, not decayed); frozen
 * (false). */
#include "registry_internal.h"
#include "minigrad/nn.h"

typedef struct {
    int64_t dim;
    float eps;
    mg_tensor *w, *b;
} layernorm;

static mg_status layernorm_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_layernorm_cfg *cfg = cfgp;
    layernorm *s = mg_layer_state(self);
    if (cfg->dim < 1 || cfg->dim > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (layernorm): dim = %lld must be in [1, %d]",
                            mg_layer_prefix(self), (long long)cfg->dim, INT32_MAX);
    s->dim = cfg->dim;
    mg_status st = mg_layer_norm_eps(self, "layernorm", cfg->eps, cfg->zero_eps, 1e-5f, &s->eps);
    if (st != MG_OK) return st;
    if (!cfg->no_affine) {
        uint32_t fl = MG_NO_DECAY | (cfg->frozen ? MG_FROZEN : 0u);
        s->w = mg_layer_param(self, params, "weight", 1, (int64_t[]){s->dim}, mg_init_ones(), fl);
        s->b = mg_layer_param(self, params, "bias", 1, (int64_t[]){s->dim}, mg_init_zeros(), fl);
        if (!s->w || !s->b) return MG_ERR_INVALID;
    }
    mg_layer_set_shape(self, "(...,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_status layernorm_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    const mg_layernorm_cfg c = mg_layer_norm_keys(cfg, 1e-5);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return layernorm_init(self, &c, params);
}

static mg_tensor *layernorm_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    layernorm *s = mg_layer_state(self);
    if (!mg_layer_check_last_dim(self, ctx, x, "", s->dim)) return mg_ctx_dummy(ctx);
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

mg_layer *mg_layernorm_new(mg_params *params, const char *name, const mg_layernorm_cfg *cfg) {
    return mg_layer_new(&mg_layer_layernorm, name, params, layernorm_init, cfg);
}

bool mg_layer_layernorm_parts(const mg_layer *l, mg_tensor **w, mg_tensor **b, float *eps, int64_t *dim) {
    if (!l || mg_layer_vt(l) != &mg_layer_layernorm) return false;
    const layernorm *s = mg_layer_state(l);
    *w = s->w, *b = s->b, *eps = s->eps, *dim = s->dim;
    return true;
}
