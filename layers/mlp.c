/* mlp: c_fc [dim, hidden] -> GELU -> c_proj [hidden, dim] -> dropout.
 * Keys: dim (required); hidden (4 dim); gelu tanh|erf (tanh); bias (true); dropout (0);
 * std (0.02); proj_std (std). */
#include "registry_internal.h"

typedef struct {
    int64_t dim;
    mg_gelu_kind gelu;
    float dropout;
    mg_layer *c_fc, *c_proj;
} mlp;

static mg_status mlp_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mlp *s = mg_layer_state(self);
    static const char *const gelus[] = {"tanh", "erf", NULL};
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX / 4);
    int64_t hidden = mg_config_int(cfg, "hidden", 4 * (s->dim > 0 ? s->dim : 1), 1, INT32_MAX);
    s->gelu = mg_config_choice(cfg, "gelu", gelus, 0) == 1 ? MG_GELU_ERF : MG_GELU_TANH;
    bool bias = mg_config_bool(cfg, "bias", true);
    s->dropout = (float)mg_config_float(cfg, "dropout", 0.0, 0.0, 0.999);
    double std = mg_config_float(cfg, "std", 0.02, 0.0, 1e6);
    double proj_std = mg_config_float(cfg, "proj_std", std, 0.0, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    st = mg_layer_child_linear(self, "c_fc", s->dim, hidden, bias, std, params, &s->c_fc);
    if (st == MG_OK) st = mg_layer_child_linear(self, "c_proj", hidden, s->dim, bias, proj_std, params, &s->c_proj);
    mg_layer_set_shape(self, "(...,%lld)", (long long)s->dim);
    return st;
}

/* h = c_fc(x) on: GELU and c_proj (fused where c_proj is the built-in linear: in bf16 GELU's
 * output is then kept only as c_proj's bf16 copy), dropout. */
static mg_tensor *mlp_tail(mg_layer *self, mlp *s, mg_ctx *ctx, mg_tensor *h, const mg_fwd *args) {
    mg_tensor *y = mg_layer_gelu_linear(s->c_proj, ctx, h, s->gelu, args);
    return mg_layer_dropout(self, ctx, y, s->dropout, args);
}

static mg_tensor *mlp_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    mlp *s = mg_layer_state(self);
    return mlp_tail(self, s, ctx, mg_layer_forward(s->c_fc, ctx, x, args), args);
}

mg_tensor *mg_mlp_normed(mg_layer *self, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    mlp *s = mg_layer_state(self);
    return mlp_tail(self, s, ctx, mg_layer_norm_linear(ln, s->c_fc, ctx, x, args), args);
}

const mg_layer_vtable mg_layer_mlp = {
    MG_LAYER_VT_HEADER,
    .name = "mlp",
    .summary = "feed-forward: c_fc, GELU, c_proj",
    .instance_size = sizeof(mlp),
    .create = mlp_create,
    .forward = mlp_forward,
};
