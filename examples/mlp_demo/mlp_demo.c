/* mlp_demo: the smallest complete minigrad program. Trains a 3-layer MLP to separate three
 * interleaved spirals (a generated task) with AdamW, printing progress, then reports the
 * training accuracy.
 *
 *   mlp_demo [--steps N] [--hidden H] [--seed S] [--threads N]
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

/* The value of option `name`, or def when it is not given; a value that is not a whole number in
 * min..max ends the program with a message naming the option and the range. */
static long arg_long(int argc, char **argv, const char *name, long def, long min, long max) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mlp_demo: %s needs a value\n", name);
                exit(2);
            }
            char *end;
            errno = 0;
            long v = strtol(argv[i + 1], &end, 10);
            if (end == argv[i + 1] || *end || errno || v < min || v > max) {
                fprintf(stderr, "mlp_demo: %s: '%s' is not a whole number in %ld..%ld\n", name, argv[i + 1], min, max);
                exit(2);
            }
            return v;
        }
    return def;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: mlp_demo [--steps N (1..1000000)] [--hidden H (1..65536)] [--seed S (0..%ld)] "
                   "[--threads N (0..1024)]\n", LONG_MAX);
            return 0;
        }
    int steps = (int)arg_long(argc, argv, "--steps", 500, 1, 1000000);
    int64_t hidden = arg_long(argc, argv, "--hidden", 64, 1, 65536);
    uint64_t seed = (uint64_t)arg_long(argc, argv, "--seed", 1, 0, LONG_MAX);
    int threads = mg_set_num_threads((int)arg_long(argc, argv, "--threads", 0, 0, 1024));

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
