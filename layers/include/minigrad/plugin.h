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
 *  - before dlopen sees it, that the file is a whole ELF shared object for this host: the ELF magic,
 *    the host's class, byte order and machine (else MG_ERR_ABI), type ET_DYN, and that the program
 *    header table, the section header table and the file bytes of every loadable segment lie inside
 *    the file (else MG_ERR_FORMAT: a truncated copy is refused here, where dlopen would fault);
 *  - the file can be opened (dlopen's own message is passed on);
 *  - it exports mg_plugin_init;
 *  - each registered vtable has abi_version == MG_LAYER_ABI_VERSION ("ABI 2, host 1") and a
 *    struct_size at least sizeof(mg_layer_vtable) of this host;
 *  - init returned MG_OK.
 * Registration is all or nothing: the layers of a plugin whose init fails or that registers one
 * bad vtable are all dropped and the object is closed. A plugin already loaded (same real path)
 * is not loaded twice. Loaded plugins stay loaded until the process exits.
 * A plugin's init may load the plugins it builds on (mg_plugin_load), but not one whose init is
 * running: a plugin that loads itself, directly or through others, is a cycle. That load returns
 * MG_ERR_INVALID naming the cycle ("liba.so -> libb.so -> liba.so in DIR"), and every plugin of
 * the cycle is refused with that message, whatever its init then returns.
 *
 * The search path, one for every program and every call below, in this order:
 *  1. the directories of MINIGRAD_PLUGIN_PATH (colon-separated; read at each search);
 *  2. the installed plugin folder: first minigrad/plugins beside the libminigrad-layers the
 *     program loaded (found with dladdr), so a prefix moved or copied elsewhere uses the plugins
 *     that came with it; then <prefix>/<libdir>/minigrad/plugins, fixed when minigrad is
 *     configured (where the prefix has not moved, the two are one folder, searched once, as
 *     "installed"). But for a program that runs from inside the build tree minigrad was built in,
 *     that build tree's plugins folder (<build>/plugins) instead, so an uninstalled build uses its
 *     own plugins and never an older installed copy;
 *  3. the folder of the running program (the directory of /proc/self/exe) and its plugins/
 *     subfolder; skipped for a program in the build tree, whose folder holds build outputs, not
 *     plugins put there to be found (step 2 has its plugins already);
 *  4. the directories added with mg_plugin_add_dir, in the order they were added.
 * Steps 2 and 3 can be turned off (mg_plugin_use_default_dirs), e.g. by a program whose own option
 * names the plugin folders. A directory that appears twice is searched once, where it appears
 * first; one that does not exist is skipped (and marked so in messages).
 *
 * Three ways to use it:
 *  - by plugin name: mg_plugin_load("alibi") opens the first lib<name>.so or <name>.so along the
 *    path (a name with '/' is a path, opened as is);
 *  - by layer or scheme name: mg_layer_find_or_load("scale") and mg_layer_find_pos_or_load("alibi")
 *    return what is registered, else scan the path for a plugin that registers it: every *.so of
 *    each directory in order (in each, lib<name>.so and <name>.so first, then the others by file
 *    name), loading each until the name is registered. This is how `pos = X` in a GPT config finds
 *    its scheme, so a plugin may register any number of layers and schemes under any names;
 *  - everything: mg_plugin_list scans the whole path and lists every layer and scheme with where
 *    it came from, the plugins that did not load (with the reason), and the shadowed files.
 * During a scan a plugin is loaded at most once, and one that fails to load is remembered, reported
 * (in the listing, in the message of a name that is then not found, or as a warning when the name
 * is found in a later plugin) and not retried; it never stops the scan. A file whose name was
 * already found in an earlier directory is shadowed: not loaded (even when the first one failed),
 * listed as such, not an error; as with PATH, the first one wins. A shared object the program has
 * already linked (libminigrad itself, say, beside the program) is left alone.
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

/* Loads a plugin by path or by name (lib<name>.so, then <name>.so, along the search path).
 * MG_ERR_NOT_FOUND when a name is found in no directory (the message lists the directories
 * searched), MG_ERR_FORMAT for a file that is not a whole ELF shared object, MG_ERR_INVALID for a
 * cycle of plugins loading each other, MG_ERR_IO when dlopen fails,
 * MG_ERR_ABI for a version or size mismatch, MG_ERR_NOT_FOUND for a missing init symbol, or
 * whatever the plugin's init returned. */
MG_API mg_status mg_plugin_load(const char *path_or_name);
/* Resolves a name to a path without loading it (buf gets the path). MG_ERR_NOT_FOUND as above;
 * MG_ERR_INVALID when the path found does not fit in buf's n bytes (buf is then left empty). */
MG_API mg_status mg_plugin_find(const char *name, char *buf, size_t n);
/* Adds a directory to the end of the search path (step 4). */
MG_API mg_status mg_plugin_add_dir(const char *dir);
/* Whether steps 2 and 3 of the search path (the installed or build tree's folder, the program's
 * folder) are searched; on by default. */
MG_API void mg_plugin_use_default_dirs(bool on);
/* The search path as it stands: its directories in order, ':'-separated, into buf (cut to fit);
 * returns how many there are. */
MG_API int mg_plugin_search_path(char *buf, size_t n);
MG_API int mg_plugin_count(void);
MG_API const char *mg_plugin_path(int i); /* real path of the i-th loaded plugin; NULL if out of range */

/* The layer registered as `name` (or providing positional scheme `scheme`); when there is none,
 * scans the search path for a plugin that registers it (see above). *out (out may be NULL) is the
 * vtable, or NULL with MG_ERR_NOT_FOUND, whose message names the layer or scheme, the registered
 * ones, every directory searched, and the plugins there that did not load with their reasons;
 * MG_ERR_INVALID for an empty name. */
MG_API mg_status mg_layer_find_or_load(const char *name, const mg_layer_vtable **out);
MG_API mg_status mg_layer_find_pos_or_load(const char *scheme, const mg_layer_vtable **out);

/* One line of mg_plugin_list. */
typedef enum mg_plugin_entry_kind {
    MG_PLUGIN_ENTRY_DIR,      /* a directory of the search path: path, why = its step */
    MG_PLUGIN_ENTRY_LAYER,    /* a registered layer: name, scheme (or NULL), path = its origin */
    MG_PLUGIN_ENTRY_FAILED,   /* a plugin that did not load: path, why = the loader's reason */
    MG_PLUGIN_ENTRY_SHADOWED, /* a file not loaded: path, why = the file of that name found first */
} mg_plugin_entry_kind;

typedef struct mg_plugin_entry {
    mg_plugin_entry_kind kind;
    const char *name;   /* LAYER: the layer's name; NULL otherwise */
    const char *scheme; /* LAYER: its positional scheme, NULL if it has none */
    const char *path;   /* DIR, FAILED, SHADOWED: the path; LAYER: "built-in", "program" or the
                           real path of the plugin that registered it */
    const char *why;    /* DIR: "MINIGRAD_PLUGIN_PATH", "beside the library", "installed", "build
                           tree", "program folder" or "added", with ", missing" when it does not
                           exist; FAILED, SHADOWED:
                           as above; NULL for LAYER */
} mg_plugin_entry;

/* Scans the whole search path, loading every plugin not yet loaded, and lists: the directories
 * searched in order, then every registered layer in registration order (built-ins first), then
 * the plugins of the search path that did not load, then the shadowed files. *out is an array of
 * *n entries that the caller frees with mg_plugin_list_free. MG_ERR_NOMEM only. */
MG_API mg_status mg_plugin_list(mg_plugin_entry **out, int *n);
MG_API void mg_plugin_list_free(mg_plugin_entry *list, int n); /* NULL is a no-op */
/* Prints mg_plugin_list as a readable table ("layers and positional schemes", "plugin directories
 * searched", "did not load", "shadowed"); only the layers that provide a positional scheme when
 * schemes_only. For a program's --list-schemes. */
MG_API mg_status mg_plugin_list_print(FILE *f, bool schemes_only);

/* The built-in layers' init: registers them through `host`, exactly as a plugin would. The
 * registry calls it once, on first use; exposed so the path is visible and testable. */
MG_API mg_status mg_builtin_layers_init(const mg_plugin_host *host);

#ifdef __cplusplus
}
#endif
#endif
