/* The scheme catalogue and the classifier of docs/posenc-benchmark.md section 4: model building
 * and the benchmark's initialisation, evaluation, attention maps and positional tables. */
#include "posenc.h"

#include "minigrad/op.h"
#include "minigrad/plugin.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

/* The spec's six schemes in its order: registry spelling, spec spelling. */
static const char *const spec_schemes[6][2] = {
    {"none", "none"},       {"sinusoidal", "sin"},
    {"learned", "learned"}, {"learned+sinusoidal", "learned_sin"},
    {"rope", "rope"},       {"alibi", "alibi"},
};

const char *posenc_scheme_label(const char *name) {
    for (int i = 0; i < 6; i++)
        if (strcmp(name, spec_schemes[i][0]) == 0) return spec_schemes[i][1];
    return name;
}

const char *posenc_scheme_name(const char *name_or_label) {
    for (int i = 0; i < 6; i++)
        if (strcmp(name_or_label, spec_schemes[i][1]) == 0) return spec_schemes[i][0];
    return name_or_label;
}

static int spec_rank(const char *name) {
    for (int i = 0; i < 6; i++)
        if (strcmp(name, spec_schemes[i][0]) == 0) return i;
    return 6;
}

/* ---- the catalogue ---- */

/* Appends to a text buffer, cutting what does not fit. */
static void append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t n, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

bool posenc_each_dir(const char *list, bool (*fn)(const char *dir, void *user), void *user) {
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ':');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            char *dir = strndup(p, len); /* any length, as the loader takes it */
            const bool go_on = dir && fn(dir, user);
            free(dir);
            if (!go_on) return false;
        }
        p += len + (end ? 1 : 0);
    }
    return true;
}

static bool add_dir(const char *dir, void *user) {
    (void)user;
    mg_plugin_add_dir(dir);
    return true;
}

static int cmp_scheme(const void *a, const void *b) {
    const posenc_scheme *x = a, *y = b;
    int rx = spec_rank(x->name), ry = spec_rank(y->name);
    return rx != ry ? rx - ry : strcmp(x->name, y->name);
}

mg_status posenc_catalog_discover(posenc_catalog *c, const char *plugin_dirs) {
    memset(c, 0, sizeof *c);
    if (plugin_dirs) {
        mg_plugin_use_default_dirs(false);
        posenc_each_dir(plugin_dirs, add_dir, NULL);
    }
    mg_plugin_entry *e;
    int n;
    mg_status st = mg_plugin_list(&e, &n); /* loads every plugin of the search path */
    if (st != MG_OK) return st;
    mg_plugin_search_path(c->dirs, sizeof c->dirs);
    posenc_scheme *none = &c->s[c->n++];
    snprintf(none->name, sizeof none->name, "none");
    snprintf(none->label, sizeof none->label, "none");
    snprintf(none->origin, sizeof none->origin, "model");
    for (int i = 0; i < n; i++) {
        if (e[i].kind == MG_PLUGIN_ENTRY_FAILED) append(c->skipped, sizeof c->skipped, "%s\n", e[i].why);
        if (e[i].kind == MG_PLUGIN_ENTRY_SHADOWED)
            append(c->shadowed, sizeof c->shadowed, "%s (shadowed by %s)\n", e[i].path, e[i].why);
        if (e[i].kind != MG_PLUGIN_ENTRY_LAYER || !e[i].scheme || strcmp(e[i].scheme, "none") == 0) continue;
        if (strlen(e[i].scheme) >= POSENC_NAME_LEN || c->n == POSENC_MAX_SCHEMES) {
            append(c->skipped, sizeof c->skipped, "%s: %s\n", e[i].scheme,
                   c->n == POSENC_MAX_SCHEMES ? "too many schemes" : "scheme name too long");
            continue;
        }
        posenc_scheme *s = &c->s[c->n++];
        snprintf(s->name, sizeof s->name, "%s", e[i].scheme);
        snprintf(s->label, sizeof s->label, "%s", posenc_scheme_label(e[i].scheme));
        snprintf(s->origin, sizeof s->origin, "%s", e[i].path);
    }
    mg_plugin_list_free(e, n);
    qsort(c->s, (size_t)c->n, sizeof c->s[0], cmp_scheme);
    return MG_OK;
}

const posenc_scheme *posenc_catalog_find(const posenc_catalog *c, const char *name) {
    const char *reg = posenc_scheme_name(name);
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->s[i].name, reg) == 0 || strcmp(c->s[i].label, name) == 0) return &c->s[i];
    return NULL;
}

void posenc_catalog_names(const posenc_catalog *c, char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < c->n; i++) append(buf, n, "%s%s", i ? ", " : "", c->s[i].label);
}

/* Builds the classifier once to see that the scheme works with it. */
static mg_status try_build(const posenc_scheme *s) {
    mg_gpt *g = NULL;
    mg_status st = posenc_model_new(s->name, 0, &g);
    mg_gpt_free(g);
    return st;
}

mg_status posenc_catalog_select(const posenc_catalog *c, const char *list, int *idx, int max,
                                int *n, char *notes, size_t notes_n) {
    *n = 0;
    if (notes && notes_n) notes[0] = 0;
    char avail[1024];
    posenc_catalog_names(c, avail, sizeof avail);
    if (!list || strcmp(list, "all") == 0) {
        for (int i = 0; i < c->n && *n < max; i++) {
            if (try_build(&c->s[i]) != MG_OK) {
                if (notes)
                    append(notes, notes_n, "scheme %s left out: %s\n", c->s[i].label,
                           mg_last_error());
                continue;
            }
            idx[(*n)++] = i;
        }
        if (*n == 0)
            return mg_set_error(MG_ERR_NOT_FOUND, "no positional scheme builds the classifier");
        return MG_OK;
    }
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[128];
        if (len == 0 || len >= sizeof name)
            return mg_set_error(MG_ERR_INVALID,
                                "--schemes '%s': empty or overlong entry (available: %s)", list,
                                avail);
        memcpy(name, p, len);
        name[len] = 0;
        const posenc_scheme *s = posenc_catalog_find(c, name);
        if (!s) {
            bool spec = spec_rank(posenc_scheme_name(name)) < 6;
            return mg_set_error(
                MG_ERR_NOT_FOUND,
                "unknown positional scheme '%s'%s (available: %s; plugin directories searched: %s)",
                name, spec ? ": its plugin was not found or did not load" : "", avail,
                c->dirs[0] ? c->dirs : "none");
        }
        int k = (int)(s - c->s);
        for (int j = 0; j < *n; j++)
            if (idx[j] == k)
                return mg_set_error(MG_ERR_INVALID, "--schemes '%s': scheme '%s' is listed twice",
                                    list, name);
        if (*n == max)
            return mg_set_error(MG_ERR_INVALID, "--schemes '%s': more than %d schemes", list, max);
        if (try_build(s) != MG_OK)
            return mg_wrap_error(MG_ERR_INVALID, "scheme '%s' cannot build the classifier", name);
        idx[(*n)++] = k;
        if (!end) break;
        p = end + 1;
    }
    return MG_OK;
}

/* ---- the classifier ---- */

mg_gpt_config posenc_model_config(const char *scheme) {
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = POSENC_V, c.block_size = POSENC_L;
    c.n_layer = POSENC_LAYERS, c.n_head = POSENC_HEADS, c.n_embd = POSENC_D;
    c.causal = false, c.gelu = MG_GELU_ERF, c.emb_scale = sqrtf((float)POSENC_D);
    c.tied_head = false, c.head_bias = true, c.dropout = 0.0f;
    snprintf(c.pos, sizeof c.pos, "%s", posenc_scheme_name(scheme));
    return c;
}

mg_status posenc_model_new(const char *scheme, uint32_t seed, mg_gpt **out) {
    *out = NULL;
    if (strlen(scheme) >= sizeof((mg_gpt_config){0}).pos)
        return mg_set_error(MG_ERR_INVALID, "scheme name '%s' is too long", scheme);
    mg_gpt_config c = posenc_model_config(scheme);
    mg_rng rng = mg_rng_make(POSENC_POS_INIT_SEED + seed);
    mg_gpt *g = NULL;
    mg_status st = mg_gpt_new(&c, &rng, &g);
    if (st == MG_OK) st = posenc_model_init(g, seed);
    if (st != MG_OK) {
        mg_gpt_free(g);
        return st;
    }
    *out = g;
    return MG_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void fill_uniform(mg_rng *r, mg_tensor *t, float bound) {
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_range(r, -bound, bound);
}

mg_status posenc_model_init(mg_gpt *g, uint32_t seed) {
    mg_params *P = mg_gpt_params(g);
    mg_rng r = mg_rng_make(POSENC_INIT_SEED + seed);
    for (int i = 0; i < mg_params_len(P); i++) {
        mg_tensor *t = mg_params_at(P, i);
        const char *n = t->name;
        if (strncmp(n, "wpe.", 4) == 0) continue; /* the scheme's own */
        if (strcmp(n, "wte.weight") == 0) {
            fill_uniform(&r, t, 0.1f);
        } else if (strncmp(n, "ln_", 3) == 0 || strstr(n, ".ln_")) {
            float v = ends_with(n, ".weight") ? 1.0f : 0.0f;
            for (int64_t j = 0; j < t->numel; j++) t->data[j] = v;
        } else if (ends_with(n, ".weight") && t->ndim == 2) { /* Linear, stored [in, out] */
            fill_uniform(&r, t, 1.0f / sqrtf((float)t->shape[0]));
        } else if (ends_with(n, ".bias") && t->ndim == 1) { /* its Linear's fan-in */
            char w[256];
            snprintf(w, sizeof w, "%.*s.weight", (int)(strlen(n) - 5), n);
            mg_tensor *wt = mg_params_find(P, w);
            if (!wt || wt->ndim != 2)
                return mg_set_error(MG_ERR_INVALID,
                                    "posenc_model_init: bias '%s' has no Linear weight '%s'", n, w);
            fill_uniform(&r, t, 1.0f / sqrtf((float)wt->shape[0]));
        } else {
            return mg_set_error(MG_ERR_INVALID,
                                "posenc_model_init: no initialiser for parameter '%s'", n);
        }
    }
    return MG_OK;
}

bool posenc_model_accepts(const mg_gpt *g, int L, char *why, size_t why_n) {
    int64_t limit = mg_layer_pos_limit(mg_gpt_layer(g));
    if (limit == 0 || L <= limit) return true;
    if (why)
        snprintf(why, why_n, "%s table has %lld rows", posenc_scheme_label(mg_gpt_cfg(g)->pos),
                 (long long)limit);
    return false;
}

/* ---- evaluation ---- */

static void record_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx, (void)msg, (void)user;
}

mg_ctx *posenc_ctx_new(void) {
    mg_ctx *ctx = mg_ctx_new(0);
    if (ctx) mg_ctx_set_error_handler(ctx, record_error, NULL);
    return ctx;
}

/* Turns a failure raised on ctx into a status, leaving ctx usable. */
static mg_status ctx_status(mg_ctx *ctx, const char *what) {
    if (mg_ctx_ok(ctx)) return MG_OK;
    mg_status st = mg_set_error(MG_ERR_INVALID, "%s: %s", what, mg_ctx_error(ctx));
    mg_ctx_clear_error(ctx);
    mg_ctx_reset(ctx);
    return st;
}

/* Sequences per forward pass: 128, fewer for long sequences so that one pass holds at most 8192
 * tokens of activations (about 120 MB). A function of L alone, so results do not depend on how a
 * set is split otherwise. */
static int eval_chunk(int L) {
    return L <= 64 ? 128 : (8192 / L > 0 ? 8192 / L : 1);
}

mg_status posenc_evaluate(mg_gpt *g, mg_ctx *ctx, const posenc_data *d, int n, posenc_metrics *m) {
    memset(m, 0, sizeof *m);
    if (n <= 0 || n > d->n) n = d->n;
    const int L = d->L, V = d->V;
    if (V != POSENC_V)
        return mg_set_error(MG_ERR_INVALID, "posenc_evaluate: vocabulary %d, model has %d", V,
                            POSENC_V);
    bool was = mg_ctx_set_grad_enabled(ctx, false);
    int64_t correct = 0, exact = 0;
    double loss = 0.0;
    mg_status st = MG_OK;
    const int chunk = eval_chunk(L);
    for (int s0 = 0; s0 < n && st == MG_OK; s0 += chunk) {
        int B = n - s0 < chunk ? n - s0 : chunk;
        mg_ctx_reset(ctx);
        mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, L}, d->x + (int64_t)s0 * L);
        mg_tensor *logits = mg_gpt_forward(g, ctx, ids, NULL);
        st = ctx_status(ctx, "evaluation");
        if (st != MG_OK) break;
        for (int b = 0; b < B; b++) {
            bool all = true;
            for (int i = 0; i < L; i++) {
                const float *z = logits->data + ((int64_t)b * L + i) * V;
                int y = d->y[(int64_t)(s0 + b) * L + i], arg = 0;
                float mx = z[0];
                for (int v = 1; v < V; v++)
                    if (z[v] > mx) mx = z[v], arg = v; /* strict: the first maximum wins ties */
                double se = 0.0;
                for (int v = 0; v < V; v++) se += exp((double)z[v] - (double)mx);
                loss += (double)mx + log(se) - (double)z[y];
                correct += arg == y;
                all = all && arg == y;
            }
            exact += all;
        }
    }
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, was);
    if (st != MG_OK) return st;
    m->n = n;
    m->acc = (double)correct / ((double)n * L);
    m->seq = (double)exact / n;
    m->loss = loss / ((double)n * L);
    if (!isfinite(m->loss))
        return mg_set_error(MG_ERR_NONFINITE, "evaluation on %s/%s: the loss is not finite",
                            posenc_task_name(d->task), posenc_split_name(d->split));
    return MG_OK;
}

/* ---- attention maps and tables ---- */

mg_status posenc_attention(mg_gpt *g, mg_ctx *ctx, const int32_t *x, int T, float *probs) {
    const mg_gpt_config *c = mg_gpt_cfg(g);
    const int64_t H = c->n_head, C = c->n_embd, D = C / H;
    mg_layer *root = mg_gpt_layer(g), *wte = mg_layer_find_child(root, "wte"),
             *wpe = mg_layer_find_child(root, "wpe");
    if (!wte) return mg_set_error(MG_ERR_INVALID, "posenc_attention: the model has no 'wte' layer");
    const mg_layer_vtable *pvt = wpe ? mg_layer_vt(wpe) : NULL;
    bool was = mg_ctx_set_grad_enabled(ctx, false);
    mg_ctx_reset(ctx);
    mg_fwd a = {.pos = wpe};
    mg_tensor *h = mg_layer_forward(
        wte, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, (void *)x), &a);
    if (wpe) h = mg_layer_forward(wpe, ctx, h, &a);
    float *row = malloc((size_t)T * sizeof *row);
    mg_status st = row ? MG_OK : mg_set_error(MG_ERR_NOMEM, "posenc_attention: out of memory");
    for (int64_t l = 0; l < c->n_layer && st == MG_OK; l++) {
        char name[32];
        snprintf(name, sizeof name, "h.%lld", (long long)l);
        mg_layer *blk = mg_layer_find_child(root, name);
        mg_layer *ln1 = blk ? mg_layer_find_child(blk, "ln_1") : NULL,
                 *att = blk ? mg_layer_find_child(blk, "attn") : NULL;
        mg_layer *c_attn = att ? mg_layer_find_child(att, "c_attn") : NULL;
        if (!c_attn || !ln1) {
            st = mg_set_error(MG_ERR_INVALID,
                              "posenc_attention: block %s lacks ln_1 or attn.c_attn", name);
            break;
        }
        mg_tensor *qkv = mg_layer_forward(c_attn, ctx, mg_layer_forward(ln1, ctx, h, &a), &a);
        mg_tensor *q = mg_split_heads(ctx, qkv, H, 0, C), *k = mg_split_heads(ctx, qkv, H, C, C);
        if (pvt && pvt->rotate_qk) pvt->rotate_qk(wpe, ctx, &q, &k, 0, 0);
        mg_attn_opts o = {.causal = c->causal};
        if (pvt && pvt->attn_bias) pvt->attn_bias(wpe, ctx, H, &o);
        mg_tensor *bt = pvt && pvt->attn_bias_tensor && mg_ctx_ok(ctx) ? pvt->attn_bias_tensor(wpe, ctx, H, T, T, &o) : NULL;
        st = ctx_status(ctx, "attention map");
        if (st == MG_OK && bt && bt->numel != H * T * T)
            st = mg_set_error(MG_ERR_INVALID, "attention map: the scheme's bias tensor has %lld values for %lld heads x %d x %d",
                              (long long)bt->numel, (long long)H, T, T);
        if (st != MG_OK) break;
        const double scale = 1.0 / sqrt((double)D);
        for (int64_t hh = 0; hh < H; hh++)
            for (int i = 0; i < T; i++) {
                const float *qi = q->data + (hh * T + i) * D;
                for (int j = 0; j < T; j++) {
                    const float *kj = k->data + (hh * T + j) * D;
                    double s = 0.0;
                    for (int64_t e = 0; e < D; e++) s += (double)qi[e] * kj[e];
                    row[j] = (float)(s * scale);
                }
                if (o.bias) o.bias(o.bias_user, hh, i, 0, T, row);
                if (bt)
                    for (int j = 0; j < T; j++) row[j] += bt->data[(hh * T + i) * T + j];
                int n_vis = c->causal ? i + 1 : T;
                float mx = row[0];
                for (int j = 1; j < n_vis; j++) mx = row[j] > mx ? row[j] : mx;
                double z = 0.0;
                for (int j = 0; j < n_vis; j++) z += exp((double)row[j] - mx);
                float *p = probs + ((l * H + hh) * T + i) * T;
                for (int j = 0; j < T; j++)
                    p[j] = j < n_vis ? (float)(exp((double)row[j] - mx) / z) : 0.0f;
            }
        h = mg_layer_forward(blk, ctx, h, &a); /* the input of the next block */
        st = ctx_status(ctx, "attention map");
    }
    free(row);
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, was);
    return st;
}

void posenc_trained_table(const mg_gpt *g, float *out, int max, int *rows, int *cols) {
    *rows = *cols = 0;
    const mg_gpt_config *c = mg_gpt_cfg(g);
    mg_params *P = mg_gpt_params(g);
    for (int i = 0; i < mg_params_len(P); i++) {
        const mg_tensor *t = mg_params_at(P, i);
        if (strncmp(t->name, "wpe.", 4) || t->ndim != 2 || t->shape[0] != c->block_size ||
            t->shape[1] != c->n_embd || t->numel > max)
            continue;
        memcpy(out, t->data, (size_t)t->numel * sizeof(float));
        *rows = (int)t->shape[0], *cols = (int)t->shape[1];
        return;
    }
}

mg_status posenc_additive_table(mg_gpt *g, mg_ctx *ctx, int T, float *out, bool *nonzero) {
    const int64_t C = mg_gpt_cfg(g)->n_embd;
    memset(out, 0, (size_t)(T * C) * sizeof(float));
    *nonzero = false;
    mg_layer *wpe = mg_layer_find_child(mg_gpt_layer(g), "wpe");
    if (!wpe) return MG_OK;
    bool was = mg_ctx_set_grad_enabled(ctx, false);
    mg_ctx_reset(ctx);
    mg_fwd a = {.pos = wpe};
    mg_tensor *y = mg_layer_forward(wpe, ctx, mg_zeros(ctx, 3, (int64_t[]){1, T, C}), &a);
    mg_status st = ctx_status(ctx, "positional table");
    if (st == MG_OK && y->numel == T * C) {
        memcpy(out, y->data, (size_t)(T * C) * sizeof(float));
        for (int64_t i = 0; i < T * C; i++) *nonzero = *nonzero || out[i] != 0.0f;
    }
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, was);
    return st;
}

mg_status posenc_scheme_probe(mg_gpt *g, mg_ctx *ctx, posenc_probe *p) {
    const mg_gpt_config *c = mg_gpt_cfg(g);
    const int T = POSENC_L, H = (int)c->n_head, C = (int)c->n_embd, D = C / H;
    memset(p, 0, sizeof *p);
    p->T = T, p->C = C, p->H = H;
    mg_layer *wpe = mg_layer_find_child(mg_gpt_layer(g), "wpe");
    if (!wpe) return MG_OK;
    if (C > POSENC_D || H > POSENC_HEADS)
        return mg_set_error(MG_ERR_INVALID, "posenc_scheme_probe: model of width %d with %d heads is larger than the probe's %d, %d",
                            C, H, POSENC_D, POSENC_HEADS);
    p->learned = mg_layer_numel(wpe) > 0;
    /* added to the embedding: the forward on zeros */
    mg_status st = posenc_additive_table(g, ctx, T, p->embed, &p->has_embed);
    if (st != MG_OK) return st;
    const mg_layer_vtable *vt = mg_layer_vt(wpe);
    bool was = mg_ctx_set_grad_enabled(ctx, false);
    mg_ctx_reset(ctx);
    /* a bias on the logits, from whichever hook the scheme has (both add up, as in attention) */
    if (vt->attn_bias || vt->attn_bias_tensor) {
        mg_attn_opts o = {.causal = c->causal};
        if (vt->attn_bias) vt->attn_bias(wpe, ctx, H, &o);
        mg_tensor *b = vt->attn_bias_tensor && mg_ctx_ok(ctx) ? vt->attn_bias_tensor(wpe, ctx, H, T, T, &o) : NULL;
        st = ctx_status(ctx, "attention bias probe");
        if (st == MG_OK && b && b->numel != (int64_t)H * T * T)
            st = mg_set_error(MG_ERR_INVALID, "attention bias probe: the scheme gave %lld values for %d heads x %d x %d",
                              (long long)b->numel, H, T, T);
        for (int h = 0; h < H && st == MG_OK; h++)
            for (int i = 0; i < T; i++) {
                float *row = p->bias + ((size_t)h * T + i) * T;
                const int vis = c->causal ? i + 1 : T;
                for (int j = 0; j < T; j++) row[j] = b ? b->data[((size_t)h * T + i) * T + j] : 0.0f;
                if (o.bias) o.bias(o.bias_user, h, i, 0, vis, row);
                for (int j = vis; j < T; j++) row[j] = NAN;
            }
        p->has_bias = st == MG_OK;
    }
    /* a rotation of q and k: the same unit vector at every position, rotated, dotted */
    if (st == MG_OK && vt->rotate_qk) {
        mg_tensor *q = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){1, H, T, D});
        mg_tensor *k = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){1, H, T, D});
        if (mg_ctx_ok(ctx)) {
            for (int64_t i = 0; i < q->numel; i++) q->data[i] = k->data[i] = 1.0f / sqrtf((float)D);
            vt->rotate_qk(wpe, ctx, &q, &k, 0, 0);
        }
        st = ctx_status(ctx, "rotation probe");
        for (int i = 0; i < T && st == MG_OK; i++)
            for (int j = 0; j < T; j++) {
                double dot = 0.0;
                for (int e = 0; e < D; e++) dot += (double)q->data[(size_t)i * D + e] * k->data[(size_t)j * D + e];
                p->rot[i * T + j] = (float)dot;
            }
        p->has_rot = st == MG_OK;
    }
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, was);
    return st;
}
