/* mg_gpt: the "gpt" layer with its parameter store, loss, summary and checkpoints. */
#include "minigrad/checkpoint.h"
#include "minigrad/gpt.h"
#include "registry_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct mg_gpt {
    mg_gpt_config cfg;
    mg_params *params;
    mg_layer *root;
    mg_gen_buffers gen; /* mg_gpt_generate's, kept for the next call */
    atomic_bool gen_busy;
};

/* The shortest decimal that reads back as the same float ("0.02", not "0.0199999996"). */
static void fmt_float(char *buf, size_t n, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

/* The attention scale the model uses: the config's, or 1/sqrt(head dim) as mg_attention computes
 * it (0 while the sizes are inconsistent; the layer's checks report that). */
static float attn_scale_of(const mg_gpt_config *c) {
    if (c->attn_scale > 0.0f) return c->attn_scale;
    if (c->n_head < 1 || c->n_embd % c->n_head) return 0.0f;
    return 1.0f / sqrtf((float)(c->n_embd / c->n_head));
}

/* The config as key/values, for the layer and for metadata: every number the forward pass needs,
 * attn_scale as the value in use rather than 0. */
static int config_pairs(const mg_gpt_config *c, const char *keys[MG_GPT_META_MAX], char vals[MG_GPT_META_MAX][MG_GPT_META_LEN]) {
    int n = 0;
#define KV(k, ...) (keys[n] = (k), snprintf(vals[n], MG_GPT_META_LEN, __VA_ARGS__), n++)
    KV("vocab_size", "%lld", (long long)c->vocab_size);
    KV("block_size", "%lld", (long long)c->block_size);
    KV("n_layer", "%lld", (long long)c->n_layer);
    KV("n_head", "%lld", (long long)c->n_head);
    KV("n_embd", "%lld", (long long)c->n_embd);
    KV("pos", "%s", c->pos);
    KV("pos_opts", "%s", c->pos_opts);
    keys[n] = "dropout", fmt_float(vals[n], MG_GPT_META_LEN, c->dropout), n++;
    KV("causal", "%s", c->causal ? "true" : "false");
    /* a kind outside the enum is written as its number, which no reader takes for a valid one */
    if (c->gelu == MG_GELU_TANH || c->gelu == MG_GELU_ERF)
        KV("gelu", "%s", c->gelu == MG_GELU_ERF ? "erf" : "tanh");
    else
        KV("gelu", "%d", (int)c->gelu);
    keys[n] = "emb_scale", fmt_float(vals[n], MG_GPT_META_LEN, c->emb_scale), n++;
    KV("head", "%s", c->tied_head ? "tied" : "linear");
    KV("head_bias", "%s", c->head_bias ? "true" : "false");
    keys[n] = "init_std", fmt_float(vals[n], MG_GPT_META_LEN, c->init_std), n++;
    keys[n] = "ln_eps", fmt_float(vals[n], MG_GPT_META_LEN, c->ln_eps), n++;
    keys[n] = "attn_scale", fmt_float(vals[n], MG_GPT_META_LEN, attn_scale_of(c)), n++;
#undef KV
    return n;
}

int mg_gpt_config_to_meta(const mg_gpt_config *cfg, mg_st_meta *meta, char buf[MG_GPT_META_MAX][MG_GPT_META_LEN]) {
    const char *keys[MG_GPT_META_MAX];
    char vals[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int n = config_pairs(cfg, keys, vals), m = 0;
    snprintf(buf[m], 64, "%s", MG_GPT_FORMAT);
    meta[m] = (mg_st_meta){"format", buf[m]};
    m++;
    for (int i = 0; i < n && m < MG_GPT_META_MAX; i++) {
        memcpy(buf[m], vals[i], MG_GPT_META_LEN);
        meta[m] = (mg_st_meta){keys[i], buf[m]};
        m++;
    }
    return m;
}

static const char *const config_keys[] = {"vocab_size", "block_size", "n_layer",   "n_head",    "n_embd",
                                          "pos",        "pos_opts",   "dropout",   "causal",    "gelu",
                                          "emb_scale",  "head",       "head_bias", "init_std",  "ln_eps",
                                          "attn_scale", NULL};

mg_status mg_gpt_config_from_file(const mg_st_file *f, mg_gpt_config *out) {
    const char *path = mg_st_path(f), *fmt = mg_st_meta_get(f, "format");
    if (!fmt)
        return mg_set_error(MG_ERR_FORMAT, "%s: __metadata__ has no 'format' (expected '%s'): not a minigrad GPT checkpoint",
                            path, MG_GPT_FORMAT);
    if (strcmp(fmt, MG_GPT_FORMAT) != 0)
        return mg_set_error(MG_ERR_FORMAT, "%s: __metadata__ format is '%s', expected '%s'", path, fmt, MG_GPT_FORMAT);
    /* Every key is required, except those a file from an older version can lack: ln_eps and
     * attn_scale (recorded since), pos_opts (written only when not empty until files carried a
     * checksum). A file with a checksum was written by this version or a later one. */
    bool old = mg_st_meta_get(f, MG_ST_CHECKSUM_KEY) == NULL;
    for (int i = 0; config_keys[i]; i++) {
        bool may_lack = old && (strcmp(config_keys[i], "ln_eps") == 0 || strcmp(config_keys[i], "attn_scale") == 0 ||
                                strcmp(config_keys[i], "pos_opts") == 0);
        if (!may_lack && !mg_st_meta_get(f, config_keys[i]))
            return mg_set_error(MG_ERR_FORMAT, "%s: __metadata__ lacks the key '%s' (a %s checkpoint states it)", path,
                                config_keys[i], MG_GPT_FORMAT);
    }
    char label[600];
    snprintf(label, sizeof label, "%s: __metadata__", path);
    mg_config *kv = mg_config_new(label);
    if (!kv) return MG_ERR_NOMEM;
    mg_status st = MG_OK;
    for (int i = 0; config_keys[i] && st == MG_OK; i++) {
        const char *v = mg_st_meta_get(f, config_keys[i]);
        if (v) st = mg_config_set(kv, config_keys[i], v);
    }
    mg_gpt_config c = mg_gpt_config_default();
    /* a file written before ln_eps and attn_scale were recorded used 1e-5 and 1/sqrt(head dim);
     * one without pos_opts had none */
    c.pos_opts[0] = 0, c.ln_eps = 1e-5f, c.attn_scale = 0.0f;
    if (st == MG_OK) st = mg_gpt_config_from(kv, &c);
    mg_config_free(kv);
    if (st == MG_OK) *out = c;
    return st;
}

mg_status mg_gpt_config_read(const char *path, mg_gpt_config *out) {
    mg_cfg_file *f;
    mg_status st = mg_cfg_file_read(path, &f);
    if (st != MG_OK) return st;
    int n = mg_cfg_file_count(f);
    if (n == 0) st = mg_set_error(MG_ERR_INVALID, "%s: no [gpt] section", path);
    for (int i = 0; i < n && st == MG_OK; i++)
        if (strcmp(mg_cfg_file_section(f, i), "gpt") != 0 || i > 0)
            st = mg_set_error(MG_ERR_INVALID, "%s:%d: unknown section '[%s]' (a GPT config has one [gpt] section)", path,
                              mg_cfg_file_line(f, i), mg_cfg_file_section(f, i));
    mg_gpt_config c = mg_gpt_config_default();
    if (st == MG_OK) st = mg_gpt_config_from(mg_cfg_file_config(f, 0), &c);
    mg_cfg_file_free(f);
    if (st == MG_OK) *out = c;
    return st;
}

void mg_gen_buffers_free(mg_gen_buffers *b) {
    mg_ctx_free(b->ctx);
    free(b->slab);
    *b = (mg_gen_buffers){NULL, NULL, 0};
}

mg_gen_buffers *mg_gpt_gen_take(mg_gpt *g) {
    return atomic_exchange(&g->gen_busy, true) ? NULL : &g->gen;
}

void mg_gpt_gen_give(mg_gpt *g) { atomic_store(&g->gen_busy, false); }

void mg_gpt_release_generation(mg_gpt *g) {
    if (!g || atomic_exchange(&g->gen_busy, true)) return; /* a call holds them: it keeps them */
    mg_gen_buffers_free(&g->gen);
    atomic_store(&g->gen_busy, false);
}

void mg_gpt_free(mg_gpt *g) {
    if (!g) return;
    mg_gen_buffers_free(&g->gen);
    mg_layer_free(g->root);
    mg_params_free(g->params);
    free(g);
}

/* The model's layers with their parameters declared but not yet allocated: the shapes are known
 * and nothing sized by them has been allocated. */
static mg_status gpt_build(const mg_gpt_config *cfg, mg_gpt **out) {
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_gpt_new: out is NULL");
    *out = NULL;
    if (!cfg) return mg_set_error(MG_ERR_INVALID, "mg_gpt_new: the config is NULL (start from mg_gpt_config_default())");
    /* fields the string config below could not carry faithfully: an unknown GELU kind would read
     * back as tanh, a negative attn_scale as the default */
    if (cfg->gelu != MG_GELU_TANH && cfg->gelu != MG_GELU_ERF)
        return mg_set_error(MG_ERR_INVALID, "gpt config: gelu = %d is not a GELU kind (MG_GELU_TANH or MG_GELU_ERF)",
                            (int)cfg->gelu);
    if (!(cfg->attn_scale >= 0.0f && isfinite(cfg->attn_scale)))
        return mg_set_error(MG_ERR_INVALID, "gpt config: attn_scale = %g must be finite and >= 0 (0: 1/sqrt(head dim))",
                            (double)cfg->attn_scale);
    mg_gpt *g = calloc(1, sizeof *g);
    mg_config *kv = mg_config_new("gpt config");
    if (!g || !kv || !(g->params = mg_params_new())) {
        mg_config_free(kv);
        mg_gpt_free(g);
        return mg_set_error(MG_ERR_NOMEM, "mg_gpt_new: out of memory");
    }
    const char *keys[MG_GPT_META_MAX];
    char vals[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int n = config_pairs(cfg, keys, vals);
    mg_status st = MG_OK;
    for (int i = 0; i < n && st == MG_OK; i++)
        st = mg_config_set(kv, keys[i], vals[i]);
    if (st == MG_OK) st = mg_layer_create("gpt", "", kv, g->params, &g->root);
    mg_config_free(kv);
    if (st != MG_OK) {
        mg_gpt_free(g);
        return st;
    }
    g->cfg = *cfg;
    g->cfg.attn_scale = attn_scale_of(cfg);
    *out = g;
    return MG_OK;
}

mg_status mg_gpt_new(const mg_gpt_config *cfg, mg_rng *rng, mg_gpt **out) {
    mg_status st = gpt_build(cfg, out);
    if (st == MG_OK && (st = mg_params_alloc((*out)->params, rng)) != MG_OK) {
        mg_gpt_free(*out);
        *out = NULL;
    }
    return st;
}

const mg_gpt_config *mg_gpt_cfg(const mg_gpt *g) { return &g->cfg; }
mg_params *mg_gpt_params(const mg_gpt *g) { return g->params; }
mg_layer *mg_gpt_layer(const mg_gpt *g) { return g->root; }
void mg_gpt_print(const mg_gpt *g, FILE *f) { mg_layer_print(g->root, f); }

mg_tensor *mg_gpt_forward(mg_gpt *g, mg_ctx *ctx, mg_tensor *ids, const mg_fwd *args) {
    return mg_layer_forward(g->root, ctx, ids, args);
}

mg_tensor *mg_gpt_loss(mg_gpt *g, mg_ctx *ctx, mg_tensor *ids, mg_tensor *targets, const mg_fwd *args) {
    return mg_cross_entropy(ctx, mg_gpt_forward(g, ctx, ids, args), targets, -1);
}

/* ---- checkpoints ---- */

mg_status mg_gpt_save(const mg_gpt *g, const char *path, const mg_st_meta *extra, int n_extra) {
    mg_st_meta meta[MG_GPT_META_MAX + 64];
    char buf[MG_GPT_META_MAX][MG_GPT_META_LEN];
    if (n_extra < 0 || n_extra > 64 || (n_extra && !extra))
        return mg_set_error(MG_ERR_INVALID, "%s: mg_gpt_save takes 0..64 extra metadata entries, got %d", path, n_extra);
    int n = mg_gpt_config_to_meta(&g->cfg, meta, buf);
    for (int i = 0; i < n_extra; i++) {
        for (int k = 0; k < n; k++)
            if (extra[i].key && strcmp(extra[i].key, meta[k].key) == 0)
                return mg_set_error(MG_ERR_INVALID, "%s: extra metadata key '%s' is a model config key", path, extra[i].key);
        meta[n + i] = extra[i];
    }
    return mg_checkpoint_save(path, g->params, false, meta, n + n_extra);
}

/* Every config key the file states must equal the model's. */
static mg_status check_meta(const mg_gpt *g, const mg_st_file *f) {
    mg_gpt_config fc;
    mg_status st = mg_gpt_config_from_file(f, &fc);
    if (st != MG_OK) return st;
    const char *keys[MG_GPT_META_MAX], *fkeys[MG_GPT_META_MAX];
    char vals[MG_GPT_META_MAX][MG_GPT_META_LEN], fvals[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int n = config_pairs(&g->cfg, keys, vals), fn = config_pairs(&fc, fkeys, fvals);
    for (int k = 0; config_keys[k]; k++) {
        if (!mg_st_meta_get(f, config_keys[k]) || strcmp(config_keys[k], "dropout") == 0) continue;
        const char *mv = "", *fv = "";
        for (int i = 0; i < n; i++)
            if (strcmp(keys[i], config_keys[k]) == 0) mv = vals[i];
        for (int i = 0; i < fn; i++)
            if (strcmp(fkeys[i], config_keys[k]) == 0) fv = fvals[i];
        if (strcmp(mv, fv) != 0)
            return mg_set_error(MG_ERR_INVALID, "%s: __metadata__ %s = '%s' but the model has %s = '%s'", mg_st_path(f),
                                config_keys[k], mg_st_meta_get(f, config_keys[k]), config_keys[k], mv);
    }
    return MG_OK;
}

mg_status mg_gpt_load(mg_gpt *g, const char *path) {
    mg_st_file *f;
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) return st;
    st = check_meta(g, f);
    mg_st_close(f);
    if (st != MG_OK) return st;
    return mg_checkpoint_load(path, g->params, NULL);
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

/* Every parameter the metadata's model declares is in the file with the same shape: checked
 * before the parameters are allocated, so that metadata claiming sizes its tensors do not have
 * (block_size 16777216 beside an 8-row position table) is refused without allocating for them. */
static mg_status check_declared(const mg_gpt *g, const mg_st_file *f) {
    const mg_gpt_config *c = &g->cfg;
    char sizes[200];
    snprintf(sizes, sizeof sizes, "vocab_size %lld, block_size %lld, n_layer %lld, n_head %lld, n_embd %lld",
             (long long)c->vocab_size, (long long)c->block_size, (long long)c->n_layer, (long long)c->n_head,
             (long long)c->n_embd);
    for (int i = 0; i < mg_params_len(g->params); i++) {
        const mg_tensor *t = mg_params_at(g->params, i);
        int k = mg_st_find(f, t->name);
        if (k < 0)
            return mg_set_error(MG_ERR_NOT_FOUND, "%s: missing tensor '%s', which the model its metadata describes "
                                "(%s, pos %s) has", mg_st_path(f), t->name, sizes, c->pos);
        const mg_st_tensor_info *info = mg_st_info(f, k);
        bool same = info->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = info->shape[d] == t->shape[d];
        if (!same) {
            char fs[160], ms[160];
            fmt_shape(fs, sizeof fs, info->ndim, info->shape);
            fmt_shape(ms, sizeof ms, t->ndim, t->shape);
            return mg_set_error(MG_ERR_FORMAT, "%s: %s: shape in file %s vs model %s: the metadata's sizes (%s) do not "
                                "match the tensors", mg_st_path(f), t->name, fs, ms, sizes);
        }
    }
    return MG_OK;
}

mg_status mg_gpt_from_checkpoint(const char *path, mg_gpt **out, mg_st_file **file_out) {
    *out = NULL;
    if (file_out) *file_out = NULL;
    mg_st_file *f;
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) return st;
    mg_gpt_config c;
    st = mg_gpt_config_from_file(f, &c);
    mg_gpt *g = NULL;
    mg_rng rng = mg_rng_make(0); /* every value is overwritten by the load */
    /* the file's config names what cannot be built (a scheme nothing provides): say which file */
    if (st == MG_OK && (st = gpt_build(&c, &g)) != MG_OK) mg_wrap_error(st, "%s", path);
    if (st == MG_OK) st = check_declared(g, f);
    if (st == MG_OK) st = mg_params_alloc(g->params, &rng);
    if (st == MG_OK) {
        mg_st_close(f);
        f = NULL;
        st = mg_checkpoint_load(path, g->params, file_out);
    }
    mg_st_close(f);
    if (st != MG_OK) {
        mg_gpt_free(g);
        if (file_out) *file_out = NULL;
        return st;
    }
    *out = g;
    return MG_OK;
}
