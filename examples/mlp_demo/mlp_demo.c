/* mlp_demo: the smallest complete minigrad program. Trains a 3-layer MLP to separate three
 * interleaved spirals (a generated task) with AdamW, printing progress, then reports the
 * training accuracy.
 *
 *   mlp_demo [--steps N] [--hidden H] [--seed S] [--threads N]   (--help lists them)
 */
#include "minigrad/minigrad.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_PTS = 600, N_CLS = 3 };

static void make_spirals(float *x, int32_t *y, mg_rng *r) {
    for (int i = 0; i < N_PTS; i++) {
        int c = i % N_CLS;
        float t = (float)(i / N_CLS) / (N_PTS / N_CLS);
        float ang = 4.0f * t + 2.0943951f * (float)c + 0.15f * mg_rng_normal(r);
        x[2 * i] = t * cosf(ang);
        x[2 * i + 1] = t * sinf(ang);
        y[i] = c;
    }
}

/* The options: whole numbers, each in its range. */
typedef struct {
    const char *name, *help;
    long *value;
    long min, max;
} demo_opt;

static void usage(const demo_opt *o, int n) {
    printf("usage: mlp_demo [options]\n\n"
           "Trains a 3-layer MLP (2-H-H-3) with AdamW to separate three interleaved spirals of %d points,\n"
           "printing the loss and the training accuracy as it goes.\n\noptions:\n", N_PTS);
    for (int i = 0; i < n; i++)
        printf("  --%-8s N  %s (%ld..%ld, default %ld)\n", o[i].name, o[i].help, o[i].min, o[i].max, *o[i].value);
    printf("  --help        this text\n");
}

/* Reads `--name value` and `--name=value` into the table. Returns -1 to go on, otherwise the exit
 * status: 0 after --help, 2 after a message naming what is wrong. */
static int parse_args(int argc, char **argv, const demo_opt *o, int n) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(o, n);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(stderr, "mlp_demo: unexpected argument '%s' (it takes only options; see --help)\n", a);
            return 2;
        }
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        const demo_opt *k = NULL;
        for (int j = 0; j < n && !k; j++)
            if (strlen(o[j].name) == len && !strncmp(o[j].name, a + 2, len)) k = &o[j];
        if (!k) {
            fprintf(stderr, "mlp_demo: unknown option '%.*s' (see --help)\n", (int)(len + 2), a);
            return 2;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "mlp_demo: --%s needs a value\n", k->name);
            return 2;
        }
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < k->min || x > k->max) {
            fprintf(stderr, "mlp_demo: --%s: '%s' is not a whole number in %ld..%ld\n", k->name, v, k->min, k->max);
            return 2;
        }
        *k->value = x;
    }
    return -1;
}

int main(int argc, char **argv) {
    long steps_l = 500, hidden_l = 64, seed_l = 1, threads_l = 0;
    const demo_opt opts[] = {
        {"steps", "training steps", &steps_l, 1, 1000000},
        {"hidden", "width H of the two hidden layers", &hidden_l, 1, 65536},
        {"seed", "seed of the data and the initialisation", &seed_l, 0, LONG_MAX},
        {"threads", "threads (0: all cores)", &threads_l, 0, 1024},
    };
    int rc = parse_args(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc >= 0) return rc;
    int steps = (int)steps_l;
    int64_t hidden = hidden_l;
    uint64_t seed = (uint64_t)seed_l;
    int threads = mg_set_num_threads((int)threads_l);

    mg_rng rng = mg_rng_make(seed);
    static float x[2 * N_PTS];
    static int32_t y[N_PTS];
    make_spirals(x, y, &rng);

    mg_params *P = mg_params_new();
    float a1 = 1.0f / sqrtf(2.0f), a2 = 1.0f / sqrtf((float)hidden);
    mg_tensor *W1 = mg_params_add(P, "fc1.weight", 2, (int64_t[]){2, hidden}, mg_init_uniform(-a1, a1), 0);
    mg_tensor *b1 = mg_params_add(P, "fc1.bias", 1, (int64_t[]){hidden}, mg_init_zeros(), MG_NO_DECAY);
    mg_tensor *W2 = mg_params_add(P, "fc2.weight", 2, (int64_t[]){hidden, hidden}, mg_init_uniform(-a2, a2), 0);
    mg_tensor *b2 = mg_params_add(P, "fc2.bias", 1, (int64_t[]){hidden}, mg_init_zeros(), MG_NO_DECAY);
    mg_tensor *W3 = mg_params_add(P, "head.weight", 2, (int64_t[]){hidden, N_CLS}, mg_init_uniform(-a2, a2), 0);
    mg_tensor *b3 = mg_params_add(P, "head.bias", 1, (int64_t[]){N_CLS}, mg_init_zeros(), MG_NO_DECAY);
    if (mg_params_alloc(P, &rng) != MG_OK) {
        fprintf(stderr, "mlp_demo: %s\n", mg_last_error());
        return 1;
    }
    mg_adamw_cfg cfg = mg_adamw_defaults();
    cfg.weight_decay = 0.0f;
    mg_optim *opt = mg_adamw_new(P, cfg);
    mg_ctx *ctx = mg_ctx_new(0);
    if (!opt || !ctx) {
        fprintf(stderr, "mlp_demo: %s\n", mg_last_error());
        return 1;
    }
    printf("mlp_demo: %d points, 3 classes, MLP 2-%lld-%lld-3 (%lld parameters), %d thread%s\n", N_PTS,
           (long long)hidden, (long long)hidden, (long long)mg_params_numel(P), threads, threads == 1 ? "" : "s");

    double t0 = mg_time();
    int correct = 0;
    for (int step = 0; step < steps; step++) {
        mg_ctx_reset(ctx);
        mg_tensor *xt = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){N_PTS, 2}, x);
        mg_tensor *yt = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){N_PTS}, y);
        mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, xt, W1), b1), MG_GELU_TANH);
        h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, h, W2), b2), MG_GELU_TANH);
        mg_tensor *logits = mg_add(ctx, mg_matmul(ctx, h, W3), b3);
        mg_tensor *loss = mg_cross_entropy(ctx, logits, yt, -1);
        mg_params_zero_grad(P);
        mg_backward(ctx, loss);
        mg_clip_grad_norm(P, 5.0f);
        mg_optim_step(opt, mg_lr_schedule(step, steps / 20, steps, 2e-2f, 1e-3f));

        correct = 0;
        for (int i = 0; i < N_PTS; i++) {
            const float *l = logits->data + i * N_CLS;
            int best = l[1] > l[0] ? 1 : 0;
            best = l[2] > l[best] ? 2 : best;
            correct += best == y[i];
        }
        if (!isfinite(loss->data[0])) {
            fprintf(stderr, "mlp_demo: loss became %g at step %d; stopping\n", loss->data[0], step);
            return 1;
        }
        if (step % 50 == 0 || step == steps - 1)
            printf("step %4d/%d  loss %.4f  train accuracy %5.1f%%  %.2f ms/step\n", step + 1, steps,
                   loss->data[0], 100.0 * correct / N_PTS, 1e3 * (mg_time() - t0) / (step + 1));
    }
    printf("done: training accuracy %.1f%% after %d steps, peak activation memory %.1f KiB\n",
           100.0 * correct / N_PTS, steps, mg_ctx_peak_bytes(ctx) / 1024.0);
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(P);
    if (mg_stdout_check() != MG_OK) { /* the report was lost (a full disk): say so */
        fprintf(stderr, "mlp_demo: %s\n", mg_last_error());
        return 1;
    }
    return 0;
}
