/* charlstm compare: the loss curves of several training logs (the JSON lines of any program on the
 * library trainer: charlstm, textgen, ...) on one chart, against wall time or steps. Each log gives
 * two series: its validation loss where it was measured, and its training loss averaged over a
 * trailing window of steps (the raw per-step loss is too noisy to compare by eye). */
#include "charlstm.h"
#include "cli.h"

#include "minigrad/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "charlstm compare"

typedef struct {
    double *x, *loss, *vx, *val;
    int n, nv, cap;
} curve;

static bool field(const char *line, const char *key, double *v) {
    const char *p = strstr(line, key);
    if (!p) return false;
    char *end;
    *v = strtod(p + strlen(key), &end);
    return end != p + strlen(key);
}

static mg_status read_log(const char *path, bool by_time, curve *c) {
    FILE *f = fopen(path, "r");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open", path);
    char line[1024];
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        double step, loss, t, val;
        if (!field(line, "\"step\": ", &step) || !field(line, "\"loss\": ", &loss) ||
            !field(line, "\"elapsed_s\": ", &t)) {
            fclose(f);
            return mg_set_error(MG_ERR_FORMAT, "%s:%d: not a trainer log line (step, loss, elapsed_s)", path, ln);
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 1024;
            c->x = realloc(c->x, (size_t)c->cap * sizeof(double));
            c->loss = realloc(c->loss, (size_t)c->cap * sizeof(double));
            c->vx = realloc(c->vx, (size_t)c->cap * sizeof(double));
            c->val = realloc(c->val, (size_t)c->cap * sizeof(double));
            if (!c->x || !c->loss || !c->vx || !c->val) {
                fclose(f);
                return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
            }
        }
        double x = by_time ? t : step;
        c->x[c->n] = x, c->loss[c->n++] = loss;
        if (field(line, "\"val_loss\": ", &val)) c->vx[c->nv] = x, c->val[c->nv++] = val;
    }
    fclose(f);
    if (c->n == 0) return mg_set_error(MG_ERR_FORMAT, "%s: no log lines", path);
    return MG_OK;
}

int cl_cmd_compare(int argc, char **argv) {
    const char *out = "compare.png", *x = "time", *title = "loss";
    int64_t window = 25;
    ex_opt table[] = {
        EX_STR_OPT("out", &out, "PNG to write"),
        EX_STR_OPT("x", &x, "time (wall seconds of the run) or step"),
        EX_STR_OPT("title", &title, "chart title"),
        EX_INT_OPT("window", &window, 1, 100000, "steps the training loss is averaged over"),
    };
    const char *logs[8];
    int n_logs = 0;
    ex_parse_result pr = ex_parse(PROG, "[--out PNG] [--x time|step] LOG=LABEL...", argc - 1, argv + 1, table,
                                  (int)(sizeof table / sizeof table[0]), logs, 8, &n_logs);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    if (strcmp(x, "time") && strcmp(x, "step")) {
        fprintf(stderr, PROG ": --x: '%s' is not time or step\n", x);
        return 2;
    }
    if (n_logs == 0) {
        fprintf(stderr, PROG ": name at least one log (LOG=LABEL)\n");
        return 2;
    }
    curve c[8] = {0};
    mg_plot_series s[16];
    char labels[16][160], paths[8][4096];
    double *smooth[8] = {0};
    int ns = 0, rc = 1;
    for (int i = 0; i < n_logs; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", logs[i]);
        char *eq = strchr(paths[i], '=');
        const char *label = eq ? eq + 1 : paths[i];
        if (eq) *eq = 0;
        if (read_log(paths[i], !strcmp(x, "time"), &c[i]) != MG_OK) goto out;
        smooth[i] = malloc((size_t)c[i].n * sizeof(double));
        if (!smooth[i]) goto out;
        double acc = 0;
        for (int k = 0; k < c[i].n; k++) {
            acc += c[i].loss[k];
            if (k >= window) acc -= c[i].loss[k - window];
            smooth[i][k] = acc / (double)(k < window ? k + 1 : window);
        }
        snprintf(labels[ns], sizeof labels[ns], "%s: validation", label);
        s[ns] = (mg_plot_series){labels[ns], c[i].vx, c[i].val, c[i].nv}, ns++;
        snprintf(labels[ns], sizeof labels[ns], "%s: training (mean of %lld steps)", label, (long long)window);
        s[ns] = (mg_plot_series){labels[ns], c[i].x, smooth[i], c[i].n}, ns++;
    }
    mg_plot_opts po = {.title = title, .xlabel = !strcmp(x, "time") ? "wall time (s)" : "step",
                       .ylabel = "loss (nats/char)", .width = 900, .height = 540};
    if (mg_plot_lines(out, &po, s, ns) != MG_OK) goto out;
    printf(PROG ": wrote %s\n", out);
    for (int i = 0; i < n_logs; i++)
        printf(PROG ": %s: %d steps, last x %.1f, last validation loss %.4f\n", paths[i], c[i].n, c[i].x[c[i].n - 1],
               c[i].nv ? c[i].val[c[i].nv - 1] : NAN);
    rc = 0;
out:
    if (rc) ex_fail(PROG);
    for (int i = 0; i < 8; i++) free(c[i].x), free(c[i].loss), free(c[i].vx), free(c[i].val), free(smooth[i]);
    return rc;
}
