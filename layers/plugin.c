/* The plugin loader: dlopen, find mg_plugin_init, let it register through a host table that
 * collects its vtables, then commit them all or none. */
#include "registry_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PENDING 64

typedef struct {
    const mg_layer_vtable *vts[MAX_PENDING];
    int n;
    mg_status err;
    char msg[1024];
} pending;

typedef struct {
    char *path;
    void *handle;
} loaded;

/* Recursive: a plugin's init may itself load a plugin it builds on. */
static pthread_mutex_t plug_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static loaded *plugins;
static int n_plugins, cap_plugins;
static char **dirs;
static int n_dirs;

static mg_status plugin_register(const mg_plugin_host *host, const mg_layer_vtable *vt) {
    pending *p = host->host_data;
    mg_status s = mg_reg_validate(vt, host->origin);
    if (s == MG_OK && p->n == MAX_PENDING)
        s = mg_set_error(MG_ERR_INVALID, "%s: registers more than %d layers", host->origin, MAX_PENDING);
    if (s != MG_OK) {
        if (p->err == MG_OK) p->err = s, snprintf(p->msg, sizeof p->msg, "%s", mg_last_error());
        return s;
    }
    p->vts[p->n++] = vt;
    return MG_OK;
}

mg_status mg_plugin_add_dir(const char *dir) {
    if (!dir || !*dir) return mg_set_error(MG_ERR_INVALID, "mg_plugin_add_dir: empty directory name");
    pthread_mutex_lock(&plug_lock);
    mg_status st = MG_OK;
    for (int i = 0; i < n_dirs; i++)
        if (strcmp(dirs[i], dir) == 0) goto out;
    char **d = realloc(dirs, (size_t)(n_dirs + 1) * sizeof *d);
    if (!d || !(d[n_dirs] = strdup(dir))) {
        if (d) dirs = d;
        st = mg_set_error(MG_ERR_NOMEM, "mg_plugin_add_dir: out of memory");
        goto out;
    }
    dirs = d;
    n_dirs++;
out:
    pthread_mutex_unlock(&plug_lock);
    return st;
}

static bool try_dir(const char *dir, size_t dlen, const char *name, char *buf, size_t n) {
    static const char *const pat[] = {"%.*s/lib%s.so", "%.*s/%s.so"};
    for (int k = 0; k < 2; k++) {
        int w = snprintf(buf, n, pat[k], (int)dlen, dir, name);
        if (w > 0 && (size_t)w < n && access(buf, R_OK) == 0) return true;
    }
    return false;
}

mg_status mg_plugin_find(const char *name, char *buf, size_t n) {
    if (!name || !*name) return mg_set_error(MG_ERR_INVALID, "mg_plugin_find: empty plugin name");
    if (strchr(name, '/')) {
        if ((size_t)snprintf(buf, n, "%s", name) >= n) return mg_set_error(MG_ERR_INVALID, "%s: path too long", name);
        return MG_OK;
    }
    const char *env = getenv(MG_PLUGIN_PATH_ENV);
    for (const char *p = env; p && *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && try_dir(p, len, name, buf, n)) return MG_OK;
        if (!end) break;
        p = end + 1;
    }
    pthread_mutex_lock(&plug_lock);
    bool found = false;
    char extra[1024] = "";
    size_t o = 0;
    for (int i = 0; i < n_dirs && !found; i++) {
        found = try_dir(dirs[i], strlen(dirs[i]), name, buf, n);
        int w = snprintf(extra + o, sizeof extra - o, "%s%s", o ? ":" : "", dirs[i]);
        if (w > 0 && (size_t)w < sizeof extra - o) o += (size_t)w;
    }
    pthread_mutex_unlock(&plug_lock);
    if (found) return MG_OK;
    return mg_set_error(MG_ERR_NOT_FOUND,
                        "plugin '%s' not found: looked for lib%s.so and %s.so in %s%s%s%s%s (set %s to the directory "
                        "that holds it)",
                        name, name, name, env && *env ? MG_PLUGIN_PATH_ENV "=" : "", env && *env ? env : "",
                        env && *env ? "" : MG_PLUGIN_PATH_ENV " (not set)", o ? " and " : "", extra,
                        MG_PLUGIN_PATH_ENV);
}

static mg_status load_path(const char *path) {
    char real[PATH_MAX];
    if (!realpath(path, real)) return mg_set_error(MG_ERR_IO, "%s: cannot open plugin: %s", path, strerror(errno));
    for (int i = 0; i < n_plugins; i++)
        if (strcmp(plugins[i].path, real) == 0) return MG_OK;
    if (n_plugins == cap_plugins) {
        int cap = cap_plugins ? 2 * cap_plugins : 8;
        loaded *l = realloc(plugins, (size_t)cap * sizeof *l);
        if (!l) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
        plugins = l, cap_plugins = cap;
    }
    char *keep = strdup(real);
    if (!keep) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        free(keep);
        return mg_set_error(MG_ERR_IO, "%s: cannot load plugin: %s", path, e ? e : "dlopen failed");
    }
    void *sym = dlsym(h, MG_PLUGIN_INIT_SYMBOL);
    if (!sym) {
        dlclose(h);
        free(keep);
        return mg_set_error(MG_ERR_NOT_FOUND,
                            "%s: not a minigrad plugin: it does not export the symbol '%s' (declare it "
                            "MG_PLUGIN_EXPORT mg_status %s(const mg_plugin_host *))",
                            path, MG_PLUGIN_INIT_SYMBOL, MG_PLUGIN_INIT_SYMBOL);
    }
    mg_plugin_init_fn init;
    memcpy(&init, &sym, sizeof init);
    (void)mg_layer_registered_count(); /* built-ins first, so a clash with them is reported */
    pending p = {.err = MG_OK};
    mg_plugin_host host = {MG_PLUGIN_ABI_VERSION, sizeof(mg_plugin_host), keep, plugin_register, &p, {0}};
    mg_clear_error();
    mg_status st = init(&host);
    if (st != MG_OK) {
        if (p.err != MG_OK)
            mg_set_error(st, "%s", p.msg);
        else {
            char why[1024]; /* copied: mg_set_error writes the buffer mg_last_error points into */
            snprintf(why, sizeof why, "%s", *mg_last_error() ? mg_last_error() : "no message");
            mg_set_error(st, "%s: %s failed (%s): %s", path, MG_PLUGIN_INIT_SYMBOL, mg_status_str(st), why);
        }
    } else if (p.err != MG_OK) {
        st = mg_set_error(p.err, "%s", p.msg); /* init ignored a refusal: refuse the whole plugin */
    } else if (p.n == 0) {
        st = mg_set_error(MG_ERR_INVALID, "%s: %s registered no layers", path, MG_PLUGIN_INIT_SYMBOL);
    } else {
        st = mg_reg_commit(p.vts, p.n, keep);
    }
    if (st != MG_OK) {
        dlclose(h);
        free(keep);
        return st;
    }
    plugins[n_plugins++] = (loaded){keep, h};
    mg_log(MG_LOG_DEBUG, "plugin %s: %d layer(s) registered", keep, p.n);
    return MG_OK;
}

mg_status mg_plugin_load(const char *path_or_name) {
    char path[PATH_MAX];
    mg_status st = mg_plugin_find(path_or_name, path, sizeof path);
    if (st != MG_OK) return st;
    pthread_mutex_lock(&plug_lock);
    st = load_path(path);
    pthread_mutex_unlock(&plug_lock);
    return st;
}

int mg_plugin_count(void) {
    pthread_mutex_lock(&plug_lock);
    int n = n_plugins;
    pthread_mutex_unlock(&plug_lock);
    return n;
}

const char *mg_plugin_path(int i) {
    pthread_mutex_lock(&plug_lock);
    const char *p = i >= 0 && i < n_plugins ? plugins[i].path : NULL;
    pthread_mutex_unlock(&plug_lock);
    return p;
}
