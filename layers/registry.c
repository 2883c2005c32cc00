/* The layer registry (the one piece of global mutable state), layer instances, and the summary
 * table. Built-in layers are registered lazily, on first use, through mg_builtin_layers_init and
 * the same host table a plugin gets. */
#include "registry_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const mg_layer_vtable *vt;
    char *origin;
} reg_entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_entry *reg;
static int reg_n, reg_cap;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;
static mg_status builtins_status = MG_OK;
static char builtins_error[512];

static mg_status builtin_register(const mg_plugin_host *host, const mg_layer_vtable *vt) {
    mg_status s = mg_reg_validate(vt, host->origin);
    if (s != MG_OK) return s;
    return mg_reg_commit(&vt, 1, host->origin);
}

static void builtins_init(void) {
    mg_plugin_host host = {MG_PLUGIN_ABI_VERSION, sizeof(mg_plugin_host), "built-in", builtin_register, NULL, {0}};
    builtins_status = mg_builtin_layers_init(&host);
    if (builtins_status != MG_OK) snprintf(builtins_error, sizeof builtins_error, "%s", mg_last_error());
}

/* Built-ins first, whatever the first registry call is, so their names are always taken. */
static void ensure_builtins(void) {
    pthread_once(&builtins_once, builtins_init);
    if (builtins_status != MG_OK) mg_log(MG_LOG_ERROR, "built-in layers failed to register: %s", builtins_error);
}

mg_status mg_reg_validate(const mg_layer_vtable *vt, const char *origin) {
    if (!vt) return mg_set_error(MG_ERR_INVALID, "%s: registered a NULL layer vtable", origin);
    if (vt->abi_version < MG_LAYER_ABI_MIN || vt->abi_version > MG_LAYER_ABI_VERSION)
        return mg_set_error(MG_ERR_ABI, "%s: layer '%s': ABI version %u, host %u (rebuild the plugin against this minigrad)",
                            origin, vt->struct_size >= offsetof(mg_layer_vtable, summary) && vt->name ? vt->name : "?",
                            vt->abi_version, MG_LAYER_ABI_VERSION);
    if (vt->struct_size < sizeof(mg_layer_vtable))
        return mg_set_error(MG_ERR_ABI, "%s: layer vtable struct_size %u, host needs at least %zu (ABI %u)", origin,
                            vt->struct_size, sizeof(mg_layer_vtable), MG_LAYER_ABI_VERSION);
    if (!vt->name || !*vt->name) return mg_set_error(MG_ERR_INVALID, "%s: a layer vtable has no name", origin);
    for (const char *p = vt->name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return mg_set_error(MG_ERR_INVALID, "%s: layer name '%s': only a-z, 0-9 and _ are allowed", origin, vt->name);
    if (!vt->create || !vt->forward)
        return mg_set_error(MG_ERR_INVALID, "%s: layer '%s' has no %s function", origin, vt->name,
                            vt->create ? "forward" : "create");
    if (vt->pos_scheme && !*vt->pos_scheme)
        return mg_set_error(MG_ERR_INVALID, "%s: layer '%s' has an empty pos_scheme", origin, vt->name);
    return MG_OK;
}

static int find_locked(const char *name, bool by_scheme) {
    for (int i = 0; i < reg_n; i++) {
        const char *k = by_scheme ? reg[i].vt->pos_scheme : reg[i].vt->name;
        if (k && strcmp(k, name) == 0) return i;
    }
    return -1;
}

mg_status mg_reg_commit(const mg_layer_vtable *const *vts, int n, const char *origin) {
    pthread_mutex_lock(&reg_lock);
    mg_status st = MG_OK;
    for (int i = 0; i < n && st == MG_OK; i++) {
        const mg_layer_vtable *vt = vts[i];
        int j = find_locked(vt->name, false);
        if (j >= 0) {
            st = mg_set_error(MG_ERR_INVALID, "%s: layer '%s' is already registered (by %s)", origin, vt->name, reg[j].origin);
            break;
        }
        if (vt->pos_scheme && (j = find_locked(vt->pos_scheme, true)) >= 0) {
            st = mg_set_error(MG_ERR_INVALID, "%s: layer '%s': positional scheme '%s' is already provided by layer '%s' (%s)",
                              origin, vt->name, vt->pos_scheme, reg[j].vt->name, reg[j].origin);
            break;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(vts[k]->name, vt->name) == 0 ||
                (vt->pos_scheme && vts[k]->pos_scheme && strcmp(vts[k]->pos_scheme, vt->pos_scheme) == 0)) {
                st = mg_set_error(MG_ERR_INVALID, "%s: layer '%s' is registered twice", origin, vt->name);
                break;
            }
    }
    if (st == MG_OK && reg_n + n > reg_cap) {
        int cap = reg_cap ? reg_cap : 32;
        while (cap < reg_n + n) cap *= 2;
        reg_entry *r = realloc(reg, (size_t)cap * sizeof *r);
        if (!r)
            st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory registering layers", origin);
        else
            reg = r, reg_cap = cap;
    }
    char **origins = NULL;
    if (st == MG_OK && n > 0) {
        origins = calloc((size_t)n, sizeof *origins);
        for (int i = 0; origins && i < n; i++)
            if (!(origins[i] = strdup(origin))) {
                for (int k = 0; k < i; k++) free(origins[k]);
                free(origins);
                origins = NULL;
            }
        if (!origins) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory registering layers", origin);
    }
    if (st == MG_OK)
        for (int i = 0; i < n; i++) reg[reg_n++] = (reg_entry){vts[i], origins[i]};
    free(origins);
    pthread_mutex_unlock(&reg_lock);
    return st;
}

mg_status mg_register_layer(const mg_layer_vtable *vt) {
    ensure_builtins();
    mg_status s = mg_reg_validate(vt, "program");
    if (s != MG_OK) return s;
    return mg_reg_commit(&vt, 1, "program");
}

static const mg_layer_vtable *lookup(const char *name, bool by_scheme) {
    if (!name) return NULL;
    ensure_builtins();
    pthread_mutex_lock(&reg_lock);
    int i = find_locked(name, by_scheme);
    const mg_layer_vtable *vt = i >= 0 ? reg[i].vt : NULL;
    pthread_mutex_unlock(&reg_lock);
    return vt;
}

const mg_layer_vtable *mg_layer_find(const char *name) { return lookup(name, false); }
const mg_layer_vtable *mg_layer_find_pos(const char *scheme) { return lookup(scheme, true); }

int mg_layer_registered_count(void) {
    ensure_builtins();
    pthread_mutex_lock(&reg_lock);
    int n = reg_n;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

const mg_layer_vtable *mg_layer_registered(int i) {
    ensure_builtins();
    pthread_mutex_lock(&reg_lock);
    const mg_layer_vtable *vt = i >= 0 && i < reg_n ? reg[i].vt : NULL;
    pthread_mutex_unlock(&reg_lock);
    return vt;
}

const char *mg_layer_origin(const char *name) {
    ensure_builtins();
    pthread_mutex_lock(&reg_lock);
    int i = find_locked(name, false);
    const char *o = i >= 0 ? reg[i].origin : NULL; /* entries are never removed: stays valid */
    pthread_mutex_unlock(&reg_lock);
    return o;
}

/* Comma-separated registered names (optionally only positional schemes) for error messages. */
void mg_reg_names(char *buf, size_t n, bool schemes) {
    ensure_builtins();
    buf[0] = 0;
    pthread_mutex_lock(&reg_lock);
    size_t len = 0;
    for (int i = 0; i < reg_n; i++) {
        const char *k = schemes ? reg[i].vt->pos_scheme : reg[i].vt->name;
        if (!k) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", k);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
    pthread_mutex_unlock(&reg_lock);
}

/* ---- instances ---- */

struct mg_layer {
    const mg_layer_vtable *vt;
    char *prefix, *local;
    void *state;
    char shape[64];
    /* the output shape as `shape` declares it (mg_layer_set_shape), checked after every forward:
     * n_decl dims (-1: nothing to check), the last ones when decl_more ("(...,768)"); decl[i] is a
     * size, or -1 for a name ("B") */
    int n_decl;
    bool decl_more;
    int64_t decl[MG_MAX_DIMS];
    int64_t pos_limit;
    mg_tensor **params;
    int n_params, cap_params;
    mg_layer **children;
    int n_children, cap_children;
    /* children by local name once there are many (a GPT has one per block): slot[h] is 1 + the
     * child's index, 0 empty; n_slots is 0 or a power of two at least 2 * n_children */
    int *slot;
    size_t n_slots;
    /* misuse found outside forward (mg_layer_fail_next_forward), raised by the next one */
    char pending[160];
};

void mg_layer_free(mg_layer *l) {
    if (!l) return;
    if (l->vt && l->vt->destroy) l->vt->destroy(l);
    for (int i = 0; i < l->n_children; i++) mg_layer_free(l->children[i]);
    free(l->children);
    free(l->slot);
    free(l->params);
    free(l->state);
    free(l->prefix);
    free(l->local);
    free(l);
}

/* A zeroed instance of vt named prefix (local: its name under its parent), or NULL with the error set. */
static mg_layer *instance_new(const mg_layer_vtable *vt, const char *prefix, const char *local) {
    mg_layer *l = calloc(1, sizeof *l);
    if (!l || !(l->prefix = strdup(prefix)) || !(l->local = strdup(local)) ||
        (vt->instance_size && !(l->state = calloc(1, vt->instance_size)))) {
        mg_layer_free(l);
        mg_set_error(MG_ERR_NOMEM, "layer '%s' (%s): out of memory", prefix, vt->name);
        return NULL;
    }
    snprintf(l->shape, sizeof l->shape, "?");
    l->n_decl = -1;
    return l;
}

mg_layer *mg_layer_new(const mg_layer_vtable *vt, const char *prefix, mg_params *params, mg_layer_init_fn init,
                       const void *cfg) {
    if (!prefix) prefix = "";
    if (!vt || !init || !cfg) {
        mg_set_error(MG_ERR_INVALID, "layer '%s': mg_layer_new needs a vtable, an init function and a config",
                     prefix);
        return NULL;
    }
    mg_layer *l = instance_new(vt, prefix, prefix);
    if (!l) return NULL;
    mg_status st = init(l, cfg, params);
    l->vt = vt; /* destroy runs on failure too: it must cope with a half-built (zeroed) state */
    if (st != MG_OK) {
        mg_layer_free(l);
        return NULL;
    }
    return l;
}

static mg_status create_named(const char *type, const char *prefix, const char *local, mg_config *cfg,
                              mg_params *params, mg_layer **out) {
    *out = NULL;
    const mg_layer_vtable *vt = mg_layer_find(type);
    if (!vt) { /* not registered: any plugin on the search path may provide it */
        if (!type) return mg_set_error(MG_ERR_NOT_FOUND, "unknown layer '(null)'");
        mg_status st = mg_layer_find_or_load(type, &vt);
        if (st != MG_OK) return mg_wrap_error(st, "unknown layer '%s'", type);
    }
    mg_config *own = NULL;
    if (!cfg) {
        char label[300];
        snprintf(label, sizeof label, "layer '%s' (%s)", prefix, vt->name);
        if (!(cfg = own = mg_config_new(label))) return MG_ERR_NOMEM;
    }
    mg_layer *l = instance_new(vt, prefix, local);
    if (!l) {
        mg_config_free(own);
        return MG_ERR_NOMEM;
    }
    mg_status st = vt->create(l, cfg, params);
    l->vt = vt; /* destroy runs on failure too: it must cope with a half-built (zeroed) state */
    if (st == MG_OK) st = mg_config_status(cfg);
    if (st == MG_OK) {
        st = mg_config_check_used(cfg);
    } else {
        /* A typo'd key often shows up first as a missing one: name the unknown key too. */
        char first[1024];
        snprintf(first, sizeof first, "%s", mg_last_error());
        if (mg_config_check_used(cfg) != MG_OK) mg_wrap_error(st, "%s; and", first);
        else mg_set_error(st, "%s", first);
    }
    mg_config_free(own);
    if (st != MG_OK) {
        mg_layer_free(l);
        return st;
    }
    *out = l;
    return MG_OK;
}

mg_status mg_layer_create(const char *type, const char *prefix, mg_config *cfg, mg_params *params, mg_layer **out) {
    if (!prefix) prefix = "";
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_layer_create: layer '%s' (%s): out is NULL", prefix, type ? type : "(null)");
    return create_named(type, prefix, prefix, cfg, params, out);
}

/* ---- children by name ---- */

enum { CHILD_INDEX_FROM = 16 }; /* fewer children are searched in order */

/* The slot holding the first child named `local`, or the empty slot where it would go. */
static size_t child_slot(const mg_layer *l, const char *local) {
    size_t mask = l->n_slots - 1, i = (size_t)mg_str_hash(local) & mask;
    while (l->slot[i] && strcmp(l->children[l->slot[i] - 1]->local, local) != 0) i = (i + 1) & mask;
    return i;
}

/* Indexes the newest child (a name already there keeps its first child, as a search in order
 * would find). Without memory for the table the index is dropped: searches go in order. */
static void index_child(mg_layer *l) {
    int n = l->n_children;
    if (n < CHILD_INDEX_FROM) return;
    if ((size_t)n > l->n_slots / 2) {
        size_t n_slots = l->n_slots ? 2 * l->n_slots : 4 * CHILD_INDEX_FROM;
        free(l->slot);
        l->n_slots = 0;
        if (!(l->slot = calloc(n_slots, sizeof *l->slot))) return;
        l->n_slots = n_slots;
        for (int i = 0; i < n - 1; i++) {
            size_t k = child_slot(l, l->children[i]->local);
            if (!l->slot[k]) l->slot[k] = i + 1;
        }
    }
    size_t k = child_slot(l, l->children[n - 1]->local);
    if (!l->slot[k]) l->slot[k] = n;
}

mg_status mg_layer_child(mg_layer *self, const char *local, const char *type, mg_config *cfg, mg_params *params,
                         mg_layer **out) {
    if (out) *out = NULL;
    char prefix[512];
    if (!local || !*local)
        snprintf(prefix, sizeof prefix, "%s", self->prefix);
    else if (*self->prefix)
        snprintf(prefix, sizeof prefix, "%s.%s", self->prefix, local);
    else
        snprintf(prefix, sizeof prefix, "%s", local);
    if (self->n_children == self->cap_children) {
        int cap = self->cap_children ? 2 * self->cap_children : 4;
        mg_layer **c = realloc(self->children, (size_t)cap * sizeof *c);
        if (!c) return mg_set_error(MG_ERR_NOMEM, "layer '%s': out of memory", self->prefix);
        self->children = c, self->cap_children = cap;
    }
    mg_layer *child;
    mg_status st = create_named(type, prefix, local ? local : "", cfg, params, &child);
    if (st != MG_OK) return st;
    self->children[self->n_children++] = child;
    index_child(self);
    if (out) *out = child;
    return MG_OK;
}

mg_tensor *mg_layer_param(mg_layer *self, mg_params *params, const char *local, int ndim, const int64_t *shape,
                          mg_init init, uint32_t flags) {
    char name[512];
    if (!params) {
        mg_set_error(MG_ERR_INVALID, "layer '%s': parameter '%s' has no store to go in (params is NULL)",
                     self->prefix, local ? local : "(null)");
        return NULL;
    }
    if (*self->prefix)
        snprintf(name, sizeof name, "%s.%s", self->prefix, local);
    else
        snprintf(name, sizeof name, "%s", local);
    if (self->n_params == self->cap_params) {
        int cap = self->cap_params ? 2 * self->cap_params : 4;
        mg_tensor **p = realloc(self->params, (size_t)cap * sizeof *p);
        if (!p) {
            mg_set_error(MG_ERR_NOMEM, "layer '%s': out of memory", self->prefix);
            return NULL;
        }
        self->params = p, self->cap_params = cap;
    }
    mg_tensor *t = mg_params_add(params, name, ndim, shape, init, flags);
    if (t) self->params[self->n_params++] = t;
    return t;
}

mg_tensor *mg_layer_buffer(mg_layer *self, mg_params *params, const char *local, int ndim, const int64_t *shape,
                           mg_init init) {
    return mg_layer_param(self, params, local, ndim, shape, init, MG_BUFFER | MG_NO_DECAY);
}

mg_tensor *mg_layer_get_param(const mg_layer *l, const char *local) {
    size_t plen = strlen(l->prefix);
    for (int i = 0; i < l->n_params; i++) {
        const char *n = l->params[i]->name;
        if (plen && (strncmp(n, l->prefix, plen) != 0 || n[plen] != '.')) continue;
        if (strcmp(n + (plen ? plen + 1 : 0), local) == 0) return l->params[i];
    }
    return NULL;
}

/* ---- what a forward returns ---- */

/* Raises on ctx, naming the layer, its kind and where the kind comes from. */
static void output_fail(mg_layer *l, mg_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void output_fail(mg_layer *l, mg_ctx *ctx, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *origin = mg_layer_origin(l->vt->name);
    bool plugin = origin && strcmp(origin, "built-in") != 0 && strcmp(origin, "program") != 0;
    mg_ctx_push_scope(ctx, ""); /* the message names the layer itself: no enclosing layer's prefix */
    mg_ctx_fail(ctx, "layer '%s' (%s, %s%s): %s", *l->prefix ? l->prefix : "(model)", l->vt->name,
                plugin ? "from plugin " : "", origin ? (strcmp(origin, "program") == 0 ? "registered by the program" : origin)
                                                     : "not registered",
                msg);
    mg_ctx_pop_scope(ctx);
}

/* Whether y is a well-formed tensor: known dtype, 0..MG_MAX_DIMS dims of sizes >= 0 whose product
 * is numel, data present. A forward that breaks this would crash the ops after it. */
static bool well_formed(const mg_tensor *y, char *why, size_t n) {
    if (y->dtype != MG_F32 && y->dtype != MG_I32) return snprintf(why, n, "of unknown dtype %d", (int)y->dtype), false;
    if (y->ndim < 0 || y->ndim > MG_MAX_DIMS)
        return snprintf(why, n, "of %d dims (0..%d are possible)", y->ndim, MG_MAX_DIMS), false;
    int64_t numel = 1;
    for (int d = 0; d < y->ndim; d++)
        if (y->shape[d] < 0 || __builtin_mul_overflow(numel, y->shape[d], &numel))
            return snprintf(why, n, "with a bad size %lld in dim %d", (long long)y->shape[d], d), false;
    if (numel != y->numel)
        return snprintf(why, n, "%s that claims %lld elements", MG_LSHAPE(y), (long long)y->numel), false;
    if (numel > 0 && !y->data) return snprintf(why, n, "%s without data", MG_LSHAPE(y)), false;
    return true;
}

/* Reads the declaration in l->shape: "(B,T,768)", "(...,768)"; anything else ("?", free text)
 * declares nothing that can be checked. */
static void parse_declared(mg_layer *l) {
    l->n_decl = -1, l->decl_more = false;
    const char *s = l->shape;
    size_t len = strlen(s);
    if (len < 2 || s[0] != '(' || s[len - 1] != ')') return;
    int n = 0;
    bool more = false;
    for (const char *p = s + 1; p < s + len - 1;) {
        const char *end = p;
        while (end < s + len - 1 && *end != ',') end++;
        while (p < end && *p == ' ') p++;
        size_t k = (size_t)(end - p);
        while (k && p[k - 1] == ' ') k--;
        if (k == 3 && strncmp(p, "...", 3) == 0 && n == 0 && !more) {
            more = true;
        } else if (k == 0 || n == MG_MAX_DIMS) {
            return;
        } else if (p[0] >= '0' && p[0] <= '9') {
            int64_t v = 0;
            for (size_t i = 0; i < k; i++) {
                if (p[i] < '0' || p[i] > '9' || v > (INT64_MAX - 9) / 10) return;
                v = 10 * v + (p[i] - '0');
            }
            l->decl[n++] = v;
        } else {
            for (size_t i = 0; i < k; i++)
                if (!((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') || p[i] == '_' ||
                      (i && p[i] >= '0' && p[i] <= '9')))
                    return;
            l->decl[n++] = -1;
        }
        p = end + (end < s + len - 1);
    }
    l->n_decl = n, l->decl_more = more;
}

/* Whether y agrees with the declared shape: each size is the output's dim at that place, counted
 * from the end (a name matches any size). Fewer dims than the last size needs is a mismatch; more
 * are let through, since a layer may take more leading dims than its declaration shows. */
static bool as_declared(const mg_layer *l, const mg_tensor *y) {
    for (int i = 0; i < l->n_decl; i++) {
        if (l->decl[i] < 0) continue;
        int d = y->ndim - (l->n_decl - i);
        if (d < 0 || y->shape[d] != l->decl[i]) return false;
    }
    return true;
}

/* Checks what forward gave back: never NULL, well formed, as declared, and with `ndim` dims of
 * `shape` (-1: any) when ndim >= 0. On a fault, raises and returns the placeholder. */
static mg_tensor *checked(mg_layer *l, mg_ctx *ctx, mg_tensor *y, int ndim, const int64_t *shape) {
    if (!mg_ctx_ok(ctx)) return y ? y : mg_ctx_dummy(ctx); /* the layer raised: its message stands */
    char why[200];
    if (!y) {
        output_fail(l, ctx, "forward returned NULL (a layer returns a tensor, or raises on ctx and returns "
                            "mg_ctx_dummy)");
        return mg_ctx_dummy(ctx);
    }
    if (!well_formed(y, why, sizeof why)) {
        output_fail(l, ctx, "forward returned a tensor %s", why);
        return mg_ctx_dummy(ctx);
    }
    if (l->n_decl >= 0 && !as_declared(l, y)) {
        output_fail(l, ctx, "forward returned %s, but the layer declares its output %s", MG_LSHAPE(y), l->shape);
        return mg_ctx_dummy(ctx);
    }
    bool ok = ndim < 0 || y->ndim == ndim;
    for (int d = 0; ok && ndim > 0 && d < ndim; d++) ok = shape[d] < 0 || y->shape[d] == shape[d];
    if (!ok) {
        char want[160] = "(";
        for (int d = 0; d < ndim; d++) {
            size_t k = strlen(want);
            if (shape[d] < 0)
                snprintf(want + k, sizeof want - k, "%s*", d ? "," : "");
            else
                snprintf(want + k, sizeof want - k, "%s%lld", d ? "," : "", (long long)shape[d]);
        }
        size_t k = strlen(want);
        snprintf(want + k, sizeof want - k, ")");
        output_fail(l, ctx, "forward returned %s, but the caller needs %s", MG_LSHAPE(y), want);
        return mg_ctx_dummy(ctx);
    }
    return y;
}

/* Runs vt->forward inside the error scope "<prefix> (<kind>)" (the kind alone at a root), so that
 * an op failing anywhere inside names the innermost layer; popped whatever forward did. */
static mg_tensor *scoped_forward(mg_layer *l, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    static const mg_fwd zero;
    char label[MG_SCOPE_LABEL_MAX];
    if (*l->prefix)
        snprintf(label, sizeof label, "%s (%s)", l->prefix, l->vt->name);
    else
        snprintf(label, sizeof label, "%s", l->vt->name);
    mg_ctx_push_scope(ctx, label);
    mg_tensor *y = l->vt->forward(l, ctx, x, args ? args : &zero);
    mg_ctx_pop_scope(ctx);
    return y;
}

void mg_layer_fail_next_forward(mg_layer *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->pending, sizeof l->pending, fmt, ap);
    va_end(ap);
}

/* The first parameter declared in l's subtree (l first, then its children depth first), or NULL. */
static const mg_tensor *first_param(const mg_layer *l) {
    if (l->n_params) return l->params[0];
    for (int i = 0; i < l->n_children; i++) {
        const mg_tensor *t = first_param(l->children[i]);
        if (t) return t;
    }
    return NULL;
}

/* What every forward entry checks before running the layer: a layer, an input, and parameters
 * with data (a layer's parameters all live in one store, allocated at once, so the first one
 * tells). On a fault, raises on ctx naming `fn` or the layer and returns false. */
static bool forward_ready(const char *fn, mg_layer *l, mg_ctx *ctx, const mg_tensor *x) {
    if (!l) {
        mg_ctx_fail(ctx, "%s: the layer is NULL", fn);
        return false;
    }
    if (l->pending[0]) {
        output_fail(l, ctx, "%s", l->pending);
        l->pending[0] = '\0';
        return false;
    }
    if (!x) {
        output_fail(l, ctx, "%s: x is NULL", fn);
        return false;
    }
    const mg_tensor *p = first_param(l);
    if (p && !p->data && p->numel > 0) {
        output_fail(l, ctx, "its parameters are not allocated ('%s' has no data): call mg_params_alloc on their "
                            "store before the first forward", p->name ? p->name : "?");
        return false;
    }
    return true;
}

mg_tensor *mg_layer_forward(mg_layer *l, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!forward_ready("mg_layer_forward", l, ctx, x)) return mg_ctx_dummy(ctx);
    return checked(l, ctx, scoped_forward(l, ctx, x, args), -1, NULL);
}

mg_tensor *mg_layer_forward_normed(mg_layer *l, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    static const mg_fwd zero;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!forward_ready("mg_layer_forward", ln, ctx, x) || !forward_ready("mg_layer_forward", l, ctx, x))
        return mg_ctx_dummy(ctx);
    mg_tensor *(*normed)(mg_layer *, mg_layer *, mg_ctx *, mg_tensor *, const mg_fwd *) =
        l->vt == &mg_layer_self_attention ? mg_self_attention_normed : l->vt == &mg_layer_mlp ? mg_mlp_normed : NULL;
    if (!normed) return mg_layer_forward(l, ctx, mg_layer_forward(ln, ctx, x, args), args);
    char label[MG_SCOPE_LABEL_MAX]; /* as scoped_forward */
    if (*l->prefix)
        snprintf(label, sizeof label, "%s (%s)", l->prefix, l->vt->name);
    else
        snprintf(label, sizeof label, "%s", l->vt->name);
    mg_ctx_push_scope(ctx, label);
    mg_tensor *y = normed(l, ln, ctx, x, args ? args : &zero);
    mg_ctx_pop_scope(ctx);
    return checked(l, ctx, y, -1, NULL);
}

mg_tensor *mg_layer_forward_expect(mg_layer *l, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args, int ndim,
                                   const int64_t *shape) {
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    if (!forward_ready("mg_layer_forward_expect", l, ctx, x)) return mg_ctx_dummy(ctx);
    if (ndim > MG_MAX_DIMS || (ndim > 0 && !shape)) {
        mg_ctx_fail(ctx, "mg_layer_forward_expect: layer '%s': %d expected dims%s", l->prefix, ndim,
                    ndim > MG_MAX_DIMS ? " is too many" : " but no shape");
        return mg_ctx_dummy(ctx);
    }
    return checked(l, ctx, scoped_forward(l, ctx, x, args), ndim, shape);
}

const mg_layer_vtable *mg_layer_vt(const mg_layer *l) { return l->vt; }
const char *mg_layer_prefix(const mg_layer *l) { return l->prefix; }
void *mg_layer_state(const mg_layer *l) { return l->state; }

void mg_layer_set_shape(mg_layer *self, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->shape, sizeof self->shape, fmt, ap);
    va_end(ap);
    parse_declared(self);
}

void mg_layer_set_pos_limit(mg_layer *self, int64_t n) { self->pos_limit = n > 0 ? n : 0; }
int64_t mg_layer_pos_limit(const mg_layer *l) { return l->pos_limit; }
int mg_layer_child_count(const mg_layer *l) { return l->n_children; }
mg_layer *mg_layer_child_at(const mg_layer *l, int i) { return i >= 0 && i < l->n_children ? l->children[i] : NULL; }

mg_layer *mg_layer_find_child(const mg_layer *l, const char *local) {
    if (!local) return NULL;
    if (l->n_slots && l->n_children >= CHILD_INDEX_FROM) {
        int k = l->slot[child_slot(l, local)];
        return k ? l->children[k - 1] : NULL;
    }
    for (int i = 0; i < l->n_children; i++)
        if (strcmp(l->children[i]->local, local) == 0) return l->children[i];
    return NULL;
}

mg_layer *mg_layer_find_positional(mg_layer *l) {
    if (!l) return NULL;
    if (l->vt->pos_scheme) return l;
    for (int i = 0; i < l->n_children; i++) {
        mg_layer *p = mg_layer_find_positional(l->children[i]);
        if (p) return p;
    }
    return NULL;
}

void mg_layer_visit_params(mg_layer *l, mg_param_visitor fn, void *user) {
    if (l->vt->visit_params) {
        l->vt->visit_params(l, fn, user);
        return;
    }
    for (int i = 0; i < l->n_params; i++) fn(user, l->params[i]->name, l->params[i]);
    for (int i = 0; i < l->n_children; i++) mg_layer_visit_params(l->children[i], fn, user);
}

static void count_visit(void *user, const char *name, mg_tensor *t) {
    (void)name;
    *(int64_t *)user += t->numel;
}

int64_t mg_layer_numel(mg_layer *l) {
    int64_t n = 0;
    mg_layer_visit_params(l, count_visit, &n);
    return n;
}

static void count_trainable_visit(void *user, const char *name, mg_tensor *t) {
    (void)name;
    if (mg_param_trainable(t)) *(int64_t *)user += t->numel;
}

int64_t mg_layer_trainable_numel(mg_layer *l) {
    int64_t n = 0;
    mg_layer_visit_params(l, count_trainable_visit, &n);
    return n;
}

/* ---- the summary table ---- */

static void emit(FILE *f, const char *line) {
    if (f)
        fprintf(f, "%s\n", line);
    else
        mg_log(MG_LOG_INFO, "%s", line);
}

void mg_fmt_count(int64_t n, char *buf, size_t len) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)n);
    size_t d = strlen(tmp), o = 0;
    for (size_t i = 0; i < d && o + 1 < len; i++) {
        if (i && (d - i) % 3 == 0 && o + 2 < len) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
}

static void print_rows(mg_layer *l, int depth, FILE *f) {
    char name[160], own[160] = "", count[32], line[512];
    snprintf(name, sizeof name, "%*s%s", 2 * depth, "", *l->prefix ? l->prefix : "(model)");
    size_t o = 0;
    for (int i = 0; i < l->n_params && o < sizeof own; i++) {
        const mg_tensor *t = l->params[i];
        const char *local = strrchr(t->name, '.');
        local = local ? local + 1 : t->name;
        char shp[64];
        o += (size_t)snprintf(own + o, sizeof own - o, "%s%s %s", i ? ", " : "", local, mg_shape_str(t, shp, sizeof shp));
    }
    mg_fmt_count(mg_layer_numel(l), count, sizeof count);
    snprintf(line, sizeof line, "%-26s %-24s %-12s %-34s %12s", name, l->vt->name, l->shape, own, count);
    emit(f, line);
    for (int i = 0; i < l->n_children; i++)
        if (strcmp(l->children[i]->prefix, l->prefix) != 0 || l->children[i]->n_params || l->children[i]->n_children)
            print_rows(l->children[i], depth + 1, f);
}

void mg_layer_print_rows(mg_layer *const *layers, int n, FILE *f) {
    char line[512], count[32];
    snprintf(line, sizeof line, "%-26s %-24s %-12s %-34s %12s", "layer", "kind", "output", "parameters", "count");
    emit(f, line);
    int64_t total = 0, trainable = 0;
    for (int i = 0; i < n; i++) {
        print_rows(layers[i], 0, f);
        total += mg_layer_numel(layers[i]);
        trainable += mg_layer_trainable_numel(layers[i]);
    }
    mg_fmt_count(total, count, sizeof count);
    char part[64] = "";
    if (trainable != total) {
        char tc[32];
        mg_fmt_count(trainable, tc, sizeof tc);
        snprintf(part, sizeof part, ", %s trainable", tc);
    }
    double kib = (double)total * 4.0 / 1024.0;
    snprintf(line, sizeof line, "total: %s parameters%s (%.1f %s as float32)", count, part,
             kib >= 1024.0 ? kib / 1024.0 : kib, kib >= 1024.0 ? "MiB" : "KiB");
    emit(f, line);
}

void mg_layer_print(mg_layer *l, FILE *f) { mg_layer_print_rows(&l, 1, f); }
