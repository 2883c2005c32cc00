/* One training run of docs/posenc-benchmark.md section 5: Adam on the spec's minibatch stream (the
 * library trainer's loop), the
 * validation curve, the final train and val evaluation, longer lengths, the attention map. */
#include "posenc.h"

#include "minigrad/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- data cache ---- */

void posenc_cache_init(posenc_cache *c) {
    memset(c, 0, sizeof *c);
}

void posenc_cache_free(posenc_cache *c) {
    for (int t = 0; t < POSENC_N_TASKS; t++) {
        posenc_data_free(&c->train[t]);
        posenc_data_free(&c->val[t]);
    }
    for (int i = 0; i < c->n_len; i++) posenc_data_free(&c->len[i].d);
    memset(c, 0, sizeof *c);
}

static mg_status cache_spec(posenc_cache *c, posenc_task task, const posenc_data **train,
                            const posenc_data **val) {
    mg_status st = MG_OK;
    if (!c->train[task].x) st = posenc_data_make(&c->train[task], task, POSENC_TRAIN, 0);
    if (st == MG_OK && !c->val[task].x) st = posenc_data_make(&c->val[task], task, POSENC_VAL, 0);
    *train = &c->train[task], *val = &c->val[task];
    return st;
}

static mg_status cache_length(posenc_cache *c, posenc_task task, int L, const posenc_data **out) {
    for (int i = 0; i < c->n_len; i++)
        if (c->len[i].task == task && c->len[i].L == L) return *out = &c->len[i].d, MG_OK;
    if (c->n_len == (int)(sizeof c->len / sizeof c->len[0]))
        return mg_set_error(MG_ERR_INVALID, "posenc_run: more than %d length sets", c->n_len);
    mg_status st = posenc_data_make_length(&c->len[c->n_len].d, task, L, 0);
    if (st != MG_OK) return st;
    c->len[c->n_len].task = task, c->len[c->n_len].L = L;
    *out = &c->len[c->n_len++].d;
    return MG_OK;
}

/* ---- one run ---- */

/* Steps round(sqrt(2)^k) below eval_every: 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, ... */
#define POSENC_EARLY_RATIO 1.4142135623730951

bool posenc_curve_early(int step, int eval_every) {
    for (int k = 0;; k++) {
        const long v = lround(pow(POSENC_EARLY_RATIO, k));
        if (v >= eval_every || v > step) return false;
        if (v == step) return true;
    }
}

int posenc_curve_early_count(int eval_every) {
    int n = 0;
    long prev = 0;
    for (int k = 0;; k++) {
        const long v = lround(pow(POSENC_EARLY_RATIO, k));
        if (v >= eval_every) return n;
        n += v != prev;
        prev = v;
    }
}

posenc_run_cfg posenc_run_defaults(void) {
    posenc_run_cfg c = {.task = POSENC_REV,
                        .scheme = "none",
                        .seed = 0,
                        .steps = POSENC_STEPS,
                        .batch = POSENC_BATCH,
                        .eval_every = POSENC_EVAL_EVERY,
                        .lr = POSENC_LR,
                        .n_lengths = 2,
                        .lengths = {48, 64},
                        .eval_n = 0,
                        .threads = 0};
    return c;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mg_status check_cfg(const posenc_run_cfg *c) {
    if (!posenc_task_name(c->task))
        return mg_set_error(MG_ERR_INVALID, "posenc_run: task id %d", (int)c->task);
    if (c->steps < 1 || c->batch < 1 || c->eval_every < 1 || !(c->lr > 0.0f) || c->eval_n < 0)
        return mg_set_error(MG_ERR_INVALID,
                            "posenc_run: steps %d, batch %d, eval_every %d, lr %g, eval_n %d: need "
                            "positive values (eval_n >= 0)",
                            c->steps, c->batch, c->eval_every, (double)c->lr, c->eval_n);
    if (c->steps / c->eval_every + 2 + posenc_curve_early_count(c->eval_every) > POSENC_MAX_CURVE)
        return mg_set_error(MG_ERR_INVALID,
                            "posenc_run: %d steps with an evaluation every %d give more than %d "
                            "curve points: raise the evaluation interval",
                            c->steps, c->eval_every, POSENC_MAX_CURVE);
    if (c->n_lengths < 0 || c->n_lengths > POSENC_MAX_LENGTHS)
        return mg_set_error(MG_ERR_INVALID, "posenc_run: %d lengths (at most %d)", c->n_lengths,
                            POSENC_MAX_LENGTHS);
    for (int i = 0; i < c->n_lengths; i++)
        if (c->lengths[i] < 1 || c->lengths[i] > POSENC_MAX_EVAL_LEN)
            return mg_set_error(MG_ERR_INVALID, "posenc_run: length %d out of range 1..%d",
                                c->lengths[i], POSENC_MAX_EVAL_LEN);
    return MG_OK;
}

typedef struct {
    posenc_result *res;
    mg_gpt *g;
    mg_ctx *ctx; /* evaluation; the trainer brings its own for the steps */
    const posenc_data *train, *val;
    int eval_n;
    double batch_loss_sum;
    int batch_loss_n;
    int step; /* steps done */
    bool have_best; /* best_val_acc holds a regular point's accuracy */
    mg_status early_st; /* the first failure of an early curve point (on_step cannot return one) */
    posenc_batch_stream bs;
    int32_t *idx, *xb, *yb;
    posenc_step_fn fn;
    void *fn_user;
} run_state;

/* Early points (posenc_curve_early) only add to the curve; best_val_acc stays the best of the
 * regular ones (every eval_every steps and the end), as the spec defines it. */
static mg_status curve_point(run_state *s, int step, bool regular) {
    posenc_result *r = s->res;
    posenc_metrics m;
    mg_status st = posenc_evaluate(s->g, s->ctx, s->val, s->eval_n, &m);
    if (st != MG_OK) return st;
    int k = r->n_curve++;
    r->curve_step[k] = step;
    r->curve_val_acc[k] = m.acc;
    r->curve_val_loss[k] = m.loss;
    r->curve_batch_loss[k] = s->batch_loss_n ? s->batch_loss_sum / s->batch_loss_n : NAN;
    s->batch_loss_sum = 0.0, s->batch_loss_n = 0;
    if (regular && step > 0 && (!s->have_best || m.acc > r->best_val_acc)) r->best_val_acc = m.acc, s->have_best = true;
    r->val = m;
    return MG_OK;
}

/* ---- the model as the library trainer sees it ---- */

static mg_status next_batch(void *user) {
    run_state *s = user;
    posenc_batch_next(&s->bs, s->idx);
    return posenc_batch_gather(s->train, s->idx, s->res->cfg.batch, s->xb, s->yb);
}

static mg_tensor *batch_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    run_state *s = user;
    (void)dropout; /* the classifier has no dropout */
    int64_t shape[2] = {s->res->cfg.batch, POSENC_L};
    mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, shape, s->xb);
    mg_tensor *tg = mg_tensor_wrap(ctx, MG_I32, 2, shape, s->yb);
    return mg_gpt_loss(s->g, ctx, ids, tg, NULL);
}

static void on_step(void *user, int64_t step, float loss) {
    run_state *s = user;
    s->batch_loss_sum += loss, s->batch_loss_n++;
    s->step = (int)step;
    /* validate() takes the regular points, after this call */
    if (s->early_st == MG_OK && step % s->res->cfg.eval_every != 0 && step != s->res->cfg.steps &&
        posenc_curve_early((int)step, s->res->cfg.eval_every))
        s->early_st = curve_point(s, (int)step, false);
    if (s->fn && (step % 10 == 0 || step == s->res->cfg.steps)) s->fn(s->fn_user, (int)step, loss);
}

static mg_status validate(void *user, float *val_loss) {
    run_state *s = user;
    mg_status st = s->early_st != MG_OK ? s->early_st : curve_point(s, s->step, true);
    *val_loss = st == MG_OK ? (float)s->res->val.loss : NAN;
    return st;
}

/* Adam at a constant rate, no clipping, no checkpoints, nothing printed: the spec's training. */
static mg_status train(run_state *s) {
    const posenc_run_cfg *c = &s->res->cfg;
    mg_train_model model = {.params = mg_gpt_params(s->g),
                            .user = s,
                            .next_batch = next_batch,
                            .loss = batch_loss,
                            .eval = validate,
                            .on_step = on_step,
                            .tokens_per_step = (int64_t)c->batch * POSENC_L};
    mg_train_cfg tc = mg_train_defaults();
    tc.steps = c->steps, tc.warmup = 0, tc.lr = tc.lr_min = c->lr;
    tc.weight_decay = 0.0f, tc.beta1 = 0.9f, tc.beta2 = 0.999f, tc.eps = 1e-8f, tc.clip = 0.0f;
    tc.eval_every = c->eval_every, tc.ckpt_every = 0, tc.prog = "posenc_run";
    tc.quiet = true, tc.catch_sigint = false;
    mg_train_result tr;
    return mg_train_run(&model, &tc, &tr);
}

static mg_status train_and_eval(run_state *s, posenc_cache *cache, posenc_step_fn fn, void *user) {
    posenc_result *r = s->res;
    const posenc_run_cfg *c = &r->cfg;
    const posenc_data *train_set, *val;
    mg_status st = cache_spec(cache, c->task, &train_set, &val);
    if (st != MG_OK) return st;
    s->train = train_set, s->val = val, s->fn = fn, s->fn_user = user;
    st = posenc_model_new(c->scheme, c->seed, &s->g);
    if (st != MG_OK) return st;
    s->idx = malloc((size_t)c->batch * sizeof *s->idx);
    s->xb = malloc((size_t)c->batch * POSENC_L * sizeof *s->xb);
    s->yb = malloc((size_t)c->batch * POSENC_L * sizeof *s->yb);
    if (!s->idx || !s->xb || !s->yb) st = mg_set_error(MG_ERR_NOMEM, "posenc_run: out of memory");
    if (st == MG_OK) st = posenc_batch_stream_init(&s->bs, c->seed, train_set->n, c->batch);
    if (st == MG_OK) st = curve_point(s, 0, false);
    double t0 = mg_time();
    if (st == MG_OK) st = train(s);
    if (st == MG_OK) st = s->early_st;
    r->train_seconds = mg_time() - t0;
    mg_ctx_reset(s->ctx);
    if (st == MG_OK) st = posenc_evaluate(s->g, s->ctx, train_set, c->eval_n, &r->train);
    for (int i = 0; i < c->n_lengths && st == MG_OK; i++) {
        posenc_length_result *lr = &r->len[r->n_len++];
        lr->L = c->lengths[i];
        if (c->task == POSENC_PERM && lr->L != POSENC_L) {
            snprintf(lr->why, sizeof lr->why, "perm: pi is defined for %d positions only",
                     POSENC_L);
            continue;
        }
        if (!posenc_model_accepts(s->g, lr->L, lr->why, sizeof lr->why)) continue;
        const posenc_data *d = NULL;
        st = cache_length(cache, c->task, lr->L, &d);
        if (st != MG_OK) break;
        mg_status e = posenc_evaluate(s->g, s->ctx, d, c->eval_n, &lr->m);
        if (e == MG_OK) {
            lr->done = true;
        } else { /* a scheme that refuses the length: say why in the table rather than fail the run
                  */
            snprintf(lr->why, sizeof lr->why, "%s", mg_last_error());
        }
    }
    if (st == MG_OK) {
        memcpy(r->attn_x, val->x, sizeof r->attn_x);
        st = posenc_attention(s->g, s->ctx, r->attn_x, POSENC_L, r->attn);
    }
    if (st == MG_OK)
        posenc_trained_table(s->g, r->table, POSENC_L * POSENC_D, &r->table_rows, &r->table_cols);
    if (st == MG_OK) st = posenc_scheme_probe(s->g, s->ctx, &r->probe);
    return st;
}

mg_status posenc_run(const posenc_run_cfg *cfg, posenc_cache *cache, posenc_step_fn fn, void *user,
                     posenc_result *res) {
    memset(res, 0, sizeof *res);
    res->cfg = *cfg;
    snprintf(res->cfg.scheme, sizeof res->cfg.scheme, "%s", posenc_scheme_name(cfg->scheme));
    double t0 = mg_time(), c0 = cpu_now();
    mg_status st = check_cfg(cfg);
    if (st == MG_OK && cfg->threads > 0) mg_set_num_threads(cfg->threads);
    run_state s = {.res = res, .eval_n = cfg->eval_n};
    if (st == MG_OK && (s.ctx = posenc_ctx_new())) mg_ctx_set_precision(s.ctx, cfg->precision);
    if (st == MG_OK && !s.ctx)
        st = mg_set_error(MG_ERR_NOMEM, "posenc_run: out of memory");
    if (st == MG_OK) st = train_and_eval(&s, cache, fn, user);
    free(s.idx);
    free(s.xb);
    free(s.yb);
    mg_gpt_free(s.g);
    mg_ctx_free(s.ctx);
    res->seconds = mg_time() - t0;
    res->cpu_seconds = cpu_now() - c0;
    res->status = st;
    if (st != MG_OK) {
        mg_wrap_error(st, "%s/%s seed %u",
                      posenc_task_name(cfg->task) ? posenc_task_name(cfg->task) : "?",
                      posenc_scheme_label(cfg->scheme), cfg->seed);
        snprintf(res->error, sizeof res->error, "%s", mg_last_error());
    }
    return st;
}
