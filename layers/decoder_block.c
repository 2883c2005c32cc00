/* decoder_block: the pre-LN Transformer block, x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
 * (Also the encoder block of the posenc classifier: causal=false.)
 * Keys: dim, n_head (required); causal (true); gelu tanh|erf (tanh); hidden (4 dim); bias (true);
 * dropout (0); eps (1e-5); attn_scale (0: 1/sqrt(dim / n_head)); std (0.02); proj_std (std). */
#include "registry_internal.h"

typedef struct {
    int64_t dim;
    mg_layer *ln_1, *attn, *ln_2, *mlp;
} block;

static mg_status block_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    block *s = mg_layer_state(self);
    static const char *const gelus[] = {"tanh", "erf", NULL};
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX / 4);
    int64_t n_head = mg_config_int(cfg, "n_head", 0, 1, INT32_MAX);
    bool causal = mg_config_bool(cfg, "causal", true);
    int gelu = mg_config_choice(cfg, "gelu", gelus, 0);
    int64_t hidden = mg_config_int(cfg, "hidden", 4 * (s->dim > 0 ? s->dim : 1), 1, INT32_MAX);
    bool bias = mg_config_bool(cfg, "bias", true);
    double dropout = mg_config_float(cfg, "dropout", 0.0, 0.0, 0.999);
    double eps = mg_config_float(cfg, "eps", 1e-5, 0.0, 1.0);
    double attn_scale = mg_config_float(cfg, "attn_scale", 0.0, 0.0, 1e6);
    double std = mg_config_float(cfg, "std", 0.02, 0.0, 1e6);
    double proj_std = mg_config_float(cfg, "proj_std", std, 0.0, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    char label[300];
    snprintf(label, sizeof label, "layer '%s' (decoder_block)", mg_layer_prefix(self));
    mg_config *a = mg_config_new(label), *m = mg_config_new(label);
    st = a && m ? MG_OK : MG_ERR_NOMEM;
    if (st == MG_OK) st = mg_config_setf(a, "dim", "%lld", (long long)s->dim);
    if (st == MG_OK) st = mg_config_setf(a, "n_head", "%lld", (long long)n_head);
    if (st == MG_OK) st = mg_config_set(a, "causal", causal ? "true" : "false");
    if (st == MG_OK) st = mg_config_set(a, "bias", bias ? "true" : "false");
    if (st == MG_OK) st = mg_config_setf(a, "dropout", "%.17g", dropout);
    if (st == MG_OK) st = mg_config_setf(a, "std", "%.17g", std);
    if (st == MG_OK) st = mg_config_setf(a, "proj_std", "%.17g", proj_std);
    if (st == MG_OK) st = mg_config_setf(a, "scale", "%.17g", attn_scale);
    if (st == MG_OK) st = mg_config_setf(m, "dim", "%lld", (long long)s->dim);
    if (st == MG_OK) st = mg_config_setf(m, "hidden", "%lld", (long long)hidden);
    if (st == MG_OK) st = mg_config_set(m, "gelu", gelus[gelu]);
    if (st == MG_OK) st = mg_config_set(m, "bias", bias ? "true" : "false");
    if (st == MG_OK) st = mg_config_setf(m, "dropout", "%.17g", dropout);
    if (st == MG_OK) st = mg_config_setf(m, "std", "%.17g", std);
    if (st == MG_OK) st = mg_config_setf(m, "proj_std", "%.17g", proj_std);
    if (st == MG_OK) st = mg_layer_child_layernorm(self, "ln_1", s->dim, eps, params, &s->ln_1);
    if (st == MG_OK) st = mg_layer_child(self, "attn", "self_attention", a, params, &s->attn);
    if (st == MG_OK) st = mg_layer_child_layernorm(self, "ln_2", s->dim, eps, params, &s->ln_2);
    if (st == MG_OK) st = mg_layer_child(self, "mlp", "mlp", m, params, &s->mlp);
    mg_config_free(a);
    mg_config_free(m);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return st;
}

/* sub(ln(x)): the norm taken into sub's first Linear (mg_layer_forward_normed: in bf16 its output
 * is then kept only as that Linear's bf16 copy) when x is what both expect; otherwise unfused, so
 * that a wrong x gets the norm's message as before. */
static mg_tensor *normed(block *s, mg_layer *ln, mg_layer *sub, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    if (mg_ctx_ok(ctx) && x->dtype == MG_F32 && x->ndim == 3 && x->shape[2] == s->dim)
        return mg_layer_forward_normed(sub, ln, ctx, x, args);
    return mg_layer_forward(sub, ctx, mg_layer_forward(ln, ctx, x, args), args);
}

static mg_tensor *block_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    block *s = mg_layer_state(self);
    x = mg_add(ctx, x, normed(s, s->ln_1, s->attn, ctx, x, args));
    return mg_add(ctx, x, normed(s, s->ln_2, s->mlp, ctx, x, args));
}

const mg_layer_vtable mg_layer_decoder_block = {
    MG_LAYER_VT_HEADER,
    .name = "decoder_block",
    .summary = "pre-LN Transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))",
    .instance_size = sizeof(block),
    .create = block_create,
    .forward = block_forward,
};
