/* Shared by the layer and GPT suites: finite-difference gradient checks through a whole layer (or
 * model), and the plugin directory of the build tree.
 *
 * The checks are mg_gradcheck's (minigrad/gradcheck.h): for a forward function f (a layer or model
 * applied to fixed inputs) and a fixed random weighting R of its output, the scalar
 * L = sum_i f_i R_i is accumulated in double from the float32 output; the analytic gradient comes
 * from mg_backward, the numeric one from (L(w + h) - L(w - h)) / 2h for elements of every
 * parameter and every float input. They must agree within |a - n| <= atol + rtol |n|. */
#ifndef MG_TEST_LAYER_CHECK_H
#define MG_TEST_LAYER_CHECK_H

#include "gradcheck_assert.h"
#include "harness.h"
#include "test_util.h"
#include "minigrad/minigrad.h"
#include "minigrad/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float h, atol, rtol;
    int max_per_tensor; /* elements checked per tensor, evenly spread (0: all) */
} lc_tol;

/* Checks every float input and every parameter of P (which may be NULL); fails the current Check
 * test with the checker's report, naming the tensor and element. Returns the number of elements
 * compared. */
static inline int64_t lc_gradcheck(const char *what, mg_gradcheck_fn fn, void *user, mg_params *P,
                                   mg_tensor *const *in, int n_in, lc_tol tol, uint64_t seed) {
    mg_gradcheck_opts o = gc_opts(tol.h, tol.atol, tol.rtol, tol.max_per_tensor, seed);
    return gc_assert_pass(what, fn, user, in, n_in, P, &o);
}

/* The build tree's plugin folder (tests run with MINIGRAD_BUILD_ROOT set by tests/meson.build). */
static inline const char *lc_plugin_dir(void) {
    static char dir[4096];
    return tu_build_path(dir, sizeof dir, "plugins") ? dir : NULL;
}

/* The build tree's broken-on-purpose plugins (libmgtest_*.so, tests/plugins/meson.build). */
static inline const char *lc_test_plugin_dir(void) {
    static char dir[4096];
    return tu_build_path(dir, sizeof dir, "tests/plugins") ? dir : NULL;
}

/* Makes the build tree's plugins findable by name (as a user would with MINIGRAD_PLUGIN_PATH). */
static inline void lc_use_build_plugins(void) {
    const char *dir = lc_plugin_dir();
    if (!dir) mg_test_skip_all("MINIGRAD_BUILD_ROOT is not set: run through meson test");
    setenv(MG_PLUGIN_PATH_ENV, dir, 1);
}

/* As lc_use_build_plugins, with the broken-on-purpose test plugins on the search path too. */
static inline void lc_use_build_and_test_plugins(void) {
    const char *dir = lc_plugin_dir(), *test_dir = lc_test_plugin_dir();
    if (!dir || !test_dir) mg_test_skip_all("MINIGRAD_BUILD_ROOT is not set: run through meson test");
    char path[8200];
    snprintf(path, sizeof path, "%s:%s", dir, test_dir);
    setenv(MG_PLUGIN_PATH_ENV, path, 1);
}

/* Swallows INFO logs (model summaries) so test output stays readable. */
static inline void lc_quiet_log(mg_log_level level, const char *msg, void *user) {
    (void)user;
    if (level >= MG_LOG_WARN) fprintf(stderr, "%s\n", msg);
}

#endif
