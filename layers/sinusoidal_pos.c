/* sinusoidal_pos (pos=sinusoidal): the fixed table of Vaswani et al. added to x (B,T,dim):
 *   PE[p, 2i] = sin(p / base^(2i/dim)),  PE[p, 2i+1] = cos(p / base^(2i/dim))
 * computed in double, rounded to float. Rows 0..max_len-1 are computed once at create (at most
 * 2^24 values: a larger max_len, say from a checkpoint's metadata, does not allocate for rows
 * that may never be used); rows past them are computed into the step arena, the same values, so
 * any position works.
 * Keys: dim (required, even); max_len (1024; a model offers its block size); base (10000). */
#include "registry_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int64_t dim, rows; /* rows: of the table computed at create */
    double base;
    float *table; /* [rows, dim], owned */
} sinusoidal;

static void fill_rows(float *dst, int64_t p0, int64_t n, int64_t dim, double base) {
    for (int64_t p = 0; p < n; p++)
        for (int64_t i = 0; i < dim; i += 2) {
            double ang = (double)(p0 + p) / pow(base, (double)i / (double)dim);
            dst[p * dim + i] = (float)sin(ang);
            dst[p * dim + i + 1] = (float)cos(ang);
        }
}

static mg_status sinusoidal_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)params;
    sinusoidal *s = mg_layer_state(self);
    s->dim = mg_config_int(cfg, "dim", 0, 2, INT32_MAX);
    s->rows = mg_config_int(cfg, "max_len", 1024, 1, 1 << 24);
    s->base = mg_config_float(cfg, "base", 10000.0, 1.000001, 1e12);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    if (s->dim % 2)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (sinusoidal_pos): dim %lld must be even", mg_layer_prefix(self),
                            (long long)s->dim);
    int64_t most = ((int64_t)1 << 24) / s->dim; /* 0 for a dim above 2^24: every row on the fly */
    if (s->rows > most) s->rows = most;
    s->table = s->rows ? malloc((size_t)(s->rows * s->dim) * sizeof(float)) : NULL;
    if (s->rows && !s->table) return mg_set_error(MG_ERR_NOMEM, "layer '%s' (sinusoidal_pos): out of memory", mg_layer_prefix(self));
    fill_rows(s->table, 0, s->rows, s->dim, s->base);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)s->dim);
    return MG_OK;
}

static void sinusoidal_destroy(mg_layer *self) {
    sinusoidal *s = mg_layer_state(self);
    free(s->table);
}

static mg_tensor *sinusoidal_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    sinusoidal *s = mg_layer_state(self);
    if (x->dtype != MG_F32 || x->ndim < 2 || x->shape[x->ndim - 1] != s->dim || args->pos0 < 0) {
        mg_layer_fail(self, ctx, "x%s at pos0 %lld: need float32 (...,T,%lld) and pos0 >= 0", MG_LSHAPE(x),
                      (long long)args->pos0, (long long)s->dim);
        return mg_ctx_dummy(ctx);
    }
    int64_t T = x->shape[x->ndim - 2], shape[2] = {T, s->dim};
    mg_tensor *pe;
    if (args->pos0 + T <= s->rows) {
        pe = mg_tensor_wrap(ctx, MG_F32, 2, shape, s->table + args->pos0 * s->dim); /* no copy */
    } else {
        pe = mg_tensor_new(ctx, MG_F32, 2, shape);
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
        fill_rows(pe->data, args->pos0, T, s->dim, s->base);
    }
    return mg_add(ctx, x, pe);
}

const mg_layer_vtable mg_layer_sinusoidal_pos = {
    MG_LAYER_VT_HEADER,
    .name = "sinusoidal_pos",
    .summary = "fixed sinusoidal positions added to the embedding (no parameters)",
    .pos_scheme = "sinusoidal",
    .instance_size = sizeof(sinusoidal),
    .create = sinusoidal_create,
    .forward = sinusoidal_forward,
    .destroy = sinusoidal_destroy,
};
