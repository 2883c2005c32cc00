/* A program outside the minigrad tree, built by tests/install/test_install.sh against an installed
 * minigrad with nothing but `pkg-config --cflags --libs minigrad`. It uses what a user would: a
 * custom op written with minigrad/op.h, layers made through the public layer API, AdamW, a
 * checkpoint saved and loaded back, and a PNG of the loss curve.
 *
 *   consumer DIR   (writes DIR/model.safetensors and DIR/loss.png; exit status 0 when all is well)
 */
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- a custom op: softsign(x) = x / (1 + |x|), d/dx = 1 / (1 + |x|)^2 ---- */

static void softsign_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    const float *dy = n->out->grad;
    for (int64_t i = 0; i < x->numel; i++) {
        float d = 1.0f + fabsf(x->data[i]);
        dx[i] += dy[i] / (d * d);
    }
}

static const mg_op_def softsign_def = {.name = "softsign", .backward = softsign_backward};

static mg_tensor *softsign(mg_ctx *ctx, mg_tensor *x) {
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "softsign", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    for (int64_t i = 0; i < x->numel; i++) y->data[i] = x->data[i] / (1.0f + fabsf(x->data[i]));
    mg_op_record(ctx, &softsign_def, y, 1, (mg_tensor *[]){x});
    return y;
}

/* ---- the model: linear -> softsign -> linear, made through the layer registry ---- */

typedef struct {
    mg_params *params;
    mg_layer *fc1, *fc2;
} model;

static int fail(const char *what) {
    fprintf(stderr, "consumer: %s: %s\n", what, mg_last_error());
    return 1;
}

static mg_status make_linear(const char *name, int in, int out, mg_params *p, mg_layer **l) {
    mg_config *cfg = mg_config_new("linear");
    char list[64];
    snprintf(list, sizeof list, "in=%d,out=%d", in, out);
    mg_status st = mg_config_set_list(cfg, list);
    if (st == MG_OK) st = mg_layer_create("linear", name, cfg, p, l);
    mg_config_free(cfg);
    return st;
}

static int model_new(model *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->params = mg_params_new();
    if (make_linear("fc1", 2, 24, m->params, &m->fc1) != MG_OK) return fail("layer fc1");
    if (make_linear("fc2", 24, 2, m->params, &m->fc2) != MG_OK) return fail("layer fc2");
    mg_rng rng = mg_rng_make(seed);
    if (mg_params_alloc(m->params, &rng) != MG_OK) return fail("mg_params_alloc");
    return 0;
}

static void model_free(model *m) {
    mg_layer_free(m->fc1);
    mg_layer_free(m->fc2);
    mg_params_free(m->params);
}

static mg_tensor *loss_of(model *m, mg_ctx *ctx, float *xs, int32_t *labels, int B) {
    mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, xs);
    mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, labels);
    mg_tensor *h = softsign(ctx, mg_layer_forward(m->fc1, ctx, x, NULL));
    return mg_cross_entropy(ctx, mg_layer_forward(m->fc2, ctx, h, NULL), y, -1);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer DIR\n");
        return 2;
    }
    enum { B = 128, STEPS = 250 };
    float xs[B * 2];
    int32_t labels[B];
    mg_rng data_rng = mg_rng_make(7);
    for (int i = 0; i < B; i++) {
        xs[2 * i] = mg_rng_range(&data_rng, -1, 1), xs[2 * i + 1] = mg_rng_range(&data_rng, -1, 1);
        labels[i] = (xs[2 * i] > 0) != (xs[2 * i + 1] > 0);
    }

    model m;
    if (model_new(&m, 42)) return 1;
    mg_optim *opt = mg_adamw_new(m.params, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0);
    double curve[STEPS];
    for (int step = 0; step < STEPS; step++) {
        mg_ctx_reset(ctx);
        mg_tensor *loss = loss_of(&m, ctx, xs, labels, B);
        mg_params_zero_grad(m.params);
        mg_backward(ctx, loss);
        if (mg_ctx_error(ctx)) {
            fprintf(stderr, "consumer: step %d: %s\n", step, mg_ctx_error(ctx));
            return 1;
        }
        mg_optim_step(opt, 2e-2f);
        curve[step] = loss->data[0];
    }
    printf("loss %.4f -> %.4f over %d steps\n", curve[0], curve[STEPS - 1], STEPS);
    if (!(curve[STEPS - 1] < 0.5 * curve[0])) {
        fprintf(stderr, "consumer: the loss did not fall by half\n");
        return 1;
    }

    /* the loss after training, then the same from a fresh model loaded from the checkpoint */
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, false);
    float trained = loss_of(&m, ctx, xs, labels, B)->data[0];
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", argv[1]);
    mg_st_meta meta[] = {{"program", "consumer"}};
    if (mg_checkpoint_save(path, m.params, false, meta, 1) != MG_OK) return fail("mg_checkpoint_save");

    model back;
    if (model_new(&back, 1234)) return 1;
    mg_ctx_reset(ctx);
    float fresh = loss_of(&back, ctx, xs, labels, B)->data[0];
    if (mg_checkpoint_load(path, back.params, NULL) != MG_OK) return fail("mg_checkpoint_load");
    mg_ctx_reset(ctx);
    float loaded = loss_of(&back, ctx, xs, labels, B)->data[0];
    printf("checkpoint: loss %.6f trained, %.6f untrained, %.6f loaded\n", trained, fresh, loaded);
    if (loaded != trained || fresh == trained) {
        fprintf(stderr, "consumer: the loaded model does not reproduce the trained one\n");
        return 1;
    }

    snprintf(path, sizeof path, "%s/loss.png", argv[1]);
    mg_plot_series s = {.label = "training loss", .y = curve, .n = STEPS};
    mg_plot_opts po = {.title = "consumer", .xlabel = "step", .ylabel = "loss"};
    if (mg_plot_lines(path, &po, &s, 1) != MG_OK) return fail("mg_plot_lines");

    mg_ctx_free(ctx);
    mg_optim_free(opt);
    model_free(&back);
    model_free(&m);
    printf("consumer: all good\n");
    return 0;
}
