/* rms_norm: over the last dim, y = x / sqrt(mean(x^2) + eps) * weight (PyTorch's nn.RMSNorm).
 * Keys: dim (required); eps (1.1920929e-07, float32's machine epsilon: PyTorch's default);
 * affine (true: a weight of ones, not decayed); frozen (false). */
#include "registry_internal.h"
#include "minigrad/nn.h"

typedef struct {
    int64_t dim;
    float eps;
    mg_tensor *w;
} rms_norm;

static const float RMS_EPS_DEFAULT = 1.1920929e-07f;

static mg_status rms_norm_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_rms_norm_cfg *cfg = cfgp;
    rms_norm *s = mg_layer_state(self);
    if (cfg->dim < 1 || cfg->dim > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (rms_norm): dim = %lld must be in [1, %d]",
                            mg_layer_prefix(self), (long long)cfg->dim, INT32_MAX);
    s->dim = cfg->dim;
    mg_status st = mg_layer_norm_eps(self, "rms_norm", cfg->eps, cfg->zero_eps, RMS_EPS_DEFAULT, &s->eps);
    if (st != MG_OK) return st;
    if (!cfg->no_affine) {
        s->w = mg_layer_param(self, params, "weight", 1, (int64_t[]){s->dim}, mg_init_ones(),
                              MG_NO_DECAY | (cfg->frozen ? MG_FROZEN : 0u));
        if (!s->w) return MG_ERR_INVALID;
    }
    mg_layer_set_shape(self, "(...,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_status rms_norm_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    const mg_layernorm_cfg k = mg_layer_norm_keys(cfg, RMS_EPS_DEFAULT);
    const mg_rms_norm_cfg c = {.dim = k.dim, .eps = k.eps, .zero_eps = k.zero_eps, .no_affine = k.no_affine,
                               .frozen = k.frozen};
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return rms_norm_init(self, &c, params);
}

static mg_tensor *rms_norm_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    rms_norm *s = mg_layer_state(self);
    if (!mg_layer_check_last_dim(self, ctx, x, "", s->dim)) return mg_ctx_dummy(ctx);
    return mg_rms_norm(ctx, x, s->w, s->eps);
}

const mg_layer_vtable mg_layer_rms_norm = {
    MG_LAYER_VT_HEADER,
    .name = "rms_norm",
    .summary = "RMSNorm over the last dim",
    .instance_size = sizeof(rms_norm),
    .create = rms_norm_create,
    .forward = rms_norm_forward,
};

mg_layer *mg_rms_norm_new(mg_params *params, const char *name, const mg_rms_norm_cfg *cfg) {
    return mg_layer_new(&mg_layer_rms_norm, name, params, rms_norm_init, cfg);
}
