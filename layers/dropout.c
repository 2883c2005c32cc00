/* dropout: inverted dropout (mg_dropout) while training (mg_fwd.train), the identity otherwise,
 * as PyTorch's nn.Dropout. Keys: p (0.5, PyTorch's default; in [0, 1)). */
#include "registry_internal.h"
#include "minigrad/nn.h"

typedef struct {
    float p;
} dropout;

static mg_status dropout_init(mg_layer *self, const void *cfgp, mg_params *params) {
    (void)params;
    const mg_dropout_cfg *cfg = cfgp;
    dropout *s = mg_layer_state(self);
    if (!(cfg->p >= 0.0f && cfg->p < 1.0f))
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (dropout): p = %g must be in [0, 1)", mg_layer_prefix(self),
                            (double)cfg->p);
    s->p = cfg->p;
    mg_layer_set_shape(self, "(...)");
    return MG_OK;
}

static mg_status dropout_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_dropout_cfg c = {0};
    c.p = (float)mg_config_float(cfg, "p", 0.5, 0.0, 1.0);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return dropout_init(self, &c, params);
}

static mg_tensor *dropout_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    dropout *s = mg_layer_state(self);
    if (x->dtype != MG_F32) {
        mg_layer_fail(self, ctx, "x%s must be float32", MG_LSHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    return mg_layer_dropout(self, ctx, x, s->p, args);
}

const mg_layer_vtable mg_layer_dropout_vt = {
    MG_LAYER_VT_HEADER,
    .name = "dropout",
    .summary = "inverted dropout while training, identity otherwise",
    .instance_size = sizeof(dropout),
    .create = dropout_create,
    .forward = dropout_forward,
};

mg_layer *mg_dropout_new(mg_params *params, const char *name, const mg_dropout_cfg *cfg) {
    return mg_layer_new(&mg_layer_dropout_vt, name, params, dropout_init, cfg);
}
