/* minigrad.h: the umbrella header: everything minigrad installs (the core library, the layers with
 * their plugins and the GPT model, plotting). minigrad/core.h is the core library's alone.
 * Link with `pkg-config --libs minigrad` (or meson's dependency('minigrad')).
 *
 * A two-layer MLP trained with AdamW, the whole API in miniature (tests/test_readme_example.c
 * builds and runs this same code, so it cannot drift):
 *
 *   mg_rng rng = mg_rng_make(42);
 *   mg_params *P = mg_params_new();
 *   mg_tensor *W1 = mg_params_add(P, "fc1.weight", 2, (int64_t[]){2, 16}, mg_init_uniform(-0.7f, 0.7f), 0);
 *   mg_tensor *b1 = mg_params_add(P, "fc1.bias", 1, (int64_t[]){16}, mg_init_zeros(), MG_NO_DECAY);
 *   mg_tensor *W2 = mg_params_add(P, "fc2.weight", 2, (int64_t[]){16, 2}, mg_init_uniform(-0.25f, 0.25f), 0);
 *   mg_params_alloc(P, &rng);
 *   mg_optim *opt = mg_adamw_new(P, mg_adamw_defaults());
 *   mg_ctx *ctx = mg_ctx_new(0);                         // activation arena, grows once then stays
 *   for (int step = 0; step < 300; step++) {
 *       mg_ctx_reset(ctx);                               // drop last step's activations and tape
 *       mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, xs);
 *       mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, labels);
 *       mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, x, W1), b1), MG_GELU_TANH);
 *       mg_tensor *loss = mg_cross_entropy(ctx, mg_matmul(ctx, h, W2), y, -1);
 *       mg_params_zero_grad(P);
 *       mg_backward(ctx, loss);
 *       mg_optim_step(opt, 1e-2f);
 *   }
 *   mg_ctx_free(ctx); mg_optim_free(opt); mg_params_free(P);
 */
#ifndef MINIGRAD_H
#define MINIGRAD_H

#include "minigrad/core.h"

#include "minigrad/config.h"
#include "minigrad/gpt.h"
#include "minigrad/layer.h"
#include "minigrad/nn.h"
#include "minigrad/plot.h"
#include "minigrad/plugin.h"
#include "minigrad/train.h"

#endif
