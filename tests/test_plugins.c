/* The plugin loader: loading by path and by name (MINIGRAD_PLUGIN_PATH, added directories), and
 * every refusal explained: missing file, not a shared object, missing init symbol, wrong ABI
 * version, a vtable struct too small, an init that fails, a plugin that is half bad (nothing of
 * it stays registered), a name clash with a built-in. Also the README's example plugin, gradient
 * checked, the GPT loading the alibi plugin on demand for pos=alibi, and the one search path:
 * a scheme found by its own name in whichever plugin provides it (from the GPT code and from
 * posenc), its order (MINIGRAD_PLUGIN_PATH first, a file of the same name later shadowed), broken
 * plugins reported without stopping the search, and the listing. The plugins come from the build
 * tree: the real ones from <build>/plugins, the test ones (tests/plugins) from
 * <build>/tests/plugins, which is on no search path unless a test puts it there. */
#include "layer_check.h"
#include "test_util.h"
#include "minigrad/gpt.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char path_buf[PATH_MAX + 64];

/* The folder of the test plugins (tests/plugins/meson.build). */
static const char *test_plugin_dir(void) {
    static char dir[1024];
    if (!tu_build_path(dir, sizeof dir, "tests/plugins")) mg_test_skip_all("MINIGRAD_BUILD_ROOT is not set: run through meson test");
    return dir;
}

/* The path of plugin lib<name>.so: a test plugin (mgtest_*) or one of <build>/plugins. */
static const char *plugin(const char *name) {
    const char *dir = strncmp(name, "mgtest_", 7) == 0 ? test_plugin_dir() : lc_plugin_dir();
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
    /* found, but the path does not fit: a buffer error (buf left empty), not "not found" */
    char small[4] = "zzz";
    size_t len = strlen(found);
    TU_ASSERT_ERR(mg_plugin_find("example_scale", small, sizeof small), MG_ERR_INVALID,
                  "mg_plugin_find: the buffer of 4 bytes is too small for the path '", found);
    ck_assert_str_eq(small, "");
    TU_ASSERT_ERR(mg_plugin_find("example_scale", NULL, 0), MG_ERR_INVALID, "the buffer of 0 bytes is too small");
    TU_ASSERT_ERR(mg_plugin_find("example_scale", found, len), MG_ERR_INVALID, "is too small");
    ck_assert_int_eq(mg_plugin_find("example_scale", found, len + 1), MG_OK); /* exactly enough */
    ck_assert_str_eq(found, plugin("example_scale"));
    TU_ASSERT_ERR(mg_plugin_find("/a/path/libx.so", small, sizeof small), MG_ERR_INVALID,
                  "the buffer of 4 bytes is too small for the path '/a/path/libx.so'");
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
    TU_ASSERT_ERR(mg_plugin_load(""), MG_ERR_INVALID, "mg_plugin_load: empty plugin name or path");
    TU_ASSERT_ERR(mg_plugin_load(NULL), MG_ERR_INVALID, "mg_plugin_load: empty plugin name or path");
    char buf[64];
    TU_ASSERT_ERR(mg_plugin_find(NULL, buf, sizeof buf), MG_ERR_INVALID, "mg_plugin_find: empty plugin name");
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
    TU_ASSERT_ERR(mg_plugin_load(tmpl), MG_ERR_FORMAT, tmpl, "cannot load plugin: not an ELF shared object",
                  "does not start with the ELF magic bytes");
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
} scale_run;

static mg_tensor *scale_fwd(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    scale_run *r = user;
    return mg_layer_forward(r->l, ctx, in[0], NULL);
}

START_TEST(example_plugin_layer_works_and_is_differentiable) {
    ck_assert_msg(mg_plugin_load(plugin("example_scale")) == MG_OK, "%s", mg_last_error());
    mg_params *P = mg_params_new();
    mg_config *cfg = mg_config_new("scale");
    mg_config_set_list(cfg, "dim=4,init=0.5");
    scale_run r = {NULL};
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
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *in = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){2, 3, 4}, x);
    ck_assert_int_eq(lc_gradcheck("scale plugin", scale_fwd, &r, P, &in, 1, (lc_tol){1e-2f, 1e-3f, 1e-2f, 0}, 5),
                     24 + 4); /* every element of x and of the gain */
    mg_ctx_free(ctx);
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
    char build_dir[PATH_MAX + 32];
    snprintf(build_dir, sizeof build_dir, "%s (build tree)", lc_plugin_dir());
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "pos: positional scheme 'xpos' not found",
                  "registered: learned, sinusoidal, learned+sinusoidal, rope", "no plugin on the search path provides it",
                  "searched MINIGRAD_PLUGIN_PATH=/nonexistent, ", build_dir);
    ck_assert_ptr_null(g);
    c = tiny("Learned!");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "positional scheme 'Learned!' not found");
    /* a plugin named like the scheme that loads but provides no such scheme */
    setenv(MG_PLUGIN_PATH_ENV, lc_plugin_dir(), 1);
    c = tiny("example_scale");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "positional scheme 'example_scale' not found");
    ck_assert_ptr_nonnull(mg_layer_find("scale")); /* it was loaded in the search */
    /* and a broken one in the path is named with its reason */
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    c = tiny("mgtest_bad_abi");
    TU_ASSERT_ERR(mg_gpt_new(&c, &rng, &g), MG_ERR_NOT_FOUND, "positional scheme 'mgtest_bad_abi' not found",
                  "did not load: ", "libmgtest_bad_abi.so: layer 'mgtest_bad_abi': ABI version");
}
END_TEST

/* ---- the one search path ---- */

static char tmpdir[256];

static void tmp_setup(void) {
    mg_log_set(lc_quiet_log, NULL);
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_test_plugins");
}

static void tmp_teardown(void) { ck_assert(tu_remove_tree(tmpdir)); }

/* Copies the test plugin lib<name>.so into tmpdir/dir (made if need be); returns the copy's real path. */
static const char *copy_plugin(const char *name, const char *dir) {
    static char real[PATH_MAX];
    char d[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(d, sizeof d, "%s", tu_path_in(tmpdir, dir));
    mkdir(d, 0755);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", plugin(name), d);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/lib%s.so", d, name);
    ck_assert_ptr_nonnull(realpath(cmd, real));
    return real;
}

/* The origin of the layer providing positional scheme `scheme`. */
static const char *scheme_origin(const char *scheme) {
    const mg_layer_vtable *vt = mg_layer_find_pos(scheme);
    ck_assert_msg(vt != NULL, "scheme %s not registered", scheme);
    return mg_layer_origin(vt->name);
}

/* The plugin registers "tilt" and "zigzag"; its file is libmgtest_two_schemes.so. It sits in the
 * test folder after every broken plugin there (by name), so finding it also shows that they do not
 * stop the search. */
START_TEST(gpt_finds_a_scheme_in_any_plugin) {
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    char want[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(plugin("mgtest_two_schemes"), want));
    ck_assert_ptr_null(mg_layer_find_pos("zigzag"));
    mg_rng rng = mg_rng_make(1);
    mg_gpt *g = NULL;
    mg_gpt_config c = tiny("zigzag");
    ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(mg_layer_vt(mg_layer_find_positional(mg_gpt_layer(g)))->name, "zigzag_pos");
    mg_gpt_free(g);
    ck_assert_str_eq(scheme_origin("zigzag"), want);
    int loaded = mg_plugin_count();
    /* the other name: already registered by the same plugin, nothing more is loaded */
    c = tiny("tilt");
    ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(mg_layer_vt(mg_layer_find_positional(mg_gpt_layer(g)))->name, "tilt_pos");
    mg_gpt_free(g);
    ck_assert_str_eq(scheme_origin("tilt"), want);
    ck_assert_int_eq(mg_plugin_count(), loaded);
    /* a layer by its name, through the same search */
    const mg_layer_vtable *vt = NULL;
    ck_assert_msg(mg_layer_find_or_load("tilt_pos", &vt) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(vt->pos_scheme, "tilt");
    ck_assert_int_eq(mg_plugin_count(), loaded);
}
END_TEST

/* A layer type that no one registered or loaded is found in a plugin on the search path, from the
 * C API and from a model config file alike; the plugin is the one that provides it, whatever its
 * file name (lib<name>.so is only tried first). */
START_TEST(layer_found_in_any_plugin_by_create_and_config) {
    mg_log_set(lc_quiet_log, NULL);
    setenv(MG_PLUGIN_PATH_ENV, lc_plugin_dir(), 1);
    ck_assert_ptr_null(mg_layer_find("scale")); /* registered by libexample_scale.so, not yet loaded */
    mg_params *P = mg_params_new();
    mg_config *cfg = mg_config_new("scale");
    ck_assert_int_eq(mg_config_set_list(cfg, "dim=3,init=0.5"), MG_OK);
    mg_layer *l = NULL;
    ck_assert_msg(mg_layer_create("scale", "s", cfg, P, &l) == MG_OK, "%s", mg_last_error());
    ck_assert_ptr_nonnull(mg_params_find(P, "s.gain"));
    ck_assert_msg(strstr(mg_layer_find("scale")->name, "scale"), "registered");
    mg_layer_free(l);
    mg_config_free(cfg);
    mg_params_free(P);
    /* an unknown type: the message says it was looked for on the path */
    P = mg_params_new();
    TU_ASSERT_ERR(mg_layer_create("no_such_layer", "x", NULL, P, &l), MG_ERR_NOT_FOUND,
                  "unknown layer 'no_such_layer'", "no plugin on the search path provides it");
    ck_assert_ptr_null(l);
    mg_params_free(P);
}
END_TEST

START_TEST(layer_in_a_config_file_found_in_a_plugin) {
    mg_log_set(lc_quiet_log, NULL);
    setenv(MG_PLUGIN_PATH_ENV, lc_plugin_dir(), 1);
    char dir[256], path[512];
    tu_make_tmpdir(dir, sizeof dir, "mg_test_plugin_cfg");
    snprintf(path, sizeof path, "%s/model.cfg", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[linear]\nname = fc\nin = 4\nout = 6\n\n[scale]\nname = g\ndim = 6\n", f);
    fclose(f);
    mg_rng rng = mg_rng_make(3);
    mg_model *m = NULL;
    ck_assert_msg(mg_model_from_file(path, &rng, &m) == MG_OK, "%s", mg_last_error());
    ck_assert_ptr_nonnull(mg_params_find(mg_model_params(m), "g.gain"));
    mg_model_free(m);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

START_TEST(gpt_finds_a_scheme_through_an_added_dir) {
    unsetenv(MG_PLUGIN_PATH_ENV);
    ck_assert_int_eq(mg_layer_find_pos_or_load("tilt", NULL), MG_ERR_NOT_FOUND); /* not on the path yet */
    ck_assert_int_eq(mg_plugin_add_dir(test_plugin_dir()), MG_OK);
    const mg_layer_vtable *vt = NULL;
    ck_assert_msg(mg_layer_find_pos_or_load("tilt", &vt) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(vt->name, "tilt_pos");
}
END_TEST

/* Same file name in two directories: the first along the path wins, the other is listed as shadowed
 * and never loaded; MINIGRAD_PLUGIN_PATH comes before added directories. */
START_TEST(search_order_first_wins_later_shadowed) {
    char a[PATH_MAX], b[PATH_MAX], env[3 * PATH_MAX];
    snprintf(a, sizeof a, "%s", copy_plugin("mgtest_two_schemes", "a"));
    snprintf(b, sizeof b, "%s", copy_plugin("mgtest_two_schemes", "b"));
    ck_assert_int_eq(mg_plugin_add_dir(tu_path_in(tmpdir, "a")), MG_OK);
    snprintf(env, sizeof env, "%s:%s:%s", tu_path_in(tmpdir, "b"), tu_path_in(tmpdir, "b"), tu_path_in(tmpdir, "a"));
    setenv(MG_PLUGIN_PATH_ENV, env, 1); /* b first, listed twice, and a both in it and added */
    ck_assert_msg(mg_layer_find_pos_or_load("zigzag", NULL) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(scheme_origin("zigzag"), b);
    char dirs[4 * PATH_MAX];
    int nd = mg_plugin_search_path(dirs, sizeof dirs);
    ck_assert_msg(strncmp(dirs, tu_path_in(tmpdir, "b"), strlen(tu_path_in(tmpdir, "b"))) == 0, "%s", dirs);
    mg_plugin_entry *e;
    int n;
    ck_assert_int_eq(mg_plugin_list(&e, &n), MG_OK);
    int n_dirs = 0, n_shadowed = 0, n_failed = 0, n_tilt = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].kind == MG_PLUGIN_ENTRY_DIR) {
            n_dirs++;
            if (n_dirs == 1) ck_assert_str_eq(e[i].why, "MINIGRAD_PLUGIN_PATH");
        } else if (e[i].kind == MG_PLUGIN_ENTRY_SHADOWED) {
            n_shadowed++;
            ck_assert_str_eq(e[i].path, tu_path_in(tmpdir, "a/libmgtest_two_schemes.so"));
            ck_assert_str_eq(e[i].why, tu_path_in(tmpdir, "b/libmgtest_two_schemes.so"));
        } else if (e[i].kind == MG_PLUGIN_ENTRY_FAILED) {
            n_failed++;
        } else if (e[i].scheme && strcmp(e[i].scheme, "tilt") == 0) {
            n_tilt++;
            ck_assert_str_eq(e[i].path, b);
        }
    }
    ck_assert_int_eq(n_dirs, nd);
    ck_assert_int_eq(n_shadowed, 1); /* a's copy, once, and not as a failure */
    ck_assert_int_eq(n_failed, 0);
    ck_assert_int_eq(n_tilt, 1);
    mg_plugin_list_free(e, n);
    for (int i = 0; i < mg_plugin_count(); i++) ck_assert_str_ne(mg_plugin_path(i), a);
}
END_TEST

/* A broken plugin along the path: listed with its reason; the search goes on past it. */
START_TEST(listing_reports_broken_plugins_and_origins) {
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    mg_plugin_entry *e;
    int n;
    ck_assert_int_eq(mg_plugin_list(&e, &n), MG_OK);
    bool bad_abi = false, init_fails = false, linear = false, zigzag = false, alibi = false;
    int n_failed = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].kind == MG_PLUGIN_ENTRY_FAILED) {
            n_failed++;
            if (strstr(e[i].path, "libmgtest_bad_abi.so")) {
                bad_abi = true;
                tu_assert_has("reason", e[i].why, "ABI version");
            }
            if (strstr(e[i].path, "libmgtest_init_fails.so")) {
                init_fails = true;
                tu_assert_has("reason", e[i].why, "the device this plugin needs is not there");
            }
        } else if (e[i].kind == MG_PLUGIN_ENTRY_LAYER) {
            if (!strcmp(e[i].name, "linear")) linear = !strcmp(e[i].path, "built-in");
            if (e[i].scheme && !strcmp(e[i].scheme, "zigzag")) zigzag = strstr(e[i].path, "libmgtest_two_schemes.so");
            if (e[i].scheme && !strcmp(e[i].scheme, "alibi")) alibi = strstr(e[i].path, "plugins/libalibi.so");
        }
    }
    mg_plugin_list_free(e, n);
    ck_assert(bad_abi && init_fails && linear && zigzag && alibi);
    /* every mgtest_* but the good one and the two whose layers misbehave only in forward */
    ck_assert_int_eq(n_failed, 9);
    /* what a program prints for --list-schemes */
    char out[] = "/tmp/mg_test_plugins_list_XXXXXX";
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_int_eq(mg_plugin_list_print(f, true), MG_OK);
    fclose(f);
    char text[16384];
    tu_read_into(out, text, sizeof text);
    unlink(out);
    tu_assert_has("listing", text, "positional schemes (scheme, layer, origin):\n  learned ");
    tu_assert_has("listing", text, "  zigzag                 zigzag_pos               ");
    tu_assert_has("listing", text, "libmgtest_two_schemes.so\n");
    tu_assert_has("listing", text, "plugin directories searched, in order:\n");
    tu_assert_has("listing", text, " (MINIGRAD_PLUGIN_PATH)\n");
    tu_assert_has("listing", text, "plugins that did not load:\n");
    tu_assert_has("listing", text, "libmgtest_no_init.so: not a minigrad plugin");
    ck_assert_msg(!strstr(text, "  linear "), "layers without a scheme are left out: %s", text);
}
END_TEST

/* Without MINIGRAD_PLUGIN_PATH a program of the build tree searches <build>/plugins, where only
 * working plugins are: the listing has no failures and the test plugins are not in it. */
START_TEST(build_tree_default_path_has_no_test_plugins) {
    unsetenv(MG_PLUGIN_PATH_ENV);
    char dirs[4 * PATH_MAX];
    ck_assert_int_eq(mg_plugin_search_path(dirs, sizeof dirs), 1);
    char want[PATH_MAX], got[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(lc_plugin_dir(), want));
    ck_assert_ptr_nonnull(realpath(dirs, got));
    ck_assert_str_eq(got, want);
    mg_plugin_entry *e;
    int n;
    ck_assert_int_eq(mg_plugin_list(&e, &n), MG_OK);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(e[i].kind != MG_PLUGIN_ENTRY_FAILED && e[i].kind != MG_PLUGIN_ENTRY_SHADOWED, "%s: %s",
                      e[i].path, e[i].why);
        ck_assert_msg(!e[i].path || !strstr(e[i].path, "mgtest"), "%s", e[i].path);
    }
    mg_plugin_list_free(e, n);
    ck_assert_ptr_nonnull(mg_layer_find_pos("alibi"));
    /* the defaults can be turned off: then nothing is searched but what is set or added */
    mg_plugin_use_default_dirs(false);
    ck_assert_int_eq(mg_plugin_search_path(dirs, sizeof dirs), 0);
    ck_assert_str_eq(dirs, "");
    TU_ASSERT_ERR(mg_layer_find_or_load("no_such_layer", NULL), MG_ERR_NOT_FOUND, "layer 'no_such_layer' not found",
                  "searched MINIGRAD_PLUGIN_PATH (not set)");
    mg_plugin_use_default_dirs(true);
}
END_TEST

START_TEST(unknown_name_lists_the_directories) {
    char env[2 * PATH_MAX];
    snprintf(env, sizeof env, "%s:/nonexistent/plugins", test_plugin_dir());
    setenv(MG_PLUGIN_PATH_ENV, env, 1);
    ck_assert_int_eq(mg_plugin_add_dir("/nonexistent/added"), MG_OK);
    char want_env[3 * PATH_MAX], build_dir[PATH_MAX + 32];
    snprintf(want_env, sizeof want_env, "searched MINIGRAD_PLUGIN_PATH=%s, ", env);
    snprintf(build_dir, sizeof build_dir, "%s (build tree)", lc_plugin_dir());
    const mg_layer_vtable *vt = (const mg_layer_vtable *)1;
    TU_ASSERT_ERR(mg_layer_find_pos_or_load("xpos", &vt), MG_ERR_NOT_FOUND, "positional scheme 'xpos' not found",
                  want_env, build_dir, "/nonexistent/added (added, missing)", "did not load: ",
                  "libmgtest_bad_abi.so");
    ck_assert_ptr_null(vt);
    /* the broken plugins are tried once: a second search loads nothing more and says the same */
    int loaded = mg_plugin_count();
    TU_ASSERT_ERR(mg_layer_find_or_load("nosuch", NULL), MG_ERR_NOT_FOUND, "layer 'nosuch' not found",
                  "libmgtest_half_bad.so");
    ck_assert_int_eq(mg_plugin_count(), loaded);
    TU_ASSERT_ERR(mg_layer_find_or_load("", NULL), MG_ERR_INVALID, "empty layer name");
}
END_TEST

/* posenc finds the two schemes by their names in the same search path, lists them with their origin
 * and the broken plugins beside them, and compares them. */
static tu_program posenc = {.name = "posenc", .rel = "examples/posenc/posenc", .max_status = 2};

START_TEST(posenc_finds_both_schemes) {
    /* from the build tree, with MINIGRAD_PLUGIN_PATH unset or naming the same folder: alibi once,
     * no test plugin, nothing that did not load */
    char same[1100];
    snprintf(same, sizeof same, "env MINIGRAD_PLUGIN_PATH='%s'", lc_plugin_dir());
    const char *envs[] = {"env -u MINIGRAD_PLUGIN_PATH", same};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tu_run_in(&posenc, tmpdir, envs[i], "--list-schemes"), 0);
        const char *a = strstr(posenc.out, "libalibi.so");
        ck_assert_msg(a && !strstr(a + 1, "libalibi.so"), "%s", posenc.out);
        ck_assert_msg(!strstr(posenc.out, "mgtest") && !strstr(posenc.out, "did not load") &&
                          !strstr(posenc.out, "shadowed") && !strstr(posenc.err, "already registered"),
                      "%s%s", posenc.out, posenc.err);
    }
    char env[1100];
    snprintf(env, sizeof env, "env MINIGRAD_PLUGIN_PATH='%s'", test_plugin_dir());
    ck_assert_int_eq(tu_run_in(&posenc, tmpdir, env, "--list-schemes"), 0);
    tu_assert_stdout_has(&posenc, "  tilt ");
    tu_assert_stdout_has(&posenc, "  zigzag ");
    tu_assert_stdout_has(&posenc, "libmgtest_two_schemes.so");
    tu_assert_stdout_has(&posenc, "libmgtest_bad_abi.so: layer 'mgtest_bad_abi': ABI version");
    ck_assert_msg(!strstr(posenc.out, "already registered (by") || strstr(posenc.out, "libmgtest_dup_name.so"),
                  "%s", posenc.out); /* only the test plugin that clashes on purpose */
    ck_assert_int_eq(tu_run_in(&posenc, tmpdir, env,
                               "--tasks lmax --schemes zigzag,tilt --seeds 0 --steps 2 --batch 4 --eval-every 1 "
                               "--eval-n 8 --lengths '' --jobs 1 --threads 1 --out o"),
                     0);
    tu_assert_stdout_has(&posenc, "1 task x 2 schemes x 1 seed = 2 runs");
    char csv[4096];
    tu_read_into(tu_path_in(tmpdir, "o/results.csv"), csv, sizeof csv);
    tu_assert_has("results.csv", csv, "\nlmax,zigzag,0,");
    tu_assert_has("results.csv", csv, "\nlmax,tilt,0,");
}
END_TEST

/* ---- files that are not whole shared objects: refused before dlopen maps them ---- */

/* The first n bytes of the real plugin lib<name>.so (a whole copy if n is beyond its end) in
 * tmpdir/<file>; returns the copy's path. *size (size may be NULL) gets the original's size. */
static const char *cut_copy(const char *name, const char *file, size_t n, size_t *size) {
    size_t len;
    unsigned char *b = tu_read_file(plugin(name), &len);
    if (size) *size = len;
    static char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", tu_path_in(tmpdir, file));
    tu_write_bytes(out, b, n < len ? n : len);
    free(b);
    return out;
}

/* Patches the copy at path: len bytes at offset off. */
static void patch(const char *path, size_t off, const void *bytes, size_t len) {
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    ck_assert_uint_le(off + len, n);
    memcpy(b + off, bytes, len);
    tu_write_bytes(path, b, n);
    free(b);
}

START_TEST(truncated_copy_is_refused_before_dlopen) {
    size_t size;
    const char *half = cut_copy("alibi", "libalibi.so", SIZE_MAX, &size);
    cut_copy("alibi", "libalibi.so", size / 2, NULL);
    int before = mg_plugin_count();
    TU_ASSERT_ERR(mg_plugin_load(half), MG_ERR_FORMAT, "libalibi.so: cannot load plugin: ", "runs past the end of the file",
                  "truncated");
    ck_assert_int_eq(mg_plugin_count(), before);
    ck_assert_ptr_null(mg_layer_find_pos("alibi"));
    /* shorter still: the ELF header itself cut, and an empty file */
    cut_copy("alibi", "libalibi.so", 40, NULL);
    TU_ASSERT_ERR(mg_plugin_load(half), MG_ERR_FORMAT, "the file is 40 bytes, shorter than the 64-byte ELF header");
    cut_copy("alibi", "libalibi.so", 10, NULL);
    TU_ASSERT_ERR(mg_plugin_load(half), MG_ERR_FORMAT, "the file is 10 bytes, shorter than the ELF header: truncated");
    cut_copy("alibi", "libalibi.so", 0, NULL);
    TU_ASSERT_ERR(mg_plugin_load(half), MG_ERR_FORMAT, "not an ELF shared object (the file is empty)");
    /* not a file at all: a FIFO is not opened for reading (that would wait for a writer) */
    char fifo[PATH_MAX];
    snprintf(fifo, sizeof fifo, "%s", tu_path_in(tmpdir, "libfifo.so"));
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    TU_ASSERT_ERR(mg_plugin_load(fifo), MG_ERR_IO, "libfifo.so: cannot load plugin: not a regular file");
    /* found by a scan: reported with its reason, the scan goes on, no crash */
    cut_copy("alibi", "libalibi.so", size / 3, NULL);
    setenv(MG_PLUGIN_PATH_ENV, tmpdir, 1);
    mg_plugin_use_default_dirs(false);
    TU_ASSERT_ERR(mg_layer_find_pos_or_load("alibi", NULL), MG_ERR_NOT_FOUND, "positional scheme 'alibi' not found",
                  "did not load: ", "libalibi.so: cannot load plugin: ", "truncated",
                  "libfifo.so: cannot load plugin: not a regular file");
    mg_plugin_use_default_dirs(true);
}
END_TEST

/* The ELF header and program headers intact, the section header table dropped (as a stripped file
 * may have it), the rest cut: the loadable segments' bytes are not in the file. */
START_TEST(valid_header_truncated_body_is_refused) {
    size_t size;
    unsigned char eh[64];
    const char *p = cut_copy("alibi", "libalibi.so", SIZE_MAX, &size);
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(eh, 1, sizeof eh, f), sizeof eh);
    fclose(f);
    uint64_t phoff;
    uint16_t phentsize, phnum;
    memcpy(&phoff, eh + 32, 8); /* Elf64_Ehdr: e_phoff, e_phentsize, e_phnum (host byte order) */
    memcpy(&phentsize, eh + 54, 2);
    memcpy(&phnum, eh + 56, 2);
    size_t keep = (size_t)phoff + (size_t)phentsize * phnum;
    ck_assert_uint_lt(keep, size);
    cut_copy("alibi", "libalibi.so", keep, NULL);
    const uint64_t zero8 = 0;
    const uint16_t zero2 = 0;
    patch(p, 40, &zero8, 8); /* e_shoff */
    patch(p, 60, &zero2, 2); /* e_shnum */
    patch(p, 62, &zero2, 2); /* e_shstrndx */
    TU_ASSERT_ERR(mg_plugin_load(p), MG_ERR_FORMAT, "libalibi.so: cannot load plugin: loadable segment 0",
                  "runs past the end of the file", "truncated");
    ck_assert_ptr_null(mg_layer_find_pos("alibi"));
    /* whole files of the wrong kind, told apart */
    cut_copy("alibi", "libalibi.so", size, NULL);
    const uint16_t exec = 2, aarch64 = 183;
    patch(p, 16, &exec, 2); /* e_type */
    TU_ASSERT_ERR(mg_plugin_load(p), MG_ERR_FORMAT, "an executable (ELF type 2), not a shared object");
    cut_copy("alibi", "libalibi.so", size, NULL);
#if defined(__x86_64__)
    patch(p, 18, &aarch64, 2); /* e_machine */
    TU_ASSERT_ERR(mg_plugin_load(p), MG_ERR_ABI, "built for AArch64 (ELF machine 183), but this host is x86-64");
#else
    (void)aarch64;
#endif
    cut_copy("alibi", "libalibi.so", size, NULL);
    patch(p, 4, (const unsigned char[]){1}, 1); /* EI_CLASS: 32-bit */
    TU_ASSERT_ERR(mg_plugin_load(p), MG_ERR_ABI, "a 32-bit ELF object, but this host loads 64-bit ones");
    /* and the copy made whole again loads */
    cut_copy("alibi", "libalibi.so", size, NULL);
    ck_assert_msg(mg_plugin_load(p) == MG_OK, "%s", mg_last_error());
    ck_assert_ptr_nonnull(mg_layer_find_pos("alibi"));
}
END_TEST

/* ---- plugins that load themselves: refused, the cycle named, no recursion ---- */

START_TEST(self_loading_plugin_is_refused) {
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    char real[PATH_MAX], want[PATH_MAX + 128];
    ck_assert_ptr_nonnull(realpath(test_plugin_dir(), real));
    snprintf(want, sizeof want, "in a cycle: libmgtest_self_load.so -> libmgtest_self_load.so in %s", real);
    int before = mg_plugin_count();
    TU_ASSERT_ERR(mg_plugin_load("mgtest_self_load"), MG_ERR_INVALID, "libmgtest_self_load.so: refused", want);
    ck_assert_ptr_null(mg_layer_find("mgtest_self_load"));
    ck_assert_int_eq(mg_plugin_count(), before);
    /* once more, by path: the same answer, nothing half-loaded in between */
    TU_ASSERT_ERR(mg_plugin_load(plugin("mgtest_self_load")), MG_ERR_INVALID, want);
    ck_assert_int_eq(mg_plugin_count(), before);
}
END_TEST

START_TEST(plugins_loading_each_other_are_refused) {
    char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX], ab[PATH_MAX + 128], ba[PATH_MAX + 128];
    ck_assert_ptr_nonnull(realpath(plugin("mgtest_cycle_a"), a));
    ck_assert_ptr_nonnull(realpath(plugin("mgtest_cycle_b"), b));
    ck_assert_ptr_nonnull(realpath(test_plugin_dir(), dir));
    snprintf(ab, sizeof ab, "libmgtest_cycle_a.so -> libmgtest_cycle_b.so -> libmgtest_cycle_a.so in %s", dir);
    snprintf(ba, sizeof ba, "libmgtest_cycle_b.so -> libmgtest_cycle_a.so -> libmgtest_cycle_b.so in %s", dir);
    int before = mg_plugin_count();
    TU_ASSERT_ERR(mg_plugin_load(a), MG_ERR_INVALID, "libmgtest_cycle_a.so: refused", "in a cycle: ", ab);
    ck_assert_ptr_null(mg_layer_find("mgtest_cycle_a"));
    ck_assert_ptr_null(mg_layer_find("mgtest_cycle_b")); /* b ignored the refusal it met: refused all the same */
    ck_assert_int_eq(mg_plugin_count(), before);
    TU_ASSERT_ERR(mg_plugin_load(b), MG_ERR_INVALID, "libmgtest_cycle_b.so: refused", ba);
    ck_assert_ptr_null(mg_layer_find("mgtest_cycle_b"));
    ck_assert_int_eq(mg_plugin_count(), before);
}
END_TEST

/* ---- layers whose forward breaks the contract ---- */

/* A layer of kind `type` (from a test plugin) named `prefix`, dim 4. */
static mg_layer *make(const char *type, const char *prefix, mg_params *P) {
    mg_config *cfg = mg_config_new(type);
    ck_assert_int_eq(mg_config_set(cfg, "dim", "4"), MG_OK);
    mg_layer *l = NULL;
    ck_assert_msg(mg_layer_create(type, prefix, cfg, P, &l) == MG_OK, "%s", mg_last_error());
    mg_config_free(cfg);
    return l;
}

START_TEST(layer_returning_null_is_caught) {
    ck_assert_msg(mg_plugin_load(plugin("mgtest_null_fwd")) == MG_OK, "%s", mg_last_error());
    char real[PATH_MAX], want[PATH_MAX + 128];
    ck_assert_ptr_nonnull(realpath(plugin("mgtest_null_fwd"), real));
    snprintf(want, sizeof want, "layer 'np' (mgtest_null_pos, from plugin %s): forward returned NULL", real);
    mg_params *P = mg_params_new();
    mg_layer *l = make("mgtest_null_pos", "np", P);
    tu_trap trap;
    mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
    mg_tensor *x = mg_zeros(ctx, 3, (int64_t[]){2, 3, 4});
    mg_tensor *y = mg_layer_forward(l, ctx, x, NULL);
    ck_assert_ptr_nonnull(y); /* the placeholder, so the caller's next op does not crash */
    ck_assert_int_eq(trap.calls, 1);
    tu_assert_has("ctx error", trap.msg, want);
    ck_assert_str_eq(mg_ctx_error(ctx), trap.msg);
    y = mg_add(ctx, y, x); /* later ops are harmless no-ops */
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(trap.calls, 1);
    mg_ctx_free(ctx);
    mg_layer_free(l);
    mg_params_free(P);
}
END_TEST

START_TEST(layer_returning_a_wrong_shape_is_caught) {
    ck_assert_msg(mg_plugin_load(plugin("mgtest_wrong_shape")) == MG_OK, "%s", mg_last_error());
    char real[PATH_MAX], want[PATH_MAX + 128];
    ck_assert_ptr_nonnull(realpath(plugin("mgtest_wrong_shape"), real));
    mg_params *P = mg_params_new();
    mg_layer *wd = make("mgtest_wrong_dim", "wd", P), *bt = make("mgtest_bad_tensor", "", P);
    tu_trap trap;
    mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
    mg_tensor *x = mg_zeros(ctx, 3, (int64_t[]){2, 3, 4});
    /* against its own declaration, (...,4) */
    mg_tensor *y = mg_layer_forward(wd, ctx, x, NULL);
    ck_assert_ptr_nonnull(y);
    snprintf(want, sizeof want,
             "layer 'wd' (mgtest_wrong_dim, from plugin %s): forward returned (2,3,5), but the layer declares its "
             "output (...,4)",
             real);
    tu_assert_has("ctx error", trap.msg, want);
    /* a tensor no op could use */
    mg_ctx_clear_error(ctx);
    y = mg_layer_forward(bt, ctx, x, NULL);
    ck_assert_ptr_nonnull(y);
    tu_assert_has("ctx error", trap.msg, "layer '(model)' (mgtest_bad_tensor, from plugin ");
    tu_assert_has("ctx error", trap.msg, "forward returned a tensor of 99 dims (0..");
    /* against what the caller needs; -1 is any size */
    mg_ctx_clear_error(ctx);
    mg_layer *lin = NULL;
    mg_config *cfg = mg_config_new("linear");
    ck_assert_int_eq(mg_config_set_list(cfg, "in=4,out=6"), MG_OK);
    ck_assert_int_eq(mg_layer_create("linear", "fc", cfg, P, &lin), MG_OK);
    mg_config_free(cfg);
    ck_assert_int_eq(mg_params_alloc(P, &(mg_rng){0}), MG_OK);
    y = mg_layer_forward_expect(lin, ctx, x, NULL, 3, (int64_t[]){2, -1, 6});
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(y->shape[2], 6);
    y = mg_layer_forward_expect(lin, ctx, x, NULL, 3, (int64_t[]){2, 3, 4});
    tu_assert_has("ctx error", trap.msg, "layer 'fc' (linear, built-in): forward returned (2,3,6), but the caller needs (2,3,4)");
    mg_ctx_free(ctx);
    mg_layer_free(wd);
    mg_layer_free(bt);
    mg_layer_free(lin);
    mg_params_free(P);
}
END_TEST

/* A GPT whose positional scheme misbehaves stops with the message on its context: no crash, no
 * abort, the scheme's plugin named. */
START_TEST(gpt_with_a_misbehaving_scheme_stops_cleanly) {
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    static const struct {
        const char *scheme, *file, *msg;
    } cases[] = {
        {"mgtest_null", "libmgtest_null_fwd.so", "layer 'wpe' (mgtest_null_pos, from plugin %s): forward returned NULL"},
        {"mgtest_wrong", "libmgtest_wrong_shape.so",
         "layer 'wpe' (mgtest_wrong_pos, from plugin %s): forward returned (2,3,9), but the caller needs (2,3,8)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mg_gpt_config c = tiny(cases[i].scheme);
        mg_rng rng = mg_rng_make(1);
        mg_gpt *g = NULL;
        ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
        char real[PATH_MAX], want[PATH_MAX + 160];
        ck_assert_ptr_nonnull(realpath(tu_path_in(test_plugin_dir(), cases[i].file), real));
        snprintf(want, sizeof want, cases[i].msg, real);
        tu_trap trap;
        mg_ctx *ctx = tu_trapping_ctx(&trap, 0);
        int32_t ids[6] = {1, 2, 3, 4, 5, 6};
        mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 3}, ids);
        mg_tensor *loss = mg_gpt_loss(g, ctx, x, x, NULL);
        ck_assert_ptr_nonnull(loss);
        ck_assert_int_eq(trap.calls, 1);
        tu_assert_has("ctx error", trap.msg, want);
        mg_ctx_free(ctx);
        mg_gpt_free(g);
    }
}
END_TEST

/* The gpt program, evaluating a checkpoint whose scheme returns NULL: exit status 1 and the message,
 * not a signal. */
static tu_program gpt_prog = {.name = "gpt", .rel = "examples/gpt/gpt", .max_status = 2};

START_TEST(gpt_program_with_a_null_scheme_ends_with_the_message) {
    setenv(MG_PLUGIN_PATH_ENV, test_plugin_dir(), 1);
    mg_gpt_config c = tiny("mgtest_null");
    mg_rng rng = mg_rng_make(1);
    mg_gpt *g = NULL;
    ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(mg_gpt_save(g, tu_path_in(tmpdir, "null.safetensors"), NULL, 0), MG_OK);
    mg_gpt_free(g);
    const unsigned char tokens[6] = {1, 0, 2, 0, 3, 0}; /* one row of 3 uint16 */
    tu_write_bytes(tu_path_in(tmpdir, "tokens.bin"), tokens, sizeof tokens);
    char env[PATH_MAX + 64];
    snprintf(env, sizeof env, "env MINIGRAD_PLUGIN_PATH='%s'", test_plugin_dir());
    int rc = tu_run_in(&gpt_prog, tmpdir, env, "eval --ckpt null.safetensors --tokens tokens.bin --batch 1 --seq 2");
    ck_assert_msg(rc == 1, "exit %d; stderr: %s", rc, gpt_prog.err);
    tu_assert_stderr_has(&gpt_prog, "layer 'wpe' (mgtest_null_pos, from plugin ");
    tu_assert_stderr_has(&gpt_prog, "libmgtest_null_fwd.so): forward returned NULL");
}
END_TEST

/* The gpt program with a --precision it does not know: exit status 2 and the message naming it. */
START_TEST(gpt_program_bad_precision_is_named) {
    int rc = tu_run_in(&gpt_prog, tmpdir, "",
                       "eval --ckpt none.safetensors --tokens none.bin --batch 1 --seq 2 --precision fp16");
    ck_assert_msg(rc == 2, "exit %d; stderr: %s", rc, gpt_prog.err);
    tu_assert_stderr_has(&gpt_prog, "gpt eval: --precision 'fp16': expected fp32 or bf16");
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

    tc = tcase_create("search");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_add_test(tc, gpt_finds_a_scheme_in_any_plugin);
    tcase_add_test(tc, gpt_finds_a_scheme_through_an_added_dir);
    tcase_add_test(tc, layer_found_in_any_plugin_by_create_and_config);
    tcase_add_test(tc, layer_in_a_config_file_found_in_a_plugin);
    tcase_add_test(tc, search_order_first_wins_later_shadowed);
    tcase_add_test(tc, listing_reports_broken_plugins_and_origins);
    tcase_add_test(tc, build_tree_default_path_has_no_test_plugins);
    tcase_add_test(tc, unknown_name_lists_the_directories);
    if (tu_program_built(&posenc))
        tcase_add_test(tc, posenc_finds_both_schemes);
    else
        fprintf(stderr, "# posenc not built (-Dexamples=false?): posenc_finds_both_schemes skipped\n");
    suite_add_tcase(s, tc);

    tc = tcase_create("misbehaving");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_add_test(tc, truncated_copy_is_refused_before_dlopen);
    tcase_add_test(tc, valid_header_truncated_body_is_refused);
    tcase_add_test(tc, self_loading_plugin_is_refused);
    tcase_add_test(tc, plugins_loading_each_other_are_refused);
    tcase_add_test(tc, layer_returning_null_is_caught);
    tcase_add_test(tc, layer_returning_a_wrong_shape_is_caught);
    tcase_add_test(tc, gpt_with_a_misbehaving_scheme_stops_cleanly);
    if (tu_program_built(&gpt_prog)) {
        tcase_add_test(tc, gpt_program_with_a_null_scheme_ends_with_the_message);
        tcase_add_test(tc, gpt_program_bad_precision_is_named);
    } else {
        fprintf(stderr, "# gpt not built (-Dexamples=false?): gpt_program_with_a_null_scheme_ends_with_the_message, "
                        "gpt_program_bad_precision_is_named skipped\n");
    }
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(plugins_suite)
