/* gpt: the GPT as a layer, assembled from registered layers by name: int32 ids (B,T) -> logits
 * (B,T,vocab). The positional scheme is whichever layer registered the `pos` name; if none has,
 * the plugin of that name is loaded from the plugin search path. Nothing here knows any scheme.
 * The config keys are mg_gpt_config's fields (gpt.h), parsed by mg_gpt_config_from below. */
#include "minigrad/checked.h"
#include "minigrad/gpt.h"
#include "registry_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The most parameters a GPT config may make (2^36: 256 GiB of float32 weights). */
#define MAX_PARAMS ((int64_t)1 << 36)

mg_gpt_config mg_gpt_config_default(void) {
    mg_gpt_config c = {
        .vocab_size = 256, .block_size = 128, .n_layer = 4, .n_head = 4, .n_embd = 128,
        .pos = "learned", .pos_opts = "", .dropout = 0.0f, .causal = true, .gelu = MG_GELU_TANH,
        .emb_scale = 1.0f, .tied_head = true, .head_bias = false, .init_std = 0.02f, .ln_eps = 1e-5f,
        .attn_scale = 0.0f,
    };
    return c;
}

mg_status mg_gpt_config_from(mg_config *kv, mg_gpt_config *out) {
    static const char *const gelus[] = {"tanh", "erf", NULL}, *const heads[] = {"tied", "linear", NULL};
    mg_gpt_config c = *out;
    c.vocab_size = mg_config_int(kv, "vocab_size", c.vocab_size, 1, INT32_MAX);
    c.block_size = mg_config_int(kv, "block_size", c.block_size, 1, 1 << 24);
    c.n_layer = mg_config_int(kv, "n_layer", c.n_layer, 0, 1 << 16);
    c.n_head = mg_config_int(kv, "n_head", c.n_head, 1, 1 << 16);
    c.n_embd = mg_config_int(kv, "n_embd", c.n_embd, 1, 1 << 20);
    const char *pos = mg_config_str(kv, "pos", c.pos);
    const char *pos_opts = mg_config_str(kv, "pos_opts", c.pos_opts);
    c.dropout = (float)mg_config_float(kv, "dropout", c.dropout, 0.0, 0.999);
    c.causal = mg_config_bool(kv, "causal", c.causal);
    c.gelu = mg_config_choice(kv, "gelu", gelus, c.gelu == MG_GELU_ERF) == 1 ? MG_GELU_ERF : MG_GELU_TANH;
    const char *scale = mg_config_str(kv, "emb_scale", ""); /* "" keeps *out's */
    c.tied_head = mg_config_choice(kv, "head", heads, c.tied_head ? 0 : 1) == 0;
    c.head_bias = mg_config_bool(kv, "head_bias", c.head_bias);
    c.init_std = (float)mg_config_float(kv, "init_std", c.init_std, 0.0, 1e6);
    c.ln_eps = (float)mg_config_float(kv, "ln_eps", c.ln_eps, 0.0, 1.0);
    c.attn_scale = (float)mg_config_float(kv, "attn_scale", c.attn_scale, 0.0, 1e6); /* 0: 1/sqrt(head dim) */
    mg_status st = mg_config_status(kv);
    if (st != MG_OK) return st;
    const char *name = mg_config_name(kv);
    if (*scale) {
        if (strcmp(scale, "sqrt") == 0) {
            c.emb_scale = sqrtf((float)c.n_embd);
        } else {
            char *end;
            double v = strtod(scale, &end);
            if (end == scale || *end || !isfinite(v))
                return mg_set_error(MG_ERR_INVALID, "%s: key 'emb_scale': expected a number or 'sqrt', got '%s'", name,
                                    scale);
            c.emb_scale = (float)v;
        }
    }
    if (strlen(pos) >= sizeof c.pos || !*pos)
        return mg_set_error(MG_ERR_INVALID, "%s: key 'pos': '%s' is empty or longer than %zu characters", name, pos,
                            sizeof c.pos - 1);
    if (strlen(pos_opts) >= sizeof c.pos_opts)
        return mg_set_error(MG_ERR_INVALID, "%s: key 'pos_opts' is longer than %zu characters", name, sizeof c.pos_opts - 1);
    char at[600];
    if (c.n_embd % c.n_head)
        return mg_set_error(MG_ERR_INVALID, "%s: n_embd %lld is not a multiple of n_head %lld",
                            mg_config_where(kv, mg_config_has(kv, "n_head") ? "n_head" : "n_embd", at, sizeof at),
                            (long long)c.n_embd, (long long)c.n_head);
    /* Each size lies in its range, but together they may still make a model no machine holds, and
     * whose byte counts would no longer fit: the parameter count of the token table, the blocks
     * and a linear head, computed with checked arithmetic, is held to MAX_PARAMS. */
    int64_t C = c.n_embd, per_block, blocks, table, total;
    bool over = mg_ckd_mul_i64(&per_block, 12 * C, C) || mg_ckd_add_i64(&per_block, per_block, 13 * C) ||
                mg_ckd_mul_i64(&blocks, per_block, c.n_layer) || mg_ckd_mul_i64(&table, c.vocab_size, C) ||
                mg_ckd_add_i64(&total, table, blocks) || (!c.tied_head && mg_ckd_add_i64(&total, total, table));
    if (over || total > MAX_PARAMS)
        return mg_set_error(MG_ERR_INVALID, "%s: vocab_size %lld, n_layer %lld and n_embd %lld make %s%lld parameters, "
                            "more than the %lld a model may have", name, (long long)c.vocab_size, (long long)c.n_layer,
                            (long long)c.n_embd, over ? "over " : "", over ? (long long)INT64_MAX : (long long)total,
                            (long long)MAX_PARAMS);
    if (c.tied_head && c.head_bias)
        return mg_set_error(MG_ERR_INVALID, "%s: head_bias needs an untied head (head = linear)", name);
    if (pos != c.pos) memcpy(c.pos, pos, strlen(pos) + 1); /* absent keys point into c itself */
    if (pos_opts != c.pos_opts) memcpy(c.pos_opts, pos_opts, strlen(pos_opts) + 1);
    st = mg_config_check_used(kv);
    if (st != MG_OK) return st;
    *out = c;
    return MG_OK;
}

typedef struct {
    mg_gpt_config c;
    mg_layer *wte, *pos, *ln_f, *lm_head;
    mg_layer **h;
    mg_tensor *wte_w;
} gpt;

/* The layer registered for a positional scheme; when none is, the plugin on the search path that
 * registers it is loaded (minigrad/plugin.h), whatever its file is called. */
static mg_status find_scheme(const char *scheme, const mg_layer_vtable **out) {
    mg_status st = mg_layer_find_pos_or_load(scheme, out);
    return st == MG_OK ? MG_OK : mg_wrap_error(st, "pos");
}

static mg_status gpt_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    gpt *s = mg_layer_state(self);
    s->c = mg_gpt_config_default();
    mg_status st = mg_gpt_config_from(cfg, &s->c);
    if (st != MG_OK) return st;
    const mg_gpt_config *c = &s->c;
    char label[300];
    snprintf(label, sizeof label, "layer '%s' (gpt)", *mg_layer_prefix(self) ? mg_layer_prefix(self) : "(model)");

    /* token embedding */
    mg_config *e = mg_config_new(label);
    if (!e) return MG_ERR_NOMEM;
    st = mg_config_setf(e, "vocab", "%lld", (long long)c->vocab_size);
    if (st == MG_OK) st = mg_config_setf(e, "dim", "%lld", (long long)c->n_embd);
    if (st == MG_OK) st = mg_config_setf(e, "scale", "%.9g", (double)c->emb_scale);
    if (st == MG_OK) st = mg_config_set(e, "init", "normal");
    if (st == MG_OK) st = mg_config_setf(e, "std", "%.9g", (double)c->init_std);
    if (st == MG_OK) st = mg_layer_child(self, "wte", "embedding", e, params, &s->wte);
    mg_config_free(e);
    if (st != MG_OK) return st;
    s->wte_w = mg_layer_get_param(s->wte, "weight");

    /* positional scheme: offered the model's sizes, given the user's pos_opts */
    if (strcmp(c->pos, "none") != 0) {
        const mg_layer_vtable *pvt;
        st = find_scheme(c->pos, &pvt);
        if (st != MG_OK) return st;
        char plabel[700];
        snprintf(plabel, sizeof plabel, "%s: pos '%s' (layer %s)", label, c->pos, pvt->name);
        mg_config *p = mg_config_new(plabel);
        if (!p) return MG_ERR_NOMEM;
        st = mg_config_offerf(p, "dim", "%lld", (long long)c->n_embd);
        if (st == MG_OK) st = mg_config_offerf(p, "max_len", "%lld", (long long)c->block_size);
        if (st == MG_OK) st = mg_config_offerf(p, "n_head", "%lld", (long long)c->n_head);
        if (st == MG_OK) st = mg_config_offerf(p, "head_dim", "%lld", (long long)(c->n_embd / c->n_head));
        if (st == MG_OK) st = mg_config_offer(p, "causal", c->causal ? "true" : "false");
        if (st == MG_OK) st = mg_config_set_list(p, c->pos_opts);
        if (st == MG_OK) st = mg_layer_child(self, "wpe", pvt->name, p, params, &s->pos);
        mg_config_free(p);
        if (st != MG_OK) return st;
    }

    /* blocks */
    s->h = calloc((size_t)(c->n_layer ? c->n_layer : 1), sizeof *s->h);
    if (!s->h) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", label);
    double proj_std = c->n_layer ? c->init_std / sqrt(2.0 * (double)c->n_layer) : c->init_std;
    for (int64_t i = 0; i < c->n_layer && st == MG_OK; i++) {
        mg_config *b = mg_config_new(label);
        if (!b) return MG_ERR_NOMEM;
        st = mg_config_setf(b, "dim", "%lld", (long long)c->n_embd);
        if (st == MG_OK) st = mg_config_setf(b, "n_head", "%lld", (long long)c->n_head);
        if (st == MG_OK) st = mg_config_set(b, "causal", c->causal ? "true" : "false");
        if (st == MG_OK) st = mg_config_set(b, "gelu", c->gelu == MG_GELU_ERF ? "erf" : "tanh");
        if (st == MG_OK) st = mg_config_setf(b, "dropout", "%.9g", (double)c->dropout);
        if (st == MG_OK) st = mg_config_setf(b, "std", "%.9g", (double)c->init_std);
        if (st == MG_OK) st = mg_config_setf(b, "proj_std", "%.17g", proj_std);
        if (st == MG_OK) st = mg_config_setf(b, "eps", "%.9g", (double)c->ln_eps);
        if (st == MG_OK) st = mg_config_setf(b, "attn_scale", "%.9g", (double)c->attn_scale);
        char local[32];
        snprintf(local, sizeof local, "h.%lld", (long long)i);
        if (st == MG_OK) st = mg_layer_child(self, local, "decoder_block", b, params, &s->h[i]);
        mg_config_free(b);
    }
    if (st == MG_OK) st = mg_layer_child_layernorm(self, "ln_f", c->n_embd, c->ln_eps, params, &s->ln_f);
    if (st == MG_OK && !c->tied_head)
        st = mg_layer_child_linear(self, "lm_head", c->n_embd, c->vocab_size, c->head_bias, c->init_std, params,
                                   &s->lm_head);
    mg_layer_set_pos_limit(self, s->pos ? mg_layer_pos_limit(s->pos) : 0);
    mg_layer_set_shape(self, "(B,T,%lld)", (long long)c->vocab_size);
    return st;
}

static void gpt_destroy(mg_layer *self) {
    gpt *s = mg_layer_state(self);
    free(s->h);
}

static mg_tensor *gpt_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *ids, const mg_fwd *args) {
    gpt *s = mg_layer_state(self);
    if (ids->dtype != MG_I32 || ids->ndim != 2) {
        mg_layer_fail(self, ctx, "ids%s: need int32 token ids (B,T)", MG_LSHAPE(ids));
        return mg_ctx_dummy(ctx);
    }
    mg_fwd a = *args;
    a.pos = s->pos;
    a.kv = NULL;
    /* every sublayer must give back (B,T,C): the positional scheme may come from any plugin */
    const int64_t btc[3] = {ids->shape[0], ids->shape[1], s->c.n_embd}, btv[3] = {btc[0], btc[1], s->c.vocab_size};
    mg_tensor *x = mg_layer_forward_expect(s->wte, ctx, ids, &a, 3, btc);
    if (s->pos) x = mg_layer_forward_expect(s->pos, ctx, x, &a, 3, btc);
    x = mg_layer_dropout(self, ctx, x, s->c.dropout, &a);
    for (int64_t i = 0; i < s->c.n_layer; i++) {
        a.kv = args->kv ? &args->kv[i] : NULL;
        x = mg_layer_forward_expect(s->h[i], ctx, x, &a, 3, btc);
    }
    a.kv = NULL;
    x = mg_layer_forward_expect(s->ln_f, ctx, x, &a, 3, btc);
    return s->lm_head ? mg_layer_forward_expect(s->lm_head, ctx, x, &a, 3, btv) : mg_matmul_nt(ctx, x, s->wte_w);
}

const mg_layer_vtable mg_layer_gpt = {
    MG_LAYER_VT_HEADER,
    .name = "gpt",
    .summary = "GPT: wte, positional scheme, n_layer decoder blocks, ln_f, tied or linear head",
    .instance_size = sizeof(gpt),
    .create = gpt_create,
    .forward = gpt_forward,
    .destroy = gpt_destroy,
};
