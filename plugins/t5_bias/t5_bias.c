/* t5_bias: T5's learned relative-position bias (Raffel et al., "Exploring the Limits of Transfer
 * Learning with a Unified Text-to-Text Transformer") as a plugin positional scheme, pos=t5_bias.
 *
 * Adds nothing to the embedding; adds to the attention logit of query i and key j, in head h,
 *     table[bucket(j - i), h]
 * where table is the parameter "<prefix>.relative_attention_bias.weight" (num_buckets, n_head),
 * laid out as T5's nn.Embedding (one row per bucket, one column per head), so a checkpoint maps
 * onto the PyTorch module's state dict name for name. The bucket of a relative position r = j - i:
 *   - bidirectional attention (causal=false): half the buckets for r > 0, half for r <= 0, n = |r|;
 *   - causal: all of them for n = max(-r, 0) (keys after the query are masked anyway);
 * then with B the buckets of that half and E = B / 2: n < E is its own bucket; larger n share
 * logarithmically spaced buckets up to max_distance, E + floor(log(n / E) / log(max_distance / E)
 * * (B - E)), at most B - 1. Distances past max_distance all land in the last bucket, so any
 * length works.
 *
 * The bias reaches mg_attention as a tensor (the attn_bias_tensor hook) gathered from the table by
 * mg_embedding on bucket ids: the table's gradient flows back through the tape.
 * Keys: n_head (required; a model offers it), num_buckets (32), max_distance (128), init uniform |
 * normal (normal), std (0.02), bound (0.1). */
#include "minigrad/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t n_head, num_buckets, max_distance;
    mg_tensor *w; /* (num_buckets, n_head) */
} t5_bias;

/* T5's relative_position_bucket for r = key - query, in float32 as the reference computes it. */
static int32_t t5_bucket(int64_t r, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
    int64_t nb = num_buckets, ret = 0, n;
    if (bidirectional) {
        nb /= 2;
        if (r > 0) ret += nb;
        n = r < 0 ? -r : r;
    } else {
        n = r < 0 ? -r : 0;
    }
    const int64_t max_exact = nb / 2;
    if (n < max_exact) return (int32_t)(ret + n);
    const float scaled = logf((float)n / (float)max_exact) / (float)log((double)max_distance / (double)max_exact) *
                         (float)(nb - max_exact);
    int64_t large = max_exact + (int64_t)scaled;
    if (large > nb - 1) large = nb - 1;
    return (int32_t)(ret + large);
}

static mg_status t5_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    t5_bias *s = mg_layer_state(self);
    s->n_head = mg_config_int(cfg, "n_head", 0, 1, 1 << 16);
    s->num_buckets = mg_config_int(cfg, "num_buckets", 32, 2, 1 << 16);
    s->max_distance = mg_config_int(cfg, "max_distance", 128, 2, INT32_MAX);
    const char *init = mg_config_str(cfg, "init", "normal");
    const double std = mg_config_float(cfg, "std", 0.02, 0.0, 1e6);
    const double bound = mg_config_float(cfg, "bound", 0.1, 0.0, 1e6);
    mg_status st = mg_config_status(cfg);
    if (st != MG_OK) return st;
    const bool uniform = strcmp(init, "uniform") == 0;
    if (!uniform && strcmp(init, "normal") != 0)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (t5_bias): init '%s': use uniform or normal",
                            mg_layer_prefix(self), init);
    /* the smallest half of the buckets (bidirectional) must hold the exact range's one bucket */
    if (s->num_buckets < 4)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (t5_bias): num_buckets %lld: need at least 4",
                            mg_layer_prefix(self), (long long)s->num_buckets);
    mg_init in = uniform ? (mg_init){MG_INIT_UNIFORM, (float)-bound, (float)bound}
                         : (mg_init){MG_INIT_NORMAL, 0.0f, (float)std};
    s->w = mg_layer_param(self, params, "relative_attention_bias.weight", 2,
                          (int64_t[]){s->num_buckets, s->n_head}, in, MG_NO_DECAY);
    if (!s->w) return MG_ERR_INVALID;
    mg_layer_set_shape(self, "(B,T,C)");
    return MG_OK;
}

static mg_tensor *t5_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

/* (1, H, Tq, Tk): entry (h, i, j) is table[bucket(j - (q_pos0 + i)), h], gathered from the table
 * seen as a column of num_buckets * H rows (row bucket * H + h) so the result comes out head-major
 * without a transpose. */
static mg_tensor *t5_bias_tensor(mg_layer *self, mg_ctx *ctx, int64_t n_head, int64_t Tq, int64_t Tk,
                                 const mg_attn_opts *opts) {
    t5_bias *s = mg_layer_state(self);
    if (n_head != s->n_head) {
        mg_ctx_fail(ctx, "layer '%s' (t5_bias): made for %lld heads, asked to bias attention with %lld",
                    mg_layer_prefix(self), (long long)s->n_head, (long long)n_head);
        return NULL;
    }
    const int64_t H = s->n_head;
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 3, (int64_t[]){H, Tq, Tk});
    if (mg_ctx_error(ctx)) return NULL;
    const bool bidir = !opts->causal;
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++) {
            const int32_t b = t5_bucket(j - (opts->q_pos0 + i), bidir, s->num_buckets, s->max_distance);
            for (int64_t h = 0; h < H; h++) ids->i32[(h * Tq + i) * Tk + j] = (int32_t)(b * H + h);
        }
    mg_tensor *col = mg_reshape(ctx, s->w, 2, (int64_t[]){s->num_buckets * H, 1});
    return mg_reshape(ctx, mg_embedding(ctx, col, ids), 4, (int64_t[]){1, H, Tq, Tk});
}

static const mg_layer_vtable t5_layer = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "t5_bias",
    .summary = "T5 relative-position bias: a learned (num_buckets, n_head) table over log-spaced distance buckets",
    .pos_scheme = "t5_bias",
    .instance_size = sizeof(t5_bias),
    .create = t5_create,
    .forward = t5_forward,
    .attn_bias_tensor = t5_bias_tensor,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
    return host->register_layer(host, &t5_layer);
}
