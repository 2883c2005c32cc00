/* Configs: typed getters and their errors, the INI-like file parser (every error names the file,
 * the line and the key), sequential models built from a file, and GPT config files. */
#include "layer_check.h"
#include "test_util.h"
#include "minigrad/gpt.h"

#include <stdio.h>
#include <unistd.h>

static char tmpdir[256];

static void setup(void) { tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_test_config"); }

static void teardown(void) { ck_assert(tu_remove_tree(tmpdir)); }

/* Writes text to <tmpdir>/name and returns the path (tu_path_in's buffers). */
static const char *write_file(const char *name, const char *text) {
    const char *path = tu_path_in(tmpdir, name);
    tu_write_text(path, text);
    return path;
}

START_TEST(getters_defaults_ranges_and_sticky_errors) {
    mg_config *c = mg_config_new("layer 'x' (test)");
    ck_assert_int_eq(mg_config_set(c, "n", "12"), MG_OK);
    ck_assert_int_eq(mg_config_set(c, "f", "0.25"), MG_OK);
    ck_assert_int_eq(mg_config_set(c, "b", "Off"), MG_OK);
    ck_assert_int_eq(mg_config_set(c, "s", "hello"), MG_OK);
    ck_assert_int_eq(mg_config_set(c, "k", "erf"), MG_OK);
    ck_assert_int_eq(mg_config_int(c, "n", 3, 1, 100), 12);
    ck_assert_int_eq(mg_config_int(c, "absent", 3, 1, 100), 3);
    ck_assert_double_eq(mg_config_float(c, "f", 1.0, 0.0, 1.0), 0.25);
    ck_assert(!mg_config_bool(c, "b", true));
    ck_assert_str_eq(mg_config_str(c, "s", "x"), "hello");
    static const char *const kinds[] = {"tanh", "erf", NULL};
    ck_assert_int_eq(mg_config_choice(c, "k", kinds, 0), 1);
    ck_assert_int_eq(mg_config_status(c), MG_OK);
    ck_assert_int_eq(mg_config_check_used(c), MG_OK);

    /* set wins over offer, offer never overrides set, an unused offer is fine */
    ck_assert_int_eq(mg_config_offer(c, "n", "99"), MG_OK);
    ck_assert_int_eq(mg_config_int(c, "n", 3, 1, 100), 12);
    ck_assert_int_eq(mg_config_offer(c, "context", "7"), MG_OK);
    ck_assert_int_eq(mg_config_check_used(c), MG_OK);

    /* the first error sticks; later getters return defaults */
    ck_assert_int_eq(mg_config_set(c, "bad", "12abc"), MG_OK);
    ck_assert_int_eq(mg_config_int(c, "bad", 5, 0, 100), 5);
    ck_assert_int_eq(mg_config_int(c, "n", 3, 50, 100), 3);
    TU_ASSERT_ERR(mg_config_status(c), MG_ERR_INVALID, "layer 'x' (test): key 'bad': expected an integer, got '12abc'");
    mg_config_free(c);

    c = mg_config_new("cfg");
    mg_config_set(c, "n", "0");
    mg_config_int(c, "n", 3, 1, 100);
    TU_ASSERT_ERR(mg_config_status(c), MG_ERR_INVALID, "key 'n' = 0 is out of range [1, 100]");
    mg_config_free(c);
    c = mg_config_new("cfg");
    mg_config_float(c, "lr", -1.0, 0.0, 1.0);
    TU_ASSERT_ERR(mg_config_status(c), MG_ERR_INVALID, "missing required key 'lr'");
    mg_config_free(c);
    c = mg_config_new("cfg");
    mg_config_set(c, "flag", "maybe");
    mg_config_bool(c, "flag", false);
    TU_ASSERT_ERR(mg_config_status(c), MG_ERR_INVALID, "key 'flag': expected true or false, got 'maybe'");
    mg_config_free(c);
    c = mg_config_new("cfg");
    mg_config_set(c, "x", "nan");
    mg_config_float(c, "x", 0.0, -1.0, 1.0);
    TU_ASSERT_ERR(mg_config_status(c), MG_ERR_INVALID, "expected a finite number, got 'nan'");
    mg_config_free(c);
    c = mg_config_new("cfg");
    ck_assert_int_eq(mg_config_set_list(c, " a = 1 , b=2,,"), MG_OK);
    ck_assert_int_eq(mg_config_len(c), 2);
    ck_assert_str_eq(mg_config_value(c, 0), "1");
    TU_ASSERT_ERR(mg_config_set_list(c, "a=1,oops"), MG_ERR_INVALID, "option 'oops' is not key=value");
    mg_config_free(c);
}
END_TEST

START_TEST(file_syntax_errors_name_file_and_line) {
    mg_cfg_file *f = (mg_cfg_file *)1;
    TU_ASSERT_ERR(mg_cfg_file_parse("# c\n[linear]\nin = 3\nthis is wrong\n", "m.cfg", &f), MG_ERR_FORMAT,
               "m.cfg:4: expected '[section]' or 'key = value', got 'this is wrong'");
    ck_assert_ptr_null(f);
    TU_ASSERT_ERR(mg_cfg_file_parse("in = 3\n", "m.cfg", &f), MG_ERR_FORMAT, "m.cfg:1: key 'in' comes before any [section]");
    TU_ASSERT_ERR(mg_cfg_file_parse("[linear\n", "m.cfg", &f), MG_ERR_FORMAT, "m.cfg:1: section header '[linear' has no closing ']'");
    TU_ASSERT_ERR(mg_cfg_file_parse("[a b]\n", "m.cfg", &f), MG_ERR_FORMAT, "m.cfg:1: bad section name '[a b]'");
    TU_ASSERT_ERR(mg_cfg_file_parse("[x]\n\n k = 1\nk=2\n", "m.cfg", &f), MG_ERR_FORMAT,
               "m.cfg:4: [x] key 'k' is set twice (first on line 3)");
    TU_ASSERT_ERR(mg_cfg_file_parse("[x]\nk =   # nothing\n", "m.cfg", &f), MG_ERR_FORMAT, "m.cfg:2: key 'k' has no value");
    TU_ASSERT_ERR(mg_cfg_file_parse("[x] junk\n", "m.cfg", &f), MG_ERR_FORMAT, "m.cfg:1: text after the section header");
    /* no text, or nowhere to put the result: an argument error, not a crash */
    f = (mg_cfg_file *)1;
    TU_ASSERT_ERR(mg_cfg_file_parse(NULL, "m.cfg", &f), MG_ERR_INVALID, "m.cfg: mg_cfg_file_parse: text is NULL");
    ck_assert_ptr_null(f);
    TU_ASSERT_ERR(mg_cfg_file_parse("[x]\n", "m.cfg", NULL), MG_ERR_INVALID, "mg_cfg_file_parse: out is NULL");
    ck_assert_int_eq(mg_cfg_file_parse("\r\n[x]\r\nk = v ; comment\r\nname=a#b\n[y]\n", "m.cfg", &f), MG_OK);
    ck_assert_int_eq(mg_cfg_file_count(f), 2);
    ck_assert_str_eq(mg_cfg_file_section(f, 0), "x");
    ck_assert_int_eq(mg_cfg_file_line(f, 1), 5);
    ck_assert_str_eq(mg_config_str(mg_cfg_file_config(f, 0), "k", ""), "v");
    ck_assert_str_eq(mg_config_str(mg_cfg_file_config(f, 0), "name", ""), "a#b"); /* '#' only after a space */
    mg_cfg_file_free(f);

    TU_ASSERT_ERR(mg_cfg_file_read("/nonexistent/dir/model.cfg", &f), MG_ERR_IO, "/nonexistent/dir/model.cfg: cannot open");
    const char *p = write_file("nul.cfg", "[x]\nk=1\n");
    FILE *fp = fopen(p, "ab");
    fputc(0, fp);
    fclose(fp);
    TU_ASSERT_ERR(mg_cfg_file_read(p, &f), MG_ERR_FORMAT, "nul.cfg:3: NUL byte");
}
END_TEST

/* A file of many keys reads in time linear in its size (each key is checked against those before
 * it through a hash table; comparing it with all of them took minutes for a 1 MB file), and every
 * key keeps its value, its line and its duplicate check, at the start, middle and end. */
START_TEST(file_with_many_keys) {
    enum { N = 100000 };
    size_t cap = (size_t)N * 24 + 64, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len, "[x]\n");
    for (int i = 0; i < N; i++) len += (size_t)snprintf(text + len, cap - len, "key_%d = %d\n", i, 7 * i);
    mg_cfg_file *f;
    ck_assert_int_eq(mg_cfg_file_parse(text, "many.cfg", &f), MG_OK);
    mg_config *c = mg_cfg_file_config(f, 0);
    ck_assert_int_eq(mg_config_len(c), N);
    char key[32], where[256], want[256];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "key_%d", i);
        snprintf(want, sizeof want, "many.cfg:%d: [x]", i + 2); /* found: its own line */
        ck_assert_str_eq(mg_config_where(c, key, where, sizeof where), want);
        if (i % 997 == 0 || i == N - 1)
            ck_assert_msg(mg_config_int(c, key, -1, 0, INT64_MAX) == 7 * (int64_t)i, "%s", key);
    }
    ck_assert_int_eq(mg_config_status(c), MG_OK);
    ck_assert(!mg_config_has(c, "key_100000") && !mg_config_has(c, "key_") && !mg_config_has(c, "key_1 "));
    TU_ASSERT_ERR(mg_config_check_used(c), MG_ERR_INVALID, "many.cfg:3: [x]: unknown key 'key_1'");
    /* a later set replaces the value in place; a new key goes after the others */
    ck_assert_int_eq(mg_config_set(c, "key_5", "five"), MG_OK);
    ck_assert_int_eq(mg_config_set(c, "extra", "1"), MG_OK);
    ck_assert_str_eq(mg_config_value(c, 5), "five");
    ck_assert_str_eq(mg_config_key(c, N), "extra");
    mg_cfg_file_free(f);

    /* duplicates of the first, a middle and the last key, each reported against its first line */
    const int dup[] = {0, N / 2, N - 1};
    for (int d = 0; d < 3; d++) {
        snprintf(text + len, cap - len, "key_%d = again\n", dup[d]);
        snprintf(want, sizeof want, "many.cfg:%d: [x] key 'key_%d' is set twice (first on line %d)", N + 2, dup[d],
                 dup[d] + 2);
        TU_ASSERT_ERR(mg_cfg_file_parse(text, "many.cfg", &f), MG_ERR_FORMAT, want);
        ck_assert_ptr_null(f);
        text[len] = 0;
    }
    free(text);
}
END_TEST

static const char *model_cfg =
    "# a tiny GPT-like stack, section by section\n"
    "[embedding]\n"
    "name = wte\n"
    "vocab = 11\n"
    "dim = 8\n"
    "\n"
    "[learned_pos]\n"
    "name = wpe\n"
    "max_len = 6\n"
    "dim = 8\n"
    "[decoder_block]\n"
    "name = h.0\n"
    "dim = 8\n"
    "n_head = 2\n"
    "[layernorm]\n"
    "name = ln_f\n"
    "dim = 8\n";

static char logbuf[8192];
static void capture_log(mg_log_level level, const char *msg, void *user) {
    (void)level, (void)user;
    size_t l = strlen(logbuf);
    snprintf(logbuf + l, sizeof logbuf - l, "%s\n", msg);
}

START_TEST(sequential_model_from_file) {
    const char *path = write_file("model.cfg", model_cfg);
    mg_rng rng = mg_rng_make(3);
    mg_model *m;
    logbuf[0] = 0;
    mg_log_set(capture_log, NULL);
    ck_assert_msg(mg_model_from_file(path, &rng, &m) == MG_OK, "%s", mg_last_error());
    mg_log_set(NULL, NULL);
    /* the summary table was printed when built */
    ck_assert_msg(strstr(logbuf, "wte") && strstr(logbuf, "weight (11,8)") && strstr(logbuf, "h.0.attn.c_attn") &&
                      strstr(logbuf, "total: 1,024 parameters"),
                  "%s", logbuf);
    ck_assert_int_eq(mg_model_count(m), 4);
    ck_assert_ptr_nonnull(mg_params_find(mg_model_params(m), "wpe.weight"));
    ck_assert_ptr_nonnull(mg_params_find(mg_model_params(m), "h.0.mlp.c_proj.bias"));
    mg_ctx *ctx = mg_ctx_new(0);
    int32_t ids[6] = {1, 2, 3, 4, 5, 10};
    mg_tensor *y = mg_model_forward(m, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 6}, ids), NULL);
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(y->ndim, 3);
    ck_assert_int_eq(y->shape[2], 8);
    mg_ctx_free(ctx);
    mg_model_free(m);
}
END_TEST

START_TEST(model_file_errors_name_file_line_key) {
    mg_rng rng = mg_rng_make(3);
    mg_model *m = (mg_model *)1;
    mg_log_set(lc_quiet_log, NULL);
    const char *p = write_file("typo_key.cfg", "[embedding]\nvocab = 11\ndimm = 8\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "typo_key.cfg:3: [embedding]: unknown key 'dimm'",
               "known keys: name, vocab, dim");
    ck_assert_ptr_null(m);
    p = write_file("typo_layer.cfg", "[embedding]\nvocab = 11\ndim = 8\n\n[layernorn]\ndim = 8\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_NOT_FOUND, "typo_layer.cfg:5: unknown layer '[layernorn]'",
               "registered: linear, embedding");
    p = write_file("bad_value.cfg", "[linear]\nin = 4\nout = four\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "bad_value.cfg:3: [linear]: key 'out': expected an integer, got 'four'");
    p = write_file("missing.cfg", "\n[linear]\nin = 4\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "missing.cfg:2: [linear]: missing required key 'out'");
    p = write_file("range.cfg", "[layernorm]\ndim = 8\neps = 2\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "range.cfg:3: [layernorm]: key 'eps' = 2 is out of range");
    p = write_file("dup.cfg", "[linear]\nname = a\nin = 2\nout = 2\n[linear]\nname = a\nin = 2\nout = 2\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID,
                  "dup.cfg:6: [linear]: name 'a' is already the name of section 1 ([linear] on line 1)");
    /* layers without parameters may share a name, as they always could */
    p = write_file("dup_dropout.cfg", "[dropout]\nname = d\np = 0.1\n[linear]\nin = 2\nout = 2\n[dropout]\nname = d\np = 0.1\n");
    TU_OK(mg_model_from_file(p, &rng, &m));
    mg_model_free(m);
    m = NULL;
    ck_assert_ptr_null(m);
    /* different names whose parameters collide: the store's message, with the file, line and section */
    p = write_file("clash.cfg", "[decoder_block]\nname = a\ndim = 8\nn_head = 2\n[linear]\nname = a.attn.c_attn\n"
                                "in = 8\nout = 24\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID,
                  "clash.cfg:5: [linear] 'a.attn.c_attn': mg_params_add: duplicate parameter name 'a.attn.c_attn.weight'");
    ck_assert_ptr_null(m);
    m = (mg_model *)1;
    TU_ASSERT_ERR(mg_model_build(NULL, &rng, &m), MG_ERR_INVALID, "mg_model_build: the config file is NULL");
    ck_assert_ptr_null(m);
    mg_cfg_file *cf = NULL;
    ck_assert_int_eq(mg_cfg_file_parse("[linear]\nin = 2\nout = 2\n", "ok.cfg", &cf), MG_OK);
    TU_ASSERT_ERR(mg_model_build(cf, &rng, NULL), MG_ERR_INVALID, "mg_model_build: out is NULL");
    mg_cfg_file_free(cf);
    p = write_file("empty.cfg", "# nothing\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "empty.cfg: no [layer] sections");
    p = write_file("nested.cfg", "[decoder_block]\ndim = 8\nn_head = 3\n");
    TU_ASSERT_ERR(mg_model_from_file(p, &rng, &m), MG_ERR_INVALID, "dim 8 is not a multiple of n_head 3");
    mg_log_set(NULL, NULL);
}
END_TEST

START_TEST(gpt_config_files) {
    mg_gpt_config c;
    const char *p = write_file("gpt.cfg", "[gpt]\nvocab_size = 65\nblock_size = 32\nn_layer = 2\nn_head = 4\n"
                                          "n_embd = 64\npos = rope\ndropout = 0.1\ngelu = erf\nemb_scale = sqrt\n"
                                          "head = linear\nhead_bias = true\ncausal = false\n");
    ck_assert_msg(mg_gpt_config_read(p, &c) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(c.vocab_size, 65);
    ck_assert_int_eq(c.n_embd, 64);
    ck_assert_str_eq(c.pos, "rope");
    ck_assert_float_eq(c.emb_scale, 8.0f);
    ck_assert(!c.tied_head && c.head_bias && !c.causal && c.gelu == MG_GELU_ERF);
    ck_assert_float_eq_tol(c.dropout, 0.1f, 1e-7f);
    ck_assert_int_eq(c.n_layer, 2);

    p = write_file("g1.cfg", "[gpt]\nvocab_size = 65\nn_heads = 4\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "g1.cfg:3: [gpt]: unknown key 'n_heads'", "known keys: vocab_size");
    p = write_file("g2.cfg", "[gpt]\nn_embd = 30\nn_head = 4\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "n_embd 30 is not a multiple of n_head 4");
    p = write_file("g3.cfg", "[gpt]\nvocab_size = 65\n[optimizer]\nlr = 1\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "g3.cfg:3: unknown section '[optimizer]'");
    p = write_file("g4.cfg", "[gpt]\nhead = tied\nhead_bias = true\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "head_bias needs an untied head");
    p = write_file("g5.cfg", "[gpt]\n\nemb_scale = big\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "key 'emb_scale': expected a number or 'sqrt', got 'big'");
    p = write_file("g6.cfg", "[gpt]\ngelu = relu\n");
    TU_ASSERT_ERR(mg_gpt_config_read(p, &c), MG_ERR_INVALID, "g6.cfg:2: [gpt]: key 'gelu': 'relu' is not one of: tanh, erf");

    /* a bad positional option reaches the scheme's layer and is named there */
    mg_gpt_config g = mg_gpt_config_default();
    g.vocab_size = 7, g.block_size = 4, g.n_layer = 1, g.n_head = 2, g.n_embd = 8;
    snprintf(g.pos, sizeof g.pos, "rope");
    snprintf(g.pos_opts, sizeof g.pos_opts, "bass=100");
    mg_rng rng = mg_rng_make(1);
    mg_gpt *m = NULL;
    TU_ASSERT_ERR(mg_gpt_new(&g, &rng, &m), MG_ERR_INVALID, "pos 'rope' (layer rope)", "unknown key 'bass'");
    ck_assert_ptr_null(m);
    snprintf(g.pos_opts, sizeof g.pos_opts, "base=100");
    ck_assert_msg(mg_gpt_new(&g, &rng, &m) == MG_OK, "%s", mg_last_error());
    mg_gpt_free(m);
}
END_TEST

static Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, getters_defaults_ranges_and_sticky_errors);
    tcase_add_test(tc, file_syntax_errors_name_file_and_line);
    tcase_add_test(tc, file_with_many_keys);
    tcase_add_test(tc, sequential_model_from_file);
    tcase_add_test(tc, model_file_errors_name_file_line_key);
    tcase_add_test(tc, gpt_config_files);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(config_suite)
