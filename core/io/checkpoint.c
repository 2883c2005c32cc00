/* Parameter stores and optimizer state to and from safetensors files. */
#include "minigrad/checkpoint.h"
#include "../optim_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mg_st_entry entry_of(const mg_tensor *t, const float *data) {
    mg_st_entry e = {.name = t->name, .ndim = t->ndim, .data = data};
    for (int d = 0; d < t->ndim; d++) e.shape[d] = t->shape[d];
    return e;
}

mg_status mg_checkpoint_save(const char *path, const mg_params *p, bool grads, const mg_st_meta *meta,
                             int n_meta) {
    if (!mg_params_allocated(p))
        return mg_set_error(MG_ERR_INVALID, "%s: cannot save a parameter store that is not allocated", path);
    int n = mg_params_len(p);
    mg_st_entry *e = calloc((size_t)(n ? n : 1), sizeof *e);
    if (!e) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) {
        mg_tensor *t = mg_params_at(p, i);
        e[i] = entry_of(t, grads ? t->grad : t->data);
    }
    mg_status s = mg_safetensors_write(path, e, n, meta, n_meta);
    free(e);
    return s;
}

static mg_st_dest dest_of(const mg_tensor *t, float *data) {
    mg_st_dest d = {.name = t->name, .ndim = t->ndim, .data = data};
    for (int k = 0; k < t->ndim; k++) d.shape[k] = t->shape[k];
    return d;
}

mg_status mg_checkpoint_load(const char *path, mg_params *p, mg_st_file **file_out) {
    if (file_out) *file_out = NULL;
    if (!mg_params_allocated(p))
        return mg_set_error(MG_ERR_INVALID, "%s: allocate the parameter store before loading into it", path);
    int n = mg_params_len(p);
    mg_st_dest *d = calloc((size_t)(n ? n : 1), sizeof *d);
    if (!d) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) {
        mg_tensor *t = mg_params_at(p, i);
        d[i] = dest_of(t, t->data);
    }
    mg_status s = mg_safetensors_load(path, d, n, file_out);
    free(d);
    return s;
}

/* Names "opt.m.<param>" live in one block of strings freed together. */
static char **state_names(const mg_params *p, const char *prefix) {
    int n = mg_params_len(p);
    char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    if (!names) return NULL;
    for (int i = 0; i < n; i++) {
        const char *base = mg_params_at(p, i)->name;
        size_t lp = strlen(prefix), lb = strlen(base);
        names[i] = malloc(lp + lb + 1);
        if (!names[i]) {
            for (int k = 0; k < i; k++) free(names[k]);
            free(names);
            return NULL;
        }
        memcpy(names[i], prefix, lp);
        memcpy(names[i] + lp, base, lb + 1);
    }
    return names;
}

static void free_names(char **names, int n) {
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The optimizer's state slabs are laid out for the store it was made for; reading or writing them
 * through another store's offsets and sizes would run past their ends. */
static mg_status check_pair(const char *path, const mg_optim *o, const mg_params *p) {
    if (mg_optim_params(o) != p)
        return mg_set_error(MG_ERR_INVALID,
                            "%s: the optimizer was made for a different parameter store than the one given "
                            "(pass the store given to mg_adamw_new or mg_sgd_new)",
                            path);
    return MG_OK;
}

static const char *slot_prefix[2] = {"opt.m.", "opt.v."};

/* The indices of the trainable parameters: the only ones with optimizer state. */
static int trainable_list(const mg_params *p, int *idx) {
    int k = 0;
    for (int i = 0; i < mg_params_len(p); i++)
        if (mg_param_trainable(mg_params_at(p, i))) idx[k++] = i;
    return k;
}

mg_status mg_train_state_save(const char *path, const mg_optim *co, const mg_params *p,
                              const mg_st_meta *meta, int n_meta) {
    mg_optim *o = (mg_optim *)co; /* reading a region may zero it first (mg_optim_state_of) */
    mg_status cs = check_pair(path, o, p);
    if (cs != MG_OK) return cs;
    if (n_meta < 0 || (n_meta > 0 && !meta))
        return mg_set_error(MG_ERR_INVALID, "%s: n_meta is %d but meta holds no entries (need n_meta >= 0, and meta "
                                            "when n_meta > 0)",
                            path, n_meta);
    int n = mg_params_len(p), slots = mg_optim_state_slots(o);
    char step[24];
    mg_meta_fmt_i64(step, mg_optim_steps(o));
    mg_st_meta *m = calloc((size_t)n_meta + 3, sizeof *m);
    mg_st_entry *e = calloc((size_t)(n * slots) + 1, sizeof *e);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    char **names[2] = {NULL, NULL};
    mg_status s = MG_OK;
    for (int k = 0; k < slots; k++) names[k] = state_names(p, slot_prefix[k]);
    if (!m || !e || !idx || !names[0] || (slots > 1 && !names[1])) {
        s = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    m[0] = (mg_st_meta){"format", "minigrad-train-state"};
    m[1] = (mg_st_meta){"optimizer", mg_optim_name(o)};
    m[2] = (mg_st_meta){"step", step};
    for (int i = 0; i < n_meta; i++) m[3 + i] = meta[i];
    int nt = trainable_list(p, idx);
    for (int k = 0; k < slots; k++)
        for (int j = 0; j < nt; j++) {
            mg_tensor *t = mg_params_at(p, idx[j]);
            e[k * nt + j] = entry_of(t, mg_optim_state_of(o, k, idx[j]));
            e[k * nt + j].name = names[k][idx[j]];
        }
    s = mg_safetensors_write(path, e, nt * slots, m, n_meta + 3);
done:
    for (int k = 0; k < 2; k++) free_names(names[k], n);
    free(m);
    free(e);
    free(idx);
    return s;
}

mg_status mg_train_state_load(const char *path, mg_optim *o, const mg_params *p, mg_st_file **file_out) {
    if (file_out) *file_out = NULL;
    mg_status s = check_pair(path, o, p);
    if (s != MG_OK) return s;
    mg_st_file *f = NULL;
    s = mg_safetensors_open(path, &f);
    if (s != MG_OK) return s;
    int n = mg_params_len(p), slots = mg_optim_state_slots(o);
    const char *fmt = mg_st_meta_get(f, "format"), *opt = mg_st_meta_get(f, "optimizer");
    int64_t step = 0;
    char **names[2] = {NULL, NULL};
    mg_st_dest *d = NULL;
    int *idx = NULL;
    if (!fmt || strcmp(fmt, "minigrad-train-state") != 0) {
        s = mg_set_error(MG_ERR_FORMAT, "%s: not a minigrad training-state file (metadata 'format' is %s%s%s)", path,
                         fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "");
        goto done;
    }
    if (!opt || strcmp(opt, mg_optim_name(o)) != 0) {
        s = mg_set_error(MG_ERR_INVALID, "%s: state of optimizer '%s', but this run uses '%s'", path,
                         opt ? opt : "(missing)", mg_optim_name(o));
        goto done;
    }
    if ((s = mg_meta_get_i64(f, "step", &step)) != MG_OK) goto done;
    if (step < 0) {
        s = mg_set_error(MG_ERR_FORMAT, "%s: metadata 'step' is negative (%lld)", path, (long long)step);
        goto done;
    }
    d = calloc((size_t)(n * slots) + 1, sizeof *d);
    idx = calloc((size_t)n + 1, sizeof *idx);
    for (int k = 0; k < slots; k++) names[k] = state_names(p, slot_prefix[k]);
    if (!d || !idx || !names[0] || (slots > 1 && !names[1])) {
        s = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    int nt = trainable_list(p, idx);
    for (int k = 0; k < slots; k++)
        for (int j = 0; j < nt; j++) {
            mg_tensor *t = mg_params_at(p, idx[j]);
            d[k * nt + j] = dest_of(t, mg_optim_state_of(o, k, idx[j]));
            d[k * nt + j].name = names[k][idx[j]];
        }
    if ((s = mg_st_load(f, d, nt * slots, 0)) != MG_OK) {
        if (nt < n) {
            char first[768];
            snprintf(first, sizeof first, "%s", mg_last_error());
            mg_set_error(s, "%s (a training state holds the state of exactly the trainable parameters; "
                            "%d of the %d here are frozen or buffers)", first, n - nt, n);
        }
        goto done;
    }
    mg_optim_set_steps(o, step);
done:
    for (int k = 0; k < 2; k++) free_names(names[k], n);
    free(d);
    free(idx);
    if (s == MG_OK && file_out)
        *file_out = f;
    else
        mg_st_close(f);
    return s;
}

static mg_status meta_int(const mg_st_file *f, const char *key, bool is_signed, uint64_t *u, int64_t *i) {
    const char *v = mg_st_meta_get(f, key);
    if (!v) return mg_set_error(MG_ERR_FORMAT, "%s: metadata key '%s' is missing", mg_st_path(f), key);
    char *end = NULL;
    errno = 0;
    if (is_signed)
        *i = strtoll(v, &end, 10);
    else
        *u = (v[0] == '-') ? (errno = ERANGE, 0) : strtoull(v, &end, 10);
    if (errno || !end || end == v || *end)
        return mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s' = '%s' is not a%s integer", mg_st_path(f), key, v,
                            is_signed ? "n" : " non-negative");
    return MG_OK;
}

mg_status mg_meta_get_u64(const mg_st_file *f, const char *key, uint64_t *out) {
    int64_t unused;
    return meta_int(f, key, false, out, &unused);
}

mg_status mg_meta_get_i64(const mg_st_file *f, const char *key, int64_t *out) {
    uint64_t unused;
    return meta_int(f, key, true, &unused, out);
}

char *mg_meta_fmt_u64(char *buf, uint64_t v) {
    snprintf(buf, 24, "%" PRIu64, v);
    return buf;
}

char *mg_meta_fmt_i64(char *buf, int64_t v) {
    snprintf(buf, 24, "%" PRId64, v);
    return buf;
}
