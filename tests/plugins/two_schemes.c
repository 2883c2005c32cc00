/* A test plugin whose file name (libmgtest_two_schemes.so) is neither of the two positional schemes
 * it registers, "tilt" and "zigzag", for tests/test_plugins.c: a scheme is found by its own name in
 * whichever plugin of the search path provides it. Both leave the embedding as it is (like ALiBi's
 * forward); the tests look only at which layer a model gets. */
#include "minigrad/plugin.h"

static mg_status create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)cfg, (void)params;
    mg_layer_set_shape(self, "(B,T,C)");
    return MG_OK;
}

static mg_tensor *forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

static const mg_layer_vtable tilt = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "tilt_pos",
    .summary = "test scheme: identity",
    .pos_scheme = "tilt",
    .create = create,
    .forward = forward,
};

static const mg_layer_vtable zigzag = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "zigzag_pos",
    .summary = "test scheme: identity",
    .pos_scheme = "zigzag",
    .create = create,
    .forward = forward,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    mg_status st = host->register_layer(host, &tilt);
    return st == MG_OK ? host->register_layer(host, &zigzag) : st;
}
