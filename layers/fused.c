/* The built-in layers' "activation, then Linear" pairs, fused where both are built-ins. */
#include "registry_internal.h"

/* Enters l's error scope, as mg_layer_forward would run l: a failure inside names it. */
static void push_scope(mg_layer *l, mg_ctx *ctx) {
    char label[MG_SCOPE_LABEL_MAX];
    const char *prefix = mg_layer_prefix(l);
    if (*prefix)
        snprintf(label, sizeof label, "%s (%s)", prefix, mg_layer_vt(l)->name);
    else
        snprintf(label, sizeof label, "%s", mg_layer_vt(l)->name);
    mg_ctx_push_scope(ctx, label);
}

mg_tensor *mg_layer_gelu_linear(mg_layer *lin, mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind, const mg_fwd *args) {
    mg_tensor *w, *b;
    int64_t in;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!mg_layer_linear_parts(lin, &w, &b, &in) || x->dtype != MG_F32 || x->ndim < 1 || mg_cols(x) != in)
        return mg_layer_forward(lin, ctx, mg_gelu(ctx, x, kind), args);
    push_scope(lin, ctx);
    mg_tensor *y = mg_gelu_linear(ctx, x, kind, w, b);
    mg_ctx_pop_scope(ctx);
    return y;
}

mg_tensor *mg_layer_norm_linear(mg_layer *ln, mg_layer *lin, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    mg_tensor *w, *b, *lw, *lb;
    int64_t in, dim;
    float eps;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!mg_layer_linear_parts(lin, &w, &b, &in) || !mg_layer_layernorm_parts(ln, &lw, &lb, &eps, &dim) ||
        x->dtype != MG_F32 || x->ndim < 1 || mg_cols(x) != dim || dim != in)
        return mg_layer_forward(lin, ctx, mg_layer_forward(ln, ctx, x, args), args);
    push_scope(lin, ctx);
    mg_tensor *y = mg_layernorm_linear(ctx, x, lw, lb, eps, w, b);
    mg_ctx_pop_scope(ctx);
    return y;
}

mg_tensor *mg_layer_merge_heads_linear(mg_layer *lin, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    mg_tensor *w, *b;
    int64_t in;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!mg_layer_linear_parts(lin, &w, &b, &in) || x->dtype != MG_F32 || x->ndim != 4 ||
        x->shape[1] * x->shape[3] != in)
        return mg_layer_forward(lin, ctx, mg_merge_heads(ctx, x), args);
    push_scope(lin, ctx);
    mg_tensor *y = mg_merge_heads_linear(ctx, x, w, b);
    mg_ctx_pop_scope(ctx);
    return y;
}
