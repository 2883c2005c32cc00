/* The PyTorch models translated line by line (translate_models.c; test_translate.py checks their
 * numbers against PyTorch): a badly shaped input or configuration raises an error that says where
 * (the layer's name and kind from mg_layer_forward's scope, the layer's own check, or the scope the
 * translated Llama block pushes around its attention and feed-forward code), the scopes are popped
 * after a failure, and docs/pytorch.md shows exactly the tested code of both sides (with the structs
 * and the naming helper the C side uses). */
#include "test_util.h"
#include "translate_models.h"

static void assert_starts(const char *msg, const char *want) {
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "message '%s' should start with '%s'", msg, want);
}

static const tr_llama_cfg LLAMA = {.dim = 16, .n_heads = 2, .hidden_dim = 40, .norm_eps = 1e-5f, .rope_theta = 10000.0f};

/* x (B,T,C) of ones. */
static mg_tensor *ones3(mg_ctx *ctx, int64_t B, int64_t T, int64_t C) {
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){B, T, C});
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 1.0f;
    return x;
}

START_TEST(llama_block_runs_and_errors_name_the_place) {
    mg_params *P = mg_params_new();
    tr_llama_block b = {0};
    ck_assert_msg(tr_llama_block_init(&b, P, "blk", &LLAMA), "%s", mg_last_error());
    mg_rng rng = mg_rng_make(5);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);

    /* well shaped: (2,5,16) in and out, no error, no scope left open */
    mg_tensor *y = tr_llama_block_forward(&b, ctx, ones3(ctx, 2, 5, 16));
    ck_assert_int_eq(t.calls, 0);
    ck_assert_int_eq(y->ndim, 3);
    ck_assert_int_eq(y->shape[2], 16);
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);

    /* the wrong model width: the first layer says so, by its name and kind */
    tr_llama_block_forward(&b, ctx, ones3(ctx, 2, 5, 12));
    ck_assert_int_eq(t.calls, 1);
    assert_starts(t.msg, "layer 'blk.attention_norm' (rms_norm): x(2,5,12): need float32 with last dim 16");
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);

    /* a 2-d input: the projections take it, the head split inside the attention code fails and
     * names the scope the block pushed */
    mg_ctx_clear_error(ctx);
    mg_ctx_reset(ctx);
    mg_tensor *x2 = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){10, 16});
    for (int64_t i = 0; i < x2->numel; i++) x2->data[i] = 0.5f;
    tr_llama_block_forward(&b, ctx, x2);
    assert_starts(t.msg, "blk.attention: mg_reshape: ");
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);
    mg_ctx_free(ctx);
    tr_llama_block_free(&b);
    mg_params_free(P);
}
END_TEST

/* n_heads that does not divide dim: as PyTorch's .view(B, T, H, D), the head split fails; here the
 * message starts with the block's attention scope. */
START_TEST(llama_heads_not_dividing_dim_fail_in_the_attention_scope) {
    mg_params *P = mg_params_new();
    tr_llama_block b = {0};
    tr_llama_cfg cfg = LLAMA;
    cfg.n_heads = 3; /* 16 / 3 = 5 per head: 15 columns of 16 */
    ck_assert_msg(tr_llama_block_init(&b, P, "layers.0", &cfg), "%s", mg_last_error());
    mg_rng rng = mg_rng_make(5);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    tr_llama_block_forward(&b, ctx, ones3(ctx, 2, 5, 16));
    ck_assert_int_eq(t.calls, 1);
    assert_starts(t.msg, "layers.0.attention: mg_reshape: ");
    ck_assert_msg(strstr(t.msg, "(2,5,16)") && strstr(t.msg, "(2,5,3,5)"), "%s", t.msg);
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);
    mg_ctx_free(ctx);
    tr_llama_block_free(&b);
    mg_params_free(P);
}
END_TEST

/* An op failing inside a built-in layer is named by mg_layer_forward's scope "<name> (<kind>)":
 * a token id outside the vocabulary reaches mg_embedding inside layer "emb". */
START_TEST(lstm_lm_bad_token_names_the_embedding_layer) {
    mg_params *P = mg_params_new();
    tr_lstm_lm m = {0};
    ck_assert_msg(tr_lstm_lm_init(&m, P, 11, 8, 12), "%s", mg_last_error());
    mg_rng rng = mg_rng_make(6);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    int32_t ids[2 * 4] = {1, 2, 3, 4, 5, 6, 11, 0};
    mg_tensor *logits = tr_lstm_lm_forward(&m, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 4}, ids));
    ck_assert_int_eq(t.calls, 1);
    assert_starts(t.msg, "emb (embedding): mg_embedding: ");
    ck_assert_msg(strstr(t.msg, "11"), "%s", t.msg);
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);
    (void)logits;

    /* with good ids the shapes are PyTorch's: (B, T, vocab) */
    mg_ctx_clear_error(ctx);
    mg_ctx_reset(ctx);
    ids[6] = 10;
    logits = tr_lstm_lm_forward(&m, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 4}, ids));
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(logits->ndim, 3);
    ck_assert_int_eq(logits->shape[0], 2);
    ck_assert_int_eq(logits->shape[1], 4);
    ck_assert_int_eq(logits->shape[2], 11);
    mg_ctx_free(ctx);
    tr_lstm_lm_free(&m);
    mg_params_free(P);
}
END_TEST

/* Images of the wrong size flatten to the wrong width: the linear head names itself (PyTorch:
 * "mat1 and mat2 shapes cannot be multiplied (3x128 and 72x10)"); the wrong channel count stops
 * at the first convolution. */
START_TEST(cnn_wrong_image_size_names_the_layer) {
    mg_params *P = mg_params_new();
    tr_cnn m = {0};
    ck_assert_msg(tr_cnn_init(&m, P), "%s", mg_last_error());
    mg_rng rng = mg_rng_make(7);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *y = tr_cnn_forward(&m, ctx, mg_zeros(ctx, 4, (int64_t[]){3, 1, 12, 12}));
    ck_assert_int_eq(t.calls, 0);
    ck_assert_int_eq(y->shape[0], 3);
    ck_assert_int_eq(y->shape[1], 10);

    tr_cnn_forward(&m, ctx, mg_zeros(ctx, 4, (int64_t[]){3, 1, 16, 16}));
    ck_assert_int_eq(t.calls, 1);
    assert_starts(t.msg, "layer 'fc' (linear): x(3,128): need float32 with last dim in = 72");

    mg_ctx_clear_error(ctx);
    tr_cnn_forward(&m, ctx, mg_zeros(ctx, 4, (int64_t[]){3, 3, 12, 12}));
    ck_assert_int_eq(t.calls, 2);
    ck_assert_msg(strstr(t.msg, "conv1") != NULL, "%s", t.msg);
    ck_assert_int_eq(mg_ctx_scope_depth(ctx), 0);
    mg_ctx_free(ctx);
    tr_cnn_free(&m);
    mg_params_free(P);
}
END_TEST

/* ---- docs/pytorch.md shows the code that is tested ---- */

/* The text of `file` (source tree) between the lines holding `begin` and `end`, without markdown
 * fence lines. NULL when a marker is missing. */
static char *block_of(const char *file, const char *begin, const char *end) {
    char path[1024];
    ck_assert_msg(tu_source_path(path, sizeof path, file), "MINIGRAD_SOURCE_ROOT not set (run through meson test)");
    char *text = tu_read_file(path, NULL);
    char *b = tu_between(text, begin, end);
    free(text);
    if (!b) return NULL;
    char *w = b;
    for (char *line = b; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        if (strncmp(line, "```", 3) != 0) memmove(w, line, len), w += len;
        line += len;
    }
    *w = 0;
    return b;
}

START_TEST(the_guide_shows_the_tested_code) {
    static const char *const models[] = {"cnn", "lstm", "llama"};
    for (int i = 0; i < 3; i++) {
        char b1[64], e1[64], b2[64], e2[64];
        snprintf(b1, sizeof b1, "translate-%s:begin", models[i]), snprintf(e1, sizeof e1, "translate-%s:end", models[i]);
        char *c_src = block_of("tests/translate_models.c", b1, e1), *py_src = block_of("tests/test_translate.py", b1, e1);
        ck_assert_msg(c_src && py_src, "translate_models.c or test_translate.py lacks the %s block", models[i]);
        snprintf(b2, sizeof b2, "minigrad-%s:begin", models[i]), snprintf(e2, sizeof e2, "minigrad-%s:end", models[i]);
        char *c_doc = block_of("docs/pytorch.md", b2, e2);
        snprintf(b2, sizeof b2, "pytorch-%s:begin", models[i]), snprintf(e2, sizeof e2, "pytorch-%s:end", models[i]);
        char *py_doc = block_of("docs/pytorch.md", b2, e2);
        ck_assert_msg(c_doc && py_doc, "docs/pytorch.md lacks the pytorch-%s or minigrad-%s block", models[i], models[i]);
        ck_assert_msg(strcmp(c_doc, c_src) == 0, "docs/pytorch.md's minigrad-%s block differs from tests/translate_models.c",
                      models[i]);
        ck_assert_msg(strcmp(py_doc, py_src) == 0, "docs/pytorch.md's pytorch-%s block differs from tests/test_translate.py",
                      models[i]);
        free(c_src), free(py_src), free(c_doc), free(py_doc);
    }
    /* the C the models use besides: their structs and the llama block's naming helper */
    static const char *const extras[][2] = {{"cnn-types", "tests/translate_models.h"},
                                            {"lstm-types", "tests/translate_models.h"},
                                            {"llama-types", "tests/translate_models.h"},
                                            {"llama-name", "tests/translate_models.c"}};
    for (int i = 0; i < 4; i++) {
        char b1[64], e1[64], b2[64], e2[64];
        snprintf(b1, sizeof b1, "translate-%s:begin", extras[i][0]), snprintf(e1, sizeof e1, "translate-%s:end", extras[i][0]);
        snprintf(b2, sizeof b2, "minigrad-%s:begin", extras[i][0]), snprintf(e2, sizeof e2, "minigrad-%s:end", extras[i][0]);
        char *src = block_of(extras[i][1], b1, e1), *doc = block_of("docs/pytorch.md", b2, e2);
        ck_assert_msg(src, "%s lacks the translate-%s block", extras[i][1], extras[i][0]);
        ck_assert_msg(doc, "docs/pytorch.md lacks the minigrad-%s block", extras[i][0]);
        ck_assert_msg(strcmp(doc, src) == 0, "docs/pytorch.md's minigrad-%s block differs from %s", extras[i][0], extras[i][1]);
        free(src), free(doc);
    }
}
END_TEST

static Suite *translate_scopes_suite(void) {
    Suite *s = suite_create("translate_scopes");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, llama_block_runs_and_errors_name_the_place);
    tcase_add_test(tc, llama_heads_not_dividing_dim_fail_in_the_attention_scope);
    tcase_add_test(tc, lstm_lm_bad_token_names_the_embedding_layer);
    tcase_add_test(tc, cnn_wrong_image_size_names_the_layer);
    suite_add_tcase(s, tc);
    tc = tcase_create("docs");
    tcase_add_test(tc, the_guide_shows_the_tested_code);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(translate_scopes_suite)
