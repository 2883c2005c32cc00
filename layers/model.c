/* Sequential models from a config file: one layer per section, in order (Darknet's idea, with
 * unknown layers and keys as errors). */
#include "registry_internal.h"

#include <stdlib.h>
#include <string.h>

struct mg_model {
    mg_params *params;
    mg_layer **layers;
    int n;
    mg_layer *pos;
};

void mg_model_free(mg_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) mg_layer_free(m->layers[i]);
    free(m->layers);
    mg_params_free(m->params);
    free(m);
}

mg_status mg_model_build(const mg_cfg_file *f, mg_rng *rng, mg_model **out) {
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_model_build: out is NULL");
    *out = NULL;
    if (!f) return mg_set_error(MG_ERR_INVALID, "mg_model_build: the config file is NULL");
    const char *path = mg_cfg_file_path(f);
    int n = mg_cfg_file_count(f);
    if (n == 0) return mg_set_error(MG_ERR_INVALID, "%s: no [layer] sections: nothing to build", path);
    mg_model *m = calloc(1, sizeof *m);
    if (!m || !(m->params = mg_params_new()) || !(m->layers = calloc((size_t)n, sizeof *m->layers))) {
        mg_model_free(m);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    }
    mg_status st = MG_OK;
    for (int i = 0; i < n && st == MG_OK; i++) {
        const char *type = mg_cfg_file_section(f, i);
        int line = mg_cfg_file_line(f, i);
        mg_config *cfg = mg_cfg_file_config(f, i);
        if (mg_layer_find_or_load(type, NULL) != MG_OK) { /* registered, or from a plugin on the path */
            st = mg_wrap_error(MG_ERR_NOT_FOUND, "%s:%d: unknown layer '[%s]'", path, line, type);
            break;
        }
        char prefix[256];
        snprintf(prefix, sizeof prefix, "layers.%d", i);
        const char *name = mg_config_str(cfg, "name", prefix);
        if (strlen(name) >= sizeof prefix) {
            st = mg_set_error(MG_ERR_INVALID, "%s:%d: [%s] name '%.40s...' is too long", path, line, type, name);
            break;
        }
        snprintf(prefix, sizeof prefix, "%s", name);
        st = mg_layer_create(type, prefix, cfg, m->params, &m->layers[i]);
        if (st == MG_OK) {
            m->n++;
            continue;
        }
        /* parameters already declared under this name: say which section has it (layers without
         * parameters may share a name, as they always could) */
        int dup = -1;
        for (int j = 0; j < m->n && dup < 0; j++)
            if (strcmp(mg_layer_prefix(m->layers[j]), prefix) == 0) dup = j;
        if (dup >= 0 && strstr(mg_last_error(), "duplicate parameter name")) {
            char where[320];
            mg_config_where(cfg, "name", where, sizeof where);
            st = mg_set_error(MG_ERR_INVALID, "%s: name '%s' is already the name of section %d ([%s] on line %d)",
                              where, prefix, dup + 1, mg_cfg_file_section(f, dup), mg_cfg_file_line(f, dup));
        } else if (strncmp(mg_last_error(), path, strlen(path)) != 0) { /* e.g. from the parameter store */
            mg_wrap_error(st, "%s:%d: [%s] '%s'", path, line, type, prefix);
        }
    }
    if (st == MG_OK) st = mg_params_alloc(m->params, rng);
    if (st != MG_OK) {
        mg_model_free(m);
        return st;
    }
    for (int i = 0; i < m->n && !m->pos; i++) m->pos = mg_layer_find_positional(m->layers[i]);
    mg_model_print(m, NULL);
    *out = m;
    return MG_OK;
}

mg_status mg_model_from_file(const char *path, mg_rng *rng, mg_model **out) {
    *out = NULL;
    mg_cfg_file *f;
    mg_status st = mg_cfg_file_read(path, &f);
    if (st != MG_OK) return st;
    st = mg_model_build(f, rng, out);
    mg_cfg_file_free(f);
    return st;
}

mg_params *mg_model_params(const mg_model *m) { return m->params; }
int mg_model_count(const mg_model *m) { return m->n; }
mg_layer *mg_model_layer(const mg_model *m, int i) { return i >= 0 && i < m->n ? m->layers[i] : NULL; }

mg_tensor *mg_model_forward(mg_model *m, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args) {
    mg_fwd a = args ? *args : (mg_fwd){0};
    if (!a.pos) a.pos = m->pos;
    for (int i = 0; i < m->n; i++) x = mg_layer_forward(m->layers[i], ctx, x, &a);
    return x;
}

void mg_model_print(const mg_model *m, FILE *f) { mg_layer_print_rows(m->layers, m->n, f); }
