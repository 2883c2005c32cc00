/* A GPT language model described to the library trainer. */
#include "trainer.h"

#include "minigrad/checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mg_gpt *g;
    const ex_lm_task *task;
    int32_t *ids, *targets;
} lm;

static mg_status lm_batch(void *user) {
    lm *m = user;
    m->task->next_batch(m->task->user, m->ids, m->targets);
    return MG_OK;
}

static mg_tensor *lm_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    lm *m = user;
    int64_t shape[2] = {m->task->B, m->task->T};
    mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, shape, m->ids);
    mg_tensor *targets = mg_tensor_wrap(ctx, MG_I32, 2, shape, m->targets);
    mg_fwd args = {.train = mg_gpt_cfg(m->g)->dropout > 0, .rng = dropout};
    return mg_gpt_loss(m->g, ctx, ids, targets, &args);
}

/* Rows [row0, row0 + nrows) of the batch: their mean loss times their share of the batch's
 * counted targets (those that are not -1), so the shares of all ranks add up to the batch's mean. */
static mg_tensor *lm_loss_rows(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t nrows) {
    lm *m = user;
    int64_t T = m->task->T, B = m->task->B, all = 0, mine = 0;
    for (int64_t i = 0; i < B * T; i++) {
        bool counted = m->targets[i] >= 0;
        all += counted;
        mine += counted && i >= row0 * T && i < (row0 + nrows) * T;
    }
    int64_t shape[2] = {nrows, T};
    mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, shape, m->ids + row0 * T);
    mg_tensor *targets = mg_tensor_wrap(ctx, MG_I32, 2, shape, m->targets + row0 * T);
    mg_fwd args = {.train = mg_gpt_cfg(m->g)->dropout > 0, .rng = dropout};
    mg_tensor *loss = mg_gpt_loss(m->g, ctx, ids, targets, &args);
    if (!loss || mine == all) return loss;
    return mg_scale(ctx, loss, all > 0 ? (float)((double)mine / (double)all) : 0.0f);
}

static mg_status lm_eval(void *user, float *val) {
    lm *m = user;
    *val = m->task->eval(m->task->user, m->g);
    return MG_OK;
}

static mg_status lm_save(void *user, const char *path, const mg_st_meta *meta, int n_meta) {
    return mg_gpt_save(((lm *)user)->g, path, meta, n_meta);
}

static mg_status lm_load(void *user, const char *path) {
    return mg_gpt_load(((lm *)user)->g, path);
}

mg_status ex_lm_train(mg_gpt *g, const mg_train_cfg *cfg, const ex_lm_task *task, mg_train_result *res) {
    int64_t bt;
    size_t bytes;
    if (task->B < 1 || task->T < 1 || mg_ckd_mul_i64(&bt, task->B, task->T) || mg_ckd_bytes(&bytes, bt, sizeof(int32_t))) {
        memset(res, 0, sizeof *res);
        return mg_set_error(MG_ERR_INVALID, "%s: a batch of %lld x %lld tokens is too large (or empty)", cfg->prog,
                            (long long)task->B, (long long)task->T);
    }
    lm m = {.g = g, .task = task, .ids = malloc(bytes), .targets = malloc(bytes)};
    mg_status st;
    if (!m.ids || !m.targets) {
        memset(res, 0, sizeof *res);
        st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory for a batch of %lld tokens", cfg->prog, (long long)bt);
    } else {
        mg_train_model model = {.params = mg_gpt_params(g),
                                .user = &m,
                                .next_batch = lm_batch,
                                .loss = lm_loss,
                                .loss_rows = lm_loss_rows,
                                .batch_rows = task->B,
                                .eval = task->eval ? lm_eval : NULL,
                                .save = lm_save,
                                .load = lm_load,
                                .meta = task->meta,
                                .n_meta = task->n_meta,
                                .n_rngs = task->n_rngs,
                                .tokens_per_step = bt};
        memcpy(model.rngs, task->rngs, sizeof model.rngs);
        memcpy(model.rng_names, task->rng_names, sizeof model.rng_names);
        st = mg_train_run(&model, cfg, res);
    }
    if (res->diverged) { /* "... or a stronger gradient clip." -> "...: --lr, --clip." */
        char msg[8192];
        snprintf(msg, sizeof msg, "%s", mg_last_error());
        size_t n = strlen(msg);
        if (n > 0 && msg[n - 1] == '.') msg[--n] = 0;
        mg_set_error(st, "%s: --lr, --clip.", msg);
    }
    free(m.ids);
    free(m.targets);
    return st;
}
