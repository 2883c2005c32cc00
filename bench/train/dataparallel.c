/* bench_train --data-parallel: the library trainer (mg_train_run) on a bench configuration, as
 * 1 process x T threads and as N MPI ranks x 1 thread (mpirun), the same global batch; see
 * bench/README.md, "Data parallel".
 *
 *   bench_train --data-parallel [--configs textgen] [--ranks 2] [--steps N] [--rounds R]
 *   bench_train --dp-worker CONFIG THREADS STEPS    (what the driver starts, alone or under mpirun)
 *
 * A worker trains STEPS + 2 steps on random tokens (dropout 0, clip 1, AdamW) and rank 0 prints
 * one JSON line: the median step time of the steps after the first two, the ranks, and the mean
 * seconds per step the step waited on communication (comm_s) and that its gradients were under
 * way on the communication thread (comm_busy_s). */
#include "bench_train.h"

#include "minigrad/minigrad.h"
#include "minigrad/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    mg_gpt *g;
    const bt_config *c;
    int32_t *ids, *tgt;
    double *t;
    int64_t n;
} dpw;

static mg_tensor *dpw_loss_rows(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t nrows) {
    (void)dropout;
    dpw *w = user;
    int64_t T = w->c->T, shape[2] = {nrows, T};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, shape, w->ids + row0 * T);
    mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, shape, w->tgt + row0 * T);
    mg_tensor *l = mg_gpt_loss(w->g, ctx, x, y, NULL);
    return nrows == w->c->B ? l : mg_scale(ctx, l, (float)nrows / (float)w->c->B);
}

static mg_tensor *dpw_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    return dpw_loss_rows(user, ctx, dropout, 0, ((dpw *)user)->c->B);
}

static void dpw_step(void *user, int64_t step, float loss) {
    (void)step, (void)loss;
    dpw *w = user;
    w->t[w->n++] = mg_time();
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bt_dp_worker(const char *config, int threads, int steps) {
    const bt_config *c = bt_config_find(config);
    if (!c || steps < 1) {
        fprintf(stderr, "bench_train --dp-worker: unknown configuration '%s' or no steps\n", config);
        return 2;
    }
    mg_set_num_threads(threads);
    mg_gpt_config gc = mg_gpt_config_default();
    gc.vocab_size = c->V, gc.block_size = c->T, gc.n_layer = c->L, gc.n_head = c->H, gc.n_embd = c->C;
    snprintf(gc.pos, sizeof gc.pos, "learned");
    gc.pos_opts[0] = 0;
    gc.dropout = 0.0f, gc.causal = true, gc.gelu = MG_GELU_TANH, gc.emb_scale = 1.0f;
    gc.tied_head = true, gc.head_bias = false, gc.init_std = 0.02f;
    mg_rng rng = mg_rng_make(1234);
    dpw w = {.c = c};
    if (mg_gpt_new(&gc, &rng, &w.g) != MG_OK) {
        fprintf(stderr, "bench_train: %s\n", mg_last_error());
        return 1;
    }
    int64_t BT = c->B * c->T, total = steps + 2;
    w.ids = malloc((size_t)BT * sizeof *w.ids);
    w.tgt = malloc((size_t)BT * sizeof *w.tgt);
    w.t = malloc((size_t)(total + 1) * sizeof *w.t);
    if (!w.ids || !w.tgt || !w.t) return 1;
    for (int64_t i = 0; i < BT; i++)
        w.ids[i] = (int32_t)mg_rng_below(&rng, (uint32_t)c->V), w.tgt[i] = (int32_t)mg_rng_below(&rng, (uint32_t)c->V);
    mg_train_model model = {.params = mg_gpt_params(w.g), .user = &w, .loss = dpw_loss, .loss_rows = dpw_loss_rows,
                            .batch_rows = c->B, .on_step = dpw_step, .tokens_per_step = BT};
    mg_train_cfg cfg = mg_train_defaults();
    cfg.steps = total, cfg.warmup = 0, cfg.lr = 3e-4f, cfg.lr_min = 3e-4f, cfg.weight_decay = 0.01f;
    cfg.beta2 = 0.999f, cfg.eval_every = 0, cfg.ckpt_every = 0, cfg.quiet = true, cfg.catch_sigint = false;
    cfg.prog = "bench_train";
    w.t[w.n++] = mg_time();
    mg_train_result res;
    mg_status st = mg_train_run(&model, &cfg, &res);
    if (st != MG_OK) {
        fprintf(stderr, "bench_train: %s\n", mg_last_error());
        return 1;
    }
    int64_t k = 0;
    double *dt = malloc((size_t)total * sizeof *dt);
    for (int64_t i = 3; i < w.n; i++) dt[k++] = w.t[i] - w.t[i - 1];
    qsort(dt, (size_t)k, sizeof *dt, cmp_d);
    double med = k ? (k % 2 ? dt[k / 2] : 0.5 * (dt[k / 2 - 1] + dt[k / 2])) : 0;
    if (res.ranks < 2 || mg_train_rank() == 0)
        printf("{\"config\":\"%s\",\"ranks\":%d,\"threads\":%d,\"ms_per_step\":%.3f,\"tokens_per_s\":%.1f,"
               "\"comm_s\":%.6f,\"comm_busy_s\":%.6f,\"n_params\":%lld}\n",
               c->name, res.ranks, threads, 1e3 * med, med > 0 ? (double)BT / med : 0, res.comm_s, res.comm_busy_s,
               (long long)mg_params_numel(mg_gpt_params(w.g)));
    fflush(stdout);
    free(dt);
    free(w.ids);
    free(w.tgt);
    free(w.t);
    mg_gpt_free(w.g);
    return 0;
}

/* Runs one worker command line and parses its JSON line; false when it failed. */
static bool run_one(const char *cmd, double *ms, double *comm, double *busy) {
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    char line[1024];
    bool got = false;
    while (fgets(line, sizeof line, p)) {
        const char *a = strstr(line, "\"ms_per_step\":"), *b = strstr(line, "\"comm_s\":"),
                   *d = strstr(line, "\"comm_busy_s\":");
        if (a && b && d) *ms = atof(a + 14), *comm = atof(b + 9), *busy = atof(d + 14), got = true;
    }
    return pclose(p) == 0 && got;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bt_dp_driver(const char *self, const char *config, int ranks, int steps, int rounds) {
    const bt_config *c = bt_config_find(config);
    if (!c) {
        fprintf(stderr, "bench_train --data-parallel: unknown configuration '%s'\n", config);
        return 2;
    }
    if (system("mpirun --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench_train --data-parallel: no mpirun (Debian package openmpi-bin)\n");
        return 2;
    }
    bool ompi = system("mpirun --version 2>&1 | grep -q 'Open MPI'") == 0;
    const char *root = ompi && geteuid() == 0 ? " --allow-run-as-root" : "";
    char cmds[3][2048];
    const char *names[3] = {"1 process", "ranks, overlap", "ranks, no overlap"};
    snprintf(cmds[0], sizeof cmds[0], "OMP_WAIT_POLICY=passive '%s' --dp-worker %s %d %d", self, config, ranks, steps);
    for (int v = 1; v < 3; v++)
        snprintf(cmds[v], sizeof cmds[v],
                 "OMP_WAIT_POLICY=passive MINIGRAD_TRAIN_OVERLAP=%d mpirun -np %d%s%s%s '%s' --dp-worker %s 1 %d",
                 v == 1 ? 1 : 0, ranks, ompi ? " --oversubscribe" : "", root,
                 ompi ? " -x OMP_WAIT_POLICY -x MINIGRAD_TRAIN_OVERLAP" : "", self, config, steps);
    double ms[3][64], comm[3][64], busy[3][64];
    int n[3] = {0, 0, 0};
    if (rounds > 64) rounds = 64;
    printf("bench_train --data-parallel: %s (B %lld, T %lld), %d steps a run, %d rounds alternating:\n"
           "  1 process x %d threads | %d ranks x 1 thread | the same without overlap\n",
           config, (long long)c->B, (long long)c->T, steps, rounds, ranks, ranks);
    fflush(stdout);
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < 3; v++) {
            if (!run_one(cmds[v], &ms[v][n[v]], &comm[v][n[v]], &busy[v][n[v]])) {
                fprintf(stderr, "bench_train: failed: %s\n", cmds[v]);
                return 1;
            }
            n[v]++;
        }
    double BT = (double)(c->B * c->T);
    printf("\n| %s | ms/step | tokens/s | waited on communication, per step | gradients under way, per step |\n"
           "|---|--:|--:|--:|--:|\n", config);
    for (int v = 0; v < 3; v++) {
        double m = median(ms[v], n[v]), w = median(comm[v], n[v]), b = median(busy[v], n[v]);
        printf("| %d %s | %.1f | %.0f | %.1f ms (%.0f%%) | %.1f ms |\n", v ? ranks : 1,
               v ? names[v] : (ranks == 1 ? "process" : "process x threads"), m, BT / (m / 1e3), 1e3 * w,
               100 * 1e3 * w / m, 1e3 * b);
        printf("{\"bench\":\"data_parallel\",\"config\":\"%s\",\"variant\":\"%s\",\"ranks\":%d,\"threads\":%d,"
               "\"ms_per_step\":%.3f,\"tokens_per_s\":%.1f,\"comm_s\":%.6f,\"comm_busy_s\":%.6f}\n",
               config, v == 0 ? "process" : v == 1 ? "ranks_overlap" : "ranks_no_overlap", v ? ranks : 1,
               v ? 1 : ranks, m, BT / (m / 1e3), w, b);
    }
    return 0;
}
