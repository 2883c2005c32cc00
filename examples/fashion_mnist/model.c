/* The CNN of the fashion_mnist example (its layers and forward) and its batches, shared by the
 * program and bench/fashion_mnist. */
#include "fm.h"
#include "minigrad/minigrad.h"

#include <string.h>

mg_status fm_model_make(fm_model *m) {
    memset(m, 0, sizeof *m);
    m->params = mg_params_new();
    if (!m->params) return mg_set_error(MG_ERR_NOMEM, "cannot allocate the parameter store");
    m->conv1 = mg_conv2d_new(m->params, "conv1",
                             &(mg_conv2d_cfg){.in = 1, .out = 32, .kernel = {3, 3}, .padding = {1, 1}, .bias = true});
    m->conv2 = mg_conv2d_new(m->params, "conv2",
                             &(mg_conv2d_cfg){.in = 32, .out = 64, .kernel = {3, 3}, .padding = {1, 1}, .bias = true});
    m->fc1 = mg_linear_new(m->params, "fc1", &(mg_linear_cfg){.in = 64 * 7 * 7, .out = 128, .bias = true});
    m->fc2 = mg_linear_new(m->params, "fc2", &(mg_linear_cfg){.in = 128, .out = FM_CLASSES, .bias = true});
    return m->conv1 && m->conv2 && m->fc1 && m->fc2 ? MG_OK : MG_ERR_INVALID;
}

void fm_model_free(fm_model *m) {
    mg_layer_free(m->conv1), mg_layer_free(m->conv2), mg_layer_free(m->fc1), mg_layer_free(m->fc2);
    mg_params_free(m->params);
}

/* x (B,1,28,28) -> logits (B,10) */
mg_tensor *fm_forward(fm_model *m, mg_ctx *ctx, mg_tensor *x) {
    const mg_pool2d_opts pool = {{2, 2}, {0, 0}, {0, 0}};
    mg_tensor *h = mg_max_pool2d(ctx, mg_relu(ctx, mg_layer_forward(m->conv1, ctx, x, NULL)), &pool);
    h = mg_max_pool2d(ctx, mg_relu(ctx, mg_layer_forward(m->conv2, ctx, h, NULL)), &pool);
    h = mg_reshape(ctx, h, 2, (int64_t[]){x->shape[0], 64 * 7 * 7});
    h = mg_relu(ctx, mg_layer_forward(m->fc1, ctx, h, NULL));
    return mg_layer_forward(m->fc2, ctx, h, NULL);
}

/* The batch of examples idx[0..B) of s as x (B,1,28,28) in [0, 1] and targets (B). */
void fm_batch(mg_ctx *ctx, const fm_set *s, const int64_t *idx, int64_t B, mg_tensor **x, mg_tensor **y) {
    *x = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, 1, FM_SIDE, FM_SIDE});
    *y = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){B});
    if (!mg_ctx_ok(ctx)) return;
    for (int64_t b = 0; b < B; b++) {
        const uint8_t *src = s->images + idx[b] * FM_PIXELS;
        float *dst = (*x)->data + b * FM_PIXELS;
        for (int p = 0; p < FM_PIXELS; p++) dst[p] = (float)src[p] * (1.0f / 255.0f);
        (*y)->i32[b] = s->labels[idx[b]];
    }
}

