/* lstm and gru: PyTorch's nn.LSTM / nn.GRU with batch_first=True, x (B,T,in) -> (B,T,H), composed
 * from ops (see minigrad/rnn.h for the equations, parameter names and keys).
 *
 * Per stacked layer: one matrix product projects the whole input sequence, xp = x W_ih^T + b_ih
 * (+ b_hh for lstm, where the two biases only ever appear summed) -> (B,T,G*H). The recurrence then
 * takes step t's row of xp and adds h W_hh^T; step 0 from a zero state skips that product. The T
 * hidden states are joined by one mg_cat into the layer's output. */
#include "registry_internal.h"
#include "minigrad/rnn.h"

#include <math.h>

typedef struct {
    bool gru;
    int64_t in, H, L, G;
    mg_tensor *w_ih[MG_RNN_MAX_LAYERS], *w_hh[MG_RNN_MAX_LAYERS];
    mg_tensor *b_ih[MG_RNN_MAX_LAYERS], *b_hh[MG_RNN_MAX_LAYERS];
    mg_tensor *h0, *c0; /* for the next forward only */
    mg_tensor *hn, *cn; /* of the last forward */
} rnn;

/* The cfg structs of lstm and gru have the same fields; this is their common reading. */
static mg_status rnn_init(mg_layer *self, bool gru, int64_t in, int64_t H, int64_t L, bool no_bias,
                          const mg_init *init, mg_params *params) {
    rnn *s = mg_layer_state(self);
    const char *kind = gru ? "gru" : "lstm";
    if (L == 0) L = 1;
    if (in < 1 || in > INT32_MAX || H < 1 || H > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): input_size = %lld and hidden_size = %lld must be in [1, %d]",
                            mg_layer_prefix(self), kind, (long long)in, (long long)H, INT32_MAX);
    if (L < 1 || L > MG_RNN_MAX_LAYERS)
        return mg_set_error(MG_ERR_INVALID, "layer '%s' (%s): num_layers = %lld must be in [1, %d]", mg_layer_prefix(self),
                            kind, (long long)L, MG_RNN_MAX_LAYERS);
    s->gru = gru, s->in = in, s->H = H, s->L = L, s->G = gru ? 3 : 4;
    const float k = (float)(1.0 / sqrt((double)H));
    const mg_init wi = init ? *init : mg_init_uniform(-k, k);
    for (int l = 0; l < L; l++) {
        char name[32];
        const int64_t inl = l == 0 ? in : H, GH = s->G * H;
        snprintf(name, sizeof name, "weight_ih_l%d", l);
        if (!(s->w_ih[l] = mg_layer_param(self, params, name, 2, (int64_t[]){GH, inl}, wi, 0))) return MG_ERR_INVALID;
        snprintf(name, sizeof name, "weight_hh_l%d", l);
        if (!(s->w_hh[l] = mg_layer_param(self, params, name, 2, (int64_t[]){GH, H}, wi, 0))) return MG_ERR_INVALID;
        if (no_bias) continue;
        snprintf(name, sizeof name, "bias_ih_l%d", l);
        if (!(s->b_ih[l] = mg_layer_param(self, params, name, 1, (int64_t[]){GH}, wi, MG_NO_DECAY)))
            return MG_ERR_INVALID;
        snprintf(name, sizeof name, "bias_hh_l%d", l);
        if (!(s->b_hh[l] = mg_layer_param(self, params, name, 1, (int64_t[]){GH}, wi, MG_NO_DECAY)))
            return MG_ERR_INVALID;
    }
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)H);
    return MG_OK;
}

static mg_status lstm_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_lstm_cfg *c = cfgp;
    return rnn_init(self, false, c->input_size, c->hidden_size, c->num_layers, c->no_bias, c->init, params);
}

static mg_status gru_init(mg_layer *self, const void *cfgp, mg_params *params) {
    const mg_gru_cfg *c = cfgp;
    return rnn_init(self, true, c->input_size, c->hidden_size, c->num_layers, c->no_bias, c->init, params);
}

/* Both string configs read the same keys into the same fields. */
static void read_keys(mg_config *cfg, int64_t *in, int64_t *H, int64_t *L, bool *no_bias) {
    *in = mg_config_int(cfg, "input_size", 0, 1, INT32_MAX);
    *H = mg_config_int(cfg, "hidden_size", 0, 1, INT32_MAX);
    *L = mg_config_int(cfg, "num_layers", 1, 1, MG_RNN_MAX_LAYERS);
    *no_bias = !mg_config_bool(cfg, "bias", true);
}

static mg_status lstm_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_lstm_cfg c = {0};
    read_keys(cfg, &c.input_size, &c.hidden_size, &c.num_layers, &c.no_bias);
    mg_status st = mg_config_status(cfg);
    return st != MG_OK ? st : lstm_init(self, &c, params);
}

static mg_status gru_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    mg_gru_cfg c = {0};
    read_keys(cfg, &c.input_size, &c.hidden_size, &c.num_layers, &c.no_bias);
    mg_status st = mg_config_status(cfg);
    return st != MG_OK ? st : gru_init(self, &c, params);
}

/* a + b, or a alone when b is NULL. */
static mg_tensor *add_opt(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) { return b ? mg_add(ctx, a, b) : a; }

/* Layer l's slice of an initial state (L,B,H) -> (B,H); NULL stays NULL. */
static mg_tensor *state_slice(mg_ctx *ctx, mg_tensor *s, int l, int64_t B, int64_t H) {
    if (!s) return NULL;
    return mg_reshape(ctx, mg_narrow(ctx, s, 0, l, 1), 2, (int64_t[]){B, H});
}

/* One stacked layer over the sequence: x (B,T,in_l) -> (B,T,H); *h and *c carry the state in
 * (NULL: zeros) and out. */
static mg_tensor *run_layer(rnn *s, mg_ctx *ctx, int l, mg_tensor *x, mg_tensor **h, mg_tensor **c) {
    const int64_t B = x->shape[0], T = x->shape[1], H = s->H, GH = s->G * H;
    mg_tensor *bias = s->b_ih[l];
    if (bias && !s->gru) bias = mg_add(ctx, s->b_ih[l], s->b_hh[l]); /* lstm: the biases only appear summed */
    mg_tensor *xp = add_opt(ctx, mg_matmul_nt(ctx, x, s->w_ih[l]), bias); /* (B,T,GH) */
    mg_tensor **hs = mg_ctx_alloc(ctx, (size_t)T * sizeof *hs, "rnn hidden states");
    if (!hs) return mg_ctx_dummy(ctx);
    for (int64_t t = 0; t < T && mg_ctx_ok(ctx); t++) {
        mg_tensor *gx = mg_reshape(ctx, mg_narrow(ctx, xp, 1, t, 1), 2, (int64_t[]){B, GH});
        mg_tensor *gh = *h ? mg_matmul_nt(ctx, *h, s->w_hh[l]) : NULL; /* (B,GH); NULL: h is zero */
        if (!s->gru) {
            mg_tensor *g = add_opt(ctx, gx, gh);
            mg_tensor *i = mg_sigmoid(ctx, mg_narrow(ctx, g, 1, 0, H));
            mg_tensor *f = mg_sigmoid(ctx, mg_narrow(ctx, g, 1, H, H));
            mg_tensor *gg = mg_tanh(ctx, mg_narrow(ctx, g, 1, 2 * H, H));
            mg_tensor *o = mg_sigmoid(ctx, mg_narrow(ctx, g, 1, 3 * H, H));
            mg_tensor *ig = mg_mul(ctx, i, gg);
            *c = *c ? mg_add(ctx, mg_mul(ctx, f, *c), ig) : ig;
            *h = mg_mul(ctx, o, mg_tanh(ctx, *c));
        } else {
            /* gh is h W_hh^T + b_hh; with a zero h, just b_hh (H-wide slices broadcast over B). */
            if (gh && s->b_hh[l]) gh = mg_add(ctx, gh, s->b_hh[l]);
            if (!gh) gh = s->b_hh[l];
            mg_tensor *r = mg_narrow(ctx, gx, 1, 0, H), *z = mg_narrow(ctx, gx, 1, H, H);
            mg_tensor *n = mg_narrow(ctx, gx, 1, 2 * H, H);
            if (gh) {
                r = mg_add(ctx, r, mg_narrow(ctx, gh, -1, 0, H));
                z = mg_add(ctx, z, mg_narrow(ctx, gh, -1, H, H));
            }
            r = mg_sigmoid(ctx, r);
            z = mg_sigmoid(ctx, z);
            if (gh) n = mg_add(ctx, n, mg_mul(ctx, r, mg_narrow(ctx, gh, -1, 2 * H, H)));
            n = mg_tanh(ctx, n);
            /* h' = (1 - z) n + z h = n + z (h - n) */
            mg_tensor *neg_n = mg_scale(ctx, n, -1.0f);
            *h = mg_add(ctx, n, mg_mul(ctx, z, add_opt(ctx, neg_n, *h)));
        }
        hs[t] = *h;
    }
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    return mg_reshape(ctx, mg_cat(ctx, hs, (int)T, 1), 3, (int64_t[]){B, T, H});
}

static bool state_ok(mg_layer *self, mg_ctx *ctx, const char *what, const mg_tensor *st, int64_t L, int64_t B,
                     int64_t H) {
    if (!st) return true;
    if (st->dtype == MG_F32 && st->ndim == 3 && st->shape[0] == L && st->shape[1] == B && st->shape[2] == H)
        return true;
    mg_layer_fail(self, ctx, "initial state %s%s: need float32 (num_layers, B, hidden_size) = (%lld,%lld,%lld)", what,
                  MG_LSHAPE(st), (long long)L, (long long)B, (long long)H);
    return false;
}

static mg_tensor *rnn_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    rnn *s = mg_layer_state(self);
    mg_tensor *h0 = s->h0, *c0 = s->c0;
    s->h0 = s->c0 = NULL;
    s->hn = s->cn = NULL;
    if (x->dtype != MG_F32 || x->ndim != 3 || x->shape[2] != s->in || x->shape[1] < 1 || x->shape[1] > INT32_MAX) {
        mg_layer_fail(self, ctx, "x%s: need float32 (B,T,input_size) with input_size = %lld and T >= 1 (batch first)",
                      MG_LSHAPE(x), (long long)s->in);
        return mg_ctx_dummy(ctx);
    }
    const int64_t B = x->shape[0];
    if (s->gru && c0) {
        mg_layer_fail(self, ctx, "a gru has no cell state: initial c0%s given", MG_LSHAPE(c0));
        return mg_ctx_dummy(ctx);
    }
    if (!state_ok(self, ctx, "h0", h0, s->L, B, s->H) || !state_ok(self, ctx, "c0", c0, s->L, B, s->H))
        return mg_ctx_dummy(ctx);
    mg_tensor *hl[MG_RNN_MAX_LAYERS], *cl[MG_RNN_MAX_LAYERS];
    mg_tensor *y = x;
    for (int l = 0; l < s->L; l++) {
        mg_tensor *h = state_slice(ctx, h0, l, B, s->H), *c = state_slice(ctx, c0, l, B, s->H);
        y = run_layer(s, ctx, l, y, &h, &c);
        hl[l] = mg_reshape(ctx, h, 3, (int64_t[]){1, B, s->H});
        if (!s->gru) cl[l] = mg_reshape(ctx, c, 3, (int64_t[]){1, B, s->H});
        if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    }
    s->hn = mg_cat(ctx, hl, (int)s->L, 0);
    if (!s->gru) s->cn = mg_cat(ctx, cl, (int)s->L, 0);
    if (!mg_ctx_ok(ctx)) {
        s->hn = s->cn = NULL;
        return mg_ctx_dummy(ctx);
    }
    return y;
}

const mg_layer_vtable mg_layer_lstm = {
    MG_LAYER_VT_HEADER,
    .name = "lstm",
    .summary = "LSTM over a sequence, batch first (B,T,in) -> (B,T,hidden); PyTorch's gates and names",
    .instance_size = sizeof(rnn),
    .create = lstm_create,
    .forward = rnn_forward,
};

const mg_layer_vtable mg_layer_gru = {
    MG_LAYER_VT_HEADER,
    .name = "gru",
    .summary = "GRU over a sequence, batch first (B,T,in) -> (B,T,hidden); PyTorch's gates and names",
    .instance_size = sizeof(rnn),
    .create = gru_create,
    .forward = rnn_forward,
};

mg_layer *mg_lstm_new(mg_params *params, const char *name, const mg_lstm_cfg *cfg) {
    return mg_layer_new(&mg_layer_lstm, name, params, lstm_init, cfg);
}

mg_layer *mg_gru_new(mg_params *params, const char *name, const mg_gru_cfg *cfg) {
    return mg_layer_new(&mg_layer_gru, name, params, gru_init, cfg);
}

static rnn *rnn_of(mg_layer *l) {
    if (!l) return NULL;
    const mg_layer_vtable *vt = mg_layer_vt(l);
    return vt == &mg_layer_lstm || vt == &mg_layer_gru ? mg_layer_state(l) : NULL;
}

void mg_rnn_set_initial_state(mg_layer *l, mg_tensor *h0, mg_tensor *c0) {
    rnn *s = rnn_of(l);
    if (s)
        s->h0 = h0, s->c0 = c0;
    else if (l && (h0 || c0)) /* clearing (NULL, NULL) asks nothing of a layer without state */
        mg_layer_fail_next_forward(l, "mg_rnn_set_initial_state: a %s layer has no recurrent state (lstm or gru only)",
                                   mg_layer_vt(l)->name);
}

mg_tensor *mg_rnn_final_state(mg_layer *l, mg_tensor **c_n) {
    rnn *s = rnn_of(l);
    if (c_n) *c_n = s ? s->cn : NULL;
    return s ? s->hn : NULL;
}
