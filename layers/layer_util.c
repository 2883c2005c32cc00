/* Small helpers the layer files share: errors named after the layer, the common init keys,
 * dropout that only runs in training. */
#include "registry_internal.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

void mg_layer_fail(mg_layer *l, mg_ctx *ctx, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The message names the layer: raised in a scope without a label, so that the layer's own
     * scope (mg_layer_forward) does not name it a second time. */
    mg_ctx_push_scope(ctx, "");
    mg_ctx_fail(ctx, "layer '%s' (%s): %s", *mg_layer_prefix(l) ? mg_layer_prefix(l) : "(model)", mg_layer_vt(l)->name,
                msg);
    mg_ctx_pop_scope(ctx);
}

mg_init mg_layer_init_from(mg_config *cfg, const char *def_kind, double def_std, double def_bound) {
    static const char *const kinds[] = {"normal", "uniform", "zeros", NULL};
    int def = 0;
    for (int i = 0; kinds[i]; i++)
        if (strcmp(kinds[i], def_kind) == 0) def = i;
    int kind = mg_config_choice(cfg, "init", kinds, def);
    double std = mg_config_float(cfg, "std", def_std, 0.0, 1e6);
    double bound = mg_config_float(cfg, "bound", def_bound, 0.0, 1e6);
    if (kind == 0) return mg_init_normal(0.0f, (float)std);
    if (kind == 1) return mg_init_uniform(-(float)bound, (float)bound);
    return mg_init_zeros();
}

bool mg_layer_check_last_dim(mg_layer *l, mg_ctx *ctx, const mg_tensor *x, const char *what, int64_t dim) {
    if (x && x->dtype == MG_F32 && x->ndim >= 1 && x->shape[x->ndim - 1] == dim) return true;
    if (!x) {
        mg_layer_fail(l, ctx, "x is NULL: need float32 with last dim %s%lld", what, (long long)dim);
        return false;
    }
    mg_layer_fail(l, ctx, "x%s: need float32 with last dim %s%lld", MG_LSHAPE(x), what, (long long)dim);
    return false;
}

mg_layernorm_cfg mg_layer_norm_keys(mg_config *cfg, double def_eps) {
    mg_layernorm_cfg c = {0};
    c.dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    c.eps = (float)mg_config_float(cfg, "eps", def_eps, 0.0, 1.0);
    c.zero_eps = c.eps == 0.0f;
    c.no_affine = !mg_config_bool(cfg, "affine", true);
    c.frozen = mg_config_bool(cfg, "frozen", false);
    return c;
}

mg_tensor *mg_layer_dropout(mg_layer *l, mg_ctx *ctx, mg_tensor *x, float p, const mg_fwd *args) {
    if (!args->train || p <= 0.0f) return x;
    if (!args->rng) {
        mg_layer_fail(l, ctx, "dropout %g in training needs an rng in mg_fwd", (double)p);
        return mg_ctx_dummy(ctx);
    }
    return mg_dropout(ctx, x, p, args->rng);
}

static mg_status child_cfg_done(mg_layer *self, const char *local, const char *type, mg_config *c, mg_status st,
                                mg_params *params, mg_layer **out) {
    if (!c) st = mg_set_error(MG_ERR_NOMEM, "layer '%s': out of memory", mg_layer_prefix(self));
    if (st == MG_OK) st = mg_layer_child(self, local, type, c, params, out);
    mg_config_free(c);
    return st;
}

mg_status mg_layer_child_linear(mg_layer *self, const char *local, int64_t in, int64_t out, bool bias, double std,
                                mg_params *params, mg_layer **child) {
    mg_config *c = mg_config_new("linear");
    mg_status st = c ? MG_OK : MG_ERR_NOMEM;
    if (st == MG_OK) st = mg_config_setf(c, "in", "%lld", (long long)in);
    if (st == MG_OK) st = mg_config_setf(c, "out", "%lld", (long long)out);
    if (st == MG_OK) st = mg_config_set(c, "bias", bias ? "true" : "false");
    if (st == MG_OK) st = mg_config_set(c, "init", "normal");
    if (st == MG_OK) st = mg_config_setf(c, "std", "%.17g", std);
    if (st == MG_OK && bias) st = mg_config_set(c, "bias_init", "zeros");
    return child_cfg_done(self, local, "linear", c, st, params, child);
}

mg_status mg_layer_child_layernorm(mg_layer *self, const char *local, int64_t dim, double eps, mg_params *params,
                                   mg_layer **child) {
    mg_config *c = mg_config_new("layernorm");
    mg_status st = c ? MG_OK : MG_ERR_NOMEM;
    if (st == MG_OK) st = mg_config_setf(c, "dim", "%lld", (long long)dim);
    if (st == MG_OK) st = mg_config_setf(c, "eps", "%.17g", eps);
    return child_cfg_done(self, local, "layernorm", c, st, params, child);
}

mg_status mg_layer_norm_eps(mg_layer *self, const char *kind, float eps, bool zero_eps, float def, float *out) {
    if (!(eps >= 0.0f) || !isfinite(eps))
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): eps %g must be finite and >= 0", mg_layer_prefix(self),
                            kind, (double)eps);
    *out = zero_eps ? 0.0f : eps != 0.0f ? eps : def;
    return MG_OK;
}
