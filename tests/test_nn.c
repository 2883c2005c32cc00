/* Layer infrastructure: error scopes (an op failing inside a model names the innermost layer),
 * frozen parameters and buffers (no gradient, no optimizer state or update, still in checkpoints),
 * and the typed constructors of minigrad/nn.h with the layers they build. */
#include "layer_check.h"
#include "minigrad/nn.h"
#include "minigrad/train.h"

#include <stdio.h>
#include <unistd.h>

/* ---- error scopes ---- */

/* A layer whose forward makes a matmul of bad shapes: an op error raised inside a layer. */
static mg_status bad_mm_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)self, (void)cfg, (void)params;
    return MG_OK;
}
static mg_tensor *bad_mm_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)args;
    return mg_matmul(ctx, x, x);
}
static const mg_layer_vtable bad_mm_vt = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_bad_mm",
    .summary = "x @ x (fails unless square)",
    .create = bad_mm_create,
    .forward = bad_mm_forward,
};

/* A composite: a linear child "fc" (in=3, out=3), then a child "inner" of kind mgtest_bad_mm. */
static mg_status wrap_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)cfg;
    mg_config *c = mg_config_new("linear");
    mg_status st = mg_config_set_list(c, "in=3,out=3");
    if (st == MG_OK) st = mg_layer_child(self, "fc", "linear", c, params, NULL);
    mg_config_free(c);
    if (st == MG_OK) st = mg_layer_child(self, "inner", "mgtest_bad_mm", NULL, params, NULL);
    return st;
}
static mg_tensor *wrap_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    x = mg_layer_forward(mg_layer_find_child(self, "fc"), ctx, x, args);
    return mg_layer_forward(mg_layer_find_child(self, "inner"), ctx, x, args);
}
static const mg_layer_vtable wrap_vt = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_wrap",
    .summary = "linear, then mgtest_bad_mm",
    .create = wrap_create,
    .forward = wrap_forward,
};

static void register_test_layers(void) {
    if (!mg_layer_find("mgtest_bad_mm")) ck_assert_msg(mg_register_layer(&bad_mm_vt) == MG_OK, "%s", mg_last_error());
    if (!mg_layer_find("mgtest_wrap")) ck_assert_msg(mg_register_layer(&wrap_vt) == MG_OK, "%s", mg_last_error());
}

static void assert_starts(const char *msg, const char *want) {
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "message '%s' should start with '%s'", msg, want);
}

START_TEST(op_error_deep_in_a_model_names_the_layer) {
    register_test_layers();
    mg_cfg_file *f;
    ck_assert(mg_cfg_file_parse("[linear]\nname = h.0\nin = 3\nout = 3\n[mgtest_wrap]\nname = h.3\n", "scope.cfg", &f) ==
              MG_OK);
    mg_rng rng = mg_rng_make(3);
    mg_model *m;
    ck_assert_msg(mg_model_build(f, &rng, &m) == MG_OK, "%s", mg_last_error());
    mg_cfg_file_free(f);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){2, 3});
    mg_model_forward(m, ctx, x, NULL);
    ck_assert_int_eq(t.calls, 1);
    /* the innermost layer, then the op's own message */
    assert_starts(t.msg, "h.3.inner (mgtest_bad_mm): mg_matmul: ");
    ck_assert_msg(strstr(t.msg, "(2,3)"), "%s", t.msg);
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0); /* popped although forward failed */
    ck_assert_ptr_null(mg_ctx_scope(ctx));

    /* The same op called by the program outside any layer: no prefix. */
    mg_ctx_clear_error(ctx);
    mg_matmul(ctx, x, x);
    assert_starts(t.msg, "mg_matmul: ");

    /* A layer's own check names it once, not once more through its scope. */
    mg_ctx_clear_error(ctx);
    mg_model_forward(m, ctx, mg_zeros(ctx, 2, (int64_t[]){2, 4}), NULL);
    assert_starts(t.msg, "layer 'h.0' (linear): x(2,4): need float32 with last dim in = 3");
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);

    /* A scope of the program's own, and one without a label inside it. */
    mg_ctx_clear_error(ctx);
    mg_ctx_push_scope(ctx, "eval batch 3");
    ck_assert_str_eq(mg_ctx_scope(ctx), "eval batch 3");
    mg_matmul(ctx, x, x);
    assert_starts(t.msg, "eval batch 3: mg_matmul: ");
    mg_ctx_clear_error(ctx);
    mg_ctx_push_scope(ctx, NULL);
    mg_matmul(ctx, x, x);
    assert_starts(t.msg, "mg_matmul: ");
    mg_ctx_pop_scope(ctx);
    mg_ctx_pop_scope(ctx);
    mg_ctx_pop_scope(ctx); /* one too many: nothing happens */
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);
    mg_ctx_free(ctx);
    mg_model_free(m);
}
END_TEST

START_TEST(scopes_deeper_than_the_stack_stay_balanced) {
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    char label[300];
    for (int i = 0; i < MG_SCOPE_DEPTH_MAX + 8; i++) {
        snprintf(label, sizeof label, "level %d %0200d", i, 0); /* longer than a label keeps */
        mg_ctx_push_scope(ctx, label);
    }
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), MG_SCOPE_DEPTH_MAX + 8);
    ck_assert_int_eq((int)strlen(mg_ctx_scope(ctx)), MG_SCOPE_LABEL_MAX - 1);
    ck_assert_msg(strncmp(mg_ctx_scope(ctx), "level 31 ", 9) == 0, "%s", mg_ctx_scope(ctx));
    for (int i = 0; i < MG_SCOPE_DEPTH_MAX + 8; i++) mg_ctx_pop_scope(ctx);
    mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){2, 3});
    mg_matmul(ctx, x, x);
    assert_starts(t.msg, "mg_matmul: ");
    mg_ctx_free(ctx);
}
END_TEST

/* ---- frozen parameters and buffers ---- */

typedef struct {
    mg_params *P;
    mg_layer *fc1, *fc2;
} two_fc;

static two_fc two_fc_make(uint64_t seed) {
    two_fc n = {mg_params_new(), NULL, NULL};
    n.fc1 = mg_linear_new(n.P, "enc.fc1", &(mg_linear_cfg){.in = 4, .out = 5, .bias = true});
    n.fc2 = mg_linear_new(n.P, "head", &(mg_linear_cfg){.in = 5, .out = 3, .bias = true});
    ck_assert_msg(n.fc1 && n.fc2, "%s", mg_last_error());
    mg_rng rng = mg_rng_make(seed);
    ck_assert(mg_params_alloc(n.P, &rng) == MG_OK);
    return n;
}

static void two_fc_free(two_fc *n) {
    mg_layer_free(n->fc1);
    mg_layer_free(n->fc2);
    mg_params_free(n->P);
}

/* One forward + backward of sum((fc2(fc1(x)))^2)-like loss: mean of the outputs times themselves. */
static mg_tensor *two_fc_step(two_fc *n, mg_ctx *ctx, mg_tensor **h_out) {
    mg_ctx_reset(ctx);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){3, 4});
    for (int i = 0; i < 12; i++) x->data[i] = 0.1f * (float)(i % 5) - 0.2f;
    mg_tensor *h = mg_layer_forward(n->fc1, ctx, x, NULL);
    mg_tensor *y = mg_layer_forward(n->fc2, ctx, h, NULL);
    mg_tensor *loss = mg_mean(ctx, mg_mul(ctx, y, y));
    if (h_out) *h_out = h;
    mg_params_zero_grad(n->P);
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    return loss;
}

static bool all_zero(const float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (p[i] != 0.0f) return false;
    return true;
}

START_TEST(frozen_weights_stay_put_and_get_no_gradient) {
    for (int opt_kind = 0; opt_kind < 2; opt_kind++) {
        two_fc n = two_fc_make(7);
        mg_tensor *w1 = mg_params_find(n.P, "enc.fc1.weight"), *b1 = mg_params_find(n.P, "enc.fc1.bias");
        mg_tensor *w2 = mg_params_find(n.P, "head.weight");
        ck_assert(mg_params_set_trainable(n.P, "enc", true) == MG_OK);
        ck_assert(mg_params_set_trainable(n.P, "enc", false) == MG_OK); /* the whole layer, by prefix */
        ck_assert(!mg_param_trainable(w1) && !mg_param_trainable(b1) && mg_param_trainable(w2));
        ck_assert(w1->flags & MG_FROZEN);
        ck_assert_int_eq(mg_params_trainable_numel(n.P), 5 * 3 + 3);
        ck_assert_int_eq(mg_params_numel(n.P), 4 * 5 + 5 + 5 * 3 + 3);
        ck_assert_int_eq(mg_layer_trainable_numel(n.fc1), 0);
        float w1_0[20], w2_0[15], b1_0[5];
        memcpy(w1_0, w1->data, sizeof w1_0);
        memcpy(b1_0, b1->data, sizeof b1_0);
        memcpy(w2_0, w2->data, sizeof w2_0);
        mg_optim *o = opt_kind ? mg_sgd_new(n.P, 0.9f, 0.1f) : mg_adamw_new(n.P, mg_adamw_defaults());
        ck_assert_ptr_nonnull(o);
        mg_ctx *ctx = mg_ctx_new(0);
        for (int s = 0; s < 3; s++) {
            mg_tensor *h;
            two_fc_step(&n, ctx, &h);
            /* nothing upstream of fc1 needs a gradient: its output was not even recorded */
            ck_assert(!mg_requires_grad(h) && h->node == NULL);
            ck_assert(all_zero(w1->grad, w1->numel) && all_zero(b1->grad, b1->numel));
            ck_assert(!all_zero(w2->grad, w2->numel));
            float norm = mg_clip_grad_norm(n.P, 0.0f);
            double want = 0;
            for (int k = 0; k < mg_params_len(n.P); k++) {
                mg_tensor *t = mg_params_at(n.P, k);
                for (int64_t i = 0; mg_param_trainable(t) && i < t->numel; i++) want += (double)t->grad[i] * t->grad[i];
            }
            ck_assert_float_eq_tol(norm, (float)sqrt(want), 1e-6f);
            mg_optim_step(o, 0.05f);
        }
        ck_assert_mem_eq(w1->data, w1_0, sizeof w1_0); /* not updated, not decayed */
        ck_assert(memcmp(w2->data, w2_0, sizeof w2_0) != 0);
        /* Unfrozen, it trains from the next step, from zero state. */
        ck_assert(mg_params_set_trainable(n.P, "enc.fc1.weight", true) == MG_OK);
        two_fc_step(&n, ctx, NULL);
        ck_assert(!all_zero(w1->grad, w1->numel));
        mg_optim_step(o, 0.05f);
        ck_assert(memcmp(w1->data, w1_0, sizeof w1_0) != 0);
        ck_assert(!all_zero(mg_optim_state_of(o, 0, 0), w1->numel));
        ck_assert_mem_eq(b1->data, b1_0, sizeof b1_0); /* the bias is still frozen */
        /* Freezing after a backward clears the gradient it had. */
        ck_assert(mg_params_set_trainable(n.P, "enc.fc1.weight", false) == MG_OK);
        ck_assert(all_zero(w1->grad, w1->numel));
        mg_ctx_free(ctx);
        mg_optim_free(o);
        two_fc_free(&n);
    }
}
END_TEST

START_TEST(set_trainable_selects_by_name_or_prefix) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_nonnull(mg_params_add(P, "h.1.w", 1, (int64_t[]){2}, mg_init_ones(), 0));
    ck_assert_ptr_nonnull(mg_params_add(P, "h.10.w", 1, (int64_t[]){2}, mg_init_ones(), 0));
    ck_assert_ptr_nonnull(mg_params_add(P, "h.1", 1, (int64_t[]){2}, mg_init_ones(), MG_FROZEN));
    ck_assert_ptr_nonnull(mg_params_add(P, "h.1.stats", 1, (int64_t[]){2}, mg_init_zeros(), MG_BUFFER | MG_FROZEN));
    ck_assert(!mg_param_trainable(mg_params_find(P, "h.1")));
    mg_tensor *st = mg_params_find(P, "h.1.stats");
    ck_assert(!mg_param_trainable(st) && (st->flags & MG_BUFFER) && !(st->flags & MG_FROZEN));
    ck_assert(mg_params_set_trainable(P, "h.1", false) == MG_OK); /* h.1 and h.1.w, not h.10.w */
    ck_assert(!mg_param_trainable(mg_params_find(P, "h.1.w")));
    ck_assert(mg_param_trainable(mg_params_find(P, "h.10.w")));
    ck_assert(mg_params_set_trainable(P, "", true) == MG_OK); /* all; the buffer stays one */
    ck_assert(mg_param_trainable(mg_params_find(P, "h.1")) && !mg_param_trainable(st));
    ck_assert(mg_params_set_trainable(P, NULL, false) == MG_OK);
    ck_assert_int_eq(mg_params_trainable_numel(P), 0);
    ck_assert(mg_params_set_trainable(P, "h", true) == MG_OK);
    ck_assert_int_eq(mg_params_trainable_numel(P), 6);
    mg_params_free(P);
}
END_TEST

START_TEST(set_trainable_errors) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_nonnull(mg_params_add(P, "enc.w", 1, (int64_t[]){2}, mg_init_ones(), 0));
    ck_assert_ptr_nonnull(mg_params_add(P, "enc.mean", 1, (int64_t[]){2}, mg_init_zeros(), MG_BUFFER));
    TU_ASSERT_ERR(mg_params_set_trainable(P, "en", false), MG_ERR_NOT_FOUND,
                  "mg_params_set_trainable: no parameter is named 'en' or lies under 'en.'");
    TU_ASSERT_ERR(mg_params_set_trainable(P, "enc.mean", true), MG_ERR_INVALID,
                  "mg_params_set_trainable: 'enc.mean' is a buffer, never trainable");
    ck_assert(mg_params_set_trainable(P, "enc.mean", false) == MG_OK);
    ck_assert(mg_params_set_trainable(P, "enc", true) == MG_OK); /* a prefix passes buffers by */
    mg_params_free(P);
}
END_TEST

/* A layer with a buffer: counts the rows it has seen (state updated in forward, never trained). */
static mg_status counter_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    int64_t dim = mg_config_int(cfg, "dim", 0, 1, 1000);
    if (mg_config_status(cfg) != MG_OK) return mg_config_status(cfg);
    if (!mg_layer_param(self, params, "scale", 1, (int64_t[]){dim}, mg_init_ones(), 0)) return MG_ERR_INVALID;
    if (!mg_layer_buffer(self, params, "seen", 1, (int64_t[]){1}, mg_init_zeros())) return MG_ERR_INVALID;
    return MG_OK;
}
static mg_tensor *counter_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)args;
    mg_layer_get_param(self, "seen")->data[0] += (float)mg_rows(x);
    return mg_mul(ctx, x, mg_layer_get_param(self, "scale"));
}
static const mg_layer_vtable counter_vt = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_counter",
    .summary = "x * scale, counting rows in a buffer",
    .create = counter_create,
    .forward = counter_forward,
};

START_TEST(buffers_are_saved_and_restored_but_never_trained) {
    if (!mg_layer_find("mgtest_counter")) ck_assert(mg_register_layer(&counter_vt) == MG_OK);
    char dir[256];
    tu_make_tmpdir(dir, sizeof dir, "mg_nn");
    mg_params *P = mg_params_new();
    mg_config *c = mg_config_new("counter");
    ck_assert(mg_config_set_list(c, "dim=3") == MG_OK);
    mg_layer *l;
    ck_assert_msg(mg_layer_create("mgtest_counter", "cnt", c, P, &l) == MG_OK, "%s", mg_last_error());
    mg_config_free(c);
    mg_layer *fc = mg_linear_new(P, "fc", &(mg_linear_cfg){.in = 3, .out = 2, .frozen = true});
    ck_assert_ptr_nonnull(fc);
    mg_rng rng = mg_rng_make(11);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    mg_tensor *seen = mg_params_find(P, "cnt.seen"), *scale = mg_params_find(P, "cnt.scale");
    mg_tensor *fw = mg_params_find(P, "fc.weight");
    ck_assert(seen && (seen->flags & MG_BUFFER) && (seen->flags & MG_NO_DECAY) && !mg_param_trainable(seen));
    ck_assert(fw && !mg_param_trainable(fw));

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mg_layer_print(l, f);
    mg_layer_print(fc, f);
    fclose(f);
    ck_assert_msg(strstr(buf, "total: 4 parameters, 3 trainable (") && strstr(buf, "total: 6 parameters, 0 trainable ("),
                  "%s", buf);
    free(buf);

    mg_optim *o = mg_adamw_new(P, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0);
    for (int s = 0; s < 2; s++) {
        mg_ctx_reset(ctx);
        mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){4, 3});
        for (int i = 0; i < 12; i++) x->data[i] = (float)i;
        mg_tensor *y = mg_layer_forward(fc, ctx, mg_layer_forward(l, ctx, x, NULL), NULL);
        mg_params_zero_grad(P);
        mg_backward(ctx, mg_mean(ctx, y));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        mg_optim_step(o, 0.1f);
    }
    ck_assert_float_eq(seen->data[0], 8.0f); /* updated by the layer only: no decay, no step */
    ck_assert(seen->grad[0] == 0.0f);
    ck_assert(scale->data[0] != 1.0f);

    /* Weights: every tensor, buffers and frozen ones included. */
    char wpath[512], spath[512];
    snprintf(wpath, sizeof wpath, "%s", tu_path_in(dir, "w.safetensors"));
    snprintf(spath, sizeof spath, "%s", tu_path_in(dir, "w.state.safetensors"));
    ck_assert(mg_checkpoint_save(wpath, P, false, NULL, 0) == MG_OK);
    ck_assert(mg_train_state_save(spath, o, P, NULL, 0) == MG_OK);
    float fw0 = fw->data[1];
    seen->data[0] = -1.0f;
    fw->data[1] = 42.0f;
    ck_assert_msg(mg_checkpoint_load(wpath, P, NULL) == MG_OK, "%s", mg_last_error());
    ck_assert_float_eq(seen->data[0], 8.0f);
    ck_assert_float_eq(fw->data[1], fw0);
    /* The training state holds the trainable parameter only. */
    mg_st_file *sf;
    ck_assert(mg_safetensors_open(spath, &sf) == MG_OK);
    ck_assert_int_eq(mg_st_count(sf), 2); /* opt.m.cnt.scale, opt.v.cnt.scale */
    mg_st_close(sf);
    ck_assert_msg(mg_train_state_load(spath, o, P, NULL) == MG_OK, "%s", mg_last_error());
    /* With fc.weight trainable now, the state lacks it: refused, saying why. */
    ck_assert(mg_params_set_trainable(P, "fc.weight", true) == MG_OK);
    TU_ASSERT_ERR(mg_train_state_load(spath, o, P, NULL), MG_ERR_NOT_FOUND, "missing tensor 'opt.m.fc.weight'",
                  "a training state holds the state of exactly the trainable parameters; 1 of the 3 here");
    mg_ctx_free(ctx);
    mg_optim_free(o);
    mg_layer_free(l);
    mg_layer_free(fc);
    mg_params_free(P);
    tu_remove_tree(dir);
}
END_TEST

/* ---- typed constructors ---- */

static mg_status make_layer(const char *type, const char *prefix, const char *list, mg_params *P, mg_layer **out) {
    mg_config *cfg = mg_config_new(type);
    mg_status st = mg_config_set_list(cfg, list);
    if (st == MG_OK) st = mg_layer_create(type, prefix, cfg, P, out);
    mg_config_free(cfg);
    return st;
}

/* The typed layer ta in A and the config-built tb in B: same kind, same parameter names, shapes,
 * flags and values from the same seed, and the same output for the same input. */
static void expect_same_layer(mg_layer *ta, mg_params *A, mg_layer *tb, mg_params *B, bool ids, int64_t width) {
    ck_assert_msg(ta && tb, "%s", mg_last_error());
    ck_assert_str_eq(mg_layer_vt(ta)->name, mg_layer_vt(tb)->name);
    mg_rng ra = mg_rng_make(5), rb = mg_rng_make(5);
    ck_assert(mg_params_alloc(A, &ra) == MG_OK && mg_params_alloc(B, &rb) == MG_OK);
    ck_assert_int_eq(mg_params_len(A), mg_params_len(B));
    for (int i = 0; i < mg_params_len(A); i++) {
        mg_tensor *pa = mg_params_at(A, i), *pb = mg_params_find(B, pa->name);
        ck_assert_msg(pb, "%s missing from the config-built layer", pa->name);
        ck_assert(mg_same_shape(pa, pb));
        ck_assert_uint_eq(pa->flags, pb->flags);
        ck_assert_mem_eq(pa->data, pb->data, (size_t)pa->numel * sizeof(float));
    }
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x;
    if (ids) {
        x = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 3});
        for (int i = 0; i < 6; i++) x->i32[i] = (i * 5) % (int)width;
    } else {
        x = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){2, 3, width});
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = 0.37f * (float)(i % 7) - 1.0f;
    }
    mg_tensor *ya = mg_layer_forward(ta, ctx, x, NULL), *yb = mg_layer_forward(tb, ctx, x, NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert(mg_same_shape(ya, yb));
    ck_assert_mem_eq(ya->data, yb->data, (size_t)ya->numel * sizeof(float));
    mg_ctx_free(ctx);
    mg_layer_free(ta), mg_layer_free(tb);
    mg_params_free(A), mg_params_free(B);
}

START_TEST(typed_constructors_match_string_configs) {
    mg_params *A = mg_params_new(), *B = mg_params_new();
    mg_layer *tb = NULL;
    mg_layer *ta = mg_embedding_new(A, "wte", &(mg_embedding_cfg){.vocab = 11, .dim = 4, .scale = 2.0f});
    ck_assert(make_layer("embedding", "wte", "vocab=11,dim=4,scale=2", B, &tb) == MG_OK);
    expect_same_layer(ta, A, tb, B, true, 11);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_embedding_new(A, "wte", &(mg_embedding_cfg){.vocab = 7, .dim = 3, .init = &(mg_init){MG_INIT_UNIFORM, -0.1f, 0.1f}, .frozen = true});
    ck_assert(make_layer("embedding", "wte", "vocab=7,dim=3,init=uniform,bound=0.1,frozen=true", B, &tb) == MG_OK);
    ck_assert(!mg_param_trainable(mg_params_find(A, "wte.weight")));
    expect_same_layer(ta, A, tb, B, true, 7);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_layernorm_new(A, "ln", &(mg_layernorm_cfg){.dim = 5});
    ck_assert(make_layer("layernorm", "ln", "dim=5", B, &tb) == MG_OK);
    ck_assert_int_eq(mg_params_len(A), 2);
    expect_same_layer(ta, A, tb, B, false, 5);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_layernorm_new(A, "ln", &(mg_layernorm_cfg){.dim = 5, .zero_eps = true, .no_affine = true});
    ck_assert(make_layer("layernorm", "ln", "dim=5,eps=0,affine=false", B, &tb) == MG_OK);
    ck_assert_int_eq(mg_params_len(A), 0);
    expect_same_layer(ta, A, tb, B, false, 5);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_rms_norm_new(A, "norm", &(mg_rms_norm_cfg){.dim = 6, .eps = 1e-6f, .frozen = true});
    ck_assert(make_layer("rms_norm", "norm", "dim=6,eps=1e-6,frozen=true", B, &tb) == MG_OK);
    ck_assert_ptr_nonnull(mg_params_find(A, "norm.weight"));
    ck_assert(mg_params_find(A, "norm.weight")->flags & MG_FROZEN);
    expect_same_layer(ta, A, tb, B, false, 6);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_rms_norm_new(A, "norm", &(mg_rms_norm_cfg){.dim = 6});
    ck_assert(make_layer("rms_norm", "norm", "dim=6", B, &tb) == MG_OK);
    expect_same_layer(ta, A, tb, B, false, 6);

    A = mg_params_new(), B = mg_params_new();
    ta = mg_dropout_new(A, "drop", &(mg_dropout_cfg){.p = 0.5f});
    ck_assert(make_layer("dropout", "drop", "", B, &tb) == MG_OK); /* p 0.5 by default */
    expect_same_layer(ta, A, tb, B, false, 4);                     /* evaluation: both the identity */
}
END_TEST

START_TEST(norm_layers_compute_their_ops) {
    mg_params *P = mg_params_new();
    mg_layer *rn = mg_rms_norm_new(P, "rn", &(mg_rms_norm_cfg){.dim = 4});
    mg_layer *rz = mg_rms_norm_new(P, "rz", &(mg_rms_norm_cfg){.dim = 4, .zero_eps = true, .no_affine = true});
    mg_layer *ln = mg_layernorm_new(P, "ln", &(mg_layernorm_cfg){.dim = 4, .eps = 0.5f});
    ck_assert_msg(rn && rz && ln, "%s", mg_last_error());
    ck_assert(mg_params_alloc(P, NULL) == MG_OK);
    mg_params_find(P, "rn.weight")->data[2] = 3.0f;
    mg_ctx *ctx = mg_ctx_new(0);
    float xv[4] = {1.0f, -2.0f, 3.0f, 0.5f};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){1, 4}, xv);
    double ms = (1.0 + 4.0 + 9.0 + 0.25) / 4.0;
    mg_tensor *y = mg_layer_forward(rn, ctx, x, NULL);
    for (int j = 0; j < 4; j++)
        ck_assert_float_eq_tol(y->data[j], (float)(xv[j] / sqrt(ms + 1.1920929e-07) * (j == 2 ? 3.0 : 1.0)), 1e-6f);
    y = mg_layer_forward(rz, ctx, x, NULL);
    for (int j = 0; j < 4; j++) ck_assert_float_eq_tol(y->data[j], (float)(xv[j] / sqrt(ms)), 1e-6f);
    y = mg_layer_forward(ln, ctx, x, NULL);
    double mean = 2.5 / 4.0, var = 0.0;
    for (int j = 0; j < 4; j++) var += (xv[j] - mean) * (xv[j] - mean) / 4.0;
    for (int j = 0; j < 4; j++) ck_assert_float_eq_tol(y->data[j], (float)((xv[j] - mean) / sqrt(var + 0.5)), 1e-6f);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    mg_ctx_free(ctx);
    mg_layer_free(rn), mg_layer_free(rz), mg_layer_free(ln);
    mg_params_free(P);
}
END_TEST

START_TEST(dropout_layer_is_active_only_in_training) {
    mg_layer *d = mg_dropout_new(NULL, "drop", &(mg_dropout_cfg){.p = 0.25f});
    ck_assert_msg(d, "%s", mg_last_error());
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){40, 50});
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 1.0f + (float)(i % 3);
    ck_assert_ptr_eq(mg_layer_forward(d, ctx, x, NULL), x);               /* evaluation: x itself */
    ck_assert_ptr_eq(mg_layer_forward(d, ctx, x, &(mg_fwd){.train = false}), x);
    mg_rng r1 = mg_rng_make(9), r2 = mg_rng_make(9);
    mg_tensor *y = mg_layer_forward(d, ctx, x, &(mg_fwd){.train = true, .rng = &r1});
    mg_tensor *want = mg_dropout(ctx, x, 0.25f, &r2);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert_mem_eq(y->data, want->data, (size_t)x->numel * sizeof(float)); /* the op, same mask */
    int64_t zeros = 0;
    for (int64_t i = 0; i < y->numel; i++) {
        if (y->data[i] == 0.0f) zeros++;
        else ck_assert_float_eq_tol(y->data[i], x->data[i] / 0.75f, 1e-6f);
    }
    ck_assert_int_gt(zeros, 350); /* 500 expected of 2000 */
    ck_assert_int_lt(zeros, 650);
    /* training without a generator: an error naming the layer */
    mg_layer_forward(d, ctx, x, &(mg_fwd){.train = true});
    ck_assert_msg(strstr(t.msg, "layer 'drop' (dropout): dropout 0.25 in training needs an rng in mg_fwd"), "%s", t.msg);
    mg_ctx_free(ctx);
    mg_layer_free(d);
}
END_TEST

START_TEST(typed_constructor_errors_name_layer_and_field) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_null(mg_embedding_new(P, "wte", &(mg_embedding_cfg){.vocab = 0, .dim = 4}));
    tu_assert_error_has("layer 'wte' (embedding): vocab = 0 and dim = 4 must be in [1,");
    ck_assert_ptr_null(mg_embedding_new(P, "wte", &(mg_embedding_cfg){.vocab = 3, .dim = 4, .scale = NAN}));
    tu_assert_error_has("layer 'wte' (embedding): scale nan is not finite");
    ck_assert_ptr_null(mg_layernorm_new(P, "ln", &(mg_layernorm_cfg){.dim = -1}));
    tu_assert_error_has("layer 'ln' (layernorm): dim = -1 must be in [1,");
    ck_assert_ptr_null(mg_layernorm_new(P, "ln", &(mg_layernorm_cfg){.dim = 3, .eps = -1e-3f}));
    tu_assert_error_has("layer 'ln' (layernorm): eps -0.001 must be finite and >= 0");
    ck_assert_ptr_null(mg_rms_norm_new(P, "rn", &(mg_rms_norm_cfg){.dim = 0}));
    tu_assert_error_has("layer 'rn' (rms_norm): dim = 0 must be in [1,");
    ck_assert_ptr_null(mg_rms_norm_new(P, "rn", &(mg_rms_norm_cfg){.dim = 3, .eps = INFINITY}));
    tu_assert_error_has("layer 'rn' (rms_norm): eps inf must be finite and >= 0");
    ck_assert_ptr_null(mg_dropout_new(P, "d", &(mg_dropout_cfg){.p = 1.0f}));
    tu_assert_error_has("layer 'd' (dropout): p = 1 must be in [0, 1)");
    ck_assert_ptr_null(mg_dropout_new(P, "d", &(mg_dropout_cfg){.p = -0.5f}));
    tu_assert_error_has("layer 'd' (dropout): p = -0.5 must be in [0, 1)");
    ck_assert_int_eq(mg_params_len(P), 0); /* nothing declared by a refused layer */
    mg_layer *l;
    TU_ASSERT_ERR(make_layer("dropout", "d", "p=1", P, &l), MG_ERR_INVALID, "layer 'd' (dropout): p = 1 must be in [0, 1)");
    TU_ASSERT_ERR(make_layer("rms_norm", "rn", "dim=4,eps=-1", P, &l), MG_ERR_INVALID, "eps");
    /* misuse in forward names the layer once */
    mg_layer *rn = mg_rms_norm_new(P, "h.2.norm", &(mg_rms_norm_cfg){.dim = 4});
    ck_assert(mg_params_alloc(P, NULL) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_layer_forward(rn, ctx, mg_zeros(ctx, 2, (int64_t[]){2, 5}), NULL);
    assert_starts(t.msg, "layer 'h.2.norm' (rms_norm): x(2,5): need float32 with last dim 4");
    mg_ctx_free(ctx);
    mg_layer_free(rn);
    mg_params_free(P);
}
END_TEST

/* Misuse a layer cannot run with is raised on the context before its forward: no layer, no input,
 * parameters whose store was never allocated (LayerNorm's included: whether it is affine is its
 * config's choice, not a matter of its weight having data); and the create calls refuse NULL
 * results and stores with a status. */
START_TEST(forward_refuses_missing_layer_input_and_parameters) {
    mg_params *P = mg_params_new();
    mg_layer *fc = mg_linear_new(P, "fc", &(mg_linear_cfg){.in = 3, .out = 2});
    mg_layer *conv = mg_conv2d_new(P, "conv", &(mg_conv2d_cfg){.in = 1, .out = 1, .kernel = {1, 1}});
    mg_layer *emb = mg_embedding_new(P, "emb", &(mg_embedding_cfg){.vocab = 5, .dim = 2});
    mg_layer *ln = mg_layernorm_new(P, "ln", &(mg_layernorm_cfg){.dim = 3});
    mg_layer *plain = mg_layernorm_new(P, "plain", &(mg_layernorm_cfg){.dim = 3, .no_affine = true});
    mg_layer *attn = NULL;
    ck_assert_int_eq(make_layer("self_attention", "attn", "dim=4,n_head=2", P, &attn), MG_OK);
    ck_assert_msg(fc && conv && emb && ln && plain, "%s", mg_last_error());
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *x = mg_zeros(ctx, 2, (int64_t[]){2, 3});
    mg_tensor *img = mg_zeros(ctx, 4, (int64_t[]){1, 1, 3, 3});
    mg_tensor *seq = mg_zeros(ctx, 3, (int64_t[]){1, 2, 4});
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) ids->i32[i] = i;
#define EXPECT(call, message)                                                                      \
    do {                                                                                           \
        t.calls = 0;                                                                               \
        ck_assert_ptr_nonnull(call);                                                               \
        ck_assert_int_eq(t.calls, 1);                                                              \
        ck_assert_str_eq(t.msg, message);                                                          \
        mg_ctx_clear_error(ctx);                                                                   \
    } while (0)
#define NOT_ALLOCATED(layer, kind, param)                                                          \
    "layer '" layer "' (" kind ", built-in): its parameters are not allocated ('" param "' has no data): call " \
    "mg_params_alloc on their store before the first forward"
    EXPECT(mg_layer_forward(fc, ctx, x, NULL), NOT_ALLOCATED("fc", "linear", "fc.weight"));
    EXPECT(mg_layer_forward(conv, ctx, img, NULL), NOT_ALLOCATED("conv", "conv2d", "conv.weight"));
    EXPECT(mg_layer_forward(emb, ctx, ids, NULL), NOT_ALLOCATED("emb", "embedding", "emb.weight"));
    EXPECT(mg_layer_forward(ln, ctx, x, NULL), NOT_ALLOCATED("ln", "layernorm", "ln.weight"));
    EXPECT(mg_layer_forward(attn, ctx, seq, NULL), NOT_ALLOCATED("attn", "self_attention", "attn.c_attn.weight"));
    EXPECT(mg_layer_forward_expect(fc, ctx, x, NULL, -1, NULL), NOT_ALLOCATED("fc", "linear", "fc.weight"));
    /* a LayerNorm without affine parameters has nothing to allocate */
    t.calls = 0;
    mg_tensor *y = mg_layer_forward(plain, ctx, x, NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", t.msg);
    ck_assert_int_eq(y->numel, 6);
    mg_rng rng = mg_rng_make(1);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    EXPECT(mg_layer_forward(NULL, ctx, x, NULL), "mg_layer_forward: the layer is NULL");
    EXPECT(mg_layer_forward(fc, ctx, NULL, NULL), "layer 'fc' (linear, built-in): mg_layer_forward: x is NULL");
    EXPECT(mg_layer_forward_expect(NULL, ctx, x, NULL, -1, NULL), "mg_layer_forward_expect: the layer is NULL");
    EXPECT(mg_layer_forward_expect(fc, ctx, NULL, NULL, -1, NULL),
           "layer 'fc' (linear, built-in): mg_layer_forward_expect: x is NULL");
#undef NOT_ALLOCATED
#undef EXPECT
    /* allocated, every one runs */
    mg_layer_forward(fc, ctx, x, NULL);
    mg_layer_forward(conv, ctx, img, NULL);
    mg_layer_forward(emb, ctx, ids, NULL);
    mg_layer_forward(ln, ctx, x, NULL);
    mg_layer_forward(attn, ctx, seq, NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", t.msg);
    mg_ctx_free(ctx);
    mg_layer_free(fc), mg_layer_free(conv), mg_layer_free(emb), mg_layer_free(ln), mg_layer_free(plain);
    mg_layer_free(attn);
    mg_params_free(P);
    /* create: no result pointer, or no store for a layer that declares parameters */
    mg_params *Q = mg_params_new();
    mg_config *cfg = mg_config_new("linear");
    ck_assert_int_eq(mg_config_set_list(cfg, "in=3,out=2"), MG_OK);
    TU_ASSERT_ERR(mg_layer_create("linear", "x", cfg, Q, NULL), MG_ERR_INVALID,
                  "mg_layer_create: layer 'x' (linear): out is NULL");
    mg_layer *l = (mg_layer *)1;
    TU_ASSERT_ERR(mg_layer_create("linear", "x", cfg, NULL, &l), MG_ERR_INVALID,
                  "layer 'x': parameter 'weight' has no store to go in (params is NULL)");
    ck_assert_ptr_null(l);
    ck_assert_ptr_null(mg_linear_new(NULL, "fc", &(mg_linear_cfg){.in = 3, .out = 2}));
    tu_assert_error_has("layer 'fc': parameter 'weight' has no store to go in (params is NULL)");
    ck_assert_int_eq(mg_params_len(Q), 0);
    mg_config_free(cfg);
    mg_params_free(Q);
}
END_TEST

/* ---- the example of docs/layers.md, compiled and run, and compared with the page ---- */

/* layers-example:begin */
#include "minigrad/minigrad.h" /* minigrad/nn.h alone lacks the optimizers */

/* Each token id of a sequence predicts the next id (modulo V): a frozen random embedding, an
 * RMSNorm, dropout and a linear head, built with the typed constructors of minigrad/nn.h. */
static float train_next_id(void) {
    enum { V = 8, C = 16, B = 4, T = 6 };
    mg_params *P = mg_params_new();
    mg_layer *emb = mg_embedding_new(P, "emb", &(mg_embedding_cfg){.vocab = V, .dim = C, .frozen = true});
    mg_layer *norm = mg_rms_norm_new(P, "norm", &(mg_rms_norm_cfg){.dim = C});
    mg_layer *drop = mg_dropout_new(P, "drop", &(mg_dropout_cfg){.p = 0.1f});
    mg_layer *head = mg_linear_new(P, "head", &(mg_linear_cfg){.in = C, .out = V, .bias = true});
    mg_rng rng = mg_rng_make(1);
    mg_params_alloc(P, &rng); /* every constructor above declared its parameters in P */
    mg_optim *opt = mg_adamw_new(P, mg_adamw_defaults()); /* skips the frozen emb.weight */
    mg_ctx *ctx = mg_ctx_new(0);
    int32_t ids[B * T], next[B * T];
    float loss_value = 0;
    for (int step = 0; step < 150; step++) {
        for (int i = 0; i < B * T; i++) ids[i] = (int32_t)mg_rng_below(&rng, V), next[i] = (ids[i] + 1) % V;
        mg_ctx_reset(ctx);
        mg_fwd fwd = {.train = true, .rng = &rng}; /* dropout is active only when training */
        mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, ids);
        x = mg_layer_forward(emb, ctx, x, &fwd);
        x = mg_layer_forward(norm, ctx, x, &fwd);
        x = mg_layer_forward(drop, ctx, x, &fwd);
        mg_tensor *logits = mg_layer_forward(head, ctx, x, &fwd);
        mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, next);
        mg_tensor *loss = mg_cross_entropy(ctx, logits, y, -1);
        mg_params_zero_grad(P);
        mg_backward(ctx, loss);
        mg_optim_step(opt, 3e-2f);
        loss_value = loss->data[0];
    }
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_layer_free(emb), mg_layer_free(norm), mg_layer_free(drop), mg_layer_free(head);
    mg_params_free(P);
    return loss_value;
}
/* layers-example:end */

START_TEST(docs_example_trains) {
    float loss = train_next_id();
    ck_assert_msg(loss < 0.3f, "final loss %g", loss);
}
END_TEST

START_TEST(docs_example_matches_this_file) {
    char p1[1024], p2[1024];
    ck_assert_msg(tu_source_path(p1, sizeof p1, "docs/layers.md"), "MINIGRAD_SOURCE_ROOT not set (run through meson test)");
    tu_source_path(p2, sizeof p2, "tests/test_nn.c");
    char *page = tu_read_file(p1, NULL), *self = tu_read_file(p2, NULL);
    char *doc = tu_between(page, "layers-example:begin", "layers-example:end");
    ck_assert_msg(doc != NULL, "docs/layers.md has no layers-example block");
    char *w = doc; /* drop the markdown fence lines */
    for (char *line = doc; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        if (strncmp(line, "```", 3) != 0) memmove(w, line, len), w += len;
        line += len;
    }
    *w = 0;
    char *code = tu_between(self, "layers-example:begin", "layers-example:end");
    ck_assert_ptr_nonnull(code);
    ck_assert_msg(strcmp(doc, code) == 0, "the example of docs/layers.md differs from tests/test_nn.c");
    free(doc), free(code), free(page), free(self);
}
END_TEST

/* ---- the library trainer with frozen parameters and a buffer ---- */

typedef struct {
    mg_params *P;
    mg_tensor *w, *fixed, *count;
} tiny;

/* loss = mean((x * w + fixed - 1)^2) over a fixed x; the buffer counts the steps. */
static mg_tensor *tiny_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout;
    tiny *m = user;
    m->count->data[0] += 1.0f;
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) x->data[i] = 0.25f * (float)i - 0.5f;
    mg_tensor *minus_one = mg_tensor_new(ctx, MG_F32, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) minus_one->data[i] = -1.0f;
    mg_tensor *d = mg_add(ctx, mg_add(ctx, mg_mul(ctx, x, m->w), m->fixed), minus_one);
    return mg_mean(ctx, mg_mul(ctx, d, d));
}

static tiny tiny_make(void) {
    tiny m = {mg_params_new(), NULL, NULL, NULL};
    m.w = mg_params_add(m.P, "w", 1, (int64_t[]){3}, mg_init_const(0.1f), 0);
    m.fixed = mg_params_add(m.P, "fixed", 1, (int64_t[]){3}, mg_init_const(0.5f), MG_FROZEN);
    m.count = mg_params_add(m.P, "count", 1, (int64_t[]){1}, mg_init_zeros(), MG_BUFFER);
    ck_assert(m.w && m.fixed && m.count && mg_params_alloc(m.P, NULL) == MG_OK);
    return m;
}

START_TEST(trainer_keeps_frozen_weights_and_buffers) {
    char dir[256], ckpt[512];
    tu_make_tmpdir(dir, sizeof dir, "mg_nn_train");
    snprintf(ckpt, sizeof ckpt, "%s", tu_path_in(dir, "tiny.safetensors"));
    tiny m = tiny_make();
    mg_train_model model = {.params = m.P, .user = &m, .loss = tiny_loss};
    mg_train_cfg cfg = mg_train_defaults();
    cfg.steps = 8, cfg.stop_after = 5, cfg.warmup = 0, cfg.lr = cfg.lr_min = 0.05f, cfg.eval_every = 0;
    cfg.ckpt = ckpt, cfg.quiet = true, cfg.catch_sigint = false, cfg.prog = "tiny";
    cfg.max_weight = 3.0f; /* the buffer passes it: the bound is about weights */
    mg_train_result res;
    TU_OK(mg_train_run(&model, &cfg, &res));
    ck_assert(res.stopped && res.step == 5);
    ck_assert_float_eq(m.count->data[0], 5.0f);
    for (int i = 0; i < 3; i++) ck_assert_float_eq(m.fixed->data[i], 0.5f);
    ck_assert(m.w->data[0] != 0.1f);
    /* resumed in a fresh store: the buffer and the frozen weight come back from the checkpoint,
     * the optimizer state of w alone from the training state */
    tiny r = tiny_make();
    r.fixed->data[0] = -7.0f;
    model.params = r.P, model.user = &r;
    cfg.resume = true, cfg.stop_after = 0;
    TU_OK(mg_train_run(&model, &cfg, &res));
    ck_assert_int_eq(res.step, 8);
    ck_assert_float_eq(r.count->data[0], 8.0f);
    ck_assert_float_eq(r.fixed->data[0], 0.5f);
    /* the same run without a stop gives the same w bit for bit */
    tiny u = tiny_make();
    snprintf(ckpt, sizeof ckpt, "%s", tu_path_in(dir, "whole.safetensors"));
    model.params = u.P, model.user = &u;
    cfg.resume = false, cfg.ckpt = ckpt;
    TU_OK(mg_train_run(&model, &cfg, &res));
    ck_assert_mem_eq(u.w->data, r.w->data, 3 * sizeof(float));
    mg_params_free(m.P), mg_params_free(r.P), mg_params_free(u.P);
    tu_remove_tree(dir);
}
END_TEST

static Suite *nn_suite(void) {
    mg_log_set(lc_quiet_log, NULL);
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("scopes");
    tcase_add_test(tc, op_error_deep_in_a_model_names_the_layer);
    tcase_add_test(tc, scopes_deeper_than_the_stack_stay_balanced);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("frozen");
    tcase_add_test(tf, frozen_weights_stay_put_and_get_no_gradient);
    tcase_add_test(tf, set_trainable_selects_by_name_or_prefix);
    tcase_add_test(tf, set_trainable_errors);
    tcase_add_test(tf, buffers_are_saved_and_restored_but_never_trained);
    tcase_add_test(tf, trainer_keeps_frozen_weights_and_buffers);
    suite_add_tcase(s, tf);
    TCase *tt = tcase_create("typed");
    tcase_add_test(tt, typed_constructors_match_string_configs);
    tcase_add_test(tt, norm_layers_compute_their_ops);
    tcase_add_test(tt, dropout_layer_is_active_only_in_training);
    tcase_add_test(tt, typed_constructor_errors_name_layer_and_field);
    tcase_add_test(tt, forward_refuses_missing_layer_input_and_parameters);
    suite_add_tcase(s, tt);
    TCase *td = tcase_create("docs");
    tcase_add_test(td, docs_example_trains);
    tcase_add_test(td, docs_example_matches_this_file);
    suite_add_tcase(s, td);
    return s;
}

MG_TEST_MAIN(nn_suite)
