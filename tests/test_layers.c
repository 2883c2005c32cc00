/* Layers: a finite-difference gradient check through every built-in layer (and the alibi and
 * t5_bias plugins inside attention), parameter names, the registry, the summary table, and the errors a layer
 * raises on misuse.
 *
 * Tolerances (see layer_check.h for the check itself): h = 1e-2 everywhere; atol 1e-3 and rtol
 * 1e-2 for single-op layers, atol 3e-3 and rtol 3e-2 for composites (attention, MLP, blocks),
 * whose float32 forward passes and O(h^2) truncation through softmax/LayerNorm/GELU cost more. */
#include "layer_check.h"
#include "minigrad/nn.h"

#include <stdio.h>

typedef struct {
    const char *name;
    const char *type, *cfg;
    const char *pos_type, *pos_cfg; /* optional positional scheme handed to forward in mg_fwd.pos */
    int ndim;
    int64_t shape[4];
    int ids_below; /* > 0: int32 ids input instead of floats */
    int64_t pos0;
    bool train;
    lc_tol tol;
} lcase;

#define SINGLE {1e-2f, 1e-3f, 1e-2f, 0}
#define COMPOSITE {1e-2f, 3e-3f, 3e-2f, 0}

static const lcase cases[] = {
    {"linear", "linear", "in=5,out=3", NULL, NULL, 3, {2, 3, 5}, 0, 0, false, SINGLE},
    {"linear no bias", "linear", "in=5,out=3,bias=false", NULL, NULL, 2, {4, 5}, 0, 0, false, SINGLE},
    {"embedding scaled", "embedding", "vocab=7,dim=4,scale=2.5", NULL, NULL, 2, {2, 3}, 7, 0, false, SINGLE},
    {"segment_embedding", "segment_embedding", "n_segments=3,dim=4", NULL, NULL, 2, {2, 5}, 3, 0, false, SINGLE},
    {"learned_pos at pos0 1", "learned_pos", "max_len=6,dim=4", NULL, NULL, 3, {2, 4, 4}, 0, 1, false, SINGLE},
    {"sinusoidal_pos past its table", "sinusoidal_pos", "dim=4,max_len=4", NULL, NULL, 3, {2, 3, 4}, 0, 2, false,
     SINGLE},
    {"learned_sinusoidal_pos", "learned_sinusoidal_pos", "max_len=6,dim=4", NULL, NULL, 3, {1, 6, 4}, 0, 0, false,
     SINGLE},
    {"layernorm", "layernorm", "dim=6", NULL, NULL, 3, {3, 2, 6}, 0, 0, false, {1e-2f, 2e-3f, 2e-2f, 0}},
    {"self_attention causal", "self_attention", "dim=8,n_head=2", NULL, NULL, 3, {2, 5, 8}, 0, 0, false, COMPOSITE},
    {"self_attention bidirectional", "self_attention", "dim=8,n_head=2,causal=false", NULL, NULL, 3, {2, 4, 8}, 0, 0,
     false, COMPOSITE},
    {"self_attention + rope at pos0 3", "self_attention", "dim=8,n_head=2", "rope", "head_dim=4", 3, {2, 5, 8}, 0, 3,
     false, COMPOSITE},
    {"self_attention + alibi causal", "self_attention", "dim=8,n_head=2", "alibi", "n_head=2", 3, {1, 6, 8}, 0, 0,
     false, COMPOSITE},
    {"self_attention + alibi bidirectional", "self_attention", "dim=12,n_head=3,causal=false", "alibi", "n_head=3", 3,
     {2, 4, 12}, 0, 0, false, COMPOSITE},
    {"mlp tanh", "mlp", "dim=4,hidden=6", NULL, NULL, 3, {2, 3, 4}, 0, 0, false, COMPOSITE},
    {"mlp erf", "mlp", "dim=4,gelu=erf", NULL, NULL, 2, {3, 4}, 0, 0, false, COMPOSITE},
    {"mlp with dropout (fixed mask)", "mlp", "dim=4,hidden=8,dropout=0.3", NULL, NULL, 3, {2, 3, 4}, 0, 0, true,
     COMPOSITE},
    {"decoder_block causal + rope", "decoder_block", "dim=8,n_head=2", "rope", "", 3, {2, 4, 8}, 0, 2, false, COMPOSITE},
    {"decoder_block bidirectional erf + alibi", "decoder_block", "dim=8,n_head=2,causal=false,gelu=erf", "alibi",
     "n_head=2", 3, {2, 5, 8}, 0, 0, false, COMPOSITE},
    {"self_attention + t5_bias causal", "self_attention", "dim=8,n_head=2", "t5_bias",
     "n_head=2,num_buckets=8,max_distance=6", 3, {2, 7, 8}, 0, 0, false, COMPOSITE},
    {"self_attention + t5_bias bidirectional", "self_attention", "dim=12,n_head=3,causal=false", "t5_bias",
     "n_head=3,num_buckets=6,max_distance=4", 3, {2, 5, 12}, 0, 0, false, COMPOSITE},
    {"decoder_block causal + t5_bias at pos0 2", "decoder_block", "dim=8,n_head=2", "t5_bias", "n_head=2,num_buckets=8",
     3, {1, 5, 8}, 0, 2, false, COMPOSITE},
    {"decoder_block + learned+sinusoidal in front", "decoder_block", "dim=8,n_head=4,hidden=16",
     "learned_sinusoidal_pos", "max_len=8,dim=8", 3, {1, 5, 8}, 0, 0, false, COMPOSITE},
    /* norm and dropout layers */
    {"rms_norm", "rms_norm", "dim=6", NULL, NULL, 3, {3, 2, 6}, 0, 0, false, {1e-2f, 2e-3f, 2e-2f, 0}},
    {"rms_norm no weight, eps 0.01", "rms_norm", "dim=5,affine=false,eps=0.01", NULL, NULL, 2, {4, 5}, 0, 0, false,
     {1e-2f, 2e-3f, 2e-2f, 0}},
    {"dropout training (fixed mask)", "dropout", "p=0.4", NULL, NULL, 3, {2, 3, 5}, 0, 0, true, SINGLE},
    {"dropout evaluation", "dropout", "", NULL, NULL, 2, {3, 4}, 0, 0, false, SINGLE},
    /* recurrent layers: two stacked layers, and a single one without biases */
    {"lstm 2 layers", "lstm", "input_size=3,hidden_size=4,num_layers=2", NULL, NULL, 3, {2, 3, 3}, 0, 0, false, COMPOSITE},
    {"lstm no bias", "lstm", "input_size=2,hidden_size=3,bias=false", NULL, NULL, 3, {1, 4, 2}, 0, 0, false, COMPOSITE},
    {"gru 2 layers", "gru", "input_size=3,hidden_size=4,num_layers=2", NULL, NULL, 3, {2, 3, 3}, 0, 0, false, COMPOSITE},
    {"gru no bias", "gru", "input_size=2,hidden_size=3,bias=false", NULL, NULL, 3, {1, 4, 2}, 0, 0, false, COMPOSITE},
    {"conv2d stride 2 pad 1 groups 2", "conv2d", "in=4,out=6,kernel=3,stride=2,padding=1,groups=2", NULL, NULL, 4,
     {2, 4, 5, 6}, 0, 0, false, SINGLE},
    {"conv2d 1x1 no bias", "conv2d", "in=3,out=2,kernel=1,bias=false", NULL, NULL, 4, {1, 3, 2, 3}, 0, 0, false, SINGLE},
    {"conv1d causal dilation 2", "conv1d", "in=3,out=4,kernel=3,dilation=2,causal=true", NULL, NULL, 3, {2, 3, 7}, 0, 0,
     false, SINGLE},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

typedef struct {
    const lcase *c;
    mg_layer *l, *pos;
    float *x;
    int32_t *ids;
} runner;

static mg_tensor *run_case(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    runner *r = user;
    const lcase *c = r->c;
    /* float inputs are the checker's view; ids go through the runner */
    mg_tensor *x = c->ids_below ? mg_tensor_wrap(ctx, MG_I32, c->ndim, c->shape, r->ids) : in[0];
    mg_rng drop = mg_rng_make(77); /* the same dropout mask on every evaluation */
    mg_fwd a = {.pos0 = c->pos0, .train = c->train, .rng = &drop, .pos = r->pos};
    /* A scheme that adds to the embedding acts in front, as a model would run it. */
    if (r->pos && !mg_layer_vt(r->pos)->rotate_qk && !mg_layer_vt(r->pos)->attn_bias &&
        !mg_layer_vt(r->pos)->attn_bias_tensor)
        x = mg_layer_forward(r->pos, ctx, x, &a);
    return mg_layer_forward(r->l, ctx, x, &a);
}

static mg_status make_layer(const char *type, const char *prefix, const char *list, mg_params *P, mg_layer **out) {
    mg_config *cfg = mg_config_new(type);
    mg_status st = mg_config_set_list(cfg, list);
    if (st == MG_OK) st = mg_layer_create(type, prefix, cfg, P, out);
    mg_config_free(cfg);
    return st;
}

START_TEST(layer_gradcheck) {
    const lcase *c = &cases[_i];
    lc_use_build_plugins();
    if (c->pos_type && !mg_layer_find(c->pos_type)) ck_assert_msg(mg_plugin_load(c->pos_type) == MG_OK, "%s", mg_last_error());
    mg_params *P = mg_params_new();
    runner r = {c, NULL, NULL, NULL, NULL};
    ck_assert_msg(make_layer(c->type, "blk", c->cfg, P, &r.l) == MG_OK, "%s: %s", c->name, mg_last_error());
    if (c->pos_type)
        ck_assert_msg(make_layer(c->pos_type, "pos", c->pos_cfg, P, &r.pos) == MG_OK, "%s: %s", c->name, mg_last_error());
    mg_rng rng = mg_rng_make(100 + (uint64_t)_i);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    /* Random values everywhere (LayerNorm gains and zero biases included) so no path is trivial. */
    for (int i = 0; i < mg_params_len(P); i++) {
        mg_tensor *p = mg_params_at(P, i);
        for (int64_t j = 0; j < p->numel; j++) p->data[j] = mg_rng_range(&rng, -0.8f, 0.8f);
    }
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++) n *= c->shape[d];
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *in = NULL;
    if (c->ids_below) {
        r.ids = malloc((size_t)n * sizeof *r.ids);
        for (int64_t j = 0; j < n; j++) r.ids[j] = (int32_t)mg_rng_below(&rng, (uint32_t)c->ids_below);
    } else {
        r.x = malloc((size_t)n * sizeof *r.x);
        for (int64_t j = 0; j < n; j++) r.x[j] = mg_rng_range(&rng, -1.0f, 1.0f);
        in = mg_tensor_wrap(ctx, MG_F32, c->ndim, c->shape, r.x);
    }
    int64_t checked = lc_gradcheck(c->name, run_case, &r, P, &in, c->ids_below ? 0 : 1, c->tol, 1000 + (uint64_t)_i);
    ck_assert_int_eq(checked, mg_params_numel(P) + (c->ids_below ? 0 : n)); /* every element */
    mg_ctx_free(ctx);
    free(r.x);
    free(r.ids);
    mg_layer_free(r.pos);
    mg_layer_free(r.l);
    mg_params_free(P);
}
END_TEST

/* t5_bias's buckets against T5's PyTorch relative_position_bucket (num_buckets 32, max_distance
 * 128), values computed with PyTorch 1.13 for these relative positions (key - query). The layer's
 * table holds its bucket number in every head, so the bias tensor reads back the buckets. */
static const int t5_rel[] = {-40, -39, -38, -37, -36, -35, -34, -33, -32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17, -16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, -45, 45, -50, 50, -63, 63, -64, 64, -65, 65, -90, 90, -100, 100, -127, 127, -128, 128, -129, 129, -200, 200, -1000, 1000};
static const int t5_bidirectional[] = {12, 12, 12, 12, 12, 12, 12, 12, 12, 11, 11, 11, 11, 11, 11, 11, 11, 11, 10, 10, 10, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8, 7, 6, 5, 4, 3, 2, 1, 0, 17, 18, 19, 20, 21, 22, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 27, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 12, 28, 13, 29, 13, 29, 14, 30, 14, 30, 14, 30, 15, 31, 15, 31, 15, 31, 15, 31, 15, 31, 15, 31};
static const int t5_causal[] = {23, 22, 22, 22, 22, 22, 21, 21, 21, 21, 20, 20, 20, 20, 19, 19, 19, 18, 18, 18, 17, 17, 16, 16, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 23, 0, 24, 0, 26, 0, 26, 0, 26, 0, 29, 0, 30, 0, 31, 0, 31, 0, 31, 0, 31, 0, 31, 0};

START_TEST(t5_bias_buckets_match_t5) {
    lc_use_build_plugins();
    if (!mg_layer_find("t5_bias")) ck_assert_msg(mg_plugin_load("t5_bias") == MG_OK, "%s", mg_last_error());
    mg_params *P = mg_params_new();
    mg_layer *l = NULL;
    ck_assert_msg(make_layer("t5_bias", "wpe", "n_head=2", P, &l) == MG_OK, "%s", mg_last_error());
    mg_rng rng = mg_rng_make(1);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    mg_tensor *w = mg_params_find(P, "wpe.relative_attention_bias.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert(w->ndim == 2 && w->shape[0] == 32 && w->shape[1] == 2);
    for (int64_t b = 0; b < 32; b++) w->data[b * 2] = (float)b, w->data[b * 2 + 1] = (float)(100 + b);
    const mg_layer_vtable *vt = mg_layer_vt(l);
    ck_assert_ptr_nonnull(vt->attn_bias_tensor);
    enum { Q0 = 1000, TK = 2001 }; /* one query at position 1000, keys 0..2000: r = j - 1000 */
    for (int causal = 0; causal < 2; causal++) {
        mg_ctx *ctx = mg_ctx_new(0);
        const mg_attn_opts o = {.causal = causal != 0, .q_pos0 = Q0};
        mg_tensor *b = vt->attn_bias_tensor(l, ctx, 2, 1, TK, &o);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        ck_assert(b->ndim == 4 && b->shape[0] == 1 && b->shape[1] == 2 && b->shape[2] == 1 && b->shape[3] == TK);
        for (size_t i = 0; i < sizeof t5_rel / sizeof t5_rel[0]; i++) {
            const int want = causal ? t5_causal[i] : t5_bidirectional[i];
            ck_assert_msg(b->data[Q0 + t5_rel[i]] == (float)want && b->data[TK + Q0 + t5_rel[i]] == (float)(100 + want),
                          "%s: relative position %d: bucket %g, T5's %d", causal ? "causal" : "bidirectional",
                          t5_rel[i], (double)b->data[Q0 + t5_rel[i]], want);
        }
        /* a model with another head count is refused by name */
        tu_trap c;
        mg_ctx *t = tu_trapping_ctx(&c, 0);
        ck_assert_ptr_null(vt->attn_bias_tensor(l, t, 3, 2, 2, &o));
        tu_assert_has("error message", c.msg, "layer 'wpe' (t5_bias): made for 2 heads, asked to bias attention with 3");
        mg_ctx_free(t);
        mg_ctx_free(ctx);
    }
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

START_TEST(every_builtin_layer_has_a_gradcheck) {
    int n = mg_layer_registered_count();
    ck_assert_int_ge(n, 12);
    for (int i = 0; i < n; i++) {
        const mg_layer_vtable *vt = mg_layer_registered(i);
        if (strcmp(mg_layer_origin(vt->name), "built-in") != 0) continue;
        bool found = strcmp(vt->name, "gpt") == 0; /* the whole model: tests/test_gpt.c, every scheme */
        for (int k = 0; k < N_CASES && !found; k++)
            found = strcmp(cases[k].type, vt->name) == 0 || (cases[k].pos_type && strcmp(cases[k].pos_type, vt->name) == 0);
        ck_assert_msg(found, "built-in layer %s has no gradient check", vt->name);
    }
}
END_TEST

/* ---- names, registry, summary, misuse ---- */

typedef struct {
    char names[64][64];
    int n;
} name_list;

static void collect(void *user, const char *name, mg_tensor *t) {
    (void)t;
    name_list *l = user;
    if (l->n < 64) snprintf(l->names[l->n++], 64, "%s", name);
}

START_TEST(block_parameters_have_gpt2_names) {
    mg_params *P = mg_params_new();
    mg_layer *l;
    ck_assert(make_layer("decoder_block", "h.3", "dim=8,n_head=2", P, &l) == MG_OK);
    name_list got = {.n = 0};
    mg_layer_visit_params(l, collect, &got);
    static const char *const want[] = {
        "h.3.ln_1.weight",      "h.3.ln_1.bias",        "h.3.attn.c_attn.weight", "h.3.attn.c_attn.bias",
        "h.3.attn.c_proj.weight", "h.3.attn.c_proj.bias", "h.3.ln_2.weight",        "h.3.ln_2.bias",
        "h.3.mlp.c_fc.weight",  "h.3.mlp.c_fc.bias",    "h.3.mlp.c_proj.weight",  "h.3.mlp.c_proj.bias",
    };
    ck_assert_int_eq(got.n, 12);
    for (int i = 0; i < 12; i++) ck_assert_str_eq(got.names[i], want[i]);
    ck_assert_int_eq(mg_params_len(P), 12);
    mg_tensor *w = mg_params_find(P, "h.3.attn.c_attn.weight");
    ck_assert_int_eq(w->shape[0], 8);
    ck_assert_int_eq(w->shape[1], 24);
    ck_assert(mg_params_find(P, "h.3.mlp.c_fc.weight")->shape[1] == 32);
    ck_assert(mg_params_find(P, "h.3.ln_1.bias")->flags & MG_NO_DECAY);
    ck_assert(!(mg_params_find(P, "h.3.mlp.c_fc.weight")->flags & MG_NO_DECAY));
    ck_assert_int_eq(mg_layer_numel(l), 2 * 16 + 8 * 24 + 24 + 64 + 8 + 8 * 32 + 32 + 32 * 8 + 8);
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

START_TEST(registry_lists_builtins_and_schemes) {
    static const char *const builtin[] = {"linear",   "embedding", "segment_embedding", "learned_pos",
                                          "sinusoidal_pos", "learned_sinusoidal_pos", "rope", "layernorm",
                                          "self_attention", "mlp", "decoder_block", "gpt"};
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        ck_assert_msg(mg_layer_find(builtin[i]) != NULL, "%s not registered", builtin[i]);
        ck_assert_str_eq(mg_layer_origin(builtin[i]), "built-in");
    }
    ck_assert_str_eq(mg_layer_find_pos("learned")->name, "learned_pos");
    ck_assert_str_eq(mg_layer_find_pos("sinusoidal")->name, "sinusoidal_pos");
    ck_assert_str_eq(mg_layer_find_pos("learned+sinusoidal")->name, "learned_sinusoidal_pos");
    ck_assert_str_eq(mg_layer_find_pos("rope")->name, "rope");
    if (mg_plugin_count() == 0) ck_assert_ptr_null(mg_layer_find_pos("alibi")); /* a plugin's */
    ck_assert_ptr_null(mg_layer_find("no_such_layer"));
}
END_TEST

static mg_status prog_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)self, (void)cfg, (void)params;
    return MG_OK;
}
static mg_tensor *prog_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)args;
    return mg_scale(ctx, x, 2.0f);
}

START_TEST(program_registration_and_refusals) {
    static const mg_layer_vtable twice = {MG_LAYER_ABI_VERSION, sizeof(mg_layer_vtable), .name = "twice",
                                          .create = prog_create, .forward = prog_forward};
    ck_assert_int_eq(mg_register_layer(&twice), MG_OK);
    ck_assert_str_eq(mg_layer_origin("twice"), "program");
    ck_assert_int_eq(mg_register_layer(&twice), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "'twice' is already registered (by program)"), "%s", mg_last_error());

    mg_layer_vtable v = twice;
    v.name = "newer";
    v.abi_version = MG_LAYER_ABI_VERSION + 1;
    ck_assert_int_eq(mg_register_layer(&v), MG_ERR_ABI);
    char want[64];
    snprintf(want, sizeof want, "ABI version %u, host %u", MG_LAYER_ABI_VERSION + 1, MG_LAYER_ABI_VERSION);
    ck_assert_msg(strstr(mg_last_error(), want), "%s", mg_last_error());
    /* A vtable of the oldest ABI still accepted (built before attn_bias_tensor, whose slot it
     * leaves zero) registers; one older is refused. */
    mg_layer_vtable old = twice;
    old.name = "abi_min";
    old.abi_version = MG_LAYER_ABI_MIN;
    ck_assert_int_eq(mg_register_layer(&old), MG_OK);
    old.name = "abi_below_min";
    old.abi_version = MG_LAYER_ABI_MIN - 1;
    ck_assert_int_eq(mg_register_layer(&old), MG_ERR_ABI);
    v.abi_version = MG_LAYER_ABI_VERSION;
    v.struct_size = 24;
    ck_assert_int_eq(mg_register_layer(&v), MG_ERR_ABI);
    ck_assert_msg(strstr(mg_last_error(), "struct_size 24"), "%s", mg_last_error());
    v.struct_size = sizeof(mg_layer_vtable);
    v.forward = NULL;
    ck_assert_int_eq(mg_register_layer(&v), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "has no forward"), "%s", mg_last_error());
    v.forward = prog_forward;
    v.name = "Bad-Name";
    ck_assert_int_eq(mg_register_layer(&v), MG_ERR_INVALID);
    v.name = "takes_rope";
    v.pos_scheme = "rope";
    ck_assert_int_eq(mg_register_layer(&v), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "'rope' is already provided by layer 'rope'"), "%s", mg_last_error());
    ck_assert_ptr_null(mg_layer_find("takes_rope"));

    /* a registered program layer is created like any other */
    mg_params *P = mg_params_new();
    mg_layer *l;
    ck_assert_int_eq(make_layer("twice", "t", "", P, &l), MG_OK);
    mg_ctx *ctx = mg_ctx_new(0);
    float xs[3] = {1, 2, 3};
    mg_tensor *y = mg_layer_forward(l, ctx, mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){3}, xs), NULL);
    ck_assert_float_eq(y->data[2], 6.0f);
    mg_ctx_free(ctx);
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

START_TEST(unknown_layer_and_key_errors) {
    mg_params *P = mg_params_new();
    mg_layer *l = (mg_layer *)1;
    ck_assert_int_eq(make_layer("linearr", "x", "", P, &l), MG_ERR_NOT_FOUND);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(mg_last_error(), "unknown layer 'linearr': layer 'linearr' not found: it is not registered (registered: linear, embedding"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("linear", "x", "in=4,out=2,biass=false", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "unknown key 'biass' (known keys: in, out, bias,"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("linear", "x", "in=4", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "missing required key 'out'"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("self_attention", "a", "dim=10,n_head=3", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "dim 10 is not a multiple of n_head 3"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("sinusoidal_pos", "p", "dim=5", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "dim 5 must be even"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("rope", "r", "head_dim=7", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "head dimension 7 is odd"), "%s", mg_last_error());
    ck_assert_int_eq(make_layer("mlp", "m", "dim=4,gelu=relu", P, &l), MG_ERR_INVALID);
    ck_assert_msg(strstr(mg_last_error(), "key 'gelu': 'relu' is not one of: tanh, erf"), "%s", mg_last_error());
    mg_params_free(P);
}
END_TEST

START_TEST(misuse_in_forward_names_the_layer) {
    mg_params *P = mg_params_new();
    mg_layer *lin, *pos, *attn;
    ck_assert(make_layer("linear", "h.0.mlp.c_fc", "in=4,out=2", P, &lin) == MG_OK);
    ck_assert(make_layer("learned_pos", "wpe", "max_len=4,dim=2", P, &pos) == MG_OK);
    ck_assert(make_layer("self_attention", "h.0.attn", "dim=4,n_head=2", P, &attn) == MG_OK);
    mg_rng rng = mg_rng_make(1);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){3, 5});
    mg_layer_forward(lin, ctx, x, NULL);
    ck_assert_msg(strstr(t.msg, "layer 'h.0.mlp.c_fc' (linear): x(3,5): need float32 with last dim in = 4"), "%s", t.msg);
    mg_ctx_clear_error(ctx);
    t.msg[0] = 0;
    mg_fwd a = {.pos0 = 3};
    mg_layer_forward(pos, ctx, mg_zeros(ctx, 3, (int64_t[]){1, 2, 2}), &a);
    ck_assert_msg(strstr(t.msg, "layer 'wpe' (learned_pos): positions 3..4 are outside the table's 4 rows"), "%s", t.msg);
    mg_ctx_clear_error(ctx);
    t.msg[0] = 0;
    mg_kv_cache kv = {NULL, NULL, 1, 2, 4, 2, 3};
    mg_fwd b = {.pos0 = 3, .kv = &kv};
    mg_layer_forward(attn, ctx, mg_zeros(ctx, 3, (int64_t[]){1, 2, 4}), &b); /* 3 + 2 > cap 4 */
    ck_assert_msg(strstr(t.msg, "layer 'h.0.attn' (self_attention): KV cache"), "%s", t.msg);
    mg_ctx_free(ctx);
    mg_layer_free(attn);
    mg_layer_free(pos);
    mg_layer_free(lin);
    mg_params_free(P);
}
END_TEST

START_TEST(summary_table) {
    mg_params *P = mg_params_new();
    mg_layer *l;
    ck_assert(make_layer("decoder_block", "h.0", "dim=8,n_head=2", P, &l) == MG_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mg_layer_print(l, f);
    fclose(f);
    ck_assert_msg(strstr(buf, "h.0.attn.c_attn") && strstr(buf, "weight (8,24), bias (24)"), "%s", buf);
    ck_assert_msg(strstr(buf, "decoder_block") && strstr(buf, "(B,T,8)"), "%s", buf);
    ck_assert_msg(strstr(buf, "total: 872 parameters"), "%s", buf);
    free(buf);
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

START_TEST(sinusoidal_values) {
    /* PE[p,2i] = sin(p / 10000^(2i/C)), PE[p,2i+1] = cos(...), straight from the definition */
    mg_params *P = mg_params_new();
    mg_layer *l;
    ck_assert(make_layer("sinusoidal_pos", "pe", "dim=6,max_len=3", P, &l) == MG_OK);
    mg_ctx *ctx = mg_ctx_new(0);
    for (int64_t pos0 = 0; pos0 < 6; pos0 += 2) { /* inside the table and past it */
        mg_fwd a = {.pos0 = pos0};
        mg_tensor *y = mg_layer_forward(l, ctx, mg_zeros(ctx, 3, (int64_t[]){1, 2, 6}), &a);
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < 3; i++) {
                double p = (double)(pos0 + t), w = pow(10000.0, 2.0 * i / 6.0);
                ck_assert_float_eq_tol(y->data[t * 6 + 2 * i], (float)sin(p / w), 1e-6f);
                ck_assert_float_eq_tol(y->data[t * 6 + 2 * i + 1], (float)cos(p / w), 1e-6f);
            }
    }
    mg_ctx_free(ctx);
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

/* The typed constructor and the string config build the same layer: same parameter names and
 * shapes, and the same values from the same seed. */
START_TEST(typed_constructor_matches_config) {
    mg_params *A = mg_params_new(), *B = mg_params_new();
    mg_layer *ta = mg_linear_new(A, "fc", &(mg_linear_cfg){.in = 7, .out = 3, .bias = true}), *tb = NULL;
    ck_assert_msg(ta, "%s", mg_last_error());
    ck_assert_msg(make_layer("linear", "fc", "in=7,out=3", B, &tb) == MG_OK, "%s", mg_last_error());
    mg_rng ra = mg_rng_make(5), rb = mg_rng_make(5);
    ck_assert(mg_params_alloc(A, &ra) == MG_OK && mg_params_alloc(B, &rb) == MG_OK);
    ck_assert_int_eq(mg_params_len(A), 2);
    ck_assert_int_eq(mg_params_len(B), 2);
    for (int i = 0; i < 2; i++) {
        mg_tensor *pa = mg_params_at(A, i), *pb = mg_params_find(B, pa->name);
        ck_assert_msg(pb, "%s missing from the config-built layer", pa->name);
        ck_assert(mg_same_shape(pa, pb));
        ck_assert_mem_eq(pa->data, pb->data, (size_t)pa->numel * sizeof(float));
    }
    ck_assert_str_eq(mg_layer_vt(ta)->name, "linear");
    /* bias left false: one parameter; a bad size is refused by name. */
    mg_params *C = mg_params_new();
    mg_layer *tc = mg_linear_new(C, "head", &(mg_linear_cfg){.in = 4, .out = 2});
    ck_assert_msg(tc, "%s", mg_last_error());
    ck_assert_int_eq(mg_params_len(C), 1);
    ck_assert_ptr_null(mg_linear_new(C, "bad", &(mg_linear_cfg){.in = 0, .out = 2}));
    ck_assert_msg(strstr(mg_last_error(), "layer 'bad' (linear): in = 0 and out = 2 must be in [1,"), "%s",
                  mg_last_error());
    ck_assert_ptr_null(mg_params_find(C, "bad.weight"));
    mg_layer_free(ta), mg_layer_free(tb), mg_layer_free(tc);
    mg_params_free(A), mg_params_free(B), mg_params_free(C);
}
END_TEST

/* conv1d / conv2d: the typed constructors and the string config give PyTorch's parameter names
 * and shapes and the same values; bad fields are refused by name. */
START_TEST(conv_typed_constructors_match_config) {
    mg_params *A = mg_params_new(), *B = mg_params_new();
    mg_layer *ta = mg_conv2d_new(A, "c1", &(mg_conv2d_cfg){.in = 4, .out = 6, .kernel = {3, 3}, .padding = {1, 1},
                                                          .groups = 2, .bias = true});
    ck_assert_msg(ta, "%s", mg_last_error());
    mg_layer *ta1 = mg_conv1d_new(A, "c2", &(mg_conv1d_cfg){.in = 6, .out = 5, .kernel = 4, .causal = true, .bias = true});
    ck_assert_msg(ta1, "%s", mg_last_error());
    mg_layer *tb = NULL, *tb1 = NULL;
    ck_assert_msg(make_layer("conv2d", "c1", "in=4,out=6,kernel=3,padding=1,groups=2", B, &tb) == MG_OK, "%s",
                  mg_last_error());
    ck_assert_msg(make_layer("conv1d", "c2", "in=6,out=5,kernel=4,causal=true", B, &tb1) == MG_OK, "%s", mg_last_error());
    mg_rng ra = mg_rng_make(5), rb = mg_rng_make(5);
    ck_assert(mg_params_alloc(A, &ra) == MG_OK && mg_params_alloc(B, &rb) == MG_OK);
    ck_assert_int_eq(mg_params_len(A), 4);
    ck_assert_int_eq(mg_params_len(B), 4);
    static const char *const names[] = {"c1.weight", "c1.bias", "c2.weight", "c2.bias"};
    static const int64_t shapes[4][4] = {{6, 2, 3, 3}, {6}, {5, 6, 4}, {5}};
    static const int ndims[] = {4, 1, 3, 1};
    for (int i = 0; i < 4; i++) {
        mg_tensor *pa = mg_params_find(A, names[i]), *pb = mg_params_find(B, names[i]);
        ck_assert_msg(pa && pb, "%s missing", names[i]);
        ck_assert_int_eq(pa->ndim, ndims[i]);
        for (int d = 0; d < ndims[i]; d++) ck_assert_int_eq(pa->shape[d], shapes[i][d]);
        ck_assert(mg_same_shape(pa, pb));
        ck_assert_mem_eq(pa->data, pb->data, (size_t)pa->numel * sizeof(float));
        /* PyTorch's bound 1/sqrt(fan_in): 1/sqrt(2*9) for c1, 1/sqrt(6*4) for c2 */
        double bound = i < 2 ? 1.0 / sqrt(18.0) : 1.0 / sqrt(24.0);
        for (int64_t j = 0; j < pa->numel; j++) ck_assert(fabs(pa->data[j]) <= bound + 1e-7);
    }
    /* forward: (2,4,5,5) -> (2,6,5,5) -> as (2,6,25) through the causal conv1d -> (2,5,25) */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_zeros(ctx, 4, (int64_t[]){2, 4, 5, 5});
    mg_tensor *y = mg_layer_forward(ta, ctx, x, NULL);
    y = mg_layer_forward(ta1, ctx, mg_reshape(ctx, y, 3, (int64_t[]){2, 6, 25}), NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_int_eq(y->shape[1], 5);
    ck_assert_int_eq(y->shape[2], 25);
    mg_ctx_free(ctx);
    /* the wrong input is refused by the layer's name */
    tu_trap trap;
    ctx = tu_trapping_ctx(&trap, 0);
    mg_layer_forward(ta, ctx, mg_zeros(ctx, 4, (int64_t[]){2, 3, 5, 5}), NULL);
    ck_assert_str_eq(trap.msg, "layer 'c1' (conv2d): x(2,3,5,5): need float32 (N,C,H,W) with 4 channels");
    mg_ctx_free(ctx);
    ctx = tu_trapping_ctx(&trap, 0);
    mg_layer_forward(ta1, ctx, mg_zeros(ctx, 4, (int64_t[]){2, 6, 5, 5}), NULL);
    ck_assert_str_eq(trap.msg, "layer 'c2' (conv1d): x(2,6,5,5): need float32 (N,C,L) with 6 channels");
    mg_ctx_free(ctx);
    mg_params *C = mg_params_new();
    ck_assert_ptr_null(mg_conv2d_new(C, "bad", &(mg_conv2d_cfg){.in = 3, .out = 4, .kernel = {3, 3}, .groups = 2}));
    ck_assert_msg(strstr(mg_last_error(), "layer 'bad' (conv2d): groups = 2 must be >= 1 and divide in = 3 and out = 4"),
                  "%s", mg_last_error());
    ck_assert_ptr_null(mg_conv2d_new(C, "bad", &(mg_conv2d_cfg){.in = 3, .out = 4}));
    ck_assert_msg(strstr(mg_last_error(), "layer 'bad' (conv2d): kernel = 0 must be in [1,"), "%s", mg_last_error());
    ck_assert_ptr_null(mg_conv1d_new(C, "bad", &(mg_conv1d_cfg){.in = 3, .out = 4, .kernel = 3, .padding = 1, .causal = true}));
    ck_assert_msg(strstr(mg_last_error(), "layer 'bad' (conv1d): causal pads on the left itself: padding must be 0, got 1"),
                  "%s", mg_last_error());
    ck_assert_ptr_null(mg_conv1d_new(C, "bad", &(mg_conv1d_cfg){.in = 3, .out = 4, .kernel = 3, .stride = -1}));
    ck_assert_msg(strstr(mg_last_error(), "layer 'bad' (conv1d): stride = -1 must be in [0,"), "%s", mg_last_error());
    ck_assert_int_eq(mg_params_len(C), 0);
    mg_layer_free(ta), mg_layer_free(tb), mg_layer_free(ta1), mg_layer_free(tb1);
    mg_params_free(A), mg_params_free(B), mg_params_free(C);
}
END_TEST

static Suite *layers_suite(void) {
    mg_log_set(lc_quiet_log, NULL);
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("gradcheck");
    tcase_add_loop_test(tc, layer_gradcheck, 0, N_CASES);
    tcase_add_test(tc, t5_bias_buckets_match_t5);
    tcase_add_test(tc, every_builtin_layer_has_a_gradcheck);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("registry");
    tcase_add_test(tr, block_parameters_have_gpt2_names);
    tcase_add_test(tr, registry_lists_builtins_and_schemes);
    tcase_add_test(tr, program_registration_and_refusals);
    tcase_add_test(tr, unknown_layer_and_key_errors);
    tcase_add_test(tr, misuse_in_forward_names_the_layer);
    tcase_add_test(tr, summary_table);
    tcase_add_test(tr, sinusoidal_values);
    tcase_add_test(tr, typed_constructor_matches_config);
    tcase_add_test(tr, conv_typed_constructors_match_config);
    suite_add_tcase(s, tr);
    return s;
}

MG_TEST_MAIN(layers_suite)
