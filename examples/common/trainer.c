/* The shared training loop. */
#include "trainer.h"

#include "minigrad/checkpoint.h"
#include "minigrad/op.h" /* mg_ctx_ok */
#include "minigrad/optim.h"
#include "minigrad/plot.h"
#include "progress.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ex_train_cfg ex_train_defaults(void) {
    return (ex_train_cfg){.steps = 1000, .warmup = 100, .lr = 1e-3f, .lr_min = 1e-4f, .weight_decay = 0.1f,
                          .beta1 = 0.9f, .beta2 = 0.95f, .clip = 1.0f, .eval_every = 250, .ckpt_every = 250,
                          .seed = 1, .prog = "train"};
}

void ex_state_path(const char *ckpt, char *buf, size_t n) {
    size_t len = strlen(ckpt), sl = strlen(".safetensors");
    if (len > sl && strcmp(ckpt + len - sl, ".safetensors") == 0)
        snprintf(buf, n, "%.*s.state.safetensors", (int)(len - sl), ckpt);
    else
        snprintf(buf, n, "%s.state.safetensors", ckpt);
}

/* ---- Ctrl-C: the first one asks the loop to save and stop; a second one ends the process ---- */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL);
}

/* ---- the loss history (kept in the state file so a resumed run's curve is the whole run) ---- */
typedef struct {
    float *loss; /* loss[s] = training loss of step s+1 */
    int64_t n, cap;
    int64_t *val_step;
    float *val;
    int64_t nv, capv;
} history;

static void hist_push(history *h, float loss) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->loss = realloc(h->loss, (size_t)h->cap * sizeof *h->loss);
    }
    h->loss[h->n++] = loss;
}

static void hist_push_val(history *h, int64_t step, float v) {
    if (h->nv == h->capv) {
        h->capv = h->capv ? 2 * h->capv : 64;
        h->val_step = realloc(h->val_step, (size_t)h->capv * sizeof *h->val_step);
        h->val = realloc(h->val, (size_t)h->capv * sizeof *h->val);
    }
    h->val_step[h->nv] = step;
    h->val[h->nv++] = v;
}

/* Encodes the history as metadata text: "l1,l2,..." and "step:v,step:v,...". */
static char *hist_text(const history *h, bool val) {
    size_t cap = (size_t)(val ? h->nv : h->n) * 32 + 16, off = 0;
    char *s = malloc(cap);
    s[0] = 0;
    int64_t n = val ? h->nv : h->n;
    for (int64_t i = 0; i < n; i++) {
        if (val)
            off += (size_t)snprintf(s + off, cap - off, "%s%lld:%.9g", i ? "," : "", (long long)h->val_step[i], (double)h->val[i]);
        else
            off += (size_t)snprintf(s + off, cap - off, "%s%.9g", i ? "," : "", (double)h->loss[i]);
    }
    return s;
}

static void hist_parse(history *h, const char *loss, const char *val) {
    for (const char *p = loss; p && *p;) {
        char *end;
        float v = strtof(p, &end);
        if (end == p) break;
        hist_push(h, v);
        p = *end == ',' ? end + 1 : end;
    }
    for (const char *p = val; p && *p;) {
        char *end;
        long long s = strtoll(p, &end, 10);
        if (*end != ':') break;
        float v = strtof(end + 1, &end);
        hist_push_val(h, s, v);
        p = *end == ',' ? end + 1 : end;
    }
}

static void hist_free(history *h) {
    free(h->loss);
    free(h->val_step);
    free(h->val);
}

static mg_status plot_history(const history *h, const char *path, const char *title) {
    if (h->n == 0) return mg_set_error(MG_ERR_INVALID, "%s: no training steps to plot", path);
    double *x = malloc((size_t)h->n * sizeof *x), *y = malloc((size_t)h->n * sizeof *y);
    double *vx = malloc((size_t)(h->nv + 1) * sizeof *vx), *vy = malloc((size_t)(h->nv + 1) * sizeof *vy);
    for (int64_t i = 0; i < h->n; i++) x[i] = (double)(i + 1), y[i] = h->loss[i];
    for (int64_t i = 0; i < h->nv; i++) vx[i] = (double)h->val_step[i], vy[i] = h->val[i];
    mg_plot_series s[2] = {{.label = "train", .x = x, .y = y, .n = (int)h->n},
                           {.label = "validation", .x = vx, .y = vy, .n = (int)h->nv}};
    mg_plot_opts o = {.title = title, .xlabel = "step", .ylabel = "loss (nats/token)"};
    mg_status st = mg_plot_lines(path, &o, s, h->nv ? 2 : 1);
    free(x), free(y), free(vx), free(vy);
    return st;
}

/* ---- saving and restoring ---- */
static mg_status save_all(mg_gpt *g, const mg_optim *opt, const ex_train_cfg *cfg, ex_task *task,
                          mg_rng *dropout, const history *h) {
    mg_status s = mg_gpt_save(g, cfg->ckpt, task->meta, task->n_meta);
    if (s != MG_OK) return s;
    char state[4096], num[EX_MAX_RNGS + 1][24], key[EX_MAX_RNGS + 1][48];
    ex_state_path(cfg->ckpt, state, sizeof state);
    mg_st_meta meta[EX_MAX_RNGS + 3];
    int n = 0;
    for (int i = 0; i <= task->n_rngs; i++) {
        mg_rng *r = i < task->n_rngs ? task->rngs[i] : dropout;
        snprintf(key[i], sizeof key[i], "rng.%s", i < task->n_rngs ? task->rng_names[i] : "dropout");
        meta[n++] = (mg_st_meta){key[i], mg_meta_fmt_u64(num[i], r->s)};
    }
    char *hl = hist_text(h, false), *hv = hist_text(h, true);
    meta[n++] = (mg_st_meta){"history.loss", hl};
    meta[n++] = (mg_st_meta){"history.val", hv};
    s = mg_train_state_save(state, opt, mg_gpt_params(g), meta, n);
    free(hl);
    free(hv);
    return s;
}

static mg_status restore_all(mg_gpt *g, mg_optim *opt, const ex_train_cfg *cfg, ex_task *task, mg_rng *dropout,
                             history *h) {
    char state[4096];
    ex_state_path(cfg->ckpt, state, sizeof state);
    mg_status s = mg_gpt_load(g, cfg->ckpt);
    if (s != MG_OK) return s;
    mg_st_file *f = NULL;
    if ((s = mg_train_state_load(state, opt, mg_gpt_params(g), &f)) != MG_OK)
        return mg_wrap_error(s, "cannot resume (the training state is saved beside the weights)");
    for (int i = 0; i <= task->n_rngs && s == MG_OK; i++) {
        char key[48];
        snprintf(key, sizeof key, "rng.%s", i < task->n_rngs ? task->rng_names[i] : "dropout");
        s = mg_meta_get_u64(f, key, i < task->n_rngs ? &task->rngs[i]->s : &dropout->s);
    }
    if (s == MG_OK) hist_parse(h, mg_st_meta_get(f, "history.loss"), mg_st_meta_get(f, "history.val"));
    mg_st_close(f);
    if (s == MG_OK && h->n != mg_optim_steps(opt))
        s = mg_set_error(MG_ERR_FORMAT, "%s: the loss history has %lld entries but the optimizer is at step %lld", state,
                         (long long)h->n, (long long)mg_optim_steps(opt));
    return s;
}

mg_status ex_train(mg_gpt *g, const ex_train_cfg *cfg, ex_task *task, ex_train_result *res) {
    memset(res, 0, sizeof *res);
    res->val_loss = NAN;
    mg_params *P = mg_gpt_params(g);
    mg_adamw_cfg acfg = {cfg->beta1, cfg->beta2, 1e-8f, cfg->weight_decay};
    mg_optim *opt = mg_adamw_new(P, acfg);
    mg_ctx *ctx = mg_ctx_new(0);
    int64_t BT = task->B * task->T;
    int32_t *ids = malloc((size_t)BT * sizeof *ids), *tg = malloc((size_t)BT * sizeof *tg);
    history h = {0};
    mg_rng dropout = mg_rng_make(cfg->seed ^ 0xD50F0D50F0ULL);
    ex_progress prog = {0};
    mg_status st = MG_OK;
    if (!opt || !ctx || !ids || !tg) {
        st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory setting up training", cfg->prog);
        goto done;
    }
    if (cfg->resume && (st = restore_all(g, opt, cfg, task, &dropout, &h)) != MG_OK) goto done;
    int64_t step = mg_optim_steps(opt);
    if (step >= cfg->steps) {
        mg_log(MG_LOG_INFO, "%s: the checkpoint is already at step %lld of %lld: nothing to do", cfg->prog,
               (long long)step, (long long)cfg->steps);
        res->step = step;
        goto done;
    }
    if ((st = ex_progress_open(&prog, cfg->prog, cfg->steps, step, cfg->log_path, cfg->resume)) != MG_OK) goto done;
    if (cfg->resume) ex_progress_note(&prog, "%s: resumed at step %lld from %s", cfg->prog, (long long)step, cfg->ckpt);

    interrupted = 0;
    void (*old_handler)(int) = signal(SIGINT, on_sigint);
    float drop = mg_gpt_cfg(g)->dropout;
    double t_start = mg_time(), ema_dt = 0;
    int64_t last_good = cfg->resume ? step : -1, first = step;
    while (step < cfg->steps) {
        double t0 = mg_time();
        mg_ctx_reset(ctx);
        task->next_batch(task->user, ids, tg);
        mg_tensor *it = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){task->B, task->T}, ids);
        mg_tensor *tt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){task->B, task->T}, tg);
        mg_fwd args = {.train = drop > 0, .rng = &dropout};
        mg_tensor *loss = mg_gpt_loss(g, ctx, it, tt, &args);
        if (mg_ctx_ok(ctx)) {
            mg_params_zero_grad(P);
            mg_backward(ctx, loss);
        }
        if (!mg_ctx_ok(ctx)) {
            st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: %s", cfg->prog, (long long)step + 1, mg_ctx_error(ctx));
            break;
        }
        float lv = loss->data[0];
        float norm = mg_clip_grad_norm(P, cfg->clip);
        if (!isfinite(lv) || !isfinite(norm)) {
            res->diverged = true;
            char where[4200];
            if (last_good >= 0)
                snprintf(where, sizeof where, "the last good checkpoint (step %lld) is kept at %s", (long long)last_good, cfg->ckpt);
            else
                snprintf(where, sizeof where, "no checkpoint was written in this run");
            st = mg_set_error(MG_ERR_NONFINITE, "%s: the %s became %g at step %lld; stopped without saving: %s. "
                              "Try a lower --lr or a stronger --clip.", cfg->prog, isfinite(lv) ? "gradient norm" : "loss",
                              (double)(isfinite(lv) ? norm : lv), (long long)step + 1, where);
            break;
        }
        float lr = mg_lr_schedule(step, cfg->warmup, cfg->steps, cfg->lr, cfg->lr_min);
        mg_optim_step(opt, lr);
        step++;
        hist_push(&h, lv);
        res->loss = lv;
        double dt = mg_time() - t0;
        ema_dt = ema_dt == 0 ? dt : 0.9 * ema_dt + 0.1 * dt;
        float val = NAN;
        bool last = step == cfg->steps;
        if (task->eval && ((cfg->eval_every > 0 && step % cfg->eval_every == 0) || last)) {
            val = task->eval(task->user, g);
            if (!isnan(val)) hist_push_val(&h, step, val), res->val_loss = val;
        }
        ex_progress_step(&prog, step, lv, lr, (double)BT / ema_dt, norm, val);
        bool pause = cfg->stop_after > 0 && step - first >= cfg->stop_after;
        bool save = last || interrupted || pause || (cfg->ckpt_every > 0 && step % cfg->ckpt_every == 0);
        if (save) {
            if ((st = save_all(g, opt, cfg, task, &dropout, &h)) != MG_OK) break;
            last_good = step;
        }
        if (interrupted) {
            res->interrupted = true;
            ex_progress_note(&prog, "%s: interrupted: saved step %lld to %s (resume with --resume)", cfg->prog,
                             (long long)step, cfg->ckpt);
            break;
        }
        if (pause && !last) {
            ex_progress_note(&prog, "%s: stopped after %lld steps as asked: saved step %lld to %s (resume with --resume)",
                             cfg->prog, (long long)cfg->stop_after, (long long)step, cfg->ckpt);
            break;
        }
    }
    signal(SIGINT, old_handler);
    ex_progress_close(&prog);
    res->step = step;
    res->steps_run = step - first;
    res->seconds = mg_time() - t_start;
    res->tokens_per_s = ema_dt > 0 ? (double)BT / ema_dt : 0;
    res->peak_arena = mg_ctx_peak_bytes(ctx);
    if (cfg->plot_path && h.n > 0) {
        mg_status ps = plot_history(&h, cfg->plot_path, cfg->plot_title ? cfg->plot_title : cfg->prog);
        if (ps != MG_OK) mg_log(MG_LOG_WARN, "%s: loss plot not written: %s", cfg->prog, mg_last_error());
        if (st == MG_OK && ps != MG_OK) mg_clear_error();
    }
done:
    hist_free(&h);
    free(ids);
    free(tg);
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    return st;
}

mg_status ex_plot_log(const char *log_path, const char *png_path, const char *title) {
    FILE *f = fopen(log_path, "r");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open the log", log_path);
    history h = {0};
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":"), *l = strstr(line, "\"loss\":"), *v = strstr(line, "\"val_loss\":");
        if (!s || !l) continue;
        long long step = strtoll(s + 7, NULL, 10);
        while (h.n < step - 1) hist_push(&h, NAN); /* a gap: keep x = step */
        hist_push(&h, strtof(l + 7, NULL));
        if (v) hist_push_val(&h, step, strtof(v + 11, NULL));
    }
    fclose(f);
    mg_status st = plot_history(&h, png_path, title);
    hist_free(&h);
    return st;
}
