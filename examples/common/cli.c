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

const char *ex_invoked_as(const char *prog) {
    return program_invocation_name && program_invocation_name[0] ? program_invocation_name : prog;
}

const char *ex_shell_word(const char *s, char *buf, size_t n) {
    if (!n) return buf;
    bool plain = s[0] != 0;
    for (const char *c = s; *c && plain; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("/._-+,:=@%", *c);
    if (plain) {
        snprintf(buf, n, "%s", s);
        return buf;
    }
    size_t k = 0;
    buf[k++] = '\'';
    for (const char *c = s; *c && k + 5 < n; c++) {
        if (*c == '\'') {
            memcpy(buf + k, "'\\''", 4);
            k += 4;
        } else {
            buf[k++] = *c;
        }
    }
    if (k + 1 < n) buf[k++] = '\'';
    buf[k < n ? k : n - 1] = 0;
    return buf;
}

static bool has_range(const ex_opt *o) {
    if (o->type == EX_INT) return o->min < o->max || (o->min == o->max && o->min != 0);
    if (o->type == EX_FLOAT) return isfinite(o->lo) && isfinite(o->hi) && (o->lo < o->hi || (o->lo == o->hi && o->lo != 0));
    return true;
}

void ex_print_usage(const char *prog, const char *usage, const ex_opt *opts, int n_opts) {
    printf("usage: %s %s\n", prog, usage ? usage : "[options]");
    if (n_opts) printf("\noptions:\n");
    for (int i = 0; i < n_opts; i++) {
        char left[64], def[160] = "";
        const char *arg = opts[i].type == EX_INT ? " N" : opts[i].type == EX_FLOAT ? " X" : opts[i].type == EX_STR ? " S" : "";
        snprintf(left, sizeof left, "--%s%s", opts[i].name, arg);
        switch (opts[i].type) {
        case EX_INT: {
            /* a default outside the range is a "not given" mark whose meaning the help text says */
            const int64_t v = *(int64_t *)opts[i].ptr;
            if (v < opts[i].min || v > opts[i].max)
                snprintf(def, sizeof def, " (%lld..%lld)", (long long)opts[i].min, (long long)opts[i].max);
            else
                snprintf(def, sizeof def, " (%lld..%lld, default %lld)", (long long)opts[i].min, (long long)opts[i].max,
                         (long long)v);
            break;
        }
        case EX_FLOAT:
            snprintf(def, sizeof def, " (%g..%g, default %g)", opts[i].lo, opts[i].hi, (double)*(float *)opts[i].ptr);
            break;
        case EX_STR: {
            /* an empty default is not shown (the help text says what it means); control
             * characters are written as escapes so that the line stays one line */
            const char *v = *(const char **)opts[i].ptr;
            if (!v || !*v) break;
            size_t k = (size_t)snprintf(def, sizeof def, " (default ");
            for (; *v && k + 8 < sizeof def; v++) {
                unsigned char c = (unsigned char)*v;
                if (c == '\n') k += (size_t)snprintf(def + k, sizeof def - k, "\\n");
                else if (c == '\t') k += (size_t)snprintf(def + k, sizeof def - k, "\\t");
                else if (c < 0x20 || c == 0x7f) k += (size_t)snprintf(def + k, sizeof def - k, "\\x%02x", c);
                else def[k++] = (char)c;
            }
            snprintf(def + k, sizeof def - k, "%s)", *v ? "..." : "");
            break;
        }
        case EX_FLAG: break;
        }
        printf("  %-22s %s%s\n", left, opts[i].help ? opts[i].help : "", def);
    }
}

static void out_of_range(const char *prog, const ex_opt *o, const char *v, const char *where) {
    if (o->type == EX_INT)
        fprintf(stderr, "%s: --%s: %s is out of range %lld..%lld%s%s%s\n", prog, o->name, v, (long long)o->min,
                (long long)o->max, where ? " (" : "", where ? where : "", where ? ")" : "");
    else
        fprintf(stderr, "%s: --%s: %s is out of range %g..%g%s%s%s\n", prog, o->name, v, o->lo, o->hi,
                where ? " (" : "", where ? where : "", where ? ")" : "");
}

static bool set_value(const char *prog, const ex_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case EX_INT: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || (errno && errno != ERANGE)) {
            fprintf(stderr, "%s: --%s expects an integer in %lld..%lld, got '%s'\n", prog, o->name, (long long)o->min,
                    (long long)o->max, v);
            return false;
        }
        if (errno == ERANGE || x < o->min || x > o->max) { /* ERANGE: beyond int64, so beyond any range */
            out_of_range(prog, o, v, NULL);
            return false;
        }
        *(int64_t *)o->ptr = x;
        return true;
    }
    case EX_FLOAT: {
        double x = strtod(v, &end);
        if (end == v || *end || isnan(x)) {
            fprintf(stderr, "%s: --%s expects a number in %g..%g, got '%s'\n", prog, o->name, o->lo, o->hi, v);
            return false;
        }
        /* a value that rounds into the range as a float is in it (0.1 is stored as 0.100000001) */
        if (!((float)x >= (float)o->lo && (float)x <= (float)o->hi)) {
            out_of_range(prog, o, v, NULL);
            return false;
        }
        *(float *)o->ptr = (float)x;
        return true;
    }
    case EX_STR: *(const char **)o->ptr = v; return true;
    case EX_FLAG: return true;
    }
    return false;
}

bool ex_check_ranges(const char *prog, const ex_opt *opts, int n_opts, const char *where) {
    char v[64];
    for (int i = 0; i < n_opts; i++) {
        const ex_opt *o = &opts[i];
        if (o->type == EX_INT) {
            int64_t x = *(const int64_t *)o->ptr;
            if (x >= o->min && x <= o->max) continue;
            snprintf(v, sizeof v, "%lld", (long long)x);
        } else if (o->type == EX_FLOAT) {
            float x = *(const float *)o->ptr;
            if (x >= (float)o->lo && x <= (float)o->hi) continue;
            snprintf(v, sizeof v, "%g", (double)x);
        } else {
            continue;
        }
        out_of_range(prog, o, v, where);
        return false;
    }
    return true;
}

ex_parse_result ex_parse(const char *prog, const char *usage, int argc, char **argv, const ex_opt *opts,
                         int n_opts, const char **pos, int max_pos, int *n_pos) {
    int np = 0;
    for (int k = 0; k < n_opts; k++)
        if (!has_range(&opts[k])) {
            fprintf(stderr, "%s: option --%s is declared without a range (a defect of the program)\n", prog,
                    opts[k].name);
            return EX_PARSE_ERROR;
        }
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
        EX_FLAG_OPT("schemes", &schemes, "only the positional schemes"),
    };
    char name[64];
    snprintf(name, sizeof name, "%s plugins", prog);
    ex_parse_result r = ex_parse(name, "[--schemes]", argc, argv, opts, 1, NULL, 0, NULL);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    return mg_plugin_list_print(stdout, schemes) == MG_OK ? 0 : ex_fail(name);
}
