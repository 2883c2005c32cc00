/* A program that includes only minigrad/core.h and links only the core library (libminigrad):
 * built by tests/core_only/meson.build against minigrad_core_dep, and by
 * tests/install/test_install.sh against an installed minigrad with `pkg-config minigrad-core`. A
 * two-layer MLP trains with AdamW, its weights go through a checkpoint and back.
 *
 *   core_only DIR   (writes DIR/core_only.safetensors; exit status 0 when all is well)
 */
#include "minigrad/core.h"

#include <stdio.h>

enum { B = 64, H = 16, STEPS = 200 };

static mg_params *model(mg_tensor **W1, mg_tensor **b1, mg_tensor **W2, uint64_t seed) {
    mg_params *P = mg_params_new();
    *W1 = mg_params_add(P, "fc1.weight", 2, (int64_t[]){2, H}, mg_init_uniform(-0.7f, 0.7f), 0);
    *b1 = mg_params_add(P, "fc1.bias", 1, (int64_t[]){H}, mg_init_zeros(), MG_NO_DECAY);
    *W2 = mg_params_add(P, "fc2.weight", 2, (int64_t[]){H, 2}, mg_init_uniform(-0.25f, 0.25f), 0);
    mg_rng rng = mg_rng_make(seed);
    if (mg_params_alloc(P, &rng) != MG_OK) {
        fprintf(stderr, "core_only: %s\n", mg_last_error());
        return NULL;
    }
    return P;
}

static float loss_of(mg_ctx *ctx, mg_tensor *W1, mg_tensor *b1, mg_tensor *W2, float *xs,
                     int32_t *labels, mg_tensor **loss_out) {
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, xs);
    mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, labels);
    mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, x, W1), b1), MG_GELU_TANH);
    mg_tensor *loss = mg_cross_entropy(ctx, mg_matmul(ctx, h, W2), y, -1);
    if (loss_out) *loss_out = loss;
    return loss->data[0];
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: core_only DIR\n");
        return 2;
    }
    float xs[B * 2];
    int32_t labels[B];
    mg_rng rng = mg_rng_make(42);
    for (int i = 0; i < B; i++) {
        xs[2 * i] = mg_rng_range(&rng, -1, 1), xs[2 * i + 1] = mg_rng_range(&rng, -1, 1);
        labels[i] = (xs[2 * i] > 0) != (xs[2 * i + 1] > 0);
    }
    mg_tensor *W1, *b1, *W2;
    mg_params *P = model(&W1, &b1, &W2, 1);
    if (!P) return 1;
    mg_optim *opt = mg_adamw_new(P, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0);
    float first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        mg_ctx_reset(ctx);
        mg_tensor *loss;
        last = loss_of(ctx, W1, b1, W2, xs, labels, &loss);
        if (step == 0) first = last;
        mg_params_zero_grad(P);
        mg_backward(ctx, loss);
        mg_optim_step(opt, 3e-2f);
    }
    printf("core_only: kernels on %s; loss %.4f -> %.4f over %d steps\n",
           mg_isa_name(mg_isa_active()), first, last, STEPS);
    if (mg_ctx_error(ctx) || !(last < 0.5f * first)) {
        fprintf(stderr, "core_only: the loss did not fall by half (%s)\n",
                mg_ctx_error(ctx) ? mg_ctx_error(ctx) : "no error");
        return 1;
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/core_only.safetensors", argv[1]);
    if (mg_checkpoint_save(path, P, false, NULL, 0) != MG_OK) {
        fprintf(stderr, "core_only: %s\n", mg_last_error());
        return 1;
    }
    mg_tensor *V1, *c1, *V2;
    mg_params *Q = model(&V1, &c1, &V2, 2);
    if (!Q || mg_checkpoint_load(path, Q, NULL) != MG_OK) {
        fprintf(stderr, "core_only: %s\n", mg_last_error());
        return 1;
    }
    mg_ctx_reset(ctx);
    float trained = loss_of(ctx, W1, b1, W2, xs, labels, NULL);
    float loaded = loss_of(ctx, V1, c1, V2, xs, labels, NULL);
    if (loaded != trained) {
        fprintf(stderr, "core_only: loaded weights give loss %.6f, trained %.6f\n", loaded, trained);
        return 1;
    }
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(Q);
    mg_params_free(P);
    printf("core_only: checkpoint round trip exact; all good\n");
    return 0;
}
