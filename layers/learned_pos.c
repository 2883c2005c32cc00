/* learned_pos (LearnablePositionalEncoding, pos=learned): a trainable [max_len, dim] table whose
 * rows pos0 .. pos0+T-1 are added to x (B,T,dim). The rows are gathered with mg_embedding, so the
 * gradient scatters back into the table. Keys: max_len, dim (required; a model offers them);
 * init uniform|normal (uniform), bound (0.1), std (0.02). */
#include "registry_internal.h"

typedef struct {
    int64_t max_len, dim;
    mg_tensor *w;
} learned;

static mg_status learned_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    learned *s = mg_layer_state(self);
    s->max_len = mg_config_int(cfg, "max_len", 0, 1, INT32_MAX);
    s->dim = mg_config_int(cfg, "dim", 0, 1, INT32_MAX);
    mg_init init = mg_layer_init_from(cfg, "uniform", 0.02, 0.1);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    s->w = mg_layer_param(self, params, "weight", 2, (int64_t[]){s->max_len, s->dim}, init, MG_NO_DECAY);
    if (!s->w) return MG_ERR_INVALID;
    mg_layer_set_pos_limit(self, s->max_len);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
}

static mg_tensor *learned_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    learned *s = mg_layer_state(self);
    if (x->dtype != MG_F32 || x->ndim < 2 || x->shape[x->ndim - 1] != s->dim) {
        mg_layer_fail(self, ctx, "x%s: need float32 (...,T,%lld)", MG_LSHAPE(x), (long long)s->dim);
        return mg_ctx_dummy(ctx);
    }
    int64_t T = x->shape[x->ndim - 2];
    if (args->pos0 < 0 || args->pos0 + T > s->max_len) {
        mg_layer_fail(self, ctx, "positions %lld..%lld are outside the table's %lld rows (crop the context to max_len)",
                      (long long)args->pos0, (long long)(args->pos0 + T - 1), (long long)s->max_len);
        return mg_ctx_dummy(ctx);
    }
    mg_tensor *pos = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){T});
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    for (int64_t t = 0; t < T; t++) pos->i32[t] = (int32_t)(args->pos0 + t);
    return mg_add(ctx, x, mg_embedding(ctx, s->w, pos));
}

const mg_layer_vtable mg_layer_learned_pos = {
    MG_LAYER_VT_HEADER,
    .name = "learned_pos",
    .summary = "learned positional table [max_len, dim] added to the embedding",
    .pos_scheme = "learned",
    .instance_size = sizeof(learned),
    .create = learned_create,
    .forward = learned_forward,
};
