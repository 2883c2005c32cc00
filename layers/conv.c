/* conv1d and conv2d: PyTorch's nn.Conv1d / nn.Conv2d over mg_conv1d / mg_conv2d, parameters named
 * and shaped as PyTorch's ("weight" (out, in/groups, k...), "bias" (out)), so state dicts map one
 * to one. Default init as PyTorch: weight and bias uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * fan_in = in/groups * kernel taps.
 * String config keys: in, out, kernel (required); stride (1), padding (0), dilation (1), groups
 * (1), bias (true); conv1d also causal (false); init normal|uniform|zeros (uniform), std (0.02),
 * bound (1/sqrt(fan_in)); bias_init zeros|uniform (uniform when init is). In the string config of
 * conv2d the kernel, stride, padding and dilation apply to both axes; the typed config takes each. */
#include "registry_internal.h"
#include "minigrad/nn.h"

#include <math.h>

typedef struct {
    bool one_d;
    int64_t in, out, kernel[2];
    mg_conv2d_opts opts2;
    mg_conv1d_opts opts1;
    mg_tensor *w, *b;
} conv;

/* Shared by both kinds: checks the geometry, declares the parameters. kernel[0] is 1 for conv1d. */
static mg_status conv_declare(mg_layer *self, mg_params *params, const char *kind, int64_t in, int64_t out,
                              const int64_t *kernel, int64_t groups, bool bias, const mg_init *winit,
                              const mg_init *binit) {
    conv *s = mg_layer_state(self);
    if (in < 1 || in > INT32_MAX || out < 1 || out > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): in = %lld and out = %lld must be in [1, %d]",
                            mg_layer_prefix(self), kind, (long long)in, (long long)out, INT32_MAX);
    if (kernel[0] < 1 || kernel[1] < 1 || kernel[0] > INT32_MAX || kernel[1] > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): kernel = %lld must be in [1, %d]", mg_layer_prefix(self),
                            kind, (long long)(kernel[0] < 1 || kernel[0] > INT32_MAX ? kernel[0] : kernel[1]),
                            INT32_MAX);
    if (groups < 1 || groups > INT32_MAX || in % groups || out % groups)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): groups = %lld must be >= 1 and divide in = %lld and out = %lld",
                            mg_layer_prefix(self), kind, (long long)groups, (long long)in, (long long)out);
    s->in = in, s->out = out, s->kernel[0] = kernel[0], s->kernel[1] = kernel[1];
    double fan_in = (double)(in / groups) * (double)kernel[0] * (double)kernel[1];
    float bound = (float)(1.0 / sqrt(fan_in));
    mg_init wi = winit ? *winit : mg_init_uniform(-bound, bound);
    if (s->one_d)
        s->w = mg_layer_param(self, params, "weight", 3, (int64_t[]){out, in / groups, kernel[1]}, wi, 0);
    else
        s->w = mg_layer_param(self, params, "weight", 4, (int64_t[]){out, in / groups, kernel[0], kernel[1]}, wi, 0);
    if (!s->w) return MG_ERR_INVALID;
    if (bias) {
        mg_init bi = binit ? *binit : wi.kind == MG_INIT_UNIFORM ? mg_init_uniform(-bound, bound) : mg_init_zeros();
        s->b = mg_layer_param(self, params, "bias", 1, (int64_t[]){out}, bi, MG_NO_DECAY);
        if (!s->b) return MG_ERR_INVALID;
    }
    return MG_OK;
}

static mg_status bad_arg(mg_layer *self, const char *kind, const char *what, int64_t v, int64_t lo) {
    return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): %s = %lld must be in [%lld, %d]", mg_layer_prefix(self), kind,
                        what, (long long)v, (long long)lo, INT32_MAX);
}

static mg_status conv2d_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_conv2d_cfg *cfg = cfgp;
    conv *s = mg_layer_state(self);
    s->one_d = false;
    for (int i = 0; i < 2; i++) {
        if (cfg->stride[i] < 0 || cfg->stride[i] > INT32_MAX) return bad_arg(self, "conv2d", "stride", cfg->stride[i], 0);
        if (cfg->padding[i] < 0 || cfg->padding[i] > INT32_MAX)
            return bad_arg(self, "conv2d", "padding", cfg->padding[i], 0);
        if (cfg->dilation[i] < 0 || cfg->dilation[i] > INT32_MAX)
            return bad_arg(self, "conv2d", "dilation", cfg->dilation[i], 0);
        s->opts2.stride[i] = cfg->stride[i], s->opts2.padding[i] = cfg->padding[i];
        s->opts2.dilation[i] = cfg->dilation[i];
    }
    s->opts2.groups = cfg->groups ? cfg->groups : 1;
    mg_status st = conv_declare(self, params, "conv2d", cfg->in, cfg->out, cfg->kernel, s->opts2.groups, cfg->bias,
                                cfg->weight_init, cfg->bias_init);
    if (st != MG_OK) return st;
    mg_layer_set_shape(self, "(N,%lld,H,W)", (long long)s->out);
    return MG_OK;
}

static mg_status conv1d_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_conv1d_cfg *cfg = cfgp;
    conv *s = mg_layer_state(self);
    s->one_d = true;
    if (cfg->stride < 0 || cfg->stride > INT32_MAX) return bad_arg(self, "conv1d", "stride", cfg->stride, 0);
    if (cfg->padding < 0 || cfg->padding > INT32_MAX) return bad_arg(self, "conv1d", "padding", cfg->padding, 0);
    if (cfg->dilation < 0 || cfg->dilation > INT32_MAX) return bad_arg(self, "conv1d", "dilation", cfg->dilation, 0);
    if (cfg->causal && cfg->padding)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (conv1d): causal pads on the left itself: padding must be 0, got %lld",
                            mg_layer_prefix(self), (long long)cfg->padding);
    s->opts1 = (mg_conv1d_opts){cfg->stride, cfg->padding, cfg->dilation, cfg->groups ? cfg->groups : 1, cfg->causal};
    mg_status st = conv_declare(self, params, "conv1d", cfg->in, cfg->out, (int64_t[]){1, cfg->kernel},
                                s->opts1.groups, cfg->bias, cfg->weight_init, cfg->bias_init);
    if (st != MG_OK) return st;
    mg_layer_set_shape(self, "(N,%lld,L)", (long long)s->out);
    return MG_OK;
}

/* The keys both kinds read; *wi and *bi must outlive the init call. */
static void read_common(mg_config *cfg, int64_t *in, int64_t *out, int64_t *kernel, int64_t *groups, bool *bias,
                        mg_init *wi, mg_init *bi) {
    *in = mg_config_int(cfg, "in", 0, 1, INT32_MAX);
    *out = mg_config_int(cfg, "out", 0, 1, INT32_MAX);
    *kernel = mg_config_int(cfg, "kernel", 0, 1, INT32_MAX);
    *groups = mg_config_int(cfg, "groups", 1, 1, INT32_MAX);
    *bias = mg_config_bool(cfg, "bias", true);
    double fan_in = *in > 0 && *kernel > 0 && *groups > 0 ? (double)(*in / *groups) * (double)*kernel : 1.0;
    double bound = 1.0 / sqrt(fan_in > 0 ? fan_in : 1.0);
    *wi = mg_layer_init_from(cfg, "uniform", 0.02, bound);
    static const char *const bkinds[] = {"zeros", "uniform", NULL};
    int bk = mg_config_choice(cfg, "bias_init", bkinds, wi->kind == MG_INIT_UNIFORM ? 1 : 0);
    *bi = bk == 1 ? mg_init_uniform(-(float)bound, (float)bound) : mg_init_zeros();
}

static mg_status conv2d_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_conv2d_cfg c = {0};
    int64_t k = 0;
    mg_init wi, bi;
    read_common(cfg, &c.in, &c.out, &k, &c.groups, &c.bias, &wi, &bi);
    /* the uniform bound counts kernel*kernel taps in 2-d */
    if (wi.kind == MG_INIT_UNIFORM && !mg_config_has(cfg, "bound") && c.in > 0 && k > 0 && c.groups > 0) {
        float b = (float)(1.0 / sqrt((double)(c.in / c.groups) * (double)k * (double)k));
        wi = mg_init_uniform(-b, b);
        if (bi.kind == MG_INIT_UNIFORM) bi = wi;
    }
    c.kernel[0] = c.kernel[1] = k;
    c.stride[0] = c.stride[1] = mg_config_int(cfg, "stride", 1, 1, INT32_MAX);
    c.padding[0] = c.padding[1] = mg_config_int(cfg, "padding", 0, 0, INT32_MAX);
    c.dilation[0] = c.dilation[1] = mg_config_int(cfg, "dilation", 1, 1, INT32_MAX);
    c.weight_init = &wi, c.bias_init = &bi;
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return conv2d_init(self, &c, params);
}

static mg_status conv1d_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_conv1d_cfg c = {0};
    mg_init wi, bi;
    read_common(cfg, &c.in, &c.out, &c.kernel, &c.groups, &c.bias, &wi, &bi);
    c.stride = mg_config_int(cfg, "stride", 1, 1, INT32_MAX);
    c.padding = mg_config_int(cfg, "padding", 0, 0, INT32_MAX);
    c.dilation = mg_config_int(cfg, "dilation", 1, 1, INT32_MAX);
    c.causal = mg_config_bool(cfg, "causal", false);
    c.weight_init = &wi, c.bias_init = &bi;
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    return conv1d_init(self, &c, params);
}

static mg_tensor *conv_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    conv *s = mg_layer_state(self);
    int nd = s->one_d ? 3 : 4;
    if (x->dtype != MG_F32 || x->ndim != nd || x->shape[1] != s->in) {
        mg_layer_fail(self, ctx, "x%s: need float32 %s with %lld channels", MG_LSHAPE(x), s->one_d ? "(N,C,L)" : "(N,C,H,W)",
                      (long long)s->in);
        return mg_ctx_dummy(ctx);
    }
    return s->one_d ? mg_conv1d(ctx, x, s->w, s->b, &s->opts1) : mg_conv2d(ctx, x, s->w, s->b, &s->opts2);
}

const mg_layer_vtable mg_layer_conv2d = {
    MG_LAYER_VT_HEADER,
    .name = "conv2d",
    .summary = "2-d convolution (N,in,H,W) -> (N,out,H',W'), weight (out,in/groups,kh,kw)",
    .instance_size = sizeof(conv),
    .create = conv2d_create,
    .forward = conv_forward,
};

const mg_layer_vtable mg_layer_conv1d = {
    MG_LAYER_VT_HEADER,
    .name = "conv1d",
    .summary = "1-d convolution (N,in,L) -> (N,out,L'), weight (out,in/groups,k)",
    .instance_size = sizeof(conv),
    .create = conv1d_create,
    .forward = conv_forward,
};

mg_layer *mg_conv2d_new(mg_params *params, const char *name, const mg_conv2d_cfg *cfg) {
    return mg_layer_new(&mg_layer_conv2d, name, params, conv2d_init, cfg);
}

mg_layer *mg_conv1d_new(mg_params *params, const char *name, const mg_conv1d_cfg *cfg) {
    return mg_layer_new(&mg_layer_conv1d, name, params, conv1d_init, cfg);
}
