/* Deliberately broken plugins for tests/test_plugins.c: each build (one -DMGTEST_<KIND>) breaks
 * one rule the loader must catch and explain. */
#include "minigrad/plugin.h"

#include <stddef.h>

static mg_status ok_create(mg_layer *self, mg_config *cfg, mg_params *params) {
    (void)self, (void)cfg, (void)params;
    return MG_OK;
}
static mg_tensor *ok_forward(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    (void)self, (void)ctx, (void)args;
    return x;
}

#if defined(MGTEST_BAD_ABI)
#define NAME "mgtest_bad_abi"
#define ABI (MG_LAYER_ABI_VERSION + 41)
#define SIZE sizeof(mg_layer_vtable)
#elif defined(MGTEST_SMALL_STRUCT)
#define NAME "mgtest_small_struct"
#define ABI MG_LAYER_ABI_VERSION
#define SIZE offsetof(mg_layer_vtable, rotate_qk) /* as if built before the positional hooks */
#elif defined(MGTEST_DUP_NAME)
#define NAME "linear" /* a built-in's name */
#define ABI MG_LAYER_ABI_VERSION
#define SIZE sizeof(mg_layer_vtable)
#else
#define NAME "mgtest_ok_part"
#define ABI MG_LAYER_ABI_VERSION
#define SIZE sizeof(mg_layer_vtable)
#endif

static const mg_layer_vtable vt = {
    .abi_version = ABI,
    .struct_size = (uint32_t)(SIZE),
    .name = NAME,
    .create = ok_create,
    .forward = ok_forward,
};

#if defined(MGTEST_HALF_BAD)
/* The second vtable is refused, so the first must not stay registered either. */
static const mg_layer_vtable bad = {
    .abi_version = MG_LAYER_ABI_VERSION + 1,
    .struct_size = sizeof(mg_layer_vtable),
    .name = "mgtest_half_bad",
    .create = ok_create,
    .forward = ok_forward,
};
#endif

#if defined(MGTEST_NO_INIT)
/* Exports something, but not mg_plugin_init. */
MG_PLUGIN_EXPORT int mgtest_not_the_init(void) { return vt.abi_version > 0; }
#else
MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
#if defined(MGTEST_INIT_FAILS)
    (void)host, (void)vt;
    return mg_set_error(MG_ERR_INVALID, "mgtest_init_fails: the device this plugin needs is not there");
#elif defined(MGTEST_HALF_BAD)
    mg_status s = host->register_layer(host, &vt);
    if (s != MG_OK) return s;
    (void)host->register_layer(host, &bad); /* ignores the refusal: the loader must not */
    return MG_OK;
#else
    return host->register_layer(host, &vt);
#endif
}
#endif
