/* Reports of a comparison: per-task tables (text and Markdown), the CSV files, and the PNGs
 * (learning curves, accuracy at longer lengths, positional tables, attention maps). */
#include "posenc.h"

#include "minigrad/file.h"
#include "minigrad/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- statistics over seeds ---- */

typedef struct {
    const posenc_result *r[64];
    int n;
} group;

static group runs_of(const posenc_report *rep, posenc_task task, const char *scheme) {
    group g = {.n = 0};
    for (int i = 0; i < rep->n_runs && g.n < 64; i++) {
        const posenc_result *r = &rep->runs[i];
        if (r->cfg.task == task && strcmp(r->cfg.scheme, scheme) == 0) g.r[g.n++] = r;
    }
    /* by seed, so that "first seed" and every listing are independent of the completion order */
    for (int i = 1; i < g.n; i++)
        for (int j = i; j > 0 && g.r[j]->cfg.seed < g.r[j - 1]->cfg.seed; j--) {
            const posenc_result *t = g.r[j];
            g.r[j] = g.r[j - 1], g.r[j - 1] = t;
        }
    return g;
}

typedef double (*field_fn)(const posenc_result *r, int arg);

static double f_train_acc(const posenc_result *r, int a) {
    return (void)a, r->train.acc;
}
static double f_val_acc(const posenc_result *r, int a) {
    return (void)a, r->val.acc;
}
static double f_val_seq(const posenc_result *r, int a) {
    return (void)a, r->val.seq;
}
static double f_train_loss(const posenc_result *r, int a) {
    return (void)a, r->train.loss;
}
static double f_val_loss(const posenc_result *r, int a) {
    return (void)a, r->val.loss;
}
static double f_best(const posenc_result *r, int a) {
    return (void)a, r->best_val_acc;
}
static double f_seconds(const posenc_result *r, int a) {
    return (void)a, r->seconds;
}
static double f_cpu(const posenc_result *r, int a) {
    return (void)a, r->cpu_seconds;
}
static double f_len_acc(const posenc_result *r, int a) {
    return r->len[a].done ? r->len[a].m.acc : NAN;
}
static double f_curve_acc(const posenc_result *r, int a) {
    return a < r->n_curve ? r->curve_val_acc[a] : NAN;
}

/* Mean and sample standard deviation; NaN when any value is NaN (a length without an answer). */
static void stats(const group *g, field_fn f, int arg, double *mean, double *sd) {
    double s = 0.0, ss = 0.0;
    for (int i = 0; i < g->n; i++) s += f(g->r[i], arg);
    *mean = g->n ? s / g->n : NAN;
    for (int i = 0; i < g->n; i++) ss += (f(g->r[i], arg) - *mean) * (f(g->r[i], arg) - *mean);
    *sd = g->n > 1 ? sqrt(ss / (g->n - 1)) : NAN;
}

/* "97.31 ± 0.42" (percent) or "0.0812 ± 0.0031"; no spread with one seed. */
static void fmt_stat(char *buf, size_t n, double mean, double sd, bool percent) {
    double k = percent ? 100.0 : 1.0;
    const char *f1 = percent ? "%.1f" : "%.4f", *f2 = percent ? "%.1f ± %.1f" : "%.4f ± %.4f";
    if (isnan(sd))
        snprintf(buf, n, f1, mean * k);
    else
        snprintf(buf, n, f2, mean * k, sd * k);
}

/* ---- CSV ---- */

void posenc_csv_row(const posenc_result *r, char *buf, size_t n) {
    snprintf(buf, n, "%s,%s,%u,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.2f", posenc_task_name(r->cfg.task),
             posenc_scheme_label(r->cfg.scheme), r->cfg.seed, r->train.acc, r->val.acc, r->val.seq,
             r->train.loss, r->val.loss, r->best_val_acc, r->seconds);
}

/* Rows in table order (task, scheme, seed), whatever order the runs finished in. */
static int ordered(const posenc_report *rep, const posenc_result **out) {
    int n = 0;
    for (int t = 0; t < rep->n_tasks; t++)
        for (int s = 0; s < rep->n_schemes; s++) {
            group g = runs_of(rep, rep->tasks[t], rep->schemes[s].name);
            for (int i = 0; i < g.n; i++) out[n++] = g.r[i];
        }
    return n;
}

/* ---- text files, each written whole (minigrad/file.h) ---- */

typedef struct {
    FILE *f;
    mg_outfile o;
} out_file;

static mg_status out_open(out_file *o, const char *dir, const char *name) {
    char path[1100];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return mg_set_error(MG_ERR_INVALID, "%s/%s: path too long", dir, name);
    mg_status st = mg_outfile_open(&o->o, path);
    o->f = o->o.f;
    return st;
}

/* Every row checked at once: the file is complete, or it is not there and the error names it. */
static mg_status out_close(out_file *o) {
    return mg_outfile_commit(&o->o);
}

mg_status posenc_write_csvs(const char *dir, const posenc_report *rep) {
    const posenc_result **rows = malloc((size_t)(rep->n_runs ? rep->n_runs : 1) * sizeof *rows);
    if (!rows) return mg_set_error(MG_ERR_NOMEM, "report: out of memory");
    int n = ordered(rep, rows);
    out_file o;
    mg_status st = out_open(&o, dir, "results.csv");
    if (st == MG_OK) {
        fprintf(o.f, "%s\n", POSENC_CSV_HEADER);
        char line[512];
        for (int i = 0; i < n; i++) {
            posenc_csv_row(rows[i], line, sizeof line);
            fprintf(o.f, "%s\n", line);
        }
        st = out_close(&o);
    }
    if (st == MG_OK) st = out_open(&o, dir, "length.csv");
    if (st == MG_OK) {
        fprintf(o.f, "task,scheme,seed,length,token_acc,seq_exact,loss,note\n");
        for (int i = 0; i < n; i++) {
            const posenc_result *r = rows[i];
            const char *t = posenc_task_name(r->cfg.task), *s = posenc_scheme_label(r->cfg.scheme);
            fprintf(o.f, "%s,%s,%u,%d,%.6f,%.6f,%.6f,\n", t, s, r->cfg.seed, POSENC_L, r->val.acc,
                    r->val.seq, r->val.loss);
            for (int k = 0; k < r->n_len; k++) {
                const posenc_length_result *l = &r->len[k];
                if (l->done)
                    fprintf(o.f, "%s,%s,%u,%d,%.6f,%.6f,%.6f,\n", t, s, r->cfg.seed, l->L, l->m.acc,
                            l->m.seq, l->m.loss);
                else /* the reason never holds a comma or a quote we did not put there */
                    fprintf(o.f, "%s,%s,%u,%d,,,,\"n/a (%s)\"\n", t, s, r->cfg.seed, l->L, l->why);
            }
        }
        st = out_close(&o);
    }
    if (st == MG_OK) st = out_open(&o, dir, "curves.csv");
    if (st == MG_OK) {
        fprintf(o.f, "task,scheme,seed,step,val_acc,val_loss,batch_loss\n");
        for (int i = 0; i < n; i++)
            for (int k = 0; k < rows[i]->n_curve; k++) {
                const posenc_result *r = rows[i];
                fprintf(o.f, "%s,%s,%u,%d,%.6f,%.6f,", posenc_task_name(r->cfg.task),
                        posenc_scheme_label(r->cfg.scheme), r->cfg.seed, r->curve_step[k],
                        r->curve_val_acc[k], r->curve_val_loss[k]);
                if (isnan(r->curve_batch_loss[k]))
                    fprintf(o.f, "\n");
                else
                    fprintf(o.f, "%.6f\n", r->curve_batch_loss[k]);
            }
        st = out_close(&o);
    }
    free(rows);
    return st;
}

/* ---- tables ---- */

enum { N_COLS_MAX = 9 + POSENC_MAX_LENGTHS, CELL = 96 };

typedef struct {
    int n_cols;
    char head[N_COLS_MAX][48];
    char cell[POSENC_MAX_SCHEMES][N_COLS_MAX][CELL];
    int n_rows;
} table;

/* The lengths the runs of a task were evaluated at (from its first run). */
static const posenc_result *first_run(const posenc_report *rep, posenc_task task) {
    for (int s = 0; s < rep->n_schemes; s++) {
        group g = runs_of(rep, task, rep->schemes[s].name);
        if (g.n) return g.r[0];
    }
    return NULL;
}

static void build_table(const posenc_report *rep, posenc_task task, table *t) {
    memset(t, 0, sizeof *t);
    const posenc_result *any = first_run(rep, task);
    static const char *const heads[] = {"scheme",          "train acc %", "val acc %",
                                        "val seq exact %", "train loss",  "val loss",
                                        "best val acc %"};
    for (int k = 0; k < 7; k++) snprintf(t->head[t->n_cols++], 48, "%s", heads[k]);
    int n_len = any ? any->n_len : 0;
    for (int k = 0; k < n_len; k++)
        snprintf(t->head[t->n_cols++], 48, "val acc %% @%d", any->len[k].L);
    snprintf(t->head[t->n_cols++], 48, "s/run (cpu)");
    static const field_fn fs[] = {f_train_acc,  f_val_acc,  f_val_seq,
                                  f_train_loss, f_val_loss, f_best};
    static const bool pct[] = {true, true, true, false, false, true};
    for (int s = 0; s < rep->n_schemes; s++) {
        group g = runs_of(rep, task, rep->schemes[s].name);
        if (!g.n) continue;
        char(*row)[CELL] = t->cell[t->n_rows++];
        int c = 0;
        snprintf(row[c++], CELL, "%s", rep->schemes[s].label);
        double m, sd;
        for (int k = 0; k < 6; k++) {
            stats(&g, fs[k], 0, &m, &sd);
            fmt_stat(row[c++], CELL, m, sd, pct[k]);
        }
        for (int k = 0; k < n_len; k++) {
            const posenc_length_result *l = k < g.r[0]->n_len ? &g.r[0]->len[k] : NULL;
            if (l && !l->done) {
                snprintf(row[c++], CELL, "n/a (%.80s)", l->why);
                continue;
            }
            stats(&g, f_len_acc, k, &m, &sd);
            if (isnan(m))
                snprintf(row[c++], CELL, "n/a (not every seed)");
            else
                fmt_stat(row[c++], CELL, m, sd, true);
        }
        double cpu;
        stats(&g, f_seconds, 0, &m, &sd);
        stats(&g, f_cpu, 0, &cpu, &sd);
        snprintf(row[c++], CELL, "%.1f (%.1f)", m, cpu);
    }
}

/* Display width: the bytes that do not continue a UTF-8 sequence. */
static int width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static void print_table(FILE *f, const table *t, bool md) {
    int w[N_COLS_MAX];
    for (int c = 0; c < t->n_cols; c++) {
        w[c] = width(t->head[c]);
        for (int r = 0; r < t->n_rows; r++)
            w[c] = width(t->cell[r][c]) > w[c] ? width(t->cell[r][c]) : w[c];
    }
    for (int r = -1; r < t->n_rows; r++) {
        for (int c = 0; c < t->n_cols; c++) {
            const char *s = r < 0 ? t->head[c] : t->cell[r][c];
            int pad = w[c] - width(s);
            bool left = c == 0;
            fprintf(f, "%s", md ? "| " : (c ? "  " : ""));
            if (!left) fprintf(f, "%*s", pad, "");
            fprintf(f, "%s", s);
            if (left) fprintf(f, "%*s", pad, "");
            if (md) fprintf(f, " ");
        }
        fprintf(f, "%s\n", md ? "|" : "");
        if (r < 0 && md) {
            for (int c = 0; c < t->n_cols; c++) {
                fprintf(f, "|%s", c == 0 ? ":" : ""); /* :--- left, ---: right, w + 2 wide */
                for (int k = 0; k < w[c] + 1; k++) fputc('-', f);
                fprintf(f, "%s", c == 0 ? "" : ":");
            }
            fprintf(f, "|\n");
        } else if (r < 0) {
            int total = 0;
            for (int c = 0; c < t->n_cols; c++) total += w[c] + (c ? 2 : 0);
            for (int k = 0; k < total; k++) fputc('-', f);
            fputc('\n', f);
        }
    }
}

/* The spec's position-blind reference levels on the val set (section 2). */
static void print_references(FILE *f, posenc_task task, bool md) {
    posenc_data tr, va;
    if (posenc_data_make(&tr, task, POSENC_TRAIN, 0) != MG_OK) return;
    if (posenc_data_make(&va, task, POSENC_VAL, 0) != MG_OK) {
        posenc_data_free(&tr);
        return;
    }
    double mode = NAN, copy = NAN, maj = NAN, cap = NAN;
    posenc_ref_mode(&va, &mode);
    posenc_ref_copy(&va, &copy);
    posenc_ref_position_majority(&tr, &va, &maj);
    posenc_ref_reflection_cap(&va, &cap);
    fprintf(f,
            "%sPosition-blind references on val: most frequent token of the sequence %.1f %%, own "
            "input token %.1f %%, "
            "per-position majority class (content-blind) %.1f %%",
            md ? "" : "  ", 100 * mode, 100 * copy, 100 * maj);
    if (task == POSENC_SORT)
        fprintf(f, "; cap of a reflection-equivariant network (alibi) %.1f %%", 100 * cap);
    fprintf(f, ".\n");
    posenc_data_free(&tr);
    posenc_data_free(&va);
}

void posenc_print_tables(FILE *f, const posenc_report *rep, bool md) {
    table *t = malloc(sizeof *t);
    if (!t) return;
    for (int k = 0; k < rep->n_tasks; k++) {
        const posenc_result *any = first_run(rep, rep->tasks[k]);
        if (!any) continue;
        int seeds = 0;
        for (int s = 0; s < rep->n_schemes && !seeds; s++)
            seeds = runs_of(rep, rep->tasks[k], rep->schemes[s].name).n;
        fprintf(f,
                md ? "\n### %s (%d seed%s, %d steps of %d; mean ± sd over seeds)\n\n"
                   : "\n%s  (%d seed%s, %d steps of %d; mean ± sd over seeds)\n",
                posenc_task_name(rep->tasks[k]), seeds, seeds == 1 ? "" : "s", any->cfg.steps,
                any->cfg.batch);
        build_table(rep, rep->tasks[k], t);
        print_table(f, t, md);
        if (md) fprintf(f, "\n");
        if (any->cfg.eval_n == 0) print_references(f, rep->tasks[k], md);
    }
    free(t);
}

/* ---- plots ---- */

static void file_label(char *buf, size_t n, const char *label) {
    snprintf(buf, n, "%s", label);
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            *p = '_';
}

static mg_status plot_curves(const char *dir, const posenc_report *rep, posenc_task task) {
    mg_plot_series ser[POSENC_MAX_SCHEMES];
    double(*xs)[POSENC_MAX_CURVE] = malloc(sizeof(double[POSENC_MAX_SCHEMES][POSENC_MAX_CURVE]));
    double(*ys)[POSENC_MAX_CURVE] = malloc(sizeof(double[POSENC_MAX_SCHEMES][POSENC_MAX_CURVE]));
    if (!xs || !ys) {
        free(xs);
        free(ys);
        return mg_set_error(MG_ERR_NOMEM, "report: out of memory");
    }
    int n = 0, seeds = 0;
    for (int s = 0; s < rep->n_schemes; s++) {
        group g = runs_of(rep, task, rep->schemes[s].name);
        if (!g.n) continue;
        seeds = g.n;
        const posenc_result *r0 = g.r[0];
        for (int k = 0; k < r0->n_curve; k++) {
            double sd;
            xs[n][k] = r0->curve_step[k];
            stats(&g, f_curve_acc, k, &ys[n][k], &sd);
        }
        ser[n] = (mg_plot_series){rep->schemes[s].label, xs[n], ys[n], r0->n_curve};
        n++;
    }
    mg_status st = MG_OK;
    if (n) {
        char title[160], path[1100];
        snprintf(title, sizeof title, "%s: validation token accuracy (mean of %d seed%s)",
                 posenc_task_name(task), seeds, seeds == 1 ? "" : "s");
        snprintf(path, sizeof path, "%s/curves_%s.png", dir, posenc_task_name(task));
        mg_plot_opts o = {.title = title,
                          .xlabel = "training step",
                          .ylabel = "val accuracy",
                          .y_fixed = true,
                          .y_min = 0.0,
                          .y_max = 1.0};
        st = mg_plot_lines(path, &o, ser, n);
    }
    free(xs);
    free(ys);
    return st;
}

static mg_status plot_lengths(const char *dir, const posenc_report *rep, posenc_task task) {
    const posenc_result *any = first_run(rep, task);
    if (!any || !any->n_len) return MG_OK;
    bool some = false;
    const char *groups[POSENC_MAX_SCHEMES];
    char series_lab[POSENC_MAX_LENGTHS + 1][32];
    const char *series[POSENC_MAX_LENGTHS + 1];
    double vals[POSENC_MAX_SCHEMES * (POSENC_MAX_LENGTHS + 1)];
    int ns = any->n_len + 1, ng = 0;
    snprintf(series_lab[0], 32, "L=%d (val)", POSENC_L);
    for (int k = 0; k < any->n_len; k++) snprintf(series_lab[k + 1], 32, "L=%d", any->len[k].L);
    for (int k = 0; k < ns; k++) series[k] = series_lab[k];
    for (int s = 0; s < rep->n_schemes; s++) {
        group g = runs_of(rep, task, rep->schemes[s].name);
        if (!g.n) continue;
        double m, sd;
        groups[ng] = rep->schemes[s].label;
        stats(&g, f_val_acc, 0, &m, &sd);
        vals[ng * ns] = m;
        for (int k = 0; k < any->n_len; k++) {
            stats(&g, f_len_acc, k, &m, &sd);
            vals[ng * ns + k + 1] = m;
            some = some || !isnan(m);
        }
        ng++;
    }
    if (!some) return MG_OK; /* perm: nothing to show past 32 */
    char title[160], path[1100];
    snprintf(title, sizeof title, "%s: accuracy at longer lengths (trained on %d; no bar: n/a)",
             posenc_task_name(task), POSENC_L);
    snprintf(path, sizeof path, "%s/length_%s.png", dir, posenc_task_name(task));
    mg_plot_opts o = {.title = title,
                      .ylabel = "token accuracy",
                      .y_fixed = true,
                      .y_min = 0.0,
                      .y_max = 1.0,
                      .width = 900};
    return mg_plot_bars(path, &o, groups, ng, series, ns, vals);
}

typedef struct {
    const char *title, *xlabel, *ylabel, *value_label;
    const float *v;
    int rows, cols, w, h;
    double lo, hi;
    bool diverging, square;
} heat;

/* One heatmap panel of the figure `path`, drawn onto dst at (x, y). */
static mg_status heat_panel(mg_canvas *dst, int x, int y, const char *path, const heat *p) {
    mg_plot_opts o = {.title = p->title,
                      .xlabel = p->xlabel,
                      .ylabel = p->ylabel,
                      .value_label = p->value_label,
                      .colormap = p->diverging ? MG_CMAP_DIVERGING : MG_CMAP_VIRIDIS,
                      .v_fixed = true,
                      .v_min = p->lo,
                      .v_max = p->hi,
                      .width = p->w,
                      .height = p->h,
                      .square_cells = p->square};
    return mg_plot_heatmap_onto(dst, x, y, path, &o, p->v, p->rows, p->cols);
}

/* Largest |v| over the finite values (1 when there is none), for a symmetric colour range. */
static float max_abs(const float *v, size_t n) {
    float mx = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) mx = fabsf(v[i]) > mx ? fabsf(v[i]) : mx;
    return mx > 0.0f ? mx : 1.0f;
}

enum { PR_W = 1320, PR_TOP = 44, PR_EMBED_H = 520, PR_BIAS_H = 360, PR_ROT_H = 520 };

/* What a scheme does, as posenc_scheme_probe saw it, one section per part it has, stacked:
 *  - the table added to the embedding (positions x dimensions) and, beside it, the cosine
 *    similarity of its rows (the table itself often looks like noise, the similarity shows what
 *    positions share);
 *  - the bias on the attention logits, one panel per head (query positions down, keys across);
 *  - q_i . k_j of one unit vector rotated to positions i and j. */
static mg_status plot_probe(const char *path, const char *title, const posenc_probe *p) {
    enum { TW = 760, SW = 560 };
    const int T = p->T, C = p->C, H = p->H;
    const int height = PR_TOP + (p->has_embed ? PR_EMBED_H : 0) + (p->has_bias ? PR_BIAS_H : 0) +
                       (p->has_rot ? PR_ROT_H : 0);
    float *sim = malloc((size_t)T * T * sizeof *sim);
    mg_canvas *all = mg_canvas_new(PR_W, height, 0xFFFFFF);
    mg_status st = sim && all ? MG_OK : mg_set_error(MG_ERR_NOMEM, "report: out of memory");
    int y = PR_TOP;
    if (st == MG_OK && p->has_embed) {
        const float *v = p->embed;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double ab = 0.0, aa = 0.0, bb = 0.0;
                for (int k = 0; k < C; k++) {
                    double a = v[i * C + k], b = v[j * C + k];
                    ab += a * b, aa += a * a, bb += b * b;
                }
                sim[i * T + j] = aa > 0.0 && bb > 0.0 ? (float)(ab / sqrt(aa * bb)) : NAN;
            }
        const float mx = max_abs(v, (size_t)T * C);
        heat t = {"added to the embedding", "dimension", "position", "value", v, T, C, TW, PR_EMBED_H,
                  -mx, mx, true, false};
        heat c = {"cosine similarity of positions", "position", "position", "cos", sim, T, T, SW,
                  PR_EMBED_H, -1.0, 1.0, true, true};
        st = heat_panel(all, 0, y, path, &t);
        if (st == MG_OK) st = heat_panel(all, TW, y, path, &c);
        y += PR_EMBED_H;
    }
    if (st == MG_OK && p->has_bias) {
        const float mx = max_abs(p->bias, (size_t)H * T * T);
        for (int h = 0; h < H && st == MG_OK; h++) {
            char t[64];
            snprintf(t, sizeof t, "logit bias, head %d", h);
            heat b = {t, "key position", "query position", NULL, p->bias + (size_t)h * T * T, T, T,
                      PR_W / H, PR_BIAS_H, -mx, mx, true, true};
            st = heat_panel(all, h * (PR_W / H), y, path, &b);
        }
        y += PR_BIAS_H;
    }
    if (st == MG_OK && p->has_rot) {
        const float mx = max_abs(p->rot, (size_t)T * T);
        heat r = {"q.k, one unit vector rotated to i and j", "key position j",
                  "query position i", "q.k", p->rot, T, T, SW, PR_ROT_H, -mx, mx, true, true};
        st = heat_panel(all, (PR_W - SW) / 2, y, path, &r);
    }
    if (st == MG_OK) {
        mg_text_style ts = {.scale = 2, .rgb = 0x202020, .align_x = 0.5, .bold = true};
        mg_canvas_text_ex(all, PR_W / 2.0, 10, title, &ts);
        st = mg_canvas_save_png(all, path);
    }
    mg_canvas_free(all);
    free(sim);
    return st;
}

/* Every scheme that acts anywhere gets its drawing: a learned one (it has parameters) after
 * training on each task, table_<scheme>_<task>.png (first seed), titled "(learned)"; a fixed one
 * once, table_<scheme>.png, titled "(fixed)". */
static mg_status plot_tables(const char *dir, const posenc_report *rep) {
    mg_status st = MG_OK;
    for (int s = 0; s < rep->n_schemes && st == MG_OK; s++) {
        const posenc_scheme *sc = &rep->schemes[s];
        char fl[64], path[1100], title[200];
        file_label(fl, sizeof fl, sc->label);
        for (int t = 0; t < rep->n_tasks && st == MG_OK; t++) {
            group g = runs_of(rep, rep->tasks[t], sc->name);
            if (!g.n) continue;
            const posenc_result *r = g.r[0];
            const posenc_probe *p = &r->probe;
            if (!p->has_embed && !p->has_bias && !p->has_rot) break; /* none: nothing to draw */
            if (p->learned) {
                snprintf(path, sizeof path, "%s/table_%s_%s.png", dir, fl, posenc_task_name(r->cfg.task));
                snprintf(title, sizeof title, "%s (learned): after training on %s (seed %u)", sc->label,
                         posenc_task_name(r->cfg.task), r->cfg.seed);
                st = plot_probe(path, title, p);
                continue;
            }
            snprintf(path, sizeof path, "%s/table_%s.png", dir, fl);
            snprintf(title, sizeof title, "%s (fixed): no parameters, the same before and after training",
                     sc->label);
            st = plot_probe(path, title, p);
            break;
        }
    }
    return st;
}

/* One panel per layer and head (rows: layers, columns: heads), each a heatmap made by
 * mg_plot_heatmap and composed onto one canvas. */
static mg_status plot_attention(const char *dir, const posenc_scheme *sc, const posenc_result *r) {
    enum { PW = 330, PH = 330, TOP = 56 };
    const int L = POSENC_LAYERS, H = POSENC_HEADS, T = POSENC_L;
    char fl[64], path[1100], title[300];
    file_label(fl, sizeof fl, sc->label);
    snprintf(path, sizeof path, "%s/attention_%s.png", dir, fl);
    mg_canvas *all = mg_canvas_new(PW * H, TOP + PH * L, 0xFFFFFF);
    mg_status st = all ? MG_OK : mg_set_error(MG_ERR_NOMEM, "report: out of memory");
    for (int l = 0; l < L && st == MG_OK; l++)
        for (int h = 0; h < H && st == MG_OK; h++) {
            char t[64];
            snprintf(t, sizeof t, "layer %d, head %d", l, h);
            heat p = {t,
                      "key position",
                      "query position",
                      NULL,
                      r->attn + (size_t)(l * H + h) * T * T,
                      T,
                      T,
                      PW,
                      PH,
                      0.0,
                      1.0,
                      false,
                      true};
            st = heat_panel(all, h * PW, TOP + l * PH, path, &p);
        }
    if (st == MG_OK) {
        snprintf(title, sizeof title, "%s: attention probabilities after training on %s (seed %u)",
                 sc->label, posenc_task_name(r->cfg.task), r->cfg.seed);
        mg_text_style ts = {.scale = 2, .rgb = 0x202020, .align_x = 0.5, .bold = true};
        mg_canvas_text_ex(all, PW * H / 2.0, 8, title, &ts);
        char in[256] = "input: the first val sequence,";
        for (int i = 0; i < T; i++)
            snprintf(in + strlen(in), sizeof in - strlen(in), " %d", r->attn_x[i]);
        mg_text_style ts2 = {.scale = 1, .rgb = 0x404040, .align_x = 0.5};
        mg_canvas_text_ex(all, PW * H / 2.0, 36, in, &ts2);
        st = mg_canvas_save_png(all, path);
    }
    mg_canvas_free(all);
    return st;
}

/* ---- Markdown ---- */

static mg_status write_markdown(const char *dir, const posenc_report *rep) {
    out_file o;
    mg_status st = out_open(&o, dir, "results.md");
    if (st != MG_OK) return st;
    FILE *f = o.f;
    fprintf(f, "## Positional schemes on order-sensitive tasks\n\n");
    if (rep->command) fprintf(f, "Command: `%s`\n\n", rep->command);
    double sum = 0.0, cpu = 0.0;
    for (int i = 0; i < rep->n_runs; i++)
        sum += rep->runs[i].seconds, cpu += rep->runs[i].cpu_seconds;
    fprintf(f,
            "%d runs, %d at a time with %d thread%s each; wall time per run %.1f s on average (CPU "
            "%.1f s), "
            "%.1f s for the whole comparison.\n",
            rep->n_runs, rep->jobs, rep->threads_per_run, rep->threads_per_run == 1 ? "" : "s",
            rep->n_runs ? sum / rep->n_runs : 0.0, rep->n_runs ? cpu / rep->n_runs : 0.0,
            rep->total_seconds);
    /* --eval-n evaluates the first eval_n sequences of each set instead of all of them */
    const int eval_n = rep->n_runs ? rep->runs[0].cfg.eval_n : 0;
    const int length_n = eval_n > 0 && eval_n < POSENC_N_LENGTH ? eval_n : POSENC_N_LENGTH;
    fprintf(f,
            "Accuracies in %%, losses in nats per token; `val acc %% @N`: token accuracy on %d "
            "fresh sequences of length N (trained on %d); `s/run (cpu)`: wall and CPU seconds per "
            "run, training and every evaluation included.\n",
            length_n, POSENC_L);
    posenc_print_tables(f, rep, true);
    fprintf(f, "\nFiles: `results.csv` (one row per run), `length.csv`, `curves.csv`; plots "
               "`curves_<task>.png`, "
               "`length_<task>.png`, `table_<scheme>[_<task>].png`, `attention_<scheme>.png`.\n");
    return out_close(&o);
}

mg_status posenc_write_report(const char *dir, const posenc_report *rep) {
    mg_status st = posenc_write_csvs(dir, rep);
    if (st == MG_OK) st = write_markdown(dir, rep);
    for (int t = 0; t < rep->n_tasks && st == MG_OK; t++) st = plot_curves(dir, rep, rep->tasks[t]);
    for (int t = 0; t < rep->n_tasks && st == MG_OK; t++)
        st = plot_lengths(dir, rep, rep->tasks[t]);
    if (st == MG_OK) st = plot_tables(dir, rep);
    for (int s = 0; s < rep->n_schemes && st == MG_OK; s++) {
        const posenc_result *first = NULL;
        for (int t = 0; t < rep->n_tasks && !first; t++) {
            group g = runs_of(rep, rep->tasks[t], rep->schemes[s].name);
            if (g.n) first = g.r[0];
        }
        if (first) st = plot_attention(dir, &rep->schemes[s], first);
    }
    return st;
}
