/* learned_sinusoidal_pos (pos=learned+sinusoidal): x + learned table + sinusoidal table. Two
 * sublayers under this layer's own name, so its parameter is "<name>.weight" like learned_pos's.
 * Keys: max_len, dim (required); base (10000); init, bound, std as learned_pos. */
#include "registry_internal.h"

typedef struct {
    mg_layer *learned, *sin;
} both;

static mg_status both_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    both *s = mg_layer_state(self);
    int64_t max_len = mg_config_int(cfg, "max_len", 0, 1, INT32_MAX);
    int64_t dim = mg_config_int(cfg, "dim", 0, 2, INT32_MAX);
    double base = mg_config_float(cfg, "base", 10000.0, 1.000001, 1e12);
    static const char *const kinds[] = {"normal", "uniform", "zeros", NULL};
    int kind = mg_config_choice(cfg, "init", kinds, 1);
    double bound = mg_config_float(cfg, "bound", 0.1, 0.0, 1e6), std = mg_config_float(cfg, "std", 0.02, 0.0, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    char label[300];
    snprintf(label, sizeof label, "layer '%s' (learned_sinusoidal_pos)", mg_layer_prefix(self));
    mg_config *a = mg_config_new(label), *b = mg_config_new(label);
    st = a && b ? MG_OK : MG_ERR_NOMEM;
    if (st == MG_OK) st = mg_config_setf(a, "max_len", "%lld", (long long)max_len);
    if (st == MG_OK) st = mg_config_setf(a, "dim", "%lld", (long long)dim);
    if (st == MG_OK) st = mg_config_set(a, "init", kinds[kind]);
    if (st == MG_OK) st = mg_config_setf(a, "bound", "%.17g", bound);
    if (st == MG_OK) st = mg_config_setf(a, "std", "%.17g", std);
    if (st == MG_OK) st = mg_config_setf(b, "max_len", "%lld", (long long)max_len);
    if (st == MG_OK) st = mg_config_setf(b, "dim", "%lld", (long long)dim);
    if (st == MG_OK) st = mg_config_setf(b, "base", "%.17g", base);
    if (st == MG_OK) st = mg_layer_child(self, "", "learned_pos", a, params, &s->learned);
    if (st == MG_OK) st = mg_layer_child(self, "", "sinusoidal_pos", b, params, &s->sin);
    mg_config_free(a);
    mg_config_free(b);
    if (st != MG_OK) return st;
    mg_layer_set_pos_limit(self, max_len);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)dim);
    return MG_OK;
}

static mg_tensor *both_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    both *s = mg_layer_state(self);
    return mg_layer_forward(s->sin, ctx, mg_layer_forward(s->learned, ctx, x, args), args);
}

const mg_layer_vtable mg_layer_learned_sinusoidal_pos = {
    MG_LAYER_VT_HEADER,
    .name = "learned_sinusoidal_pos",
    .summary = "learned table + fixed sinusoidal positions added to the embedding",
    .pos_scheme = "learned+sinusoidal",
    .instance_size = sizeof(both),
    .create = both_create,
    .forward = both_forward,
};
