/* The library trainer (minigrad/train.h) on a model that is not a GPT: the README's MLP, compiled
 * here and compared with README.md and the header's sketch, learns; a run stopped (stop_after,
 * Ctrl-C) and resumed ends bit for bit where an uninterrupted one does; a non-finite loss stops with
 * the last good checkpoint intact; bad configurations and failing callbacks give clear errors. */
#include "test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

/* train-example:begin */
#include "minigrad/minigrad.h"
#include "minigrad/train.h"

/* A 2-layer MLP learning XOR-like labels of 2-D points: fresh points every step, a fixed
 * validation set. */
enum { B = 64 };
typedef struct {
    mg_params *P;
    mg_tensor *W1, *b1, *W2;
    mg_rng data;               /* draws the training points: saved, so a resume continues it */
    float x[B * 2], vx[B * 2]; /* this step's batch, the validation set */
    int32_t y[B], vy[B];
    mg_ctx *vctx; /* validation brings its own context */
} mlp;

static void points(mg_rng *r, float *x, int32_t *y) {
    for (int i = 0; i < B; i++) {
        x[2 * i] = mg_rng_range(r, -1, 1), x[2 * i + 1] = mg_rng_range(r, -1, 1);
        y[i] = (x[2 * i] > 0) != (x[2 * i + 1] > 0);
    }
}

static void mlp_init(mlp *m) {
    mg_rng init = mg_rng_make(42), val = mg_rng_make(1);
    m->P = mg_params_new();
    m->W1 = mg_params_add(m->P, "fc1.weight", 2, (int64_t[]){2, 32}, mg_init_uniform(-0.7f, 0.7f), 0);
    m->b1 = mg_params_add(m->P, "fc1.bias", 1, (int64_t[]){32}, mg_init_zeros(), MG_NO_DECAY);
    m->W2 = mg_params_add(m->P, "fc2.weight", 2, (int64_t[]){32, 2}, mg_init_uniform(-0.2f, 0.2f), 0);
    mg_params_alloc(m->P, &init);
    m->data = mg_rng_make(7);
    points(&val, m->vx, m->vy);
    m->vctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(m->vctx, false);
}

static void mlp_free(mlp *m) {
    mg_ctx_free(m->vctx);
    mg_params_free(m->P);
}

static mg_tensor *mlp_forward(mlp *m, mg_ctx *ctx, float *x, int32_t *y) {
    mg_tensor *xt = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, x);
    mg_tensor *yt = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, y);
    mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, xt, m->W1), m->b1), MG_GELU_TANH);
    return mg_cross_entropy(ctx, mg_matmul(ctx, h, m->W2), yt, -1);
}

/* What the trainer calls: the next batch, its loss, the validation loss. */
static mg_status mlp_batch(void *user) {
    mlp *m = user;
    points(&m->data, m->x, m->y);
    return MG_OK;
}

static mg_tensor *mlp_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout; /* no dropout in this model */
    mlp *m = user;
    return mlp_forward(m, ctx, m->x, m->y);
}

static mg_status mlp_eval(void *user, float *val_loss) {
    mlp *m = user;
    mg_ctx_reset(m->vctx);
    *val_loss = mlp_forward(m, m->vctx, m->vx, m->vy)->data[0];
    return MG_OK;
}

static int train_mlp_example(void) {
    mlp m;
    mlp_init(&m);
    mg_train_model model = {.params = m.P, .user = &m, .next_batch = mlp_batch, .loss = mlp_loss,
                            .eval = mlp_eval, .rngs = {&m.data}, .rng_names = {"data"}, .n_rngs = 1};
    mg_train_cfg cfg = mg_train_defaults();
    cfg.steps = 300, cfg.warmup = 20, cfg.lr = 3e-2f, cfg.lr_min = 3e-3f, cfg.eval_every = 50;
    cfg.ckpt = "mlp.safetensors"; /* and its training state: mlp.state.safetensors */
    cfg.log_path = "mlp.jsonl", cfg.plot_path = "mlp.png", cfg.prog = "mlp";
    mg_train_result res;
    mg_status st = mg_train_run(&model, &cfg, &res); /* cfg.resume = true continues it */
    if (st != MG_OK) fprintf(stderr, "%s\n", mg_last_error());
    else printf("step %lld: loss %.3f, validation %.3f\n", (long long)res.step, res.loss, res.val_loss);
    mlp_free(&m);
    return st == MG_OK ? 0 : 1;
}
/* train-example:end */

/* ---- helpers ---- */

static char tmpdir[512];

static void setup_dir(void) {
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_train");
    ck_assert_int_eq(chdir(tmpdir), 0);
}

static void remove_dir(void) {
    ck_assert_int_eq(chdir("/"), 0);
    ck_assert_msg(tu_remove_tree(tmpdir), "cannot remove %s", tmpdir);
}

static bool exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* stdout into a file while a run prints, then back. */
static int stdout_to(const char *path) {
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(dup2(fd, STDOUT_FILENO), 0);
    close(fd);
    return saved;
}

static void stdout_back(int saved) {
    fflush(stdout);
    ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
    close(saved);
}

/* The log's lines without what depends on the clock (speed, elapsed time): "step loss lr norm
 * val" each. */
typedef struct {
    int n, nv;
    char line[512][160];
    double loss[512];
} run_log;

static void read_log(const char *path, run_log *lg) {
    memset(lg, 0, sizeof *lg);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no log at %s", path);
    char l[1024];
    while (fgets(l, sizeof l, f)) {
        ck_assert_int_lt(lg->n, 512);
        const char *k[] = {"\"step\": ", "\"loss\": ", "\"lr\": ", "\"grad_norm\": ", "\"val_loss\": "};
        char *o = lg->line[lg->n];
        size_t off = 0;
        for (int i = 0; i < 5; i++) {
            const char *p = strstr(l, k[i]);
            ck_assert_msg(p || i == 4, "log line lacks %s: %s", k[i], l);
            if (!p) continue;
            p += strlen(k[i]);
            off += (size_t)snprintf(o + off, sizeof lg->line[0] - off, "%.*s ", (int)strcspn(p, ",}"), p);
        }
        ck_assert_msg(strstr(l, "\"steps_per_s\": ") && strstr(l, "\"elapsed_s\": "), "log line: %s", l);
        lg->nv += strstr(l, "\"val_loss\": ") != NULL;
        lg->loss[lg->n++] = strtod(strstr(l, "\"loss\": ") + 8, NULL);
    }
    fclose(f);
}

static void assert_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

static void assert_same_log(const char *a, const char *b, int steps) {
    static run_log la, lb;
    read_log(a, &la);
    read_log(b, &lb);
    ck_assert_int_eq(la.n, steps);
    ck_assert_int_eq(lb.n, steps);
    for (int i = 0; i < steps; i++)
        ck_assert_msg(strcmp(la.line[i], lb.line[i]) == 0, "step %d: %s vs %s", i + 1, la.line[i], lb.line[i]);
}

/* A run of the MLP under the test's configuration: quiet, files under name. */
static mg_train_cfg test_cfg(const char *name, int64_t steps) {
    static char ckpt[8][64], log[8][64];
    static int k;
    k = (k + 1) % 8;
    snprintf(ckpt[k], sizeof ckpt[k], "%s.safetensors", name);
    snprintf(log[k], sizeof log[k], "%s.jsonl", name);
    mg_train_cfg c = mg_train_defaults();
    c.steps = steps, c.warmup = 5, c.lr = 3e-2f, c.lr_min = 3e-3f, c.eval_every = 7, c.ckpt_every = 10;
    c.ckpt = ckpt[k], c.log_path = log[k], c.quiet = true, c.prog = "mlp";
    return c;
}

/* The MLP as the trainer sees it, with hooks the tests use to interfere. */
typedef struct {
    mlp m;
    int64_t steps_done;
    int64_t interrupt_at; /* on_step raises interrupt_sig (SIGINT when 0) after this step */
    int interrupt_sig;
    int64_t poison_at;    /* the loss of this step is NaN */
    int64_t copy_at;      /* before this step, the checkpoint files are read into before[] */
    int64_t val_nan_at;   /* the validation loss after this step is NaN */
    const char *ckpt;
    char *before[2];
    size_t before_n[2];
} tmodel;

static mg_status t_batch(void *user) {
    tmodel *t = user;
    if (t->copy_at && t->steps_done + 1 == t->copy_at) {
        char state[256];
        TU_OK(mg_train_state_path(t->ckpt, state, sizeof state));
        t->before[0] = tu_read_file(t->ckpt, &t->before_n[0]);
        t->before[1] = tu_read_file(state, &t->before_n[1]);
    }
    return mlp_batch(&t->m);
}

/* The MLP's loss plus a small term through dropout, so that the trainer's stream matters too. */
static mg_tensor *t_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    tmodel *t = user;
    mg_tensor *loss = mlp_loss(&t->m, ctx, dropout);
    mg_tensor *noise = mg_mean(ctx, mg_mul(ctx, mg_dropout(ctx, t->m.W1, 0.5f, dropout), t->m.W1));
    loss = mg_add(ctx, loss, mg_scale(ctx, noise, 1e-2f));
    return t->steps_done + 1 == t->poison_at ? mg_scale(ctx, loss, NAN) : loss;
}

static mg_status t_eval(void *user, float *v) {
    tmodel *t = user;
    mg_status st = mlp_eval(&t->m, v);
    if (t->val_nan_at && t->steps_done == t->val_nan_at) *v = NAN;
    return st;
}

static void t_step(void *user, int64_t step, float loss) {
    tmodel *t = user;
    (void)loss;
    t->steps_done = step;
    if (step == t->interrupt_at) raise(t->interrupt_sig ? t->interrupt_sig : SIGINT);
}

static mg_train_model t_model(tmodel *t) {
    return (mg_train_model){.params = t->m.P, .user = t, .next_batch = t_batch, .loss = t_loss, .eval = t_eval,
                            .on_step = t_step, .rngs = {&t->m.data}, .rng_names = {"data"}, .n_rngs = 1};
}

/* A fresh MLP trained (or, with cfg->resume, continued) under cfg. */
static mg_status run_plain(const mg_train_cfg *cfg, mg_train_result *res) {
    tmodel t = {0};
    mlp_init(&t.m);
    mg_train_model model = t_model(&t);
    mg_status st = mg_train_run(&model, cfg, res);
    mlp_free(&t.m);
    return st;
}

/* ---- the README's example ---- */

START_TEST(readme_example_learns) {
    setup_dir();
    int saved = stdout_to("out.txt");
    int rc = train_mlp_example();
    stdout_back(saved);
    char *out = tu_read_file("out.txt", NULL);
    ck_assert_msg(rc == 0, "the example failed: %s", mg_last_error());
    tu_assert_has("its output", out, "step 300: loss ");
    tu_assert_has("its progress lines", out, "mlp step 300/300  loss ");
    tu_assert_has("its progress lines", out, "steps/s");
    free(out);
    static run_log lg;
    read_log("mlp.jsonl", &lg);
    ck_assert_int_eq(lg.n, 300);
    ck_assert_int_eq(lg.nv, 6); /* steps 50, 100, ..., 300 */
    double first = 0, last = 0;
    for (int i = 0; i < 20; i++) first += lg.loss[i] / 20, last += lg.loss[280 + i] / 20;
    ck_assert_msg(lg.loss[0] > 0.6 && first > 0.4 && last < 0.2, "the loss went from %g to %g", first, last);
    ck_assert(exists("mlp.safetensors") && exists("mlp.state.safetensors"));
    size_t n;
    unsigned char *png = tu_read_file("mlp.png", &n);
    ck_assert_msg(n > 1000 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0, "mlp.png is not a PNG");
    free(png);
    /* the weights file holds every parameter under its name, and the step */
    mg_st_file *f;
    TU_OK(mg_safetensors_open("mlp.safetensors", &f));
    ck_assert_int_eq(mg_st_count(f), 3);
    ck_assert_int_ge(mg_st_find(f, "fc1.weight"), 0);
    ck_assert_str_eq(mg_st_meta_get(f, "train.step"), "300");
    mg_st_close(f);
    /* a finished run resumed: nothing to do */
    mlp m;
    mlp_init(&m);
    mg_train_model model = {.params = m.P, .user = &m, .next_batch = mlp_batch, .loss = mlp_loss};
    mg_train_cfg cfg = mg_train_defaults();
    cfg.steps = 300, cfg.ckpt = "mlp.safetensors", cfg.resume = true, cfg.quiet = true;
    mg_train_result res;
    TU_OK(mg_train_run(&model, &cfg, &res));
    ck_assert_int_eq(res.step, 300);
    ck_assert_int_eq(res.steps_run, 0);
    mlp_free(&m);
    /* the curve again, from the log */
    TU_OK(mg_train_plot_log("mlp.jsonl", "again.png", "again"));
    ck_assert(exists("again.png"));
    TU_ASSERT_ERR(mg_train_plot_log("nope.jsonl", "x.png", NULL), MG_ERR_IO, "nope.jsonl");
    /* a log without a training step: the message names the log and its first unusable line, not
     * the picture, and no picture is written */
    FILE *g = fopen("garbage.jsonl", "w");
    ck_assert_ptr_nonnull(g);
    fputs("{not json\n{\"step\":\"x\",\"loss\":1}\n", g);
    fclose(g);
    TU_ASSERT_ERR(mg_train_plot_log("garbage.jsonl", "x.png", NULL), MG_ERR_FORMAT,
                  "garbage.jsonl: no training steps to plot: none of its 2 lines has a \"step\" of 1..2147483648 "
                  "and a \"loss\" (line 1: '{not json')");
    ck_assert(strstr(mg_last_error(), "x.png") == NULL);
    g = fopen("empty.jsonl", "w");
    ck_assert_ptr_nonnull(g);
    fclose(g);
    TU_ASSERT_ERR(mg_train_plot_log("empty.jsonl", "x.png", NULL), MG_ERR_FORMAT, "empty.jsonl: the log is empty");
    ck_assert(!exists("x.png"));
    remove_dir();
}
END_TEST

START_TEST(readme_and_header_match_this_file) {
    char p[3][1024];
    ck_assert_msg(tu_source_path(p[0], sizeof p[0], "README.md"), "MINIGRAD_SOURCE_ROOT not set (run through meson test)");
    tu_source_path(p[1], sizeof p[1], "tests/test_train.c");
    tu_source_path(p[2], sizeof p[2], "train/include/minigrad/train.h");
    char *readme = tu_read_file(p[0], NULL), *self = tu_read_file(p[1], NULL), *header = tu_read_file(p[2], NULL);
    char *doc = tu_between(readme, "train-example:begin", "train-example:end");
    ck_assert_msg(doc != NULL, "README.md has no train-example block");
    char *w = doc; /* drop the markdown fence lines */
    for (char *line = doc; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        if (strncmp(line, "```", 3) != 0) memmove(w, line, len), w += len;
        line += len;
    }
    *w = 0;
    char *code = tu_between(self, "train-example:begin", "train-example:end");
    ck_assert_ptr_nonnull(code);
    ck_assert_msg(strcmp(doc, code) == 0, "README.md's trainer example differs from tests/test_train.c");
    /* every line of the header's sketch (" *   code") is a line of the example */
    char *sketch = tu_between(header, "A model that is not a GPT", "#ifndef MINIGRAD_TRAIN_H");
    ck_assert_msg(sketch != NULL, "train.h lacks its example");
    int checked = 0;
    for (char *line = strtok(sketch, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, " *   ", 5) != 0) continue;
        const char *text = line + 5;
        while (*text == ' ') text++;
        if (strcmp(text, "...") == 0) continue;
        ck_assert_msg(strstr(code, text), "train.h's example line is not in the README's: %s", text);
        checked++;
    }
    ck_assert_int_ge(checked, 10);
    free(sketch);
    free(doc);
    free(code);
    free(readme);
    free(self);
    free(header);
}
END_TEST

/* ---- exact resume ---- */

static volatile sig_atomic_t sigints;
static void count_sigint(int sig) {
    (void)sig;
    sigints++;
}

/* A run of 60 steps that signal sig stops after step `at`, then resumed: its files end as those of
 * the uninterrupted run "straight". */
static void signal_then_resume(const char *name, int64_t at, int sig) {
    mg_train_result res;
    mg_train_cfg c = test_cfg(name, 60);
    tmodel t = {.interrupt_at = at, .interrupt_sig = sig};
    mlp_init(&t.m);
    mg_train_model model = t_model(&t);
    signal(SIGINT, count_sigint);
    signal(SIGTERM, count_sigint);
    TU_OK(mg_train_run(&model, &c, &res));
    mlp_free(&t.m);
    ck_assert(res.interrupted);
    ck_assert_int_eq(res.stop_signal, sig);
    ck_assert_int_eq(res.step, at);
    ck_assert_msg(signal(SIGINT, SIG_DFL) == count_sigint, "the trainer did not restore the SIGINT handler it found");
    ck_assert_msg(signal(SIGTERM, SIG_DFL) == count_sigint, "the trainer did not restore the SIGTERM handler it found");
    ck_assert_int_eq(sigints, 0); /* the trainer's handler took the signal */
    c.resume = true;
    TU_OK(run_plain(&c, &res));
    ck_assert_int_eq(res.steps_run, 60 - at);
    ck_assert(!res.interrupted);
    ck_assert_int_eq(res.stop_signal, 0);
    char a[80], b[80];
    snprintf(a, sizeof a, "%s.safetensors", name);
    snprintf(b, sizeof b, "%s.state.safetensors", name);
    assert_same_file("straight.safetensors", a);
    assert_same_file("straight.state.safetensors", b);
    snprintf(a, sizeof a, "%s.jsonl", name);
    assert_same_log("straight.jsonl", a, 60);
}

START_TEST(resume_is_bit_identical) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg a = test_cfg("straight", 60);
    TU_OK(run_plain(&a, &res));
    ck_assert_int_eq(res.step, 60);
    ck_assert_int_eq(res.steps_run, 60);
    ck_assert(!res.stopped && !res.interrupted && !res.diverged);
    ck_assert(isfinite(res.val_loss) && res.val_loss < 0.5f);

    /* in three pieces: 23 steps, 20 more, the rest */
    mg_train_cfg b = test_cfg("pieces", 60);
    b.stop_after = 23;
    TU_OK(run_plain(&b, &res));
    ck_assert(res.stopped);
    ck_assert_int_eq(res.step, 23);
    b.resume = true, b.stop_after = 20;
    TU_OK(run_plain(&b, &res));
    ck_assert(res.stopped);
    ck_assert_int_eq(res.step, 43);
    ck_assert_int_eq(res.steps_run, 20);
    b.stop_after = 0;
    TU_OK(run_plain(&b, &res));
    ck_assert(!res.stopped);
    ck_assert_int_eq(res.step, 60);
    ck_assert_int_eq(res.steps_run, 17);
    assert_same_file("straight.safetensors", "pieces.safetensors");
    assert_same_file("straight.state.safetensors", "pieces.state.safetensors");
    assert_same_log("straight.jsonl", "pieces.jsonl", 60);

    /* Ctrl-C after step 16, SIGTERM (kill, timeout, a job scheduler) after step 9: saved there, the
     * handlers found for both signals put back, and a resume continues exactly */
    signal_then_resume("ctrlc", 16, SIGINT);
    signal_then_resume("term", 9, SIGTERM);
    /* a signal the process ignores stays ignored: a background job's SIGINT does not stop the run */
    signal(SIGINT, SIG_IGN);
    mg_train_cfg ig = test_cfg("ignored", 20);
    tmodel u = {.interrupt_at = 5, .interrupt_sig = SIGINT};
    mlp_init(&u.m);
    mg_train_model um = t_model(&u);
    TU_OK(mg_train_run(&um, &ig, &res));
    mlp_free(&u.m);
    ck_assert(!res.interrupted);
    ck_assert_int_eq(res.step, 20);
    ck_assert_msg(signal(SIGINT, SIG_DFL) == SIG_IGN, "the trainer did not leave SIGINT ignored");
    remove_dir();
}
END_TEST

START_TEST(resume_refuses_what_does_not_fit) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg c = test_cfg("run", 40);
    c.resume = true;
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_IO, "run.safetensors", "cannot resume");
    c.resume = false, c.stop_after = 10;
    TU_OK(run_plain(&c, &res));
    /* weights without their state */
    ck_assert_int_eq(rename("run.state.safetensors", "keep.safetensors"), 0);
    c.resume = true, c.stop_after = 0;
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_IO, "run.state.safetensors", "training state");
    /* a state of another step (a save cut short between the two files) */
    mg_train_cfg d = test_cfg("other", 40);
    d.stop_after = 20;
    TU_OK(run_plain(&d, &res));
    ck_assert_int_eq(rename("other.state.safetensors", "run.state.safetensors"), 0);
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_FORMAT,
                  "run.safetensors: cannot resume: the weights are of step 10 but the training state "
                  "run.state.safetensors is of step 20: the weights file is older");
    /* ... and the other way round: other's weights (step 20) with run's state of step 10 */
    size_t n10;
    char *state10 = tu_read_file("keep.safetensors", &n10);
    tu_write_bytes("other.state.safetensors", state10, n10);
    free(state10);
    d.resume = true, d.stop_after = 0;
    TU_ASSERT_ERR(run_plain(&d, &res), MG_ERR_FORMAT,
                  "other.safetensors: cannot resume: the weights are of step 20 but the training state "
                  "other.state.safetensors is of step 10: the training state is older");
    /* the same step, but the state of another run's weights */
    mg_train_cfg o = test_cfg("another", 40);
    o.stop_after = 10, o.seed = 99;
    tmodel t = {0};
    mlp_init(&t.m);
    t.m.W1->data[0] += 0.25f; /* other initial weights */
    mg_train_model model = t_model(&t);
    TU_OK(mg_train_run(&model, &o, &res));
    mlp_free(&t.m);
    ck_assert_int_eq(rename("another.state.safetensors", "run.state.safetensors"), 0);
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_FORMAT,
                  "run.safetensors: cannot resume: the training state run.state.safetensors belongs to other "
                  "weights (it names crc32:",
                  "the two files come from different runs or saves of step 10");
    /* the right state again: it continues */
    ck_assert_int_eq(rename("keep.safetensors", "run.state.safetensors"), 0);
    TU_OK(run_plain(&c, &res));
    ck_assert_int_eq(res.step, 40);
    remove_dir();
}
END_TEST

/* ---- divergence ---- */

START_TEST(non_finite_loss_keeps_the_last_checkpoint) {
    setup_dir();
    mg_train_cfg c = test_cfg("run", 60);
    tmodel t = {.poison_at = 24, .copy_at = 21, .ckpt = c.ckpt};
    mlp_init(&t.m);
    mg_train_model model = t_model(&t);
    mg_train_result res;
    TU_ASSERT_ERR(mg_train_run(&model, &c, &res), MG_ERR_NONFINITE, "mlp: the loss became nan at step 24",
                  "the last good checkpoint (step 20) is kept at run.safetensors", "learning rate");
    ck_assert(res.diverged);
    ck_assert_int_eq(res.step, 23);
    ck_assert_ptr_nonnull(t.before[0]);
    /* both files are what step 20 wrote */
    size_t n;
    char *now = tu_read_file("run.safetensors", &n);
    ck_assert(n == t.before_n[0] && memcmp(now, t.before[0], n) == 0);
    free(now);
    now = tu_read_file("run.state.safetensors", &n);
    ck_assert(n == t.before_n[1] && memcmp(now, t.before[1], n) == 0);
    free(now);
    free(t.before[0]);
    free(t.before[1]);
    mlp_free(&t.m);

    /* before any checkpoint of this run; and without checkpoints at all */
    tmodel u = {.poison_at = 3};
    mlp_init(&u.m);
    model = t_model(&u);
    TU_ASSERT_ERR(mg_train_run(&model, &c, &res), MG_ERR_NONFINITE, "at step 3",
                  "no checkpoint was written in this run");
    u.steps_done = 0;
    c.ckpt = NULL;
    TU_ASSERT_ERR(mg_train_run(&model, &c, &res), MG_ERR_NONFINITE, "no checkpoints are kept");
    mlp_free(&u.m);
    remove_dir();
}
END_TEST

/* The update of a step that makes the weights explode (beyond cfg.max_weight) or non-finite is
 * not saved: with a checkpoint every step, the one kept is of the step before, and holds finite
 * weights within the bound. A validation loss that turns NaN stops the run the same way. */
START_TEST(exploding_weights_are_not_checkpointed) {
    setup_dir();
    mg_train_cfg c = test_cfg("boom", 200);
    c.ckpt_every = 1, c.eval_every = 0, c.warmup = 0, c.lr = 0.2f, c.lr_min = 0.2f, c.max_weight = 2.0f;
    mg_train_result res;
    mg_status st = run_plain(&c, &res);
    ck_assert_int_eq(st, MG_ERR_NONFINITE);
    ck_assert(res.diverged);
    int64_t bad = res.step + 1;
    char want[200];
    snprintf(want, sizeof want, "mlp: the update of step %lld made the weights explode", (long long)bad);
    tu_assert_error_has(want);
    tu_assert_error_has("beyond the bound 2 (cfg.max_weight)");
    snprintf(want, sizeof want, "stopped without saving step %lld: the last good checkpoint (step %lld) is kept at "
             "boom.safetensors", (long long)bad, (long long)bad - 1);
    tu_assert_error_has(want);
    ck_assert_int_gt(res.step, 3);
    /* what is kept is the step before, whole and within the bound; a resume continues from it */
    mlp m;
    mlp_init(&m);
    mg_st_file *f;
    TU_OK(mg_checkpoint_load("boom.safetensors", m.P, &f));
    char step_text[24];
    ck_assert_str_eq(mg_st_meta_get(f, "train.step"), mg_meta_fmt_i64(step_text, bad - 1));
    mg_st_close(f);
    for (int i = 0; i < mg_params_len(m.P); i++) {
        mg_tensor *t = mg_params_at(m.P, i);
        for (int64_t k = 0; k < t->numel; k++) ck_assert(isfinite(t->data[k]) && fabsf(t->data[k]) <= 2.0f);
    }
    mlp_free(&m);
    c.resume = true;
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_NONFINITE, want);

    /* non-finite weights from an absurd step size: the same, and no bound needed to see them */
    mg_train_cfg d = test_cfg("inf", 50);
    d.ckpt_every = 1, d.warmup = 0, d.lr = 1e38f, d.lr_min = 1e38f, d.weight_decay = 1e10f, d.max_weight = 0;
    TU_ASSERT_ERR(run_plain(&d, &res), MG_ERR_NONFINITE, "the update of step 1 made the weights non-finite",
                  "inf)", "no checkpoint was written in this run");
    ck_assert(!exists("inf.safetensors") && !exists("inf.safetensors.pending"));
    d.max_weight = -1;
    TU_ASSERT_ERR(run_plain(&d, &res), MG_ERR_INVALID, "cfg.max_weight must lie in [0, inf), got -1");
    d.max_weight = NAN;
    TU_ASSERT_ERR(run_plain(&d, &res), MG_ERR_INVALID, "cfg.max_weight");
    ck_assert(mg_train_defaults().max_weight == 1e6f);

    /* the validation loss turns NaN after step 9 (it was finite after 7): step 9 is not saved */
    mg_train_cfg v = test_cfg("val", 30);
    v.ckpt_every = 1;
    tmodel t = {.val_nan_at = 14};
    mlp_init(&t.m);
    mg_train_model model = t_model(&t);
    TU_ASSERT_ERR(mg_train_run(&model, &v, &res), MG_ERR_NONFINITE,
                  "mlp: the validation loss became nan after the update of step 14; stopped without saving step 14: "
                  "the last good checkpoint (step 13) is kept");
    ck_assert_int_eq(res.step, 14);
    mlp_free(&t.m);
    TU_OK(mg_safetensors_open("val.safetensors", &f));
    ck_assert_str_eq(mg_st_meta_get(f, "train.step"), "13");
    mg_st_close(f);
    /* a model without validation data (NaN from the start) is not divergence */
    tmodel u = {.val_nan_at = 7};
    mlp_init(&u.m);
    model = t_model(&u);
    v = test_cfg("noval", 10);
    TU_OK(mg_train_run(&model, &v, &res));
    mlp_free(&u.m);
    remove_dir();
}
END_TEST

/* ---- checkpoints as a pair: kills and full disks between the two files ---- */

/* The run test_cfg(name, steps) in a child process: this program again (a forked copy of a
 * process that ran OpenMP code cannot), told by MG_TEST_TRAIN_CHILD, with
 * MINIGRAD_TRAIN_CRASH=crash, which must kill it (SIGKILL). */
static void run_crashing(const char *name, int steps, const char *crash) {
    char spec[128], self[4096];
    snprintf(spec, sizeof spec, "%s %d", name, steps);
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(len, 0);
    self[len] = 0;
    fflush(stdout);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("MINIGRAD_TRAIN_CRASH", crash, 1);
        setenv("MG_TEST_TRAIN_CHILD", spec, 1);
        execl(self, self, (char *)NULL);
        _exit(98);
    }
    int wst;
    ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
    ck_assert_msg(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "%s: the run was not killed (status 0x%x)", crash,
                  (unsigned)wst);
}

START_TEST(a_kill_between_the_two_files_resumes_exactly) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg a = test_cfg("straight", 40);
    TU_OK(run_plain(&a, &res));
    static const struct {
        const char *crash, *name;
        bool weights_pending, state_pending;
        const char *step_on_disk; /* of the committed weights after the kill */
    } cases[] = {
        {"weights:3", "w", true, false, "20"}, /* the 3rd checkpoint (step 30) */
        {"state:3", "s", true, true, "20"},
        {"commit:3", "c", false, true, "30"},
        {"commit:1", "first", false, true, "10"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mg_train_cfg c = test_cfg(cases[k].name, 40);
        run_crashing(cases[k].name, 40, cases[k].crash);
        char p[256];
        snprintf(p, sizeof p, "%s.safetensors.pending", cases[k].name);
        ck_assert_msg(exists(p) == cases[k].weights_pending, "%s: %s", cases[k].crash, p);
        snprintf(p, sizeof p, "%s.state.safetensors.pending", cases[k].name);
        ck_assert_msg(exists(p) == cases[k].state_pending, "%s: %s", cases[k].crash, p);
        mg_st_file *f;
        TU_OK(mg_safetensors_open(c.ckpt, &f));
        ck_assert_str_eq(mg_st_meta_get(f, "train.step"), cases[k].step_on_disk);
        mg_st_close(f);
        /* what a writer killed mid-file leaves, from a process that is gone */
        snprintf(p, sizeof p, "%s.state.safetensors.tmp.%d", cases[k].name, 999999999);
        tu_write_text(p, "half a file");
        char live[256];
        snprintf(live, sizeof live, "%s.safetensors.tmp.1", cases[k].name); /* pid 1 exists: left alone */
        tu_write_text(live, "another process's");
        c.resume = true;
        TU_OK(run_plain(&c, &res));
        ck_assert_int_eq(res.step, 40);
        ck_assert_int_eq(res.steps_run, 40 - atoi(cases[k].step_on_disk));
        assert_same_file("straight.safetensors", c.ckpt);
        char sa[256], sb[256];
        TU_OK(mg_train_state_path(c.ckpt, sb, sizeof sb));
        TU_OK(mg_train_state_path(a.ckpt, sa, sizeof sa));
        assert_same_file(sa, sb);
        ck_assert_msg(!exists(p), "%s was not removed", p);
        ck_assert(exists(live));
        snprintf(p, sizeof p, "%s.safetensors.pending", cases[k].name);
        ck_assert(!exists(p));
        snprintf(p, sizeof p, "%s.state.safetensors.pending", cases[k].name);
        ck_assert(!exists(p));
    }
    /* a fresh run over a killed one starts over and clears its pending files */
    mg_train_cfg c = test_cfg("again", 40);
    run_crashing("again", 40, "commit:2");
    ck_assert(exists("again.state.safetensors.pending"));
    TU_OK(run_plain(&c, &res));
    ck_assert(!exists("again.state.safetensors.pending"));
    assert_same_file("straight.safetensors", c.ckpt);
    remove_dir();
}
END_TEST

START_TEST(a_full_disk_keeps_the_previous_pair) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg a = test_cfg("straight", 40);
    a.log_path = NULL;
    TU_OK(run_plain(&a, &res));
    mg_train_cfg c = test_cfg("full", 40);
    c.log_path = NULL, c.stop_after = 10;
    TU_OK(run_plain(&c, &res));
    size_t nw, ns;
    char *w10 = tu_read_file("full.safetensors", &nw), *s10 = tu_read_file("full.state.safetensors", &ns);
    ck_assert_uint_lt(nw + 64, ns);
    /* files may grow to the weights' size but not to the state's: the state's write fails */
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit lim = {(rlim_t)(nw + 32), old.rlim_max};
    void (*xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    c.resume = true, c.stop_after = 0;
    mg_status st = run_plain(&c, &res);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, xfsz);
    ck_assert_int_eq(st, MG_ERR_IO);
    tu_assert_error_has("the checkpoint of step 20 was not saved (the previous one is intact)");
    tu_assert_error_has("full.state.safetensors.pending");
    ck_assert_int_eq(res.step, 20);
    size_t n;
    char *now = tu_read_file("full.safetensors", &n);
    ck_assert(n == nw && memcmp(now, w10, n) == 0);
    free(now);
    now = tu_read_file("full.state.safetensors", &n);
    ck_assert(n == ns && memcmp(now, s10, n) == 0);
    free(now);
    ck_assert(!exists("full.safetensors.pending") && !exists("full.state.safetensors.pending"));
    /* space again: the run resumes from step 10 and ends exactly */
    TU_OK(run_plain(&c, &res));
    ck_assert_int_eq(res.steps_run, 30);
    assert_same_file("straight.safetensors", "full.safetensors");
    assert_same_file("straight.state.safetensors", "full.state.safetensors");
    free(w10);
    free(s10);
    remove_dir();
}
END_TEST

/* ---- errors ---- */

static mg_status fail_batch(void *user) {
    (void)user;
    return mg_set_error(MG_ERR_IO, "data.bin: read error");
}

static mg_status fail_eval(void *user, float *v) {
    (void)user;
    *v = NAN;
    return mg_set_error(MG_ERR_NOMEM, "validation buffers");
}

static mg_tensor *vector_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout;
    mlp *m = user;
    return mg_matmul(ctx, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, m->x), m->W1);
}

static mg_tensor *shape_error_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout;
    mlp *m = user;
    return mg_matmul(ctx, m->W1, m->W1); /* (2, 32) x (2, 32) */
}

static mg_tensor *null_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)user, (void)ctx, (void)dropout;
    return NULL;
}

/* Case i: one bad value put into c, and what the message must say (NULL after the last). */
static const char *bad_cfg(int i, mg_train_cfg *c) {
    switch (i) {
    case 0: return c->steps = 0, "run: cfg.steps must be at least 1, got 0";
    case 1: return c->warmup = -1, "cfg.warmup must be at least 0, got -1";
    case 2: return c->eval_every = -2, "cfg.eval_every must be at least 0";
    case 3: return c->ckpt_every = -1, "cfg.ckpt_every must be at least 0";
    case 4: return c->stop_after = -1, "cfg.stop_after must be at least 0";
    case 5: return c->lr = 0, "cfg.lr must be positive and finite, got 0";
    case 6: return c->lr = NAN, "cfg.lr must be positive and finite, got nan";
    case 7: return c->lr_min = -1e-3f, "cfg.lr_min must lie in [0, inf), got -0.001";
    case 8: return c->weight_decay = INFINITY, "cfg.weight_decay must lie in [0, inf), got inf";
    case 9: return c->beta1 = 1, "cfg.beta1 must lie in [0, 1), got 1";
    case 10: return c->beta2 = -0.5f, "cfg.beta2 must lie in [0, 1), got -0.5";
    case 11: return c->eps = 0, "cfg.eps must be positive and finite, got 0";
    case 12: return c->clip = NAN, "cfg.clip must lie in [0, inf), got nan";
    case 13: return c->ckpt = "", "cfg.ckpt is an empty path";
    case 14: return c->ckpt = NULL, c->resume = true, "cfg.resume needs cfg.ckpt";
    case 15: return c->ckpt = NULL, c->stop_after = 5, "cfg.stop_after needs cfg.ckpt";
    case 16:
        return c->precision = (mg_precision)7,
               "run: cfg.precision is 7: expected MG_PRECISION_FP32 or MG_PRECISION_BF16";
    default: return NULL;
    }
}

START_TEST(bad_configurations_are_refused) {
    setup_dir();
    mlp m;
    mlp_init(&m);
    const mg_train_model good = {.params = m.P, .user = &m, .next_batch = mlp_batch, .loss = mlp_loss,
                                 .rngs = {&m.data}, .rng_names = {"data"}, .n_rngs = 1};
    mg_train_result res;
    for (int i = 0;; i++) {
        mg_train_cfg c = test_cfg("run", 20);
        c.prog = "run";
        const char *msg = bad_cfg(i, &c);
        if (!msg) break;
        TU_ASSERT_ERR(mg_train_run(&good, &c, &res), MG_ERR_INVALID, msg);
    }
    mg_train_cfg c = test_cfg("run", 20);
    static mg_st_meta reserved[] = {{"note", "x"}, {"train.step", "5"}};
    struct {
        mg_train_model m;
        const char *msg;
    } bad_model[] = {
        {{.loss = mlp_loss}, "model.params must be an allocated parameter store"},
        {{.params = m.P}, "model.loss is required"},
        {{.params = m.P, .loss = mlp_loss, .n_rngs = 9}, "model.n_rngs must lie in [0, 8], got 9"},
        {{.params = m.P, .loss = mlp_loss, .n_rngs = 1, .rng_names = {"data"}}, "model.rngs[0] is NULL"},
        {{.params = m.P, .loss = mlp_loss, .n_rngs = 1, .rngs = {&m.data}}, "model.rng_names[0] must be a name"},
        {{.params = m.P, .loss = mlp_loss, .n_rngs = 1, .rngs = {&m.data}, .rng_names = {"dropout"}},
         "'dropout' is the trainer's own stream"},
        {{.params = m.P, .loss = mlp_loss, .n_rngs = 2, .rngs = {&m.data, &m.data}, .rng_names = {"a", "a"}},
         "model.rng_names[0] and [1] are both 'a'"},
        {{.params = m.P, .loss = mlp_loss, .n_meta = 2}, "model.n_meta is 2 but model.meta holds no entries"},
        {{.params = m.P, .loss = mlp_loss, .meta = reserved, .n_meta = 2}, "model.meta[1]: the key 'train.step'"},
        {{.params = m.P, .loss = mlp_loss, .tokens_per_step = -1}, "model.tokens_per_step must be at least 0"},
    };
    for (size_t i = 0; i < sizeof bad_model / sizeof bad_model[0]; i++)
        TU_ASSERT_ERR(mg_train_run(&bad_model[i].m, &c, &res), MG_ERR_INVALID, "mlp: ", bad_model[i].msg);
    TU_ASSERT_ERR(mg_train_run(NULL, &c, &res), MG_ERR_INVALID, "needs a model and a configuration");
    TU_ASSERT_ERR(mg_train_run(&good, &c, NULL), MG_ERR_INVALID, "needs a result");
    /* nothing was written by any of them */
    ck_assert(!exists("run.safetensors") && !exists("run.jsonl") && !exists("run.state.safetensors"));

    /* the state file's name, and one that does not fit */
    char buf[64];
    TU_OK(mg_train_state_path("out/model.safetensors", buf, sizeof buf));
    ck_assert_str_eq(buf, "out/model.state.safetensors");
    TU_OK(mg_train_state_path("weights.bin", buf, sizeof buf));
    ck_assert_str_eq(buf, "weights.bin.state.safetensors");
    TU_ASSERT_ERR(mg_train_state_path("out/model.safetensors", buf, 20), MG_ERR_INVALID, "longer than 19 bytes");
    mlp_free(&m);
    remove_dir();
}
END_TEST

START_TEST(failing_callbacks_stop_the_run) {
    setup_dir();
    mlp m;
    mlp_init(&m);
    mg_train_cfg c = test_cfg("run", 20);
    c.ckpt = NULL, c.log_path = NULL;
    mg_train_result res;
    mg_train_model md = {.params = m.P, .user = &m, .next_batch = fail_batch, .loss = mlp_loss};
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_IO, "mlp: step 1: the next batch: data.bin: read error");
    md.next_batch = mlp_batch, md.eval = fail_eval;
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_NOMEM, "mlp: step 7: validation: validation buffers");
    ck_assert_int_eq(res.step, 7);
    md.eval = NULL, md.loss = vector_loss;
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_INVALID, "step 1: model.loss must return one float, got 2048");
    md.loss = null_loss;
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_INVALID, "step 1: model.loss returned no tensor");
    md.loss = shape_error_loss; /* raised on the trainer's context: an error, not an abort */
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_INVALID, "mlp: step 1: ", "matmul");
    mlp_free(&m);
    remove_dir();
}
END_TEST

/* ---- without checkpoints, quietly (a loop inside a bigger program) ---- */

START_TEST(quiet_run_without_files) {
    setup_dir();
    mg_train_cfg c = test_cfg("run", 50);
    c.ckpt = NULL, c.log_path = NULL, c.catch_sigint = false;
    int saved = stdout_to("out.txt");
    mg_train_result res;
    mg_status st = run_plain(&c, &res);
    stdout_back(saved);
    TU_OK(st);
    ck_assert_int_eq(res.step, 50);
    ck_assert(res.steps_per_s > 0 && res.tokens_per_s == 0 && res.peak_arena > 0);
    size_t n;
    free(tu_read_file("out.txt", &n));
    ck_assert_uint_eq(n, 0);
    ck_assert(!exists("run.safetensors"));
    remove_dir();
}
END_TEST

/* ---- files that cannot be written ---- */

/* A checkpoint path that is a device or a folder is refused before training: the commit renames
 * into place, which would replace it. */
START_TEST(a_checkpoint_path_that_is_not_a_file_is_refused) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg c = test_cfg("run", 5);
    c.ckpt = "/dev/null";
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_IO, "/dev/null: not a regular file");
    struct stat sb;
    ck_assert_int_eq(stat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
}
END_TEST

/* The log on a full disk: the run stops at the step it could not log, with MG_ERR_IO naming the
 * log and the reason, and the log keeps whole lines only. */
START_TEST(a_log_that_cannot_be_written_stops_the_run) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg c = test_cfg("run", 30);
    c.log_path = "/dev/full";
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_IO, "mlp: step 1: /dev/full: cannot write the log file: ",
                  strerror(ENOSPC));
    ck_assert_int_eq(res.step, 1);
    ck_assert(!exists("run.safetensors"));
    tu_assert_dev_full_intact();

    /* a disk that fills up part way through the log (before the first checkpoint, at step 10) */
    c = test_cfg("part", 30);
    struct rlimit old = tu_limit_file_size(600);
    mg_status st = run_plain(&c, &res);
    tu_restore_file_size(old);
    ck_assert_int_eq(st, MG_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "mlp: step %lld: part.jsonl: cannot write the log file: ", (long long)res.step);
    tu_assert_error_has(want);
    tu_assert_error_has(strerror(EFBIG));
    ck_assert(res.step > 1 && res.step < 10);
    size_t n;
    char *log = tu_read_file("part.jsonl", &n);
    ck_assert(n > 0 && n <= 600 && log[n - 1] == '\n');
    int lines = 0;
    for (char *l = log; *l; l = strchr(l, '\n') + 1) {
        char head[32];
        snprintf(head, sizeof head, "{\"step\": %d, ", ++lines);
        ck_assert_msg(strncmp(l, head, strlen(head)) == 0, "line %d of the log: %.80s", lines, l);
        ck_assert_ptr_nonnull(strstr(l, "}\n"));
    }
    ck_assert_int_eq(lines, res.step - 1);
    free(log);
    ck_assert(!exists("part.safetensors"));
    remove_dir();
}
END_TEST

/* The loss curve on a full disk: the run is done and saved, and its status says the PNG is not. */
START_TEST(a_plot_that_cannot_be_written_fails_the_run) {
    setup_dir();
    mg_train_result res;
    mg_train_cfg c = test_cfg("run", 12);
    c.plot_path = "/dev/full";
    TU_ASSERT_ERR(run_plain(&c, &res), MG_ERR_IO, "mlp: loss plot not written: /dev/full: write failed: ",
                  strerror(ENOSPC));
    ck_assert_int_eq(res.step, 12);
    ck_assert(exists("run.safetensors"));
    tu_assert_dev_full_intact();
    /* an earlier error keeps its message: the plot's failure does not replace it */
    tmodel t = {0};
    mlp_init(&t.m);
    mg_train_model md = t_model(&t);
    md.eval = fail_eval;
    TU_ASSERT_ERR(mg_train_run(&md, &c, &res), MG_ERR_NOMEM, "mlp: step 7: validation: validation buffers");
    mlp_free(&t.m);
    remove_dir();
}
END_TEST

/* The reporter on its own: a log line that cannot be written is an error at that step and after,
 * and at the close. */
START_TEST(progress_reports_a_log_it_cannot_write) {
    setup_dir();
    mg_train_progress p;
    TU_OK(mg_train_progress_open(&p, "loop", 10, 0, "/dev/full", false));
    p.quiet = true;
    TU_ASSERT_ERR(mg_train_progress_step(&p, 1, 1.0f, 1e-3f, 10.0, NAN, NAN), MG_ERR_IO,
                  "/dev/full: cannot write the log file: ", strerror(ENOSPC));
    mg_clear_error();
    TU_ASSERT_ERR(mg_train_progress_step(&p, 2, 1.0f, 1e-3f, 10.0, NAN, NAN), MG_ERR_IO, "/dev/full");
    mg_clear_error();
    TU_ASSERT_ERR(mg_train_progress_close(&p), MG_ERR_IO, "/dev/full: cannot write the log file: ");
    tu_assert_dev_full_intact();
    TU_OK(mg_train_progress_open(&p, "loop", 10, 0, "good.jsonl", false));
    p.quiet = true;
    TU_OK(mg_train_progress_step(&p, 1, 1.0f, 1e-3f, 10.0, 0.5f, 2.0f));
    TU_OK(mg_train_progress_close(&p));
    char *log = tu_read_file("good.jsonl", NULL);
    tu_assert_has("the log", log, "{\"step\": 1, \"loss\": 1, \"lr\": 0.001, \"tokens_per_s\": 10.0, \"grad_norm\": 0.5, ");
    tu_assert_has("the log", log, ", \"val_loss\": 2}\n");
    free(log);
    remove_dir();
}
END_TEST

/* Off a terminal (MINIGRAD_NO_TTY, output to a file): the first step gets a line, then every 1/50
 * of the run, and any step after 30 s without a line. */
START_TEST(plain_progress_shows_the_first_step_and_keeps_talking) {
    setup_dir();
    setenv("MINIGRAD_NO_TTY", "1", 1);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_ptr_nonnull(freopen("plain.txt", "w", stdout));
    mg_train_progress p;
    TU_OK(mg_train_progress_open(&p, "loop", 1000, 0, NULL, false));
    for (int64_t step = 1; step <= 25; step++) {
        if (step == 7) p.last_print -= 31.0; /* as if step 7 came 31 s after the last line */
        TU_OK(mg_train_progress_step(&p, step, 1.0f, 1e-3f, 10.0, NAN, NAN));
    }
    TU_OK(mg_train_progress_close(&p));
    fflush(stdout);
    ck_assert_int_eq(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
    close(saved);
    char *out = tu_read_file("plain.txt", NULL);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    tu_assert_has("the progress", out, "loop step 1/1000 ");
    tu_assert_has("the progress", out, "loop step 7/1000 ");
    tu_assert_has("the progress", out, "loop step 20/1000 ");
    ck_assert_msg(lines == 3, "%d lines: %s", lines, out);
    ck_assert_msg(!strchr(out, '\r') && !strchr(out, '\033'), "terminal codes off a terminal: %s", out);
    free(out);
    remove_dir();
}
END_TEST

static Suite *train_suite(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_add_test(tc, readme_example_learns);
    tcase_add_test(tc, readme_and_header_match_this_file);
    tcase_add_test(tc, resume_is_bit_identical);
    tcase_add_test(tc, resume_refuses_what_does_not_fit);
    tcase_add_test(tc, non_finite_loss_keeps_the_last_checkpoint);
    tcase_add_test(tc, exploding_weights_are_not_checkpointed);
    tcase_add_test(tc, a_kill_between_the_two_files_resumes_exactly);
    tcase_add_test(tc, a_full_disk_keeps_the_previous_pair);
    tcase_add_test(tc, bad_configurations_are_refused);
    tcase_add_test(tc, failing_callbacks_stop_the_run);
    tcase_add_test(tc, quiet_run_without_files);
    if (tu_have_dev_full()) {
        tcase_add_test(tc, a_checkpoint_path_that_is_not_a_file_is_refused);
        tcase_add_test(tc, a_log_that_cannot_be_written_stops_the_run);
        tcase_add_test(tc, a_plot_that_cannot_be_written_fails_the_run);
        tcase_add_test(tc, progress_reports_a_log_it_cannot_write);
    } else {
        fprintf(stderr, "# /dev/full not found: the full-disk cases of the train suite skipped\n");
    }
    tcase_add_test(tc, plain_progress_shows_the_first_step_and_keeps_talking);
    suite_add_tcase(s, tc);
    return s;
}

/* As MG_TEST_MAIN, except that with MG_TEST_TRAIN_CHILD="NAME STEPS" in the environment the
 * program runs test_cfg(NAME, STEPS) in the current directory instead (run_crashing). */
int main(void) {
    const char *child = getenv("MG_TEST_TRAIN_CHILD");
    if (child) {
        char name[64];
        int steps;
        if (sscanf(child, "%63s %d", name, &steps) != 2) return 97;
        mg_train_cfg c = test_cfg(name, steps);
        mg_train_result res;
        run_plain(&c, &res);
        return 3; /* not killed: the crash hook did not fire */
    }
    SRunner *sr = srunner_create(train_suite());
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
