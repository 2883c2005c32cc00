/* The parameter store: declare, then one allocation per slab.
 *
 * Names are indexed by an open-addressing hash table (linear probing, kept at most half full), so
 * declaring n parameters costs O(n) name comparisons rather than the O(n^2) of checking each new
 * name against all earlier ones: a model may declare hundreds of thousands of them. */
#include "minigrad/params.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mg_tensor t;
    mg_init init;
    int64_t offset;
    char *name;
    uint64_t hash; /* of name, kept so that growing the table rehashes no string */
} param;

struct mg_params {
    param **v;
    int n, cap;
    /* slot[h] is 1 + the index in v of a parameter, or 0 for an empty slot; n_slots is 0 or a
     * power of two at least 2 * n */
    int *slot;
    size_t n_slots;
    float *data, *grad;
    int64_t size;
};

/* The slot that holds `name`, or the empty slot where it would go. Needs n_slots > 0. */
static size_t slot_of(const mg_params *p, const char *name, uint64_t h) {
    size_t mask = p->n_slots - 1, i = (size_t)h & mask;
    for (;;) {
        int k = p->slot[i];
        if (!k) return i;
        const param *q = p->v[k - 1];
        if (q->hash == h && strcmp(q->name, name) == 0) return i;
        i = (i + 1) & mask;
    }
}

/* Makes room for one more name: doubles the table (and rehashes) when it would pass half full. */
static bool reserve_slot(mg_params *p) {
    if ((size_t)p->n + 1 <= p->n_slots / 2) return true;
    size_t n_slots = p->n_slots ? 2 * p->n_slots : 64;
    int *slot = calloc(n_slots, sizeof *slot);
    if (!slot) return false;
    for (int i = 0; i < p->n; i++) {
        size_t j = (size_t)p->v[i]->hash & (n_slots - 1);
        while (slot[j]) j = (j + 1) & (n_slots - 1);
        slot[j] = i + 1;
    }
    free(p->slot);
    p->slot = slot;
    p->n_slots = n_slots;
    return true;
}

mg_params *mg_params_new(void) { return calloc(1, sizeof(mg_params)); }

void mg_params_free(mg_params *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        free(p->v[i]->name);
        free(p->v[i]);
    }
    free(p->v);
    free(p->slot);
    mg_aligned_free(p->data);
    mg_aligned_free(p->grad);
    free(p);
}

static bool valid_init(const char *name, mg_init init);

mg_tensor *mg_params_add(mg_params *p, const char *name, int ndim, const int64_t *shape, mg_init init,
                         uint32_t flags) {
    if (p->data) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s' declared after mg_params_alloc", name ? name : "?");
        return NULL;
    }
    if (!name || !*name) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: a parameter needs a name");
        return NULL;
    }
    uint64_t h = mg_str_hash(name);
    if (p->n_slots && p->slot[slot_of(p, name, h)]) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: duplicate parameter name '%s'", name);
        return NULL;
    }
    if (ndim < 0 || ndim > MG_MAX_DIMS) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s' has %d dims (0..%d allowed)", name, ndim, MG_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s': shape is NULL for %d dims", name, ndim);
        return NULL;
    }
    if (!valid_init(name, init)) return NULL;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) {
            mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s' dim %d is %lld (must be > 0)", name, i,
                         (long long)shape[i]);
            return NULL;
        }
        if (__builtin_mul_overflow(numel, shape[i], &numel)) {
            mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s' has more than 2^63 elements", name);
            return NULL;
        }
    }
    if (p->n == INT32_MAX) {
        mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s': the store is full (%d parameters)", name, p->n);
        return NULL;
    }
    if (!reserve_slot(p)) goto nomem;
    if (p->n == p->cap) {
        int cap = !p->cap ? 16 : p->cap > INT32_MAX / 2 ? INT32_MAX : 2 * p->cap;
        param **v = realloc(p->v, (size_t)cap * sizeof *v);
        if (!v) goto nomem;
        p->v = v;
        p->cap = cap;
    }
    param *q = calloc(1, sizeof *q);
    if (!q) goto nomem;
    q->name = strdup(name);
    if (!q->name) {
        free(q);
        goto nomem;
    }
    q->t.ndim = ndim;
    for (int i = 0; i < ndim; i++) q->t.shape[i] = shape[i];
    q->t.numel = numel;
    q->t.dtype = MG_F32;
    if (flags & MG_BUFFER) flags &= ~(uint32_t)MG_FROZEN;
    q->t.flags = flags | MG_PARAM | (flags & (MG_BUFFER | MG_FROZEN) ? 0u : (uint32_t)MG_REQUIRES_GRAD);
    q->t.name = q->name;
    q->init = init;
    q->hash = h;
    p->v[p->n] = q;
    p->slot[slot_of(p, name, h)] = ++p->n;
    return &q->t;
nomem:
    mg_set_error(MG_ERR_NOMEM, "mg_params_add: out of memory declaring '%s'", name);
    return NULL;
}

/* An initialiser that would fill the parameter with NaN, infinities or values from an empty
 * range is refused where it is declared, naming the parameter. */
static bool valid_init(const char *name, mg_init init) {
    const double a = init.a, b = init.b;
    switch (init.kind) {
    case MG_INIT_ZEROS:
    case MG_INIT_ONES: return true;
    case MG_INIT_CONST:
        if (isfinite(a)) return true;
        mg_set_error(MG_ERR_INVALID, "mg_params_add: '%s': constant initialiser value %g is not finite", name, a);
        return false;
    case MG_INIT_UNIFORM:
        if (isfinite(a) && isfinite(b) && a <= b && isfinite(init.b - init.a)) return true;
        mg_set_error(MG_ERR_INVALID,
                     "mg_params_add: '%s': uniform initialiser [%g, %g) needs finite bounds with lo <= hi "
                     "(and hi - lo finite in float)",
                     name, a, b);
        return false;
    case MG_INIT_NORMAL:
        if (isfinite(a) && isfinite(b) && b >= 0) return true;
        mg_set_error(MG_ERR_INVALID,
                     "mg_params_add: '%s': normal initialiser (mean %g, std %g) needs a finite mean and a finite "
                     "std >= 0",
                     name, a, b);
        return false;
    }
    mg_set_error(MG_ERR_INVALID,
                 "mg_params_add: '%s': unknown initialiser kind %d (expected MG_INIT_ZEROS .. MG_INIT_NORMAL)", name,
                 (int)init.kind);
    return false;
}

static void run_init(param *q, mg_rng *rng) {
    float *d = q->t.data;
    for (int64_t i = 0; i < q->t.numel; i++) {
        switch (q->init.kind) {
        case MG_INIT_ZEROS: d[i] = 0.0f; break;
        case MG_INIT_ONES: d[i] = 1.0f; break;
        case MG_INIT_CONST: d[i] = q->init.a; break;
        case MG_INIT_UNIFORM: d[i] = mg_rng_range(rng, q->init.a, q->init.b); break;
        case MG_INIT_NORMAL: d[i] = q->init.a + q->init.b * mg_rng_normal(rng); break;
        }
    }
}

mg_status mg_params_alloc(mg_params *p, mg_rng *rng) {
    if (p->data) return mg_set_error(MG_ERR_INVALID, "mg_params_alloc: already allocated");
    /* both slabs together stay addressable: 2 * off floats fit in an int64_t of bytes */
    const int64_t most = INT64_MAX / (2 * (int64_t)sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < p->n; i++) {
        p->v[i]->offset = off;
        if (p->v[i]->t.numel > most - 16 - off)
            return mg_set_error(MG_ERR_NOMEM, "mg_params_alloc: '%s' takes the store past 2^60 floats",
                                p->v[i]->name);
        off += (p->v[i]->t.numel + 15) / 16 * 16;
        mg_init_kind k = p->v[i]->init.kind;
        if (!rng && (k == MG_INIT_UNIFORM || k == MG_INIT_NORMAL))
            return mg_set_error(MG_ERR_INVALID, "mg_params_alloc: '%s' has a random initialiser but no generator was given",
                                p->v[i]->name);
    }
    size_t bytes = (size_t)(off ? off : 16) * sizeof(float);
    p->data = mg_aligned_alloc(bytes);
    p->grad = mg_aligned_alloc(bytes);
    if (!p->data || !p->grad) {
        mg_aligned_free(p->data);
        mg_aligned_free(p->grad);
        p->data = p->grad = NULL;
        return mg_set_error(MG_ERR_NOMEM, "mg_params_alloc: cannot allocate %zu bytes for %d parameters", 2 * bytes, p->n);
    }
    memset(p->data, 0, bytes);
    memset(p->grad, 0, bytes);
    p->size = off;
    for (int i = 0; i < p->n; i++) {
        param *q = p->v[i];
        q->t.data = p->data + q->offset;
        q->t.grad = p->grad + q->offset;
        run_init(q, rng);
    }
    return MG_OK;
}

bool mg_params_allocated(const mg_params *p) { return p->data != NULL; }
int mg_params_len(const mg_params *p) { return p->n; }
mg_tensor *mg_params_at(const mg_params *p, int i) { return i >= 0 && i < p->n ? &p->v[i]->t : NULL; }

mg_tensor *mg_params_find(const mg_params *p, const char *name) {
    if (!name || !p->n_slots) return NULL;
    int k = p->slot[slot_of(p, name, mg_str_hash(name))];
    return k ? &p->v[k - 1]->t : NULL;
}

int64_t mg_params_numel(const mg_params *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n; i++) n += p->v[i]->t.numel;
    return n;
}

int64_t mg_params_trainable_numel(const mg_params *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n; i++)
        if (mg_param_trainable(&p->v[i]->t)) n += p->v[i]->t.numel;
    return n;
}

/* name exactly, or name + "." + anything; NULL or "" matches all. */
static bool selects(const char *name, size_t len, const char *pname, bool *exact) {
    *exact = len && strcmp(pname, name) == 0;
    return !len || *exact || (strncmp(pname, name, len) == 0 && pname[len] == '.');
}

mg_status mg_params_set_trainable(mg_params *p, const char *name, bool trainable) {
    size_t len = name ? strlen(name) : 0;
    int matched = 0;
    for (int i = 0; i < p->n; i++) {
        mg_tensor *t = &p->v[i]->t;
        bool exact;
        if (!selects(name, len, t->name, &exact)) continue;
        matched++;
        if (t->flags & MG_BUFFER) {
            if (exact && trainable)
                return mg_set_error(MG_ERR_INVALID, "mg_params_set_trainable: '%s' is a buffer, never trainable", name);
            continue;
        }
        if (trainable) {
            t->flags = (t->flags & ~(uint32_t)MG_FROZEN) | MG_REQUIRES_GRAD;
        } else {
            t->flags = (t->flags & ~(uint32_t)MG_REQUIRES_GRAD) | MG_FROZEN;
            if (t->grad) memset(t->grad, 0, (size_t)t->numel * sizeof(float));
        }
    }
    if (!matched && len)
        return mg_set_error(MG_ERR_NOT_FOUND, "mg_params_set_trainable: no parameter is named '%s' or lies under '%s.'",
                            name, name);
    return MG_OK;
}

float *mg_params_data(const mg_params *p) { return p->data; }
float *mg_params_grad(const mg_params *p) { return p->grad; }
int64_t mg_params_slab_size(const mg_params *p) { return p->size; }
int64_t mg_params_offset(const mg_params *p, int i) { return p->v[i]->offset; }

void mg_params_zero_grad(mg_params *p) {
    if (p->grad) memset(p->grad, 0, (size_t)p->size * sizeof(float));
}
