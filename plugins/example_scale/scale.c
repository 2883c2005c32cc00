/* example_scale: the smallest useful plugin, shown in the README ("Writing a new layer as a
 * plugin") and loaded by tests/test_plugins.c, so the example cannot rot.
 * Layer "scale": y = x * gain, one learned gain per channel (last dim). Keys: dim (required),
 * init (1.0). */
#include "minigrad/plugin.h"

typedef struct {
    int64_t dim;
    mg_tensor *gain;
} scale;

static mg_status scale_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    scale *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 0, 1, 1 << 24); /* default outside the range: required */
    float init = (float)mg_config_float(cfg, "init", 1.0, -1e6, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->gain = mg_layer_param(self, params, "gain", 1, (int64_t[]){s->dim}, mg_init_const(init), MG_NO_DECAY);
    return s->gain ? MG_OK : MG_ERR_INVALID;
}

static mg_tensor *scale_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    scale *s = mg_layer_state(self);
    return mg_mul(ctx, x, s->gain); /* an op: its backward comes for free */
}

static const mg_layer_vtable scale_layer = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "scale",
    .summary = "y = x * gain (per channel)",
    .instance_size = sizeof(scale),
    .create = scale_create,
    .forward = scale_forward,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    return host->register_layer(host, &scale_layer);
}
