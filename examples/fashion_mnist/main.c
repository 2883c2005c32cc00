/* fashion_mnist: trains a small CNN on Fashion-MNIST and reports test accuracy.
 *
 *   conv 1->32 3x3 pad 1, relu, maxpool 2; conv 32->64 3x3 pad 1, relu, maxpool 2;
 *   linear 3136->128, relu, linear 128->10; Adam (lr 1e-3), batch 128, pixels scaled to [0, 1].
 *
 * The same model, data and optimizer as fashion_mnist_pytorch.py beside it. Trains with the library
 * trainer (minigrad/train.h), so `mpirun -np N fashion_mnist train ...` splits every batch over N
 * processes, and --stop-after / Ctrl-C then --resume continue a run exactly. Writes into --out: the
 * checkpoint model.safetensors with its training state model.state.safetensors (after every
 * epoch), curves.png (training loss, test accuracy),
 * misclassified.png (test images it got wrong, with true and predicted class), confusion.png, and
 * the JSON-lines log train.jsonl. Prints a progress line, the test accuracy after each epoch and
 * the confusion matrix at the end.
 *
 * --precision bf16 trains in bf16 mixed precision (docs/bf16.md): the products of the convolutions
 * and the linear layers on bf16 operands, with float32 weights, gradients, Adam moments and sums;
 * the evaluation context follows it.
 */
#include "fm.h"
#include "cli.h"
#include "gpt_opts.h" /* ex_precision_from, ex_precision_banner */
#include "output.h"
#include "progress.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char PROG[] = "fashion_mnist";

/* Test accuracy; sets *mean_loss (when not NULL) to the mean test cross-entropy and fills confusion[true][pred] and pred[i] when not NULL. */
static double fm_evaluate(fm_model *m, mg_ctx *ctx, const fm_set *test, int64_t batch, int64_t *confusion,
                          uint8_t *pred, double *mean_loss) {
    int64_t correct = 0;
    double loss_sum = 0.0;
    int64_t *idx = malloc((size_t)batch * sizeof *idx);
    if (!idx) return NAN;
    if (confusion) memset(confusion, 0, sizeof(int64_t) * FM_CLASSES * FM_CLASSES);
    bool prev = mg_ctx_set_grad_enabled(ctx, false);
    for (int64_t i0 = 0; i0 < test->n; i0 += batch) {
        int64_t B = test->n - i0 < batch ? test->n - i0 : batch;
        for (int64_t b = 0; b < B; b++) idx[b] = i0 + b;
        mg_ctx_reset(ctx);
        mg_tensor *x, *y;
        fm_batch(ctx, test, idx, B, &x, &y);
        mg_tensor *logits = fm_forward(m, ctx, x);
        mg_tensor *loss = mean_loss ? mg_cross_entropy(ctx, logits, y, -1) : NULL;
        if (!mg_ctx_ok(ctx)) break;
        if (loss) loss_sum += (double)loss->data[0] * (double)B;
        for (int64_t b = 0; b < B; b++) {
            const float *l = logits->data + b * FM_CLASSES;
            int best = 0;
            for (int c = 1; c < FM_CLASSES; c++)
                if (l[c] > l[best]) best = c;
            correct += best == y->i32[b];
            if (confusion) confusion[y->i32[b] * FM_CLASSES + best]++;
            if (pred) pred[i0 + b] = (uint8_t)best;
        }
    }
    mg_ctx_set_grad_enabled(ctx, prev);
    free(idx);
    if (mean_loss) *mean_loss = loss_sum / (double)test->n;
    return mg_ctx_ok(ctx) ? (double)correct / (double)test->n : NAN;
}

/* Loss curve (mean loss of each stretch of steps) and test accuracy per epoch, side by side. */
static mg_status fm_plot_curves(const char *dir, const double *loss_x, const double *loss_y, int n_loss,
                                const double *acc, int epochs) {
    char lp[4096], ap[4096], out[4096];
    snprintf(lp, sizeof lp, "%s/.curves_loss.png", dir);
    snprintf(ap, sizeof ap, "%s/.curves_acc.png", dir);
    snprintf(out, sizeof out, "%s/curves.png", dir);
    double *ex = malloc(sizeof(double) * (size_t)(epochs > 0 ? epochs : 1)), *ey = malloc(sizeof(double) * (size_t)(epochs > 0 ? epochs : 1));
    if (!ex || !ey) {
        free(ex), free(ey);
        return mg_set_error(MG_ERR_NOMEM, "cannot allocate the accuracy curve");
    }
    for (int e = 0; e < epochs; e++) ex[e] = e + 1, ey[e] = 100.0 * acc[e];
    mg_plot_series ls = {"training loss", loss_x, loss_y, n_loss}, as = {"test accuracy (%)", ex, ey, epochs};
    mg_status s = mg_plot_lines(lp, &(mg_plot_opts){.title = "Training loss", .xlabel = "epoch", .ylabel = "cross-entropy",
                                                    .width = 600, .height = 400, .log_y = true},
                                &ls, 1);
    if (s == MG_OK)
        s = mg_plot_lines(ap, &(mg_plot_opts){.title = "Test accuracy", .xlabel = "epoch", .ylabel = "%", .width = 600,
                                              .height = 400},
                          &as, 1);
    mg_canvas *a = NULL, *b = NULL, *c = NULL;
    if (s == MG_OK) s = mg_canvas_load_png(lp, &a);
    if (s == MG_OK) s = mg_canvas_load_png(ap, &b);
    if (s == MG_OK) {
        c = mg_canvas_new(1200, 400, 0xffffff);
        if (!c) s = mg_set_error(MG_ERR_NOMEM, "cannot allocate the curves figure");
    }
    if (s == MG_OK) {
        mg_canvas_blit(c, a, 0, 0);
        mg_canvas_blit(c, b, 600, 0);
        s = mg_canvas_save_png(c, out);
    }
    mg_canvas_free(a), mg_canvas_free(b), mg_canvas_free(c);
    unlink(lp), unlink(ap);
    free(ex), free(ey);
    return s;
}

/* Up to 64 misclassified test images, 3x enlarged, each captioned "true>pred" (class numbers;
 * the legend below names them). */
static mg_status fm_plot_misclassified(const char *path, const fm_set *test, const uint8_t *pred) {
    enum { COLS = 8, ROWS = 8, SCALE = 3, CELL_W = FM_SIDE * SCALE + 10, CELL_H = FM_SIDE * SCALE + 24 };
    const int legend_h = 5 * 16 + 10;
    mg_canvas *c = mg_canvas_new(COLS * CELL_W + 10, ROWS * CELL_H + 40 + legend_h, 0xffffff);
    if (!c) return mg_set_error(MG_ERR_NOMEM, "cannot allocate the misclassified-images figure");
    mg_canvas_text(c, 8, 8, "Misclassified test images: true > predicted class", 1.0, 0x000000);
    int k = 0;
    for (int64_t i = 0; i < test->n && k < COLS * ROWS; i++) {
        if (pred[i] == test->labels[i]) continue;
        int x0 = 10 + (k % COLS) * CELL_W, y0 = 30 + (k / COLS) * CELL_H;
        const uint8_t *img = test->images + i * FM_PIXELS;
        for (int r = 0; r < FM_SIDE; r++)
            for (int q = 0; q < FM_SIDE; q++) {
                uint32_t v = 255u - img[r * FM_SIDE + q];
                mg_canvas_fill_rect(c, x0 + q * SCALE, y0 + r * SCALE, SCALE, SCALE, v << 16 | v << 8 | v);
            }
        char cap[32];
        snprintf(cap, sizeof cap, "%d > %d", test->labels[i], pred[i]);
        mg_canvas_text(c, x0, y0 + FM_SIDE * SCALE + 4, cap, 1.0, 0xb00000);
        k++;
    }
    int ly = 40 + ROWS * CELL_H;
    for (int cl = 0; cl < FM_CLASSES; cl++) {
        char t[48];
        snprintf(t, sizeof t, "%d %s", cl, fm_class_names[cl]);
        mg_canvas_text(c, 10 + (cl % 2) * 300, ly + (cl / 2) * 16, t, 1.0, 0x303030);
    }
    mg_status s = mg_canvas_save_png(c, path);
    mg_canvas_free(c);
    return s;
}

static void fm_print_confusion(const int64_t *cm) {
    printf("confusion matrix (rows: true class, columns: predicted)\n%-12s", "");
    for (int c = 0; c < FM_CLASSES; c++) printf(" %5d", c);
    printf("  recall\n");
    for (int t = 0; t < FM_CLASSES; t++) {
        int64_t row = 0;
        for (int c = 0; c < FM_CLASSES; c++) row += cm[t * FM_CLASSES + c];
        printf("%d %-10s", t, fm_class_names[t]);
        for (int c = 0; c < FM_CLASSES; c++) printf(" %5lld", (long long)cm[t * FM_CLASSES + c]);
        printf("  %5.1f%%\n", row ? 100.0 * (double)cm[t * FM_CLASSES + t] / (double)row : 0.0);
    }
}

static mg_status fm_plot_confusion(const char *path, const int64_t *cm) {
    float v[FM_CLASSES * FM_CLASSES];
    for (int t = 0; t < FM_CLASSES; t++) {
        int64_t row = 0;
        for (int c = 0; c < FM_CLASSES; c++) row += cm[t * FM_CLASSES + c];
        for (int c = 0; c < FM_CLASSES; c++)
            v[t * FM_CLASSES + c] = row ? (float)(100.0 * (double)cm[t * FM_CLASSES + c] / (double)row) : 0.0f;
    }
    mg_plot_opts o = {.title = "Confusion matrix (% of each true class)", .xlabel = "predicted", .ylabel = "true",
                      .width = 800, .height = 700, .value_label = "%", .row_labels = fm_class_names,
                      .col_labels = fm_class_names, .square_cells = true};
    return mg_plot_heatmap(path, &o, v, FM_CLASSES, FM_CLASSES);
}

typedef struct fm_opts {
    const char *data, *out;
    const char *precision; /* fp32 (NULL) or bf16 */
    int64_t epochs, batch, limit, threads, seed, eval_batch, stop_after;
    float lr;
    bool resume, force;
} fm_opts;

/* A training run on the library trainer (minigrad/train.h): its batches, its loss on any rows of a
 * batch (so the ranks of `mpirun -np N` share each batch), the test accuracy after each epoch. */
typedef struct fm_job {
    fm_model m;
    fm_set train, test;
    mg_ctx *ectx;       /* evaluation */
    mg_rng shuffle;     /* shuffles each epoch, after drawing the initial weights */
    int64_t *perm;      /* the order of the training images in epoch `shuffled - 1` */
    int64_t shuffled;   /* epochs shuffled into perm */
    int64_t batch, spe; /* batch size, steps per epoch */
    int64_t step;       /* batches made so far (the trainer's step once the batch is trained) */
    const int64_t *idx; /* the current batch: images idx[0..B) */
    int64_t B;
    int64_t eval_batch, epochs, seed;
    double *acc; /* test accuracy after each epoch (NAN: not measured by this run or its checkpoint) */
    double t_batch, t_train;
    int64_t images_seen;
    char epoch_meta[32], acc_meta[64 * 1000 + 16], batch_meta[32], n_meta[32], seed_meta[32];
    char note[160]; /* the last epoch's accuracy line, printed once the trainer's progress line is out */
} fm_job;

static void fm_flush_note(fm_job *j) {
    if (!j->note[0]) return;
    /* on a terminal the trainer's live line is open: start a line of our own. The same test as the
     * trainer's (fd 1, MINIGRAD_NO_TTY set at all): stdout itself is a checked stream with no fd */
    bool tty = isatty(STDOUT_FILENO) && !getenv("MINIGRAD_NO_TTY");
    printf("%s%s\n", tty ? "\r\033[K" : "", j->note);
    fflush(stdout);
    j->note[0] = 0;
}

/* Step j->step + 1's batch. The order of every epoch is a function of the seed alone (each epoch
 * shuffles the previous one's order), so a resumed run replays the shuffles up to its epoch. */
static mg_status fm_next_batch(void *user) {
    fm_job *j = user;
    fm_flush_note(j);
    const int64_t e = j->step / j->spe, s = j->step % j->spe, n = j->train.n;
    if (j->shuffled == 0)
        for (int64_t i = 0; i < n; i++) j->perm[i] = i;
    for (; j->shuffled <= e; j->shuffled++)
        for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t k = (int64_t)mg_rng_below(&j->shuffle, (uint32_t)(i + 1)), t = j->perm[i];
            j->perm[i] = j->perm[k], j->perm[k] = t;
        }
    const int64_t i0 = s * j->batch;
    j->B = n - i0 < j->batch ? n - i0 : j->batch;
    j->idx = j->perm + i0;
    j->step++;
    j->t_batch = mg_time();
    return MG_OK;
}

/* Rows [row0, row0 + nrows) of the trainer's batch_rows (the batch size) map onto the same share
 * of the current batch, which is shorter at the end of an epoch: their mean cross-entropy times
 * their share of the batch, so the ranks' parts add up to the batch's mean loss. */
static mg_tensor *fm_loss_rows(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t nrows) {
    (void)dropout;
    fm_job *j = user;
    int64_t r0 = row0 * j->B / j->batch, r1 = (row0 + nrows) * j->B / j->batch;
    float share = (float)((double)(r1 - r0) / (double)j->B);
    if (r1 == r0) /* more ranks than images in this batch: a share of nothing, on one image */
        r0 = r0 < j->B ? r0 : j->B - 1, r1 = r0 + 1, share = 0.0f;
    mg_tensor *x, *y;
    fm_batch(ctx, &j->train, j->idx + r0, r1 - r0, &x, &y);
    if (!mg_ctx_ok(ctx)) return NULL;
    mg_tensor *loss = mg_cross_entropy(ctx, fm_forward(&j->m, ctx, x), y, -1);
    if (!loss || (r1 - r0 == j->B && share == 1.0f)) return loss;
    return mg_scale(ctx, loss, share);
}

static void fm_on_step(void *user, int64_t step, float loss) {
    (void)loss;
    fm_job *j = user;
    j->t_train += mg_time() - j->t_batch;
    j->images_seen += j->B;
    snprintf(j->epoch_meta, sizeof j->epoch_meta, "%lld", (long long)(step / j->spe));
}

/* The accuracies so far as the checkpoint keeps them: "91.52,92.03,..." ("nan" for an epoch not
 * measured). */
static void fm_acc_meta(fm_job *j, int64_t epochs_done) {
    size_t off = 0;
    j->acc_meta[0] = 0;
    for (int64_t e = 0; e < epochs_done && off < sizeof j->acc_meta - 32; e++)
        off += (size_t)snprintf(j->acc_meta + off, sizeof j->acc_meta - off, "%s%.4f", e ? "," : "", 100.0 * j->acc[e]);
}

/* After each epoch (the trainer's eval every steps-per-epoch steps): the test accuracy, printed
 * after the step's progress line, and the test loss as the validation loss. */
static mg_status fm_eval(void *user, float *val_loss) {
    fm_job *j = user;
    double t0 = mg_time(), loss = NAN;
    int64_t e = j->step / j->spe;
    double acc = fm_evaluate(&j->m, j->ectx, &j->test, j->eval_batch, NULL, NULL, &loss);
    if (!isfinite(acc))
        return mg_set_error(MG_ERR_INVALID, "evaluation failed: %s",
                            mg_ctx_error(j->ectx) ? mg_ctx_error(j->ectx) : "out of memory");
    if (e >= 1 && e <= j->epochs) j->acc[e - 1] = acc;
    fm_acc_meta(j, e < j->epochs ? e : j->epochs);
    *val_loss = (float)loss;
    snprintf(j->note, sizeof j->note, "epoch %lld: test accuracy %.2f%% (training %.0f images/s, evaluation %.1fs)",
             (long long)e, 100.0 * acc, j->t_train > 0 ? (double)j->images_seen / j->t_train : 0.0, mg_time() - t0);
    return MG_OK;
}

/* The training loss of every step 1..total from the trainer's log (a step logged again after a
 * resume: its later line); NAN where a step is missing. */
static void fm_read_losses(const char *log_path, double *loss, int64_t total) {
    for (int64_t i = 0; i < total; i++) loss[i] = NAN;
    FILE *f = fopen(log_path, "r");
    if (!f) return;
    char line[1024];
    long long step;
    double v;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "{\"step\": %lld, \"loss\": %lf", &step, &v) == 2 && step >= 1 && step <= total)
            loss[step - 1] = v;
    fclose(f);
}

/* The accuracies a checkpoint recorded, its step ("train.step") and its precision ("fm.precision";
 * fp32 where absent, as in checkpoints written before it was recorded). */
static mg_status fm_read_ckpt(const char *ckpt, fm_job *j, int64_t *step, mg_precision *precision) {
    mg_st_file *f = NULL;
    mg_status st = mg_safetensors_open(ckpt, &f);
    if (st != MG_OK) return mg_wrap_error(st, "cannot resume (start without --resume)");
    const char *s = mg_st_meta_get(f, "train.step"), *a = mg_st_meta_get(f, "fm.test_accuracy");
    char *end = NULL;
    *step = s ? strtoll(s, &end, 10) : -1;
    if (!s || *end || *step < 0) {
        mg_st_close(f);
        return mg_set_error(MG_ERR_FORMAT, "%s: no training step (metadata train.step): not a checkpoint of %s train",
                            ckpt, PROG);
    }
    if (!mg_st_meta_get(f, "fm.batch") && !mg_st_meta_get(f, "fm.train_images")) {
        mg_st_close(f);
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: not a checkpoint of %s (no fm.* metadata: written by another program?); start without "
                            "--resume, with --force to replace it",
                            ckpt, PROG);
    }
    /* the batches of the rest of the run must be those of the saved one */
    static const struct {
        const char *key, *what, *flag;
    } same[] = {{"fm.batch", "batch size", "--batch"},
                {"fm.train_images", "number of training images", "--data and --limit"},
                {"fm.seed", "seed", "--seed"}};
    for (int i = 0; i < 3; i++) {
        const char *v = mg_st_meta_get(f, same[i].key);
        long long want = i == 0 ? (long long)j->batch : i == 1 ? (long long)j->train.n : (long long)j->seed;
        if (v && strtoll(v, NULL, 10) != want) {
            mg_set_error(MG_ERR_INVALID,
                         "%s: the saved run's %s is %s (metadata %s), this one's %lld: resume with the same %s, or "
                         "start a new run without --resume",
                         ckpt, same[i].what, v, same[i].key, want, same[i].flag);
            mg_st_close(f);
            return MG_ERR_INVALID;
        }
    }
    const char *p = mg_st_meta_get(f, "fm.precision");
    *precision = MG_PRECISION_FP32;
    if (p && !mg_precision_parse(p, precision)) {
        mg_set_error(MG_ERR_FORMAT, "%s: metadata 'fm.precision' is '%s': expected fp32 or bf16", ckpt, p);
        mg_st_close(f);
        return MG_ERR_FORMAT;
    }
    for (int64_t e = 0; a && *a && e < j->epochs; e++) {
        j->acc[e] = strtod(a, &end) / 100.0;
        if (end == a) break;
        a = *end == ',' ? end + 1 : end;
    }
    mg_st_close(f);
    return MG_OK;
}

/* The command line of this run, kept by main for the command that continues it. */
static int cmd_argc;
static char **cmd_argv;

/* "continue with: <this command> --resume", without --force and --stop-after (the checkpoint
 * holds the run; the data, batch, epochs and seed must be given again, as they were). */
static void print_resume_command(void) {
    char w[1024];
    printf("%s: continue with: %s", PROG, ex_shell_word(ex_invoked_as(PROG), w, sizeof w));
    for (int i = 1; i < cmd_argc; i++) {
        const char *a = cmd_argv[i];
        if (!strcmp(a, "--force") || !strcmp(a, "--resume") || !strncmp(a, "--stop-after=", 13)) continue;
        if (!strcmp(a, "--stop-after")) {
            i++; /* and its value */
            continue;
        }
        printf(" %s", ex_shell_word(a, w, sizeof w));
    }
    printf(" --resume\n");
}

static int run(const fm_opts *o, mg_precision precision) {
    if (o->threads) mg_set_num_threads((int)o->threads);
    fm_job j = {.batch = o->batch, .eval_batch = o->eval_batch, .epochs = o->epochs, .seed = o->seed};
    int rc = 0;
    double *losses = NULL, *loss_x = NULL, *loss_y = NULL;
    uint8_t *pred = NULL;
    mg_st_meta meta[6];
    char log_path[4096], ckpt[4096], png[4096];
    snprintf(log_path, sizeof log_path, "%s/train.jsonl", o->out);
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", o->out);
    if (ex_check_out_dir(PROG, o->out, ckpt, o->resume, o->force) != 0) return 1; /* before anything is read */
    if (fm_load(o->data, "train", o->limit, &j.train) != MG_OK || fm_load(o->data, "t10k", o->limit, &j.test) != MG_OK ||
        ex_mkdirs(o->out) != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    mg_rng rng = mg_rng_make((uint64_t)o->seed);
    if (fm_model_make(&j.m) != MG_OK || mg_params_alloc(j.m.params, &rng) != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    j.shuffle = rng;
    j.spe = (j.train.n + o->batch - 1) / o->batch;
    const int64_t total = j.spe * o->epochs;
    j.perm = malloc((size_t)j.train.n * sizeof *j.perm);
    j.acc = malloc((size_t)o->epochs * sizeof *j.acc);
    j.ectx = mg_ctx_new(0);
    pred = malloc((size_t)j.test.n);
    if (!j.perm || !j.acc || !j.ectx || !pred) {
        mg_set_error(MG_ERR_NOMEM, "out of memory");
        rc = ex_fail(PROG);
        goto done;
    }
    for (int64_t e = 0; e < o->epochs; e++) j.acc[e] = NAN;
    mg_precision saved_precision;
    if (o->resume && fm_read_ckpt(ckpt, &j, &j.step, &saved_precision) != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    if (o->resume && !o->precision) precision = saved_precision; /* a resume goes on as the run started */
    mg_ctx_set_precision(j.ectx, precision); /* evaluation follows --precision */
    snprintf(j.epoch_meta, sizeof j.epoch_meta, "%lld", (long long)(j.step / j.spe));
    fm_acc_meta(&j, j.step / j.spe < o->epochs ? j.step / j.spe : o->epochs);
    meta[0] = (mg_st_meta){"epoch", j.epoch_meta};
    meta[1] = (mg_st_meta){"fm.test_accuracy", j.acc_meta};
    meta[2] = (mg_st_meta){"fm.batch", mg_meta_fmt_i64(j.batch_meta, o->batch)};
    meta[3] = (mg_st_meta){"fm.train_images", mg_meta_fmt_i64(j.n_meta, j.train.n)};
    meta[4] = (mg_st_meta){"fm.seed", mg_meta_fmt_i64(j.seed_meta, o->seed)};
    meta[5] = (mg_st_meta){"fm.precision", mg_precision_name(precision)};
    printf("%s: %lld training and %lld test images from %s; %lld parameters; %lld epochs of %lld steps, batch %lld, "
           "%d thread%s%s\n",
           PROG, (long long)j.train.n, (long long)j.test.n, o->data, (long long)mg_params_numel(j.m.params),
           (long long)o->epochs, (long long)j.spe, (long long)o->batch, mg_get_num_threads(),
           mg_get_num_threads() == 1 ? "" : "s", ex_precision_banner(PROG, precision == MG_PRECISION_BF16));
    fflush(stdout);

    mg_train_model model = {.params = j.m.params, .user = &j, .next_batch = fm_next_batch, .loss_rows = fm_loss_rows,
                            .batch_rows = o->batch, .eval = fm_eval, .on_step = fm_on_step, .meta = meta, .n_meta = 6,
                            .tokens_per_step = o->batch, .speed_unit = "images"};
    mg_train_cfg cfg = mg_train_defaults();
    /* Adam: a constant learning rate, no weight decay, no clipping */
    cfg.steps = total, cfg.warmup = 0, cfg.lr = cfg.lr_min = o->lr, cfg.weight_decay = 0.0f;
    mg_adamw_cfg adam = mg_adamw_defaults();
    cfg.beta1 = adam.beta1, cfg.beta2 = adam.beta2, cfg.eps = adam.eps, cfg.clip = 0.0f;
    cfg.eval_every = j.spe, cfg.ckpt_every = j.spe, cfg.stop_after = o->stop_after;
    cfg.seed = (uint64_t)o->seed, cfg.ckpt = ckpt, cfg.resume = o->resume, cfg.log_path = log_path;
    cfg.prog = PROG;
    cfg.precision = precision;
    mg_train_result res;
    mg_status tst = mg_train_run(&model, &cfg, &res);
    fm_flush_note(&j);
    if (tst != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    if (res.stopped || res.interrupted) {
        printf("%s: stopped at step %lld of %lld; --resume continues from %s:\n", PROG, (long long)res.step,
               (long long)total, ckpt);
        print_resume_command();
        if (res.interrupted) rc = ex_interrupted_status(&res);
        goto done;
    }
    if (mg_train_rank() != 0) goto done; /* rank 0 alone writes the figures */
    int64_t cm[FM_CLASSES * FM_CLASSES];
    double final = fm_evaluate(&j.m, j.ectx, &j.test, o->eval_batch, cm, pred, NULL);
    if (!isfinite(final)) {
        mg_set_error(MG_ERR_INVALID, "evaluation failed: %s", mg_ctx_error(j.ectx) ? mg_ctx_error(j.ectx) : "out of memory");
        rc = ex_fail(PROG);
        goto done;
    }
    char dur[32];
    if (res.steps_run > 0 && j.t_train > 0)
        printf("test accuracy %.2f%% after %lld epochs; training %.0f images/s, %s of training\n", 100.0 * final,
               (long long)o->epochs, (double)j.images_seen / j.t_train, mg_train_fmt_duration(j.t_train, dur, sizeof dur));
    else
        printf("test accuracy %.2f%% after %lld epochs\n", 100.0 * final, (long long)o->epochs);
    fm_print_confusion(cm);
    /* the loss curve: the mean loss of each stretch of steps, from the log (which covers resumed runs) */
    const int64_t stretch = j.spe >= 20 ? j.spe / 10 : 1;
    int64_t n_pts = 0;
    losses = malloc(sizeof(double) * (size_t)total);
    loss_x = malloc(sizeof(double) * (size_t)total), loss_y = malloc(sizeof(double) * (size_t)total);
    if (!losses || !loss_x || !loss_y) {
        mg_set_error(MG_ERR_NOMEM, "out of memory");
        rc = ex_fail(PROG);
        goto done;
    }
    fm_read_losses(log_path, losses, total);
    double sum = 0.0;
    int64_t k = 0;
    for (int64_t s = 1; s <= total; s++) {
        if (!isnan(losses[s - 1])) sum += losses[s - 1], k++;
        if ((s % j.spe) % stretch == 0 || s % j.spe == 0) {
            if (k > 0) loss_x[n_pts] = (double)s / (double)j.spe, loss_y[n_pts++] = sum / (double)k;
            sum = 0.0, k = 0;
        }
    }
    snprintf(png, sizeof png, "%s/confusion.png", o->out);
    mg_status st = fm_plot_confusion(png, cm);
    if (st == MG_OK) st = fm_plot_curves(o->out, loss_x, loss_y, (int)n_pts, j.acc, (int)o->epochs);
    snprintf(png, sizeof png, "%s/misclassified.png", o->out);
    if (st == MG_OK) st = fm_plot_misclassified(png, &j.test, pred);
    if (st != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    printf("wrote %s, %s/curves.png, %s/misclassified.png, %s/confusion.png, %s\n", ckpt, o->out, o->out, o->out, log_path);
done:
    free(j.perm), free(j.acc), free(pred), free(losses), free(loss_x), free(loss_y);
    mg_ctx_free(j.ectx);
    fm_model_free(&j.m);
    fm_set_free(&j.train), fm_set_free(&j.test);
    return rc;
}

int main(int argc, char **argv) {
    ex_stdout_begin();
    fm_opts o = {.data = FM_DEFAULT_DIR, .out = "fashion_mnist_out", .epochs = 10, .batch = 128, .lr = 1e-3f,
                 .seed = 1, .eval_batch = 500};
    const ex_opt opts[] = {
        EX_STR_OPT("data", &o.data, "folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (" FM_DEFAULT_DIR
                                    ", from the Debian package dataset-fashion-mnist)"),
        EX_STR_OPT("out", &o.out, "folder for the checkpoint, the log and the figures (fashion_mnist_out)"),
        EX_INT_OPT("epochs", &o.epochs, 1, 1000, "passes over the training set"),
        EX_INT_OPT("batch", &o.batch, 1, EX_MAX_BATCH, "training batch size"),
        EX_FLOAT_OPT("lr", &o.lr, 1e-8, 10.0, "Adam learning rate"),
        EX_INT_OPT("limit", &o.limit, 0, 1 << 24, "use only the first N training and test images (0: all)"),
        EX_INT_OPT("threads", &o.threads, 0, EX_MAX_THREADS, "OpenMP threads (0: all cores)"),
        EX_INT_OPT("seed", &o.seed, 0, INT64_MAX, "initialisation and shuffling seed"),
        EX_INT_OPT("eval-batch", &o.eval_batch, 1, EX_MAX_BATCH, "batch size for the test set"),
        EX_FLAG_OPT("resume", &o.resume, "continue the run saved in --out (the same data, batch and epochs)"),
        EX_FLAG_OPT("force", &o.force, "start a new run even if --out already holds one (it is replaced)"),
        EX_INT_OPT("stop-after", &o.stop_after, 0, INT64_MAX,
                   "stop after this many steps, saving a checkpoint that --resume continues (0: run to the end)"),
        EX_STR_OPT("precision", &o.precision,
                   "fp32 (default) or bf16: mixed precision, the convolutions' and linear layers' products on bf16 "
                   "operands with float32 weights, gradients and Adam state; evaluation follows it"),
    };
    cmd_argc = argc, cmd_argv = argv;
    /* `fashion_mnist train [options]` is the same as `fashion_mnist [options]` */
    if (argc > 1 && strcmp(argv[1], "train") == 0) argv++, argc--;
    ex_parse_result pr = ex_parse(PROG, "[train] [options]", argc - 1, argv + 1, opts,
                                  (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
    if (pr == EX_PARSE_HELP) return ex_exit_status(PROG, 0);
    if (pr == EX_PARSE_ERROR) return 2;
    mg_precision precision;
    if (!ex_precision_from(PROG, o.precision, &precision)) return 2;
    return ex_exit_status(PROG, run(&o, precision));
}
