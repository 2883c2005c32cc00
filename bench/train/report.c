/* Results: the terminal table with minigrad / PyTorch ratios and the performance targets, JSON
 * lines, and the PNG chart (three panels: textgen training, music training, generation). */
#include "bench_train.h"
#include "../common/bench_util.h"

#include "minigrad/plot.h"

#include <cjson/cJSON.h>
#include <errno.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const bt_impl_name[BT_N_IMPL] = {"minigrad", "pytorch", "minigrad-bf16", "pytorch-bf16"};
#define impl_name bt_impl_name

bt_result *bt_report_add(bt_report *rep) {
    if (rep->n == rep->cap) {
        const int cap = rep->cap ? 2 * rep->cap : 32;
        bt_result *r = realloc(rep->r, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        rep->r = r, rep->cap = cap;
    }
    bt_result *r = &rep->r[rep->n++];
    memset(r, 0, sizeof *r);
    r->mfu = r->peak_rss_mb = r->base_rss_mb = r->arena_peak_mb = r->state_mb = NAN;
    r->tokens_per_s = r->seconds = r->best_seconds = r->peak_gflops = NAN;
    double l[1];
    r->load = getloadavg(l, 1) == 1 ? l[0] : NAN;
    return r;
}

const bt_result *bt_report_find(const bt_report *rep, bool gen, bool cache, const char *cfg, int threads,
                                int impl) {
    for (int i = 0; i < rep->n; i++) {
        const bt_result *r = &rep->r[i];
        if (r->valid && r->gen == gen && (!gen || r->cache == cache) && r->threads == threads &&
            r->impl == impl && strcmp(r->cfg->name, cfg) == 0)
            return r;
    }
    return NULL;
}

/* The measurement a minigrad result is compared with: PyTorch at the same thread count, for
 * generation PyTorch without a cache (the baseline of the generation target). */
static const bt_result *baseline(const bt_report *rep, const bt_result *r) {
    if (r->impl != BT_MINIGRAD) return NULL;
    return bt_report_find(rep, r->gen, false, r->cfg->name, r->threads, BT_PYTORCH);
}

static double ratio(const bt_report *rep, const bt_result *r) {
    const bt_result *b = baseline(rep, r);
    return b ? r->tokens_per_s / b->tokens_per_s : NAN;
}

static void fmt_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "-");
}

static int max_threads(const bt_report *rep) {
    int m = 1;
    for (int i = 0; i < rep->n_threads; i++) m = rep->threads[i] > m ? rep->threads[i] : m;
    return m;
}

/* binding: false for a figure whose target applies at another thread count (shown, and whether it is
 * above or below, but not judged) */
static void print_target_at(FILE *f, const char *what, double value, const char *unit, double target, bool at_least,
                            bool binding) {
    char v[32];
    fmt_num(v, sizeof v, "%.2f", value);
    const bool ok = at_least ? value >= target : value <= target;
    const char *verdict = !isfinite(value) ? "not measured"
                          : !binding       ? (ok ? "above the target, which applies on all threads only"
                                                 : "below the target, which applies on all threads only")
                          : ok             ? "met"
                                           : "not met";
    fprintf(f, "  %-70s %7s%s  (target %s %.2f%s)  %s\n", what, v, unit, at_least ? ">=" : "<=", target, unit,
            verdict);
}

static void print_target(FILE *f, const char *what, double value, const char *unit, double target, bool at_least) {
    print_target_at(f, what, value, unit, target, at_least, true);
}

static double tps(const bt_report *rep, bool gen, bool cache, const char *cfg, int threads, int impl) {
    const bt_result *r = bt_report_find(rep, gen, cache, cfg, threads, impl);
    return r ? r->tokens_per_s : NAN;
}

/* New tokens per generation run as measured for a configuration (every run of one report uses the
 * same count), 0 when it has none. */
static int64_t gen_tokens_of(const bt_report *rep, const char *cfg) {
    for (int i = 0; i < rep->n; i++)
        if (rep->r[i].valid && rep->r[i].gen && !strcmp(rep->r[i].cfg->name, cfg)) return rep->r[i].new_tokens;
    return 0;
}

/* The bf16 path a minigrad-bf16 result ran on: the last word of its backend ("avx512 bf16 amx"). */
static const char *bf16_path(const bt_result *r) {
    const char *b = strstr(r->backend, " bf16 ");
    return b ? b + 6 : "unknown";
}

/* bf16 training against float32, targets set by the bf16 unit the run had: where AMX tiles do the
 * products at least 3x minigrad fp32 and 2x PyTorch's bf16 autocast, where AVX512-BF16 does them at
 * least 1.5x minigrad fp32. The emulation (no bf16 unit) is shown with no target. */
static void print_bf16_targets(const bt_report *rep, FILE *f) {
    for (int t = 0; t < rep->n_threads; t++) {
        const int th = rep->threads[t];
        for (int c = 0; c < bt_n_configs; c++) {
            const char *name = bt_configs[c].name;
            const bt_result *b = bt_report_find(rep, false, false, name, th, BT_MINIGRAD_BF16);
            if (bt_configs[c].test_only || !b) continue;
            const char *path = bf16_path(b);
            const double fp32 = b->tokens_per_s / tps(rep, false, false, name, th, BT_MINIGRAD);
            char what[96];
            snprintf(what, sizeof what, "%s training tokens/s, bf16 on %s / minigrad fp32, %dt", name, path, th);
            if (!strcmp(path, "amx")) {
                print_target(f, what, fp32, "x", 3.0, true);
                snprintf(what, sizeof what, "%s training tokens/s, bf16 on amx / PyTorch bf16 autocast, %dt", name, th);
                print_target(f, what, b->tokens_per_s / tps(rep, false, false, name, th, BT_PYTORCH_BF16), "x", 2.0,
                             true);
            } else if (!strcmp(path, "avx512bf16")) {
                print_target(f, what, fp32, "x", 1.5, true);
            } else {
                char v[32];
                fmt_num(v, sizeof v, "%.2f", fp32);
                fprintf(f, "  %-70s %7sx  (%s)\n", what, v,
                        strcmp(path, "emulated") ? "no target: the run did not record its bf16 unit"
                                                 : "no target without a bf16 unit");
            }
        }
    }
}

void bt_print_table(const bt_report *rep, FILE *f) {
    fprintf(f, "\ncpu: %s\n", rep->cpu[0] ? rep->cpu : "not recorded (a run from before the CPU was recorded)");
    fprintf(f, "\ntraining: one AdamW step (forward, backward, clip, update); median of the timed steps\n");
    fprintf(f, "%-8s %3s %-13s %5s %10s %10s %7s %9s %9s %9s %8s %5s\n", "config", "thr", "impl", "steps", "ms/step",
            "tokens/s", "MFU", "peak RSS", "base RSS", "arena", "ratio", "load");
    for (int i = 0; i < rep->n; i++) {
        const bt_result *r = &rep->r[i];
        if (!r->valid || r->gen) continue;
        char mfu[16], rss[16], base[16], arena[16], rt[16];
        fmt_num(mfu, sizeof mfu, "%.1f%%", 100.0 * r->mfu);
        fmt_num(rss, sizeof rss, "%.0fM", r->peak_rss_mb);
        fmt_num(base, sizeof base, "%.0fM", r->base_rss_mb);
        fmt_num(arena, sizeof arena, "%.0fM", r->arena_peak_mb);
        fmt_num(rt, sizeof rt, "%.2fx", ratio(rep, r));
        fprintf(f, "%-8s %3d %-13s %5d %10.1f %10.0f %7s %9s %9s %9s %8s %5.1f\n", r->cfg->name, r->threads,
                impl_name[r->impl], r->n, 1e3 * r->seconds, r->tokens_per_s, mfu, rss, base, arena, rt, r->load);
    }
    fprintf(f, "\ngeneration: batch 1, greedy, %d-token prompt; tokens/s = new tokens / wall time; median of "
               "samples, each the mean of runs back to back (samples x runs)\n",
            BT_PROMPT_LEN);
    fprintf(f, "%-8s %3s %-13s %-8s %4s %7s %10s %10s %7s %9s %8s %5s\n", "config", "thr", "impl", "kv", "new", "runs",
            "ms/token", "tokens/s", "MFU", "peak RSS", "ratio", "load");
    for (int i = 0; i < rep->n; i++) {
        const bt_result *r = &rep->r[i];
        if (!r->valid || !r->gen) continue;
        char mfu[16], rss[16], rt[16], runs[24];
        fmt_num(mfu, sizeof mfu, "%.2f%%", 100.0 * r->mfu);
        fmt_num(rss, sizeof rss, "%.0fM", r->peak_rss_mb);
        fmt_num(rt, sizeof rt, "%.1fx", r->cache ? ratio(rep, r) : NAN);
        snprintf(runs, sizeof runs, "%dx%d", r->n, r->reps);
        fprintf(f, "%-8s %3d %-13s %-8s %4lld %7s %10.3f %10.1f %7s %9s %8s %5.1f\n", r->cfg->name, r->threads,
                impl_name[r->impl], r->cache ? "cache" : "no cache", (long long)r->new_tokens, runs,
                1e3 * r->seconds / (double)r->new_tokens, r->tokens_per_s, mfu, rss, rt, r->load);
    }
    fprintf(f, "ratio: minigrad tokens/s over PyTorch's at the same thread count (generation: over PyTorch "
               "without a cache); load: 1-minute load average as the measurement ended\n");
    /* bt_measure_peak times float32 FMAs only; bf16 units do more multiply-adds a cycle */
    fprintf(f, "MFU: model FLOPs (training: per step, as bench/README.md counts them; generation: the forward "
               "FLOPs of a cached decoder) / median time / the float32 FMA peak measured on the machine at the "
               "same thread count (peak_gflops in --json).\n     bf16 rows use that float32 peak too; the bf16 units "
               "(AVX512-BF16, AMX) do more multiply-adds per cycle, so their MFU can pass 100%%\n");

    bool any_target = false;
    for (int i = 0; i < rep->n; i++) any_target |= rep->r[i].valid && !rep->r[i].cfg->test_only;
    if (!any_target) return;
    const int all = max_threads(rep);
    const int two = 2 <= all ? 2 : all; /* the target's 1 -> 2 threads scaling */
    fprintf(f, "\nperformance targets, at each thread count measured (textgen's minigrad / PyTorch target applies "
               "on all threads, %d here):\n",
            all);
    for (int t = 0; t < rep->n_threads; t++) {
        const int th = rep->threads[t];
        char what[96];
        const bt_result *tg = bt_report_find(rep, false, false, "textgen", th, BT_MINIGRAD);
        const bt_result *mu = bt_report_find(rep, false, false, "music", th, BT_MINIGRAD);
        const bt_result *mu_pt = bt_report_find(rep, false, false, "music", th, BT_PYTORCH);
        snprintf(what, sizeof what, "textgen training tokens/s, minigrad / PyTorch, %dt", th);
        print_target_at(f, what, tg ? ratio(rep, tg) : NAN, "x", 1.5, true, th == all);
        snprintf(what, sizeof what, "textgen training MFU (%%), %dt", th);
        print_target(f, what, tg ? 100.0 * tg->mfu : NAN, "", 60.0, true);
        snprintf(what, sizeof what, "music training tokens/s, minigrad / PyTorch, %dt", th);
        print_target(f, what, mu ? ratio(rep, mu) : NAN, "x", 4.0, true);
        /* with --pytorch-malloc retain, PyTorch's RSS also counts the memory glibc kept for it */
        snprintf(what, sizeof what, "music peak RSS, minigrad / PyTorch%s, %dt",
                 mu_pt && strstr(mu_pt->backend, "retain") ? " (its freed memory kept)" : "", th);
        print_target(f, what, mu && mu_pt ? mu->peak_rss_mb / mu_pt->peak_rss_mb : NAN, "", 0.5, false);
        for (int c = 0; c < bt_n_configs; c++) {
            if (bt_configs[c].test_only) continue;
            const int64_t nt = gen_tokens_of(rep, bt_configs[c].name);
            char len[48] = "";
            if (nt > 0) snprintf(len, sizeof len, " (%lld new tokens)", (long long)nt);
            snprintf(what, sizeof what, "%s generation%s, KV cache / PyTorch no cache, %dt", bt_configs[c].name, len, th);
            print_target(f, what,
                         tps(rep, true, true, bt_configs[c].name, th, BT_MINIGRAD) /
                             tps(rep, true, false, bt_configs[c].name, th, BT_PYTORCH),
                         "x", 20.0, true);
        }
    }
    print_bf16_targets(rep, f);
    for (int c = 0; c < bt_n_configs; c++) {
        if (bt_configs[c].test_only) continue;
        char what[96];
        snprintf(what, sizeof what, "%s training scaling, 1 -> %d threads (minigrad)", bt_configs[c].name, two);
        print_target(f, what,
                     tps(rep, false, false, bt_configs[c].name, two, BT_MINIGRAD) /
                         tps(rep, false, false, bt_configs[c].name, 1, BT_MINIGRAD),
                     "x", 1.85, true);
    }
}


bool bt_write_json(const bt_report *rep, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_train: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    for (int i = 0; i < rep->n; i++) {
        const bt_result *r = &rep->r[i];
        if (!r->valid) continue;
        const bt_config *c = r->cfg;
        fprintf(f, "{\"bench\":\"%s\",\"config\":\"%s\",\"threads\":%d,\"impl\":\"%s\"", r->gen ? "gen" : "train",
                c->name, r->threads, impl_name[r->impl]);
        if (r->gen) {
            fprintf(f, ",\"cache\":%s,\"prompt_tokens\":%d,\"new_tokens\":%lld,\"runs\":%d,\"reps_per_run\":%d",
                    r->cache ? "true" : "false", BT_PROMPT_LEN, (long long)r->new_tokens, r->n, r->reps);
            bench_json_num(f, "ms_per_token", 1e3 * r->seconds / (double)r->new_tokens, "%.6g");
            bench_json_num(f, "gen_tokens_per_s", r->tokens_per_s, "%.6g");
            bench_json_num(f, "best_ms_per_token", 1e3 * r->best_seconds / (double)r->new_tokens, "%.6g");
        } else {
            fprintf(f, ",\"steps\":%d", r->n);
            bench_json_num(f, "ms_per_step", 1e3 * r->seconds, "%.6g");
            bench_json_num(f, "best_ms_per_step", 1e3 * r->best_seconds, "%.6g");
            bench_json_num(f, "model_gflop_per_step", bt_train_flops_per_token(c) * (double)(c->B * c->T) / 1e9, "%.6g");
        }
        bench_json_num(f, "tokens_per_s", r->tokens_per_s, "%.6g");
        bench_json_num(f, "mfu", r->mfu, "%.5f");
        bench_json_num(f, "peak_gflops", r->peak_gflops, "%.2f");
        bench_json_num(f, "peak_rss_mb", r->peak_rss_mb, "%.1f");
        bench_json_num(f, "base_rss_mb", r->base_rss_mb, "%.1f");
        bench_json_num(f, "arena_peak_mb", r->arena_peak_mb, "%.1f");
        bench_json_num(f, "state_mb", r->state_mb, "%.1f");
        const double rt = r->gen && !r->cache ? NAN : ratio(rep, r);
        if (isfinite(rt)) bench_json_num(f, "ratio_vs_pytorch", rt, "%.4f");
        fprintf(f, ",\"n_params\":%lld,\"backend\":\"%s\",\"V\":%lld,\"T\":%lld,\"C\":%lld,\"L\":%lld,\"H\":%lld,"
                   "\"B\":%lld",
                (long long)r->n_params, r->backend, (long long)c->V, (long long)c->T, (long long)c->C,
                (long long)c->L, (long long)c->H, (long long)(r->gen ? 1 : c->B));
        bench_json_num(f, "load", r->load, "%.2f");
        bench_json_num(f, "load_before", rep->load_before, "%.2f");
        bench_json_num(f, "load_after", rep->load_after, "%.2f");
        if (rep->cpu[0]) {
            fputs(",\"cpu\":\"", f);
            for (const char *ch = rep->cpu; *ch; ch++) /* a JSON string: quotes, backslashes and controls escaped */
                if (*ch == '"' || *ch == '\\') fprintf(f, "\\%c", *ch);
                else if ((unsigned char)*ch < 0x20) fprintf(f, "\\u%04x", (unsigned char)*ch);
                else fputc(*ch, f);
            fputc('"', f);
        }
        fputs("}\n", f);
    }
    return bench_json_close("bench_train", f, path);
}

/* ---- PNG: each panel is drawn by mg_plot_bars into a temporary folder, then the panels are
 * pasted onto one canvas, training in the top row and generation below, one column per
 * configuration (each panel keeps its own value axis: the configurations' throughputs differ by
 * an order of magnitude). ---- */

enum { PANEL_W = 560, PANEL_H = 440, MAX_PANELS = 8 };

static bool paste(mg_canvas *dst, const char *tmp, int x0, int y0) {
    mg_canvas *src = NULL;
    if (mg_canvas_load_png(tmp, &src) != MG_OK) return false;
    const int w = mg_canvas_width(src), h = mg_canvas_height(src);
    const int dw = mg_canvas_width(dst), dh = mg_canvas_height(dst);
    uint8_t *d = mg_canvas_pixels(dst), *s = mg_canvas_pixels(src);
    for (int y = 0; y < h && y0 + y < dh; y++)
        memcpy(d + ((size_t)(y0 + y) * (size_t)dw + (size_t)x0) * 3, s + (size_t)y * (size_t)w * 3,
               (size_t)(w < dw - x0 ? w : dw - x0) * 3);
    mg_canvas_free(src);
    return true;
}

bool bt_write_png(const bt_report *rep, const char *path) {
    const char *thr_label[8];
    char thr_buf[8][24];
    for (int t = 0; t < rep->n_threads; t++) {
        snprintf(thr_buf[t], sizeof thr_buf[t], "%d thread%s", rep->threads[t], rep->threads[t] > 1 ? "s" : "");
        thr_label[t] = thr_buf[t];
    }
    const char *train_series[2] = {"minigrad", "PyTorch 1.13"};
    const char *gen_series[3] = {"minigrad, KV cache", "PyTorch, no cache", "PyTorch, own cache"};
    const int n_train = rep->have_pytorch ? 2 : 1, n_gen = rep->have_pytorch ? 3 : 1;
    char tmp[MAX_PANELS][4200], title[128];
    int col[MAX_PANELS], row[MAX_PANELS], panels = 0, cols = 0;
    /* the panels go to a folder of their own, not beside path: path may be a device (/dev/stdout) */
    const char *tmpdir = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bench_train_png_XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_train: %s: cannot make a folder for the chart's panels: %s\n", dir, strerror(errno));
        return false;
    }
    bool ok = true;
    for (int c = 0; c < bt_n_configs && ok; c++) {
        const bt_config *cfg = &bt_configs[c];
        bool used = false;
        for (int gen = 0; gen < 2 && ok && panels < MAX_PANELS; gen++) {
            double v[8 * 3];
            const int ns = gen ? n_gen : n_train;
            bool any = false;
            for (int t = 0; t < rep->n_threads; t++)
                for (int i = 0; i < ns; i++) {
                    /* generation series: minigrad cached, PyTorch uncached, PyTorch cached */
                    const int impl = gen && i > 0 ? BT_PYTORCH : i;
                    const bool cache = gen && i != 1;
                    v[t * ns + i] = tps(rep, gen, cache, cfg->name, rep->threads[t], impl);
                    any |= isfinite(v[t * ns + i]);
                }
            if (!any) continue;
            if (gen)
                snprintf(title, sizeof title, "%s generation, batch 1 (%lld new tokens)", cfg->name,
                         (long long)gen_tokens_of(rep, cfg->name));
            else
                snprintf(title, sizeof title, "%s training (B=%lld, T=%lld)", cfg->name, (long long)cfg->B,
                         (long long)cfg->T);
            snprintf(tmp[panels], sizeof tmp[panels], "%s/panel%d.png", dir, panels);
            mg_plot_opts o = {.title = title, .ylabel = gen ? "new tokens/s" : "tokens/s", .width = PANEL_W,
                              .height = PANEL_H, .bar_values = true};
            ok = mg_plot_bars(tmp[panels], &o, thr_label, rep->n_threads, gen ? gen_series : train_series, ns, v) ==
                 MG_OK;
            col[panels] = cols, row[panels] = gen;
            panels++;
            used = true;
        }
        cols += used;
    }
    if (!ok) fprintf(stderr, "bench_train: chart: %s\n", mg_last_error());
    int rows = 0;
    for (int p = 0; p < panels; p++) rows = row[p] + 1 > rows ? row[p] + 1 : rows;
    mg_canvas *all = ok && panels > 0 ? mg_canvas_new(PANEL_W * cols, PANEL_H * rows, 0xFFFFFF) : NULL;
    for (int p = 0; p < panels && all && ok; p++)
        if (!paste(all, tmp[p], col[p] * PANEL_W, row[p] * PANEL_H)) {
            fprintf(stderr, "bench_train: chart: %s\n", mg_last_error());
            ok = false;
        }
    if (ok && all && mg_canvas_save_png(all, path) != MG_OK) {
        fprintf(stderr, "bench_train: %s\n", mg_last_error());
        ok = false;
    }
    if (ok && panels == 0) {
        fprintf(stderr, "bench_train: chart: nothing was measured\n");
        ok = false;
    }
    for (int p = 0; p < panels; p++) unlink(tmp[p]);
    rmdir(dir);
    mg_canvas_free(all);
    return ok;
}

/* ---- reading an earlier run's JSON lines back (--report FILE) ---- */

double bt_json_num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *bt_json_str(const cJSON *j, const char *key, const char *missing) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : missing;
}

bool bt_report_load(bt_report *rep, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_train: cannot read %s: %s\n", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    bool ok = true;
    rep->load_before = rep->load_after = NAN;
    while (ok && getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[strspn(line, " \t\r\n")] == 0) continue;
        cJSON *j = cJSON_Parse(line);
        const char *bench = j ? bt_json_str(j, "bench", NULL) : NULL, *cfg = j ? bt_json_str(j, "config", NULL) : NULL;
        const char *impl = j ? bt_json_str(j, "impl", NULL) : NULL;
        const bt_config *c = cfg ? bt_config_find(cfg) : NULL;
        const int threads = j ? (int)bt_json_num(j, "threads") : 0;
        const bool gen = bench && !strcmp(bench, "gen");
        if (!bench || (!gen && strcmp(bench, "train")) || !c || !impl ||
            (strcmp(impl, "minigrad") && strcmp(impl, "pytorch") && strcmp(impl, "minigrad-bf16") &&
             strcmp(impl, "pytorch-bf16")) || threads < 1) {
            fprintf(stderr, "bench_train: %s:%ld: not a bench_train record (bench train|gen, a known config, "
                            "impl minigrad|pytorch, threads >= 1)\n", path, lineno);
            ok = false;
        } else {
            bt_result *r = bt_report_add(rep);
            if (!r) {
                ok = false;
            } else {
                r->valid = true, r->gen = gen, r->cfg = c, r->threads = threads;
                r->impl = BT_MINIGRAD;
                for (int q = 0; q < BT_N_IMPL; q++)
                    if (!strcmp(impl, bt_impl_name[q])) r->impl = q;
                r->cache = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "cache"));
                r->new_tokens = gen ? (int64_t)bt_json_num(j, "new_tokens") : 0;
                r->n = (int)bt_json_num(j, gen ? "runs" : "steps");
                const double reps = gen ? bt_json_num(j, "reps_per_run") : NAN;
                r->reps = isfinite(reps) && reps >= 1.0 && reps <= 1e6 ? (int)reps : 1; /* files before it: 1 */
                r->seconds = gen ? bt_json_num(j, "ms_per_token") * (double)r->new_tokens / 1e3 : bt_json_num(j, "ms_per_step") / 1e3;
                r->best_seconds = gen ? bt_json_num(j, "best_ms_per_token") * (double)r->new_tokens / 1e3
                                      : bt_json_num(j, "best_ms_per_step") / 1e3;
                r->tokens_per_s = bt_json_num(j, "tokens_per_s"), r->mfu = bt_json_num(j, "mfu");
                r->peak_gflops = bt_json_num(j, "peak_gflops"), r->peak_rss_mb = bt_json_num(j, "peak_rss_mb");
                r->base_rss_mb = bt_json_num(j, "base_rss_mb"), r->arena_peak_mb = bt_json_num(j, "arena_peak_mb");
                r->state_mb = bt_json_num(j, "state_mb"), r->load = bt_json_num(j, "load");
                r->n_params = (int64_t)bt_json_num(j, "n_params");
                snprintf(r->backend, sizeof r->backend, "%s", bt_json_str(j, "backend", ""));
                rep->load_before = bt_json_num(j, "load_before"), rep->load_after = bt_json_num(j, "load_after");
                if (!rep->cpu[0]) snprintf(rep->cpu, sizeof rep->cpu, "%s", bt_json_str(j, "cpu", ""));
                if (r->impl == BT_PYTORCH) rep->have_pytorch = true;
                int t = 0;
                while (t < rep->n_threads && rep->threads[t] != threads) t++;
                if (t == rep->n_threads && t < 8) rep->threads[rep->n_threads++] = threads, rep->peak[t] = NAN;
                if (t < 8 && isfinite(r->peak_gflops)) rep->peak[t] = r->peak_gflops;
            }
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    if (ok && rep->n == 0) {
        fprintf(stderr, "bench_train: %s: no records\n", path);
        ok = false;
    }
    return ok;
}
