/* minigrad/plugin.h: layers loaded at run time from shared objects.
 *
 * A plugin is a shared object exporting one function, `mg_plugin_init` (MG_PLUGIN_INIT_SYMBOL),
 * which registers its layers through the host table it is given, the very call the built-in layers
 * use. It may call any public minigrad function (plugins link against libminigrad):
 *
 *     #include "minigrad/plugin.h"
 *     static const mg_layer_vtable my_layer = { MG_LAYER_ABI_VERSION, sizeof(mg_layer_vtable),
 *                                               .name = "my_layer", ... };
 *     MG_PLUGIN_EXPORT mg_status mg_plugin_init(const mg_plugin_host *host) {
 *         return host->register_layer(host, &my_layer);
 *     }
 *
 * The loader checks, and explains any refusal naming the file:
 *  - the file can be opened (dlopen's own message is passed on);
 *  - it exports mg_plugin_init;
 *  - each registered vtable has abi_version == MG_LAYER_ABI_VERSION ("ABI 2, host 1") and a
 *    struct_size at least sizeof(mg_layer_vtable) of this host;
 *  - init returned MG_OK.
 * Registration is all or nothing: the layers of a plugin whose init fails or that registers one
 * bad vtable are all dropped and the object is closed. A plugin already loaded (same real path)
 * is not loaded twice. Loaded plugins stay loaded until the process exits.
 *
 * Search: a name without '/' ("alibi") is looked for as lib<name>.so, then <name>.so, in each
 * directory of MINIGRAD_PLUGIN_PATH (colon-separated), then in the directories added with
 * mg_plugin_add_dir, in that order. A name with '/' is a path and is opened as is.
 */
#ifndef MINIGRAD_PLUGIN_H
#define MINIGRAD_PLUGIN_H

#include "minigrad/export.h"

#include "minigrad/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MG_PLUGIN_ABI_VERSION MG_LAYER_ABI_VERSION
#define MG_PLUGIN_INIT_SYMBOL "mg_plugin_init"
#define MG_PLUGIN_PATH_ENV "MINIGRAD_PLUGIN_PATH"

#if defined(__GNUC__)
#define MG_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MG_PLUGIN_EXPORT
#endif

/* What the host hands to a plugin's init (and to the built-in layers' init). */
typedef struct mg_plugin_host {
    uint32_t abi_version; /* MG_PLUGIN_ABI_VERSION of the host */
    uint32_t struct_size; /* sizeof(mg_plugin_host) of the host */
    const char *origin;   /* the plugin's path, or "built-in" */
    mg_status (*register_layer)(const struct mg_plugin_host *host, const mg_layer_vtable *vt);
    void *host_data; /* the loader's; do not touch */
    void *reserved[4];
} mg_plugin_host;

typedef mg_status (*mg_plugin_init_fn)(const mg_plugin_host *host);

/* Loads a plugin by path or by name (see above). MG_ERR_NOT_FOUND when a name is found in no
 * directory (the message lists the directories searched), MG_ERR_IO when dlopen fails,
 * MG_ERR_ABI for a version or size mismatch, MG_ERR_NOT_FOUND for a missing init symbol, or
 * whatever the plugin's init returned. */
MG_API mg_status mg_plugin_load(const char *path_or_name);
/* Resolves a name to a path without loading it (buf gets the path). MG_ERR_NOT_FOUND as above. */
MG_API mg_status mg_plugin_find(const char *name, char *buf, size_t n);
/* Adds a directory searched after MINIGRAD_PLUGIN_PATH (e.g. a build tree's plugins folder). */
MG_API mg_status mg_plugin_add_dir(const char *dir);
MG_API int mg_plugin_count(void);
MG_API const char *mg_plugin_path(int i); /* real path of the i-th loaded plugin; NULL if out of range */

/* The built-in layers' init: registers them through `host`, exactly as a plugin would. The
 * registry calls it once, on first use; exposed so the path is visible and testable. */
MG_API mg_status mg_builtin_layers_init(const mg_plugin_host *host);

#ifdef __cplusplus
}
#endif
#endif
