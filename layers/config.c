/* Key/value configs with sticky typed getters, and the INI-like config file parser.
 * Every entry remembers its file and line, so an error points at the text the user wrote.
 * Keys are indexed by an open-addressing hash table, so that reading a file of n keys (each one
 * checked against the keys before it) takes O(n), not O(n^2): no config file can stall it. */
#include "minigrad/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *key, *value, *file;
    int line;
    bool offered; /* host context: may go unused */
    bool used;
    uint64_t hash; /* of key */
} entry;

struct mg_config {
    char *name;
    char *file; /* origin of the whole config (a section header), for missing keys */
    int line;
    entry *e;
    int n, cap;
    int *slot;      /* 1 + index in e of a key, or 0 (empty); n_slots: 0 or a power of two >= 2n */
    size_t n_slots;
    char **asked; /* every key a getter asked for, for the "known keys" hint */
    int n_asked, cap_asked;
    mg_status status;
    char err[1100];
};

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

mg_config *mg_config_new(const char *name) {
    mg_config *c = calloc(1, sizeof *c);
    if (!c || !(c->name = dupstr(name ? name : "config"))) {
        free(c);
        mg_set_error(MG_ERR_NOMEM, "mg_config_new: out of memory");
        return NULL;
    }
    return c;
}

void mg_config_free(mg_config *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].key), free(c->e[i].value), free(c->e[i].file);
    for (int i = 0; i < c->n_asked; i++) free(c->asked[i]);
    free(c->asked);
    free(c->e);
    free(c->slot);
    free(c->file);
    free(c->name);
    free(c);
}

const char *mg_config_name(const mg_config *c) { return c->name; }

void mg_config_set_origin(mg_config *c, const char *file, int line) {
    free(c->file);
    c->file = dupstr(file);
    c->line = line;
}

/* The slot holding key, or the empty slot where it would go. Needs n_slots > 0. */
static size_t slot_of(const mg_config *c, const char *key, uint64_t h) {
    size_t mask = c->n_slots - 1, i = (size_t)h & mask;
    while (c->slot[i]) {
        const entry *e = &c->e[c->slot[i] - 1];
        if (e->hash == h && strcmp(e->key, key) == 0) break;
        i = (i + 1) & mask;
    }
    return i;
}

static entry *find(const mg_config *c, const char *key) {
    if (!c->n_slots) return NULL;
    int k = c->slot[slot_of(c, key, mg_str_hash(key))];
    return k ? &c->e[k - 1] : NULL;
}

/* Room in the table for one more key: it doubles (and is rebuilt) before it passes half full. */
static bool reserve_slot(mg_config *c) {
    if ((size_t)c->n + 1 <= c->n_slots / 2) return true;
    size_t n_slots = c->n_slots ? 2 * c->n_slots : 16;
    int *slot = calloc(n_slots, sizeof *slot);
    if (!slot) return false;
    for (int i = 0; i < c->n; i++) {
        size_t j = (size_t)c->e[i].hash & (n_slots - 1);
        while (slot[j]) j = (j + 1) & (n_slots - 1);
        slot[j] = i + 1;
    }
    free(c->slot);
    c->slot = slot, c->n_slots = n_slots;
    return true;
}

static mg_status put(mg_config *c, const char *key, const char *value, const char *file, int line, bool offered) {
    if (!key || !*key || !value)
        return mg_set_error(MG_ERR_INVALID, "%s: a config entry needs a non-empty key and a value", c->name);
    entry *e = find(c, key);
    if (e) {
        if (offered && !e->offered) return MG_OK; /* what the user set wins over host context */
        char *v = strdup(value), *f = dupstr(file);
        if (!v || (file && !f)) {
            free(v), free(f);
            return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", c->name);
        }
        free(e->value), free(e->file);
        e->value = v, e->file = f, e->line = line, e->offered = offered, e->used = false;
        return MG_OK;
    }
    if (c->n == INT32_MAX) return mg_set_error(MG_ERR_INVALID, "%s: too many keys", c->name);
    if (!reserve_slot(c)) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", c->name);
    if (c->n == c->cap) {
        int cap = !c->cap ? 8 : c->cap > INT32_MAX / 2 ? INT32_MAX : 2 * c->cap;
        entry *ne = realloc(c->e, (size_t)cap * sizeof *ne);
        if (!ne) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", c->name);
        c->e = ne, c->cap = cap;
    }
    uint64_t h = mg_str_hash(key);
    entry n = {strdup(key), strdup(value), dupstr(file), line, offered, false, h};
    if (!n.key || !n.value || (file && !n.file)) {
        free(n.key), free(n.value), free(n.file);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", c->name);
    }
    c->e[c->n] = n;
    c->slot[slot_of(c, key, h)] = ++c->n;
    return MG_OK;
}

mg_status mg_config_set(mg_config *c, const char *key, const char *value) { return put(c, key, value, NULL, 0, false); }
mg_status mg_config_set_at(mg_config *c, const char *key, const char *value, const char *file, int line) {
    return put(c, key, value, file, line, false);
}
mg_status mg_config_offer(mg_config *c, const char *key, const char *value) { return put(c, key, value, NULL, 0, true); }

static mg_status putv(mg_config *c, const char *key, bool offered, const char *fmt, va_list ap) {
    char buf[512];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return mg_set_error(MG_ERR_INVALID, "%s: value of key '%s' is too long", c->name, key ? key : "?");
    return put(c, key, buf, NULL, 0, offered);
}

mg_status mg_config_setf(mg_config *c, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mg_status s = putv(c, key, false, fmt, ap);
    va_end(ap);
    return s;
}

mg_status mg_config_offerf(mg_config *c, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mg_status s = putv(c, key, true, fmt, ap);
    va_end(ap);
    return s;
}

mg_status mg_config_set_list(mg_config *c, const char *list) {
    if (!list) return MG_OK;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        if (len >= sizeof item) return mg_set_error(MG_ERR_INVALID, "%s: option list item too long: '%.40s...'", c->name, p);
        memcpy(item, p, len);
        item[len] = 0;
        char *eq = strchr(item, '=');
        /* trim both sides */
        char *k = item;
        while (isspace((unsigned char)*k)) k++;
        if (*k) {
            if (!eq || eq == k)
                return mg_set_error(MG_ERR_INVALID, "%s: option '%s' is not key=value", c->name, item);
            *eq = 0;
            char *v = eq + 1, *ke = eq;
            while (ke > k && isspace((unsigned char)ke[-1])) *--ke = 0;
            while (isspace((unsigned char)*v)) v++;
            char *ve = v + strlen(v);
            while (ve > v && isspace((unsigned char)ve[-1])) *--ve = 0;
            mg_status s = put(c, k, v, NULL, 0, false);
            if (s != MG_OK) return s;
        }
        if (!end) break;
        p = end + 1;
    }
    return MG_OK;
}

mg_status mg_config_copy(mg_config *dst, const mg_config *src) {
    for (int i = 0; i < src->n; i++) {
        const entry *e = &src->e[i];
        mg_status s = put(dst, e->key, e->value, e->file, e->line, e->offered);
        if (s != MG_OK) return s;
    }
    return MG_OK;
}

bool mg_config_has(const mg_config *c, const char *key) { return find(c, key) != NULL; }
int mg_config_len(const mg_config *c) { return c->n; }
const char *mg_config_key(const mg_config *c, int i) { return i >= 0 && i < c->n ? c->e[i].key : NULL; }
const char *mg_config_value(const mg_config *c, int i) { return i >= 0 && i < c->n ? c->e[i].value : NULL; }

/* ---- getters ---- */

static void note_asked(mg_config *c, const char *key) {
    for (int i = 0; i < c->n_asked; i++)
        if (strcmp(c->asked[i], key) == 0) return;
    if (c->n_asked == c->cap_asked) {
        int cap = c->cap_asked ? 2 * c->cap_asked : 8;
        char **a = realloc(c->asked, (size_t)cap * sizeof *a);
        if (!a) return; /* only the hint suffers */
        c->asked = a, c->cap_asked = cap;
    }
    char *k = strdup(key);
    if (k) c->asked[c->n_asked++] = k;
}

/* "file:line: name" for an entry or the config's origin, else just the name. */
static void where(const mg_config *c, const entry *e, char *buf, size_t n) {
    if (e && e->file)
        snprintf(buf, n, "%s:%d: %s", e->file, e->line, c->name);
    else if (c->file)
        snprintf(buf, n, "%s:%d: %s", c->file, c->line, c->name);
    else
        snprintf(buf, n, "%s", c->name);
}

const char *mg_config_where(const mg_config *c, const char *key, char *buf, size_t n) {
    where(c, key ? find(c, key) : NULL, buf, n);
    return buf;
}

static void fail(mg_config *c, const entry *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(mg_config *c, const entry *e, const char *fmt, ...) {
    if (c->status != MG_OK) return; /* keep the first */
    char w[512], m[512];
    where(c, e, w, sizeof w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "%s: %s", w, m);
    c->status = MG_ERR_INVALID;
    mg_set_error(c->status, "%s", c->err);
}

/* The entry for key, marked used; NULL when absent. */
static entry *lookup(mg_config *c, const char *key) {
    note_asked(c, key);
    entry *e = find(c, key);
    if (e) e->used = true;
    return e;
}

int64_t mg_config_int(mg_config *c, const char *key, int64_t def, int64_t min, int64_t max) {
    entry *e = lookup(c, key);
    if (!e) {
        if (def < min || def > max) fail(c, NULL, "missing required key '%s' (an integer)", key);
        return def;
    }
    if (c->status != MG_OK) return def;
    errno = 0;
    char *end;
    long long v = strtoll(e->value, &end, 10);
    if (end == e->value || *end || errno == ERANGE) {
        fail(c, e, "key '%s': expected an integer, got '%s'", key, e->value);
        return def;
    }
    if (v < min || v > max) {
        fail(c, e, "key '%s' = %lld is out of range [%lld, %lld]", key, v, (long long)min, (long long)max);
        return def;
    }
    return (int64_t)v;
}

double mg_config_float(mg_config *c, const char *key, double def, double min, double max) {
    entry *e = lookup(c, key);
    if (!e) {
        if (!(def >= min && def <= max)) fail(c, NULL, "missing required key '%s' (a number)", key);
        return def;
    }
    if (c->status != MG_OK) return def;
    errno = 0;
    char *end;
    double v = strtod(e->value, &end);
    if (end == e->value || *end || !isfinite(v)) {
        fail(c, e, "key '%s': expected a finite number, got '%s'", key, e->value);
        return def;
    }
    if (!(v >= min && v <= max)) {
        fail(c, e, "key '%s' = %g is out of range [%g, %g]", key, v, min, max);
        return def;
    }
    return v;
}

bool mg_config_bool(mg_config *c, const char *key, bool def) {
    entry *e = lookup(c, key);
    if (!e || c->status != MG_OK) return def;
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(e->value, yes[i]) == 0) return true;
        if (strcasecmp(e->value, no[i]) == 0) return false;
    }
    fail(c, e, "key '%s': expected true or false, got '%s'", key, e->value);
    return def;
}

const char *mg_config_str(mg_config *c, const char *key, const char *def) {
    entry *e = lookup(c, key);
    if (!e) {
        if (!def) fail(c, NULL, "missing required key '%s'", key);
        return def;
    }
    return e->value;
}

int mg_config_choice(mg_config *c, const char *key, const char *const *choices, int def) {
    entry *e = lookup(c, key);
    if (!e || c->status != MG_OK) return def;
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        if (strcmp(e->value, choices[i]) == 0) return i;
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", choices[i]);
    }
    fail(c, e, "key '%s': '%s' is not one of: %s", key, e->value, list);
    return def;
}

mg_status mg_config_status(const mg_config *c) {
    if (c->status != MG_OK) mg_set_error(c->status, "%s", c->err);
    return c->status;
}

mg_status mg_config_check_used(const mg_config *c) {
    for (int i = 0; i < c->n; i++) {
        const entry *e = &c->e[i];
        if (e->used || e->offered) continue;
        char w[512], known[512] = "";
        where(c, e, w, sizeof w);
        for (int k = 0; k < c->n_asked; k++) {
            size_t l = strlen(known);
            snprintf(known + l, sizeof known - l, "%s%s", k ? ", " : "", c->asked[k]);
        }
        if (c->n_asked)
            return mg_set_error(MG_ERR_INVALID, "%s: unknown key '%s' (known keys: %s)", w, e->key, known);
        return mg_set_error(MG_ERR_INVALID, "%s: unknown key '%s' (this takes no keys)", w, e->key);
    }
    return MG_OK;
}

/* ---- config files ---- */

typedef struct {
    char *name;
    int line;
    mg_config *cfg;
} section;

struct mg_cfg_file {
    char *path;
    section *s;
    int n, cap;
};

void mg_cfg_file_free(mg_cfg_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->s[i].name), mg_config_free(f->s[i].cfg);
    free(f->s);
    free(f->path);
    free(f);
}

const char *mg_cfg_file_path(const mg_cfg_file *f) { return f->path; }
int mg_cfg_file_count(const mg_cfg_file *f) { return f->n; }
const char *mg_cfg_file_section(const mg_cfg_file *f, int i) { return i >= 0 && i < f->n ? f->s[i].name : NULL; }
int mg_cfg_file_line(const mg_cfg_file *f, int i) { return i >= 0 && i < f->n ? f->s[i].line : 0; }
mg_config *mg_cfg_file_config(const mg_cfg_file *f, int i) { return i >= 0 && i < f->n ? f->s[i].cfg : NULL; }

static bool name_char(int ch) { return isalnum(ch) || ch == '_' || ch == '.' || ch == '+' || ch == '-'; }

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* Cuts a comment: '#' or ';' at the start or after whitespace. */
static void cut_comment(char *s) {
    for (char *p = s; *p; p++)
        if ((*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
            *p = 0;
            return;
        }
}

static mg_status add_section(mg_cfg_file *f, const char *name, int line) {
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        section *s = realloc(f->s, (size_t)cap * sizeof *s);
        if (!s) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", f->path);
        f->s = s, f->cap = cap;
    }
    char label[300];
    snprintf(label, sizeof label, "[%s]", name);
    section s = {strdup(name), line, mg_config_new(label)};
    if (!s.name || !s.cfg) {
        free(s.name), mg_config_free(s.cfg);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", f->path);
    }
    mg_config_set_origin(s.cfg, f->path, line);
    f->s[f->n++] = s;
    return MG_OK;
}

mg_status mg_cfg_file_parse(const char *text, const char *name, mg_cfg_file **out) {
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_cfg_file_parse: out is NULL");
    *out = NULL;
    if (!text) return mg_set_error(MG_ERR_INVALID, "%s: mg_cfg_file_parse: text is NULL", name ? name : "<config>");
    mg_cfg_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name ? name : "<config>"))) {
        free(f);
        return mg_set_error(MG_ERR_NOMEM, "mg_cfg_file_parse: out of memory");
    }
    mg_status st = MG_OK;
    int lineno = 0;
    const char *p = text;
    char buf[1024];
    while (*p && st == MG_OK) {
        lineno++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof buf) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: line longer than %zu characters", f->path, lineno, sizeof buf - 1);
            break;
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        p = nl ? nl + 1 : p + len;
        cut_comment(buf);
        char *s = trim(buf);
        if (!*s) continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close) {
                st = mg_set_error(MG_ERR_FORMAT, "%s:%d: section header '%s' has no closing ']'", f->path, lineno, s);
                break;
            }
            if (*trim(close + 1)) {
                st = mg_set_error(MG_ERR_FORMAT, "%s:%d: text after the section header: '%s'", f->path, lineno, close + 1);
                break;
            }
            *close = 0;
            char *nm = trim(s + 1);
            bool ok = *nm != 0;
            for (char *q = nm; *q && ok; q++) ok = name_char((unsigned char)*q);
            if (!ok) {
                st = mg_set_error(MG_ERR_FORMAT, "%s:%d: bad section name '[%s]' (letters, digits, _ . + -)", f->path,
                                  lineno, nm);
                break;
            }
            st = add_section(f, nm, lineno);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: expected '[section]' or 'key = value', got '%s'", f->path, lineno, s);
            break;
        }
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        bool ok = *key != 0;
        for (char *q = key; *q && ok; q++) ok = name_char((unsigned char)*q);
        if (!ok) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: bad key '%s' (letters, digits, _ . + -)", f->path, lineno, key);
            break;
        }
        if (!*val) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: key '%s' has no value", f->path, lineno, key);
            break;
        }
        if (f->n == 0) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: key '%s' comes before any [section]", f->path, lineno, key);
            break;
        }
        section *sec = &f->s[f->n - 1];
        const entry *dup = find(sec->cfg, key);
        if (dup) {
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: [%s] key '%s' is set twice (first on line %d)", f->path, lineno,
                              sec->name, key, dup->line);
            break;
        }
        st = mg_config_set_at(sec->cfg, key, val, f->path, lineno);
    }
    if (st != MG_OK) {
        mg_cfg_file_free(f);
        return st;
    }
    *out = f;
    return MG_OK;
}

mg_status mg_cfg_file_read(const char *path, mg_cfg_file **out) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    mg_status st = MG_OK;
    while (text) {
        if (n + 1 >= cap) {
            if (cap > ((size_t)64 << 20)) {
                st = mg_set_error(MG_ERR_FORMAT, "%s: larger than 64 MiB: not a config file", path);
                break;
            }
            char *t = realloc(text, cap * 2);
            if (!t) break;
            text = t, cap *= 2;
        }
        size_t r = fread(text + n, 1, cap - 1 - n, fp);
        n += r;
        if (r == 0) break;
    }
    if (st == MG_OK && !text) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    if (st == MG_OK && ferror(fp)) st = mg_set_error(MG_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(fp);
    if (st == MG_OK) {
        text[n] = 0;
        if (strlen(text) != n) {
            int line = 1;
            for (size_t i = 0; text[i]; i++) line += text[i] == '\n';
            st = mg_set_error(MG_ERR_FORMAT, "%s:%d: NUL byte at offset %zu: not a text file", path, line, strlen(text));
        }
    }
    if (st == MG_OK) st = mg_cfg_file_parse(text, path, out);
    free(text);
    return st;
}
