/* linear: y = x W + b with W stored [in, out] (GPT-2's Conv1D layout, so checkpoints match
 * the c_attn/c_proj/c_fc shapes of docs/checkpoint-format.md; a PyTorch nn.Linear weight is its transpose).
 * Keys: in, out (required); bias (true); init normal|uniform|zeros (uniform), std (0.02),
 * bound (1/sqrt(in): PyTorch's default); bias_init zeros|uniform (uniform when init is); frozen
 * (false: parameters declared not trainable). */
#include "registry_internal.h"
#include "minigrad/nn.h"

#include <math.h>

typedef struct {
    int64_t in, out;
    mg_tensor *w, *b;
} linear;

/* The one place a linear layer is built: from the typed config (mg_linear_new) or from the string
 * config that linear_create has read into one. */
static mg_status linear_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_linear_cfg *cfg = cfgp;
    linear *s = mg_layer_state(self);
    if (cfg->in < 1 || cfg->in > INT32_MAX || cfg->out < 1 || cfg->out > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (linear): in = %lld and out = %lld must be in [1, %d]",
                            mg_layer_prefix(self), (long long)cfg->in, (long long)cfg->out, INT32_MAX);
    s->in = cfg->in, s->out = cfg->out;
    float bound = (float)(1.0 / sqrt((double)s->in));
    mg_init wi = cfg->weight_init ? *cfg->weight_init : mg_init_uniform(-bound, bound);
    const uint32_t fz = cfg->frozen ? MG_FROZEN : 0;
    s->w = mg_layer_param(self, params, "weight", 2, (int64_t[]){s->in, s->out}, wi, fz);
    if (!s->w) return MG_ERR_INVALID;
    if (cfg->bias) {
        mg_init bi = cfg->bias_init ? *cfg->bias_init
                                    : wi.kind == MG_INIT_UNIFORM ? mg_init_uniform(-bound, bound) : mg_init_zeros();
        s->b = mg_layer_param(self, params, "bias", 1, (int64_t[]){s->out}, bi, MG_NO_DECAY | fz);
        if (!s->b) return MG_ERR_INVALID;
    }
    mg_layer_set_shape(self, "(...,%lld)", (long long)s->out);
    return MG_OK;
}

static mg_status linear_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_linear_cfg c = {0};
    c.in = mg_config_int(cfg, "in", 0, 1, INT32_MAX);
    c.out = mg_config_int(cfg, "out", 0, 1, INT32_MAX);
    c.bias = mg_config_bool(cfg, "bias", true);
    c.frozen = mg_config_bool(cfg, "frozen", false);
    double bound = c.in > 0 ? 1.0 / sqrt((double)c.in) : 1.0;
    mg_init wi = mg_layer_init_from(cfg, "uniform", 0.02, bound);
    static const char *const bkinds[] = {"zeros", "uniform", NULL};
    int bk = mg_config_choice(cfg, "bias_init", bkinds, wi.kind == MG_INIT_UNIFORM ? 1 : 0);
    mg_init bi = bk == 1 ? mg_init_uniform(-(float)bound, (float)bound) : mg_init_zeros();
    c.weight_init = &wi, c.bias_init = &bi;
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return linear_init(self, &c, params);
}

static mg_tensor *linear_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    linear *s = mg_layer_state(self);
    if (!mg_layer_check_last_dim(self, ctx, x, "in = ", s->in)) return mg_ctx_dummy(ctx);
    return mg_linear(ctx, x, s->w, s->b); /* fused: no (...,out) intermediate nor its gradient */
}

const mg_layer_vtable mg_layer_linear = {
    MG_LAYER_VT_HEADER,
    .name = "linear",
    .summary = "y = x W + b, W [in, out]",
    .instance_size = sizeof(linear),
    .create = linear_create,
    .forward = linear_forward,
};

mg_layer *mg_linear_new(mg_params *params, const char *name, const mg_linear_cfg *cfg) {
    return mg_layer_new(&mg_layer_linear, name, params, linear_init, cfg);
}

bool mg_layer_linear_parts(const mg_layer *l, mg_tensor **w, mg_tensor **b, int64_t *in) {
    if (!l || mg_layer_vt(l) != &mg_layer_linear) return false;
    const linear *s = mg_layer_state(l);
    *w = s->w, *b = s->b, *in = s->in;
    return true;
}
