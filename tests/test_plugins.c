/* The plugin loader: loading by path and by name (MINIGRAD_PLUGIN_PATH, added directories), and
 * every refusal explained: missing file, not a shared object, missing init symbol, wrong ABI
 * version, a vtable struct too small, an init that fails, a plugin that is half bad (nothing of
 * it stays registered), a name clash with a built-in. Also the README's example plugin, gradient
 * checked, and the GPT loading the alibi plugin on demand for pos=alibi. The plugins come from the
 * build tree (plugins/meson.build, tests/plugins/meson.build). */
#include "layer_check.h"
#include "test_util.h"
#include "minigrad/gpt.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char path_buf[PATH_MAX + 64];

/* A plugin of the build tree by name: the real ones in <build>/plugins, the broken-on-purpose
 * mgtest_* ones in <build>/tests/plugins. */
static const char *plugin(const char *name) {
    const char *dir = strncmp(name, "mgtest_", 7) == 0 ? lc_test_plugin_dir() : lc_plugin_dir();
    if (!dir) mg_test_skip_all("MINIGRAD_BUILD_ROOT is not set: run through meson test");
    snprintf(path_buf, sizeof path_buf, "%s/lib%s.so", dir, name);
    return path_buf;
}

START_TEST(load_alibi_by_path_once) {
    int before = mg_plugin_count();
    ck_assert_msg(mg_plugin_load(plugin("alibi")) == MG_OK, "%s", mg_last_error());
    const mg_layer_vtable *vt = mg_layer_find("alibi");
    ck_assert_ptr_nonnull(vt);
    ck_assert_str_eq(vt->pos_scheme, "alibi");
    ck_assert_ptr_eq(mg_layer_find_pos("alibi"), vt);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(plugin("alibi"), real));
    ck_assert_str_eq(mg_layer_origin("alibi"), real);
    int after = mg_plugin_count();
    ck_assert_int_ge(after, before);
    ck_assert_int_eq(mg_plugin_load(plugin("alibi")), MG_OK); /* same file: not loaded twice */
    ck_assert_int_eq(mg_plugin_count(), after);
    ck_assert_str_eq(mg_plugin_path(after - 1), real);
}
END_TEST

START_TEST(load_by_name_from_search_path) {
    char env[PATH_MAX + 64];
    snprintf(env, sizeof env, "/nonexistent/a::%s", lc_plugin_dir());
    setenv(MG_PLUGIN_PATH_ENV, env, 1);
    char found[PATH_MAX];
    ck_assert_int_eq(mg_plugin_find("example_scale", found, sizeof found), MG_OK);
    ck_assert_str_eq(found, plugin("example_scale"));
    ck_assert_msg(mg_plugin_load("example_scale") == MG_OK, "%s", mg_last_error());
    ck_assert_ptr_nonnull(mg_layer_find("scale"));
}
END_TEST

START_TEST(load_by_name_from_added_dir) {
    unsetenv(MG_PLUGIN_PATH_ENV);
    ck_assert_int_eq(mg_plugin_add_dir(lc_plugin_dir()), MG_OK);
    ck_assert_int_eq(mg_plugin_add_dir(lc_plugin_dir()), MG_OK); /* once is enough */
    ck_assert_msg(mg_plugin_load("alibi") == MG_OK, "%s", mg_last_error());
    TU_ASSERT_ERR(mg_plugin_add_dir(""), MG_ERR_INVALID, "empty directory");
}
END_TEST

START_TEST(not_found_lists_where_it_looked) {
    setenv(MG_PLUGIN_PATH_ENV, "/nonexistent1:/nonexistent2", 1);
    TU_ASSERT_ERR(mg_plugin_load("nope"), MG_ERR_NOT_FOUND, "plugin 'nope' not found", "libnope.so and nope.so",
               "MINIGRAD_PLUGIN_PATH=/nonexistent1:/nonexistent2");
    unsetenv(MG_PLUGIN_PATH_ENV);
    TU_ASSERT_ERR(mg_plugin_load("nope"), MG_ERR_NOT_FOUND, "MINIGRAD_PLUGIN_PATH (not set)");
    TU_ASSERT_ERR(mg_plugin_load(""), MG_ERR_INVALID, "empty plugin name");
}
END_TEST

START_TEST(missing_file_and_not_a_shared_object) {
    TU_ASSERT_ERR(mg_plugin_load("/nonexistent/dir/libx.so"), MG_ERR_IO, "/nonexistent/dir/libx.so: cannot open plugin",
               "No such file");
    char tmpl[] = "/tmp/mg_test_plugin_XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "this is not ELF\n", 16), 16);
    close(fd);
    TU_ASSERT_ERR(mg_plugin_load(tmpl), MG_ERR_IO, tmpl, "cannot load plugin");
    unlink(tmpl);
}
END_TEST

START_TEST(missing_init_symbol) {
    int before = mg_plugin_count();
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_no_init")), MG_ERR_NOT_FOUND, "libmgtest_no_init.so: not a minigrad plugin",
               "does not export the symbol 'mg_plugin_init'");
    ck_assert_int_eq(mg_plugin_count(), before);
}
END_TEST

START_TEST(wrong_abi_version) {
    char want[80];
    snprintf(want, sizeof want, "layer 'mgtest_bad_abi': ABI version %u, host %u", MG_LAYER_ABI_VERSION + 41,
             MG_LAYER_ABI_VERSION);
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_bad_abi")), MG_ERR_ABI, "libmgtest_bad_abi.so", want, "rebuild the plugin");
    ck_assert_ptr_null(mg_layer_find("mgtest_bad_abi"));
}
END_TEST

START_TEST(struct_too_small) {
    char want[96];
    snprintf(want, sizeof want, "struct_size %zu, host needs at least %zu", offsetof(mg_layer_vtable, rotate_qk),
             sizeof(mg_layer_vtable));
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_small_struct")), MG_ERR_ABI, "libmgtest_small_struct.so", want);
    ck_assert_ptr_null(mg_layer_find("mgtest_small_struct"));
}
END_TEST

START_TEST(init_that_fails) {
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_init_fails")), MG_ERR_INVALID, "libmgtest_init_fails.so",
               "mg_plugin_init failed", "the device this plugin needs is not there");
}
END_TEST

START_TEST(half_bad_plugin_registers_nothing) {
    int before = mg_layer_registered_count();
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_half_bad")), MG_ERR_ABI, "layer 'mgtest_half_bad'");
    ck_assert_ptr_null(mg_layer_find("mgtest_ok_part"));
    ck_assert_int_eq(mg_layer_registered_count(), before);
}
END_TEST

START_TEST(clash_with_builtin) {
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_dup_name")), MG_ERR_INVALID, "layer 'linear' is already registered (by built-in)");
    ck_assert_str_eq(mg_layer_origin("linear"), "built-in");
}
END_TEST

/* ---- the README example ---- */

typedef struct {
    mg_layer *l;
    float *x;
} scale_run;

static mg_tensor *scale_fwd(void *user, mg_ctx *ctx, mg_tensor **in_t) {
    scale_run *r = user;
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){2, 3, 4}, r->x);
    mg_tensor_set_requires_grad(x, true);
    in_t[0] = x;
    return mg_layer_forward(r->l, ctx, x, NULL);
}

START_TEST(example_plugin_layer_works_and_is_differentiable) {
    ck_assert_msg(mg_plugin_load(plugin("example_scale")) == MG_OK, "%s", mg_last_error());
    mg_params *P = mg_params_new();
    mg_config *cfg = mg_config_new("scale");
    mg_config_set_list(cfg, "dim=4,init=0.5");
    scale_run r = {NULL, NULL};
    ck_assert_msg(mg_layer_create("scale", "s", cfg, P, &r.l) == MG_OK, "%s", mg_last_error());
    mg_config_free(cfg);
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    mg_tensor *gain = mg_params_find(P, "s.gain");
    ck_assert_ptr_nonnull(gain);
    ck_assert_float_eq(gain->data[3], 0.5f);
    gain->data[1] = -1.25f;
    float x[24];
    mg_rng rng = mg_rng_make(9);
    for (int i = 0; i < 24; i++) x[i] = mg_rng_range(&rng, -1, 1);
    r.x = x;
    lc_input in = {x, 24};
    ck_assert_int_gt(lc_gradcheck("scale plugin", scale_fwd, &r, P, &in, 1, (lc_tol){1e-2f, 1e-3f, 1e-2f, 0}, 5), 0);
    /* its config errors are named like a built-in's */
    mg_layer *bad = NULL;
    cfg = mg_config_new("scale");
    mg_config_set_list(cfg, "dim=4,gian=2");
    TU_ASSERT_ERR(mg_layer_create("scale", "s2", cfg, P, &bad), MG_ERR_INVALID, "unknown key 'gian' (known keys: dim, init)");
    mg_config_free(cfg);
    mg_layer_free(r.l);
    mg_params_free(P);
}
END_TEST

/* README.md ("Writing a new layer as a plugin") shows scale.c verbatim (from its #include on): keep the two in step. */
START_TEST(readme_shows_the_example_verbatim) {
    char p[PATH_MAX + 64];
    if (!tu_source_path(p, sizeof p, "plugins/example_scale/scale.c")) return;
    char *code = tu_read_file(p, NULL);
    tu_source_path(p, sizeof p, "README.md");
    char *readme = tu_read_file(p, NULL);
    const char *inc = "#include \"minigrad/plugin.h\"";
    char *c0 = strstr(code, inc), *r0 = strstr(readme, "```c\n#include \"minigrad/plugin.h\"");
    ck_assert_ptr_nonnull(c0);
    ck_assert_ptr_nonnull(r0);
    r0 += 5;
    char *r1 = strstr(r0, "```");
    ck_assert_ptr_nonnull(r1);
    ck_assert_msg(strlen(c0) == (size_t)(r1 - r0) && memcmp(c0, r0, strlen(c0)) == 0,
                  "README.md's plugin code block differs from plugins/example_scale/scale.c");
    free(code);
    free(readme);
}
END_TEST

/* ---- the GPT asks for schemes by name ---- */

static mg_gpt_config tiny(const char *pos) {
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = 9, c.block_size = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
    snprintf(c.pos, sizeof c.pos, "%s", pos);
    return c;
}

START_TEST(gpt_loads_alibi_on_demand) {
    lc_use_build_plugins();
    mg_gpt_config c = tiny("alibi");
    mg_rng rng = mg_rng_make(1);
    mg_gpt *g = NULL;
    ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
    ck_assert_ptr_nonnull(mg_layer_find_pos("alibi"));
    ck_assert_str_eq(mg_layer_vt(mg_layer_find_positional(mg_gpt_layer(g)))->name, "alibi");
    mg_gpt_free(g);
}
END_TEST

START_TEST(gpt_unknown_scheme_explained) {
    setenv(MG_PLUGIN_PATH_ENV, "/nonexistent", 1);
    mg_gpt_config c = tiny("xpos");
    mg_rng rng = mg_rng_make(1);
    mg_gpt *g = (mg_gpt *)1;
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND,
               "pos 'xpos' is not a registered positional scheme (registered: none, learned, sinusoidal, "
               "learned+sinusoidal, rope",
               "plugin 'xpos' not found", "MINIGRAD_PLUGIN_PATH=/nonexistent");
    ck_assert_ptr_null(g);
    c = tiny("Learned!");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "pos 'Learned!': no such positional scheme");
    /* a plugin that loads but provides no such scheme */
    setenv(MG_PLUGIN_PATH_ENV, lc_plugin_dir(), 1);
    c = tiny("example_scale");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "plugin 'example_scale' loaded but registers no positional scheme");
    /* and a broken one is refused with its reason */
    lc_use_build_and_test_plugins();
    c = tiny("mgtest_bad_abi");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_ABI, "pos 'mgtest_bad_abi'", "ABI version");
}
END_TEST

static Suite *plugins_suite(void) {
    mg_log_set(lc_quiet_log, NULL);
    Suite *s = suite_create("plugins");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, load_alibi_by_path_once);
    tcase_add_test(tc, load_by_name_from_search_path);
    tcase_add_test(tc, load_by_name_from_added_dir);
    tcase_add_test(tc, not_found_lists_where_it_looked);
    tcase_add_test(tc, missing_file_and_not_a_shared_object);
    tcase_add_test(tc, missing_init_symbol);
    tcase_add_test(tc, wrong_abi_version);
    tcase_add_test(tc, struct_too_small);
    tcase_add_test(tc, init_that_fails);
    tcase_add_test(tc, half_bad_plugin_registers_nothing);
    tcase_add_test(tc, clash_with_builtin);
    tcase_add_test(tc, example_plugin_layer_works_and_is_differentiable);
    tcase_add_test(tc, readme_shows_the_example_verbatim);
    tcase_add_test(tc, gpt_loads_alibi_on_demand);
    tcase_add_test(tc, gpt_unknown_scheme_explained);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(plugins_suite)
