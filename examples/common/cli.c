/* Typed option parsing for the example programs. */
#include "cli.h"
#include "minigrad/plugin.h"


#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ex_print_usage(const char *prog, const char *usage, const ex_opt *opts, int n_opts) {
    printf("usage: %s %s\n", prog, usage ? usage : "[options]");
    if (n_opts) printf("\noptions:\n");
    for (int i = 0; i < n_opts; i++) {
        char left[64], def[96] = "";
        const char *arg = opts[i].type == EX_INT ? " N" : opts[i].type == EX_FLOAT ? " X" : opts[i].type == EX_STR ? " S" : "";
        snprintf(left, sizeof left, "--%s%s", opts[i].name, arg);
        switch (opts[i].type) {
        case EX_INT: snprintf(def, sizeof def, " (default %lld)", (long long)*(int64_t *)opts[i].ptr); break;
        case EX_FLOAT: snprintf(def, sizeof def, " (default %g)", (double)*(float *)opts[i].ptr); break;
        case EX_STR:
            if (*(const char **)opts[i].ptr) snprintf(def, sizeof def, " (default %s)", *(const char **)opts[i].ptr);
            break;
        case EX_FLAG: break;
        }
        printf("  %-22s %s%s\n", left, opts[i].help ? opts[i].help : "", def);
    }
}

static bool set_value(const char *prog, const ex_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case EX_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) {
            fprintf(stderr, "%s: --%s expects an integer, got '%s'\n", prog, o->name, v);
            return false;
        }
        *(int64_t *)o->ptr = x;
        return true;
    }
    case EX_FLOAT: {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x)) {
            fprintf(stderr, "%s: --%s expects a number, got '%s'\n", prog, o->name, v);
            return false;
        }
        *(float *)o->ptr = x;
        return true;
    }
    case EX_STR: *(const char **)o->ptr = v; return true;
    case EX_FLAG: return true;
    }
    return false;
}

ex_parse_result ex_parse(const char *prog, const char *usage, int argc, char **argv, const ex_opt *opts,
                         int n_opts, const char **pos, int max_pos, int *n_pos) {
    int np = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ex_print_usage(prog, usage, opts, n_opts);
            return EX_PARSE_HELP;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
            if (np >= max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, a);
                return EX_PARSE_ERROR;
            }
            pos[np++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const ex_opt *o = NULL;
        for (int k = 0; k < n_opts && !o; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, name, len)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option '--%.*s' (see --help)\n", prog, (int)len, name);
            return EX_PARSE_ERROR;
        }
        if (o->type == EX_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: --%s takes no value\n", prog, o->name);
                return EX_PARSE_ERROR;
            }
            *(bool *)o->ptr = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "%s: --%s needs a value\n", prog, o->name);
            return EX_PARSE_ERROR;
        }
        if (!set_value(prog, o, v)) return EX_PARSE_ERROR;
    }
    if (n_pos) *n_pos = np;
    return EX_PARSE_OK;
}

int ex_fail(const char *prog) {
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", prog, mg_last_error());
    return 1;
}

int ex_fail_load(const char *prog, const char *train_cmd, const char *ckpt) {
    ex_fail(prog);
    if (access(ckpt, F_OK) != 0)
        fprintf(stderr, "%s: train a model first (%s) or pass --ckpt FILE\n", prog, train_cmd);
    return 1;
}

mg_status ex_mkdirs(const char *dir) {
    char d[4096];
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d)
        return mg_set_error(MG_ERR_INVALID, "%.64s...: path too long", dir);
    if (!d[0]) return mg_set_error(MG_ERR_INVALID, "an empty folder name");
    for (char *p = d + 1;; p++) {
        if (*p != '/' && *p) continue;
        const char c = *p;
        *p = 0;
        if (mkdir(d, 0777) != 0 && errno != EEXIST)
            return mg_set_error(MG_ERR_IO, "%s: cannot create the directory: %s", d, strerror(errno));
        *p = c;
        if (!c) break;
    }
    struct stat sb;
    if (stat(d, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mg_set_error(MG_ERR_IO, "%s: exists but is not a directory", d);
    return MG_OK;
}

int ex_cmd_plugins(const char *prog, int argc, char **argv) {
    bool schemes = false;
    const ex_opt opts[] = {
        {"schemes", EX_FLAG, &schemes, "only the positional schemes"},
    };
    char name[64];
    snprintf(name, sizeof name, "%s plugins", prog);
    ex_parse_result r = ex_parse(name, "[--schemes]", argc, argv, opts, 1, NULL, 0, NULL);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    return mg_plugin_list_print(stdout, schemes) == MG_OK ? 0 : ex_fail(name);
}
