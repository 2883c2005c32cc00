/* Plugins whose layers misbehave in forward, for tests/test_plugins.c: each build (one
 * -DMGTEST_<KIND>) loads and registers fine, and its layers break the forward contract the host
 * checks (minigrad/layer.h, mg_layer_forward).
 *  - NULL_FWD: positional scheme "mgtest_null" (layer mgtest_null_pos) whose forward returns NULL.
 *  - WRONG_SHAPE: positional scheme "mgtest_wrong" (layer mgtest_wrong_pos) that declares (B,T,C)
 *    and returns (B,T,C+1); layer mgtest_wrong_dim, declared (...,dim), returning (...,dim+1); and
 *    layer mgtest_bad_tensor, returning a tensor of 99 dims. */
#include "minigrad/plugin.h"

#include <string.h>

typedef struct {
    int64_t dim;
} state;

static mg_status create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    state *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 4, 1, 1 << 20);
    mg_layer_set_shape(self, "(B,T,C)");
    return mg_config_status(cfg);
}

#if defined(MGTEST_NULL_FWD)
static mg_tensor *null_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)x, (void)args;
    return NULL;
}

static const mg_layer_vtable null_pos = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_null_pos",
    .summary = "test scheme: forward returns NULL",
    .pos_scheme = "mgtest_null",
    .instance_size = sizeof(state),
    .create = create,
    .forward = null_forward,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) { return host->register_layer(host, &null_pos); }

#elif defined(MGTEST_WRONG_SHAPE)
/* x with one more column in its last dim. */
static mg_tensor *wider(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)args;
    int64_t shape[MG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1]++;
    return mg_zeros(ctx, x->ndim, shape);
}

static mg_status create_dim(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_status st = create(self, cfg, params);
    mg_layer_set_shape(self, "(...,%lld)", (long long)((state *)mg_layer_state(self))->dim);
    return st;
}

static mg_tensor *bad_tensor(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    static mg_tensor t;
    t = *x;
    t.ndim = 99;
    return &t;
}

static const mg_layer_vtable wrong_pos = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_wrong_pos",
    .summary = "test scheme: returns (B,T,C+1)",
    .pos_scheme = "mgtest_wrong",
    .instance_size = sizeof(state),
    .create = create,
    .forward = wider,
};

static const mg_layer_vtable wrong_dim = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_wrong_dim",
    .summary = "test layer: declares (...,dim), returns (...,dim+1)",
    .instance_size = sizeof(state),
    .create = create_dim,
    .forward = wider,
};

static const mg_layer_vtable bad = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_bad_tensor",
    .summary = "test layer: returns a tensor of 99 dims",
    .instance_size = sizeof(state),
    .create = create,
    .forward = bad_tensor,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    mg_status st = host->register_layer(host, &wrong_pos);
    if (st == MG_OK) st = host->register_layer(host, &wrong_dim);
    return st == MG_OK ? host->register_layer(host, &bad) : st;
}
#endif
