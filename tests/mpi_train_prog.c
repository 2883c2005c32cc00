/* A model that is not a GPT, trained by mg_train_run under mpirun by tests/test_mpi.sh:
 *   mpi_train_prog DIR rows|whole|fail [RANK STEP] [zero1]
 * rows: the model gives loss_rows (data parallel); whole: only loss (every rank trains on the whole
 * batch); fail: as rows, but the next batch of rank RANK fails at step STEP the way a bad data
 * file would. The run writes DIR/model.safetensors, its state and DIR/log.jsonl; the exit status
 * is 0 when mg_train_run returned MG_OK, else 1 after printing its error. */
#include "minigrad/minigrad.h"
#include "minigrad/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 30, H = 300 }; /* 30 rows: an uneven split over 4 ranks; H: a slab of several chunks */

typedef struct {
    mg_params *P;
    mg_tensor *W1, *b1, *W2;
    mg_rng data;
    float x[B * 2];
    int32_t y[B];
    int fail_rank;
    int64_t fail_step, step;
} mlp;

static mg_status mlp_batch(void *user) {
    mlp *m = user;
    m->step++;
    if (m->step == m->fail_step && mg_train_rank() == m->fail_rank)
        return mg_set_error(MG_ERR_IO, "shard-%d.bin: truncated record at byte 4096", m->fail_rank);
    for (int i = 0; i < B; i++) {
        m->x[2 * i] = mg_rng_range(&m->data, -1, 1), m->x[2 * i + 1] = mg_rng_range(&m->data, -1, 1);
        m->y[i] = (m->x[2 * i] > 0) != (m->x[2 * i + 1] > 0);
    }
    return MG_OK;
}

static mg_tensor *forward(mlp *m, mg_ctx *ctx, int64_t row0, int64_t n) {
    mg_tensor *xt = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){n, 2}, m->x + 2 * row0);
    mg_tensor *yt = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){n}, m->y + row0);
    mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, xt, m->W1), m->b1), MG_GELU_TANH);
    return mg_cross_entropy(ctx, mg_matmul(ctx, h, m->W2), yt, -1);
}

static mg_tensor *mlp_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout;
    return forward(user, ctx, 0, B);
}

/* the rows' mean loss times their share of the batch */
static mg_tensor *mlp_loss_rows(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t n) {
    (void)dropout;
    return mg_scale(ctx, forward(user, ctx, row0, n), (float)n / (float)B);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_train_prog DIR rows|whole|fail [RANK STEP] [zero1]\n");
        return 2;
    }
    mlp m = {.fail_rank = -1};
    bool whole = strcmp(argv[2], "whole") == 0, zero1 = strcmp(argv[argc - 1], "zero1") == 0;
    if (strcmp(argv[2], "fail") == 0 && argc >= 5) m.fail_rank = atoi(argv[3]), m.fail_step = atoll(argv[4]);
    mg_rng init = mg_rng_make(42);
    m.P = mg_params_new();
    m.W1 = mg_params_add(m.P, "fc1.weight", 2, (int64_t[]){2, H}, mg_init_uniform(-0.7f, 0.7f), 0);
    m.b1 = mg_params_add(m.P, "fc1.bias", 1, (int64_t[]){H}, mg_init_zeros(), MG_NO_DECAY);
    m.W2 = mg_params_add(m.P, "fc2.weight", 2, (int64_t[]){H, 30}, mg_init_uniform(-0.2f, 0.2f), 0);
    mg_params_alloc(m.P, &init);
    m.data = mg_rng_make(7);
    char ckpt[4096], log[4096];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", argv[1]);
    snprintf(log, sizeof log, "%s/log.jsonl", argv[1]);
    mg_train_model model = {.params = m.P, .user = &m, .next_batch = mlp_batch, .loss = mlp_loss,
                            .loss_rows = whole ? NULL : mlp_loss_rows, .batch_rows = B,
                            .rngs = {&m.data}, .rng_names = {"data"}, .n_rngs = 1};
    mg_train_cfg cfg = mg_train_defaults();
    cfg.steps = 12, cfg.warmup = 2, cfg.lr = 3e-2f, cfg.lr_min = 3e-3f, cfg.ckpt_every = 4, cfg.eval_every = 0;
    cfg.ckpt = ckpt, cfg.log_path = log, cfg.quiet = true, cfg.prog = "mpi_train_prog", cfg.zero1 = zero1;
    mg_train_result res;
    mg_status st = mg_train_run(&model, &cfg, &res);
    if (st != MG_OK) fprintf(stderr, "mpi_train_prog: %s\n", mg_last_error());
    else if (mg_train_rank() == 0)
        printf("mpi_train_prog: %d ranks, step %lld, loss %.9g\n", res.ranks, (long long)res.step, (double)res.loss);
    mg_params_free(m.P);
    return st == MG_OK ? 0 : 1;
}
