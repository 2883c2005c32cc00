/* fashion_mnist: trains a small CNN on Fashion-MNIST and reports test accuracy.
 *
 *   conv 1->32 3x3 pad 1, relu, maxpool 2; conv 32->64 3x3 pad 1, relu, maxpool 2;
 *   linear 3136->128, relu, linear 128->10; Adam (lr 1e-3), batch 128, pixels scaled to [0, 1].
 *
 * The same model, data and optimizer as fashion_mnist_pytorch.py beside it. Writes into --out: the
 * checkpoint model.safetensors (after every epoch), curves.png (training loss, test accuracy),
 * misclassified.png (test images it got wrong, with true and predicted class), confusion.png, and
 * the JSON-lines log train.jsonl. Prints a progress line, the test accuracy after each epoch and
 * the confusion matrix at the end.
 */
#include "fm.h"
#include "cli.h"
#include "output.h"
#include "progress.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char PROG[] = "fashion_mnist";

/* Test accuracy; fills confusion[true][pred] and pred[i] when not NULL. */
static double fm_evaluate(fm_model *m, mg_ctx *ctx, const fm_set *test, int64_t batch, int64_t *confusion,
                          uint8_t *pred) {
    int64_t correct = 0;
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
        if (!mg_ctx_ok(ctx)) break;
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
    int64_t epochs, batch, limit, threads, seed, eval_batch;
    float lr;
} fm_opts;

static int run(const fm_opts *o) {
    if (o->threads) mg_set_num_threads((int)o->threads);
    fm_set train = {0}, test = {0};
    if (fm_load(o->data, "train", o->limit, &train) != MG_OK || fm_load(o->data, "t10k", o->limit, &test) != MG_OK) {
        fm_set_free(&train);
        return ex_fail(PROG);
    }
    if (ex_mkdirs(o->out) != MG_OK) {
        fm_set_free(&train), fm_set_free(&test);
        return ex_fail(PROG);
    }
    fm_model m;
    mg_rng rng = mg_rng_make((uint64_t)o->seed);
    if (fm_model_make(&m) != MG_OK || mg_params_alloc(m.params, &rng) != MG_OK) {
        fm_model_free(&m);
        fm_set_free(&train), fm_set_free(&test);
        return ex_fail(PROG);
    }
    mg_adamw_cfg acfg = mg_adamw_defaults();
    acfg.weight_decay = 0.0f; /* Adam */
    mg_optim *opt = mg_adamw_new(m.params, acfg);
    mg_ctx *ctx = mg_ctx_new(0);
    const int64_t steps_per_epoch = (train.n + o->batch - 1) / o->batch, total = steps_per_epoch * o->epochs;
    int64_t *perm = malloc((size_t)train.n * sizeof *perm);
    uint8_t *pred = malloc((size_t)test.n);
    double *acc = calloc((size_t)o->epochs, sizeof(double));
    const int64_t stretch = steps_per_epoch >= 20 ? steps_per_epoch / 10 : 1; /* steps per loss point */
    int64_t n_pts_cap = total / stretch + o->epochs + 2, n_pts = 0;
    double *loss_x = malloc(sizeof(double) * (size_t)n_pts_cap), *loss_y = malloc(sizeof(double) * (size_t)n_pts_cap);
    int rc = 0;
    if (!opt || !ctx || !perm || !pred || !acc || !loss_x || !loss_y) {
        if (!mg_last_error()) mg_set_error(MG_ERR_NOMEM, "out of memory");
        rc = ex_fail(PROG);
        goto done;
    }
    printf("%s: %lld training and %lld test images from %s; %lld parameters; %lld epochs of %lld steps, batch %lld, "
           "%d threads\n",
           PROG, (long long)train.n, (long long)test.n, o->data, (long long)mg_params_numel(m.params),
           (long long)o->epochs, (long long)steps_per_epoch, (long long)o->batch, mg_get_num_threads());
    char log_path[4096], ckpt[4096], png[4096];
    snprintf(log_path, sizeof log_path, "%s/train.jsonl", o->out);
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", o->out);
    mg_train_progress prog;
    if (mg_train_progress_open(&prog, PROG, total, 0, log_path, false) != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    prog.speed_unit = "images";
    for (int64_t i = 0; i < train.n; i++) perm[i] = i;
    int64_t step = 0;
    double t_train = 0.0, stretch_loss = 0.0;
    int64_t stretch_n = 0, images_seen = 0;
    for (int64_t e = 0; e < o->epochs && rc == 0; e++) {
        for (int64_t i = train.n - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)mg_rng_below(&rng, (uint32_t)(i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int64_t s = 0; s < steps_per_epoch; s++) {
            double t0 = mg_time();
            int64_t i0 = s * o->batch, B = train.n - i0 < o->batch ? train.n - i0 : o->batch;
            mg_ctx_reset(ctx);
            mg_tensor *x, *y;
            fm_batch(ctx, &train, perm + i0, B, &x, &y);
            mg_params_zero_grad(m.params);
            mg_tensor *loss = mg_cross_entropy(ctx, fm_forward(&m, ctx, x), y, -1);
            mg_backward(ctx, loss);
            if (!mg_ctx_ok(ctx)) {
                mg_set_error(MG_ERR_INVALID, "%s", mg_ctx_error(ctx));
                rc = ex_fail(PROG);
                break;
            }
            float lv = loss->data[0];
            if (!isfinite(lv)) {
                mg_set_error(MG_ERR_NONFINITE, "the loss is %g at step %lld", (double)lv, (long long)step + 1);
                rc = ex_fail(PROG);
                break;
            }
            mg_optim_step(opt, o->lr);
            double dt = mg_time() - t0;
            t_train += dt;
            images_seen += B;
            step++;
            stretch_loss += lv, stretch_n++;
            if (stretch_n == stretch || s == steps_per_epoch - 1) {
                if (n_pts < n_pts_cap) {
                    loss_x[n_pts] = (double)step / (double)steps_per_epoch;
                    loss_y[n_pts++] = stretch_loss / (double)stretch_n;
                }
                stretch_loss = 0.0, stretch_n = 0;
            }
            if (mg_train_progress_step(&prog, step, lv, o->lr, (double)images_seen / t_train, NAN, NAN) != MG_OK) {
                rc = ex_fail(PROG);
                break;
            }
        }
        if (rc) break;
        double t_eval = mg_time();
        acc[e] = fm_evaluate(&m, ctx, &test, o->eval_batch, NULL, NULL);
        if (!isfinite(acc[e])) {
            mg_set_error(MG_ERR_INVALID, "evaluation failed: %s", mg_ctx_error(ctx) ? mg_ctx_error(ctx) : "out of memory");
            rc = ex_fail(PROG);
            break;
        }
        mg_train_progress_note(&prog, "epoch %lld: test accuracy %.2f%% (training %.0f images/s, evaluation %.1fs)",
                               (long long)e + 1, 100.0 * acc[e], (double)images_seen / t_train, mg_time() - t_eval);
        char eb[32];
        mg_st_meta meta[] = {{"epoch", mg_meta_fmt_i64(eb, e + 1)}};
        if (mg_checkpoint_save(ckpt, m.params, false, meta, 1) != MG_OK) {
            rc = ex_fail(PROG);
            break;
        }
    }
    if (mg_train_progress_close(&prog) != MG_OK && rc == 0) rc = ex_fail(PROG);
    if (rc) goto done;
    int64_t cm[FM_CLASSES * FM_CLASSES];
    double final = fm_evaluate(&m, ctx, &test, o->eval_batch, cm, pred);
    char dur[32];
    printf("test accuracy %.2f%% after %lld epochs; training %.0f images/s, %s of training\n", 100.0 * final,
           (long long)o->epochs, (double)images_seen / t_train, mg_train_fmt_duration(t_train, dur, sizeof dur));
    fm_print_confusion(cm);
    snprintf(png, sizeof png, "%s/confusion.png", o->out);
    mg_status st = fm_plot_confusion(png, cm);
    if (st == MG_OK) st = fm_plot_curves(o->out, loss_x, loss_y, (int)n_pts, acc, (int)o->epochs);
    snprintf(png, sizeof png, "%s/misclassified.png", o->out);
    if (st == MG_OK) st = fm_plot_misclassified(png, &test, pred);
    if (st != MG_OK) {
        rc = ex_fail(PROG);
        goto done;
    }
    printf("wrote %s, %s/curves.png, %s/misclassified.png, %s/confusion.png, %s\n", ckpt, o->out, o->out, o->out, log_path);
done:
    free(perm), free(pred), free(acc), free(loss_x), free(loss_y);
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    fm_model_free(&m);
    fm_set_free(&train), fm_set_free(&test);
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
    };
    ex_parse_result pr = ex_parse(PROG, "fashion_mnist [options]", argc - 1, argv + 1, opts,
                                  (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
    if (pr == EX_PARSE_HELP) return ex_exit_status(PROG, 0);
    if (pr == EX_PARSE_ERROR) return 2;
    return ex_exit_status(PROG, run(&o));
}
