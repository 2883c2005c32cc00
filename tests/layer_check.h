/* Shared by the layer and GPT suites: finite-difference gradient checks through a whole layer (or
 * model), and the plugin directory of the build tree.
 *
 * For a forward function f (a layer or model applied to fixed inputs) and a fixed random
 * weighting R of its output, the scalar L = sum_i f_i R_i is accumulated in double from the
 * float32 output. The analytic gradient comes from mg_backward through mg_sum(mg_mul(f, R)); the
 * numeric one from (L(w + h) - L(w - h)) / 2h for elements of every parameter and every float
 * input. They must agree within |a - n| <= atol + rtol |n|. */
#ifndef MG_TEST_LAYER_CHECK_H
#define MG_TEST_LAYER_CHECK_H

#include "harness.h"
#include "test_util.h"
#include "minigrad/minigrad.h"
#include "minigrad/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Builds the output from the current values of the parameters and of the float inputs, which
 * the function wraps (mg_tensor_wrap) from buffers it owns; it records the wrapped input tensors
 * in in_t[] so their gradients can be read. */
typedef mg_tensor *(*lc_forward_fn)(void *user, mg_ctx *ctx, mg_tensor **in_t);

typedef struct {
    float *data; /* caller-owned buffer of a float input, perturbed in place */
    int64_t n;
} lc_input;

typedef struct {
    float h, atol, rtol;
    int max_per_tensor; /* elements checked per tensor, evenly strided (0: all) */
} lc_tol;

/* Runs the check; fails the current Check test with a message naming the tensor and element.
 * Returns the number of elements compared. */
static inline int lc_gradcheck(const char *what, lc_forward_fn fn, void *user, mg_params *P, lc_input *in, int n_in,
                               lc_tol tol, uint64_t seed) {
    mg_ctx *ctx = mg_ctx_new(0), *fd = mg_ctx_new(0);
    mg_rng r = mg_rng_make(seed);
    mg_tensor *in_t[8] = {0};
    if (P) mg_params_zero_grad(P);
    mg_tensor *y = fn(user, ctx, in_t);
    ck_assert_msg(mg_ctx_ok(ctx), "%s: forward: %s", what, mg_ctx_error(ctx));
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, y->ndim, y->shape);
    for (int64_t i = 0; i < R->numel; i++) R->data[i] = mg_rng_range(&r, -1.0f, 1.0f);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s: backward: %s", what, mg_ctx_error(ctx));
    mg_ctx_set_grad_enabled(fd, false);

    int n_t = (P ? mg_params_len(P) : 0) + n_in, checked = 0;
    for (int t = 0; t < n_t; t++) {
        float *data, *grad;
        int64_t n;
        const char *name;
        char label[64];
        if (P && t < mg_params_len(P)) {
            mg_tensor *p = mg_params_at(P, t);
            data = p->data, grad = p->grad, n = p->numel, name = p->name;
        } else {
            int k = t - (P ? mg_params_len(P) : 0);
            ck_assert_msg(in_t[k] && in_t[k]->grad, "%s: input %d got no gradient", what, k);
            data = in[k].data, grad = in_t[k]->grad, n = in[k].n;
            snprintf(label, sizeof label, "input %d", k);
            name = label;
        }
        int64_t step = tol.max_per_tensor > 0 && n > tol.max_per_tensor ? n / tol.max_per_tensor : 1;
        for (int64_t j = (step > 1 ? (int64_t)mg_rng_below(&r, (uint32_t)step) : 0); j < n; j += step) {
            float keep = data[j];
            double L[2];
            for (int s = 0; s < 2; s++) {
                data[j] = keep + (s ? -tol.h : tol.h);
                mg_ctx_reset(fd);
                mg_tensor *yy = fn(user, fd, (mg_tensor *[8]){0});
                ck_assert_msg(mg_ctx_ok(fd), "%s: forward: %s", what, mg_ctx_error(fd));
                double acc = 0.0;
                for (int64_t i = 0; i < yy->numel; i++) acc += (double)yy->data[i] * R->data[i];
                L[s] = acc;
            }
            data[j] = keep;
            double num = (L[0] - L[1]) / (2.0 * tol.h), ana = grad ? grad[j] : 0.0;
            ck_assert_msg(fabs(ana - num) <= tol.atol + tol.rtol * fabs(num),
                          "%s: %s element %lld: analytic %.6g vs numeric %.6g (h %g, atol %g, rtol %g)", what, name,
                          (long long)j, ana, num, (double)tol.h, (double)tol.atol, (double)tol.rtol);
            checked++;
        }
    }
    mg_ctx_free(fd);
    mg_ctx_free(ctx);
    return checked;
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
