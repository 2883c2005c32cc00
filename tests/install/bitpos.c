/* bitpos: a positional scheme built outside the minigrad tree as a plugin, with nothing but
 *     cc -shared -fPIC bitpos.c -o libbitpos.so $(pkg-config --cflags --libs minigrad)
 * (tests/install/test_install.sh). Channel c of the embedding gets +-0.5 from bit (c mod 8) of the
 * position: a fixed binary position code added to the token embeddings.
 * Keys: dim (required; a model offers it). */
#include "minigrad/op.h"
#include "minigrad/plugin.h"

typedef struct {
    int64_t dim;
} bitpos;

static mg_status bitpos_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    bitpos *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 0, 1, 1 << 20);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_tensor *bitpos_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    bitpos *s = mg_layer_state(self);
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (x->ndim < 2 || x->shape[x->ndim - 1] != s->dim) {
        mg_ctx_fail(ctx, "layer '%s' (bitpos): input's last dimension is not %lld",
                    mg_layer_prefix(self), (long long)s->dim);
        return mg_ctx_dummy(ctx);
    }
    int64_t T = x->shape[x->ndim - 2];
    mg_tensor *pe = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){T, s->dim});
    if (!mg_ctx_ok(ctx)) return pe;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < s->dim; c++)
            pe->data[t * s->dim + c] = ((args->pos0 + t) >> (c % 8)) & 1 ? 0.5f : -0.5f;
    return mg_add(ctx, x, pe);
}

static const mg_layer_vtable bitpos_layer = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "bitpos",
    .summary = "binary position code: channel c gets +-0.5 from bit c mod 8 of the position",
    .pos_scheme = "bitpos",
    .instance_size = sizeof(bitpos),
    .create = bitpos_create,
    .forward = bitpos_forward,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    return host->register_layer(host, &bitpos_layer);
}
