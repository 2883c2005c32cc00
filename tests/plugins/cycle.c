/* Plugins whose init loads a plugin that loads it back, for tests/test_plugins.c; the loader must
 * refuse them all, naming the cycle, and never recurse.
 *  - SELF: libmgtest_self_load.so loads itself by name (found on the search path) and ignores the
 *    refusal.
 *  - A, B: libmgtest_cycle_a.so loads libmgtest_cycle_b.so from its own folder and returns the
 *    refusal; libmgtest_cycle_b.so loads libmgtest_cycle_a.so and ignores it. */
#include "minigrad/plugin.h"

#include <stdio.h>
#include <string.h>

static mg_status create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)self, (void)cfg, (void)params;
    return MG_OK;
}

static mg_tensor *forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

#if defined(MGTEST_SELF)
#define NAME "mgtest_self_load"
#elif defined(MGTEST_CYCLE_A)
#define NAME "mgtest_cycle_a"
#define OTHER "libmgtest_cycle_b.so"
#else
#define NAME "mgtest_cycle_b"
#define OTHER "libmgtest_cycle_a.so"
#endif

static const mg_layer_vtable vt = {
    .abi_version = MG_LAYER_ABI_VERSION,
    .struct_size = sizeof(mg_layer_vtable),
    .name = NAME,
    .create = create,
    .forward = forward,
};

MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
#if defined(MGTEST_SELF)
    (void)mg_plugin_load(NAME);
#else
    char other[4096];
    const char *slash = strrchr(host->origin, '/');
    snprintf(other, sizeof other, "%.*s/%s", slash ? (int)(slash - host->origin) : 1, slash ? host->origin : ".",
             OTHER);
    mg_status st = mg_plugin_load(other);
#if defined(MGTEST_CYCLE_A)
    if (st != MG_OK) return st;
#else
    (void)st;
#endif
#endif
    return host->register_layer(host, &vt);
}
