/* translate_models MODEL IN.safetensors OUT.safetensors (built for tests only; driven by
 * tests/test_translate.py)
 *
 * Builds MODEL (translate_models.h: cnn, lstm, llama with Hugging Face's rotary pairs or
 * llama_meta with Meta's), loads every parameter and the tensors
 * "input" and "target" from IN (strictly: a missing, extra or misshapen tensor is an error naming
 * it), runs forward, the model's loss and backward, and writes to OUT: "output", "loss" (0-d),
 * "grad.input" (models with a float input) and "grad.<name>" for every parameter. Token ids and
 * class targets are stored as float32 in IN (safetensors files here hold F32 only) and converted
 * to int32. Exit 0 on success, 1 with a message on stderr otherwise. */
#include "translate_models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sizes tests/test_translate.py builds its PyTorch models with. */
enum { LSTM_VOCAB = 11, LSTM_EMB = 8, LSTM_HIDDEN = 12 };
static const tr_llama_cfg LLAMA = {.dim = 16, .n_heads = 2, .hidden_dim = 40, .norm_eps = 1e-5f, .rope_theta = 10000.0f};

static void on_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx, (void)user;
    fprintf(stderr, "translate_models: %s\n", msg);
}

static int fail(const char *what) {
    fprintf(stderr, "translate_models: %s: %s\n", what, mg_last_error());
    return 1;
}

/* A tensor of the input file as int32 (ids, targets): each value must be an integer. */
static int32_t *to_i32(const float *v, int64_t n, const char *name) {
    int32_t *r = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; r && i < n; i++) {
        if (v[i] != floorf(v[i]) || fabsf(v[i]) > 1e9f) {
            fprintf(stderr, "translate_models: %s[%lld] = %g is not an integer\n", name, (long long)i, (double)v[i]);
            free(r);
            return NULL;
        }
        r[i] = (int32_t)v[i];
    }
    return r;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "cnn") && strcmp(argv[1], "lstm") && strcmp(argv[1], "llama") &&
                      strcmp(argv[1], "llama_meta"))) {
        fprintf(stderr, "usage: translate_models cnn|lstm|llama|llama_meta IN.safetensors OUT.safetensors\n");
        return 2;
    }
    const char *kind = argv[1];
    tr_llama_cfg llama_cfg = LLAMA;
    llama_cfg.meta_rope = !strcmp(kind, "llama_meta");
    /* everything freed at the end, on every path */
    int rc = 1, np = 0;
    mg_params *P = mg_params_new();
    tr_cnn cnn = {0};
    tr_lstm_lm lstm = {0};
    tr_llama_block llama = {0};
    mg_st_file *f = NULL;
    mg_st_dest *dest = NULL;
    mg_ctx *ctx = NULL;
    int32_t *ids = NULL, *cls = NULL;
    mg_st_entry *e = NULL;
    char **names = NULL;

    bool ok = !strcmp(kind, "cnn")    ? tr_cnn_init(&cnn, P)
              : !strcmp(kind, "lstm") ? tr_lstm_lm_init(&lstm, P, LSTM_VOCAB, LSTM_EMB, LSTM_HIDDEN)
                                      : tr_llama_block_init(&llama, P, "blk", &llama_cfg);
    mg_rng rng = mg_rng_make(1);
    if (!ok || mg_params_alloc(P, &rng) != MG_OK) {
        rc = fail(kind);
        goto done;
    }

    /* every parameter by its name, then input and target in the shapes the file gives */
    if (mg_safetensors_open(argv[2], &f) != MG_OK) {
        rc = fail("open");
        goto done;
    }
    np = mg_params_len(P);
    if (!(dest = calloc((size_t)np + 2, sizeof *dest))) goto done;
    for (int i = 0; i < np; i++) {
        mg_tensor *t = mg_params_at(P, i);
        dest[i].name = t->name, dest[i].ndim = t->ndim, dest[i].data = t->data;
        memcpy(dest[i].shape, t->shape, sizeof t->shape);
    }
    const char *extra[2] = {"input", "target"};
    for (int j = 0; j < 2; j++) {
        int k = mg_st_find(f, extra[j]);
        if (k < 0) {
            fprintf(stderr, "translate_models: %s: no tensor '%s'\n", argv[2], extra[j]);
            goto done;
        }
        const mg_st_tensor_info *info = mg_st_info(f, k);
        mg_st_dest *d = &dest[np + j];
        d->name = extra[j], d->ndim = info->ndim, d->data = malloc(sizeof(float) * (size_t)(info->numel + 1));
        memcpy(d->shape, info->shape, sizeof d->shape);
        if (!d->data) goto done;
    }
    if (mg_st_load(f, dest, np + 2, 0) != MG_OK) {
        rc = fail("load");
        goto done;
    }
    const mg_st_dest *in = &dest[np], *tg = &dest[np + 1];
    int64_t n_in = 1, n_tg = 1;
    for (int d = 0; d < in->ndim; d++) n_in *= in->shape[d];
    for (int d = 0; d < tg->ndim; d++) n_tg *= tg->shape[d];

    ctx = mg_ctx_new(0);
    mg_ctx_set_error_handler(ctx, on_error, NULL);
    mg_tensor *x, *out, *loss;
    if (!strcmp(kind, "lstm")) {
        if (!(ids = to_i32(in->data, n_in, "input")) || !(cls = to_i32(tg->data, n_tg, "target"))) goto done;
        x = mg_tensor_wrap(ctx, MG_I32, in->ndim, in->shape, ids);
        out = tr_lstm_lm_forward(&lstm, ctx, x);
        loss = tr_lstm_lm_loss(ctx, out, mg_tensor_wrap(ctx, MG_I32, tg->ndim, tg->shape, cls));
    } else {
        x = mg_tensor_wrap(ctx, MG_F32, in->ndim, in->shape, in->data);
        mg_tensor_set_requires_grad(x, true);
        if (!strcmp(kind, "cnn")) {
            if (!(cls = to_i32(tg->data, n_tg, "target"))) goto done;
            out = tr_cnn_forward(&cnn, ctx, x);
            loss = tr_cnn_loss(ctx, out, mg_tensor_wrap(ctx, MG_I32, tg->ndim, tg->shape, cls));
        } else {
            out = tr_llama_block_forward(&llama, ctx, x);
            loss = mg_mse_loss(ctx, out, mg_tensor_wrap(ctx, MG_F32, tg->ndim, tg->shape, tg->data)); /* F.mse_loss */
        }
    }
    mg_params_zero_grad(P);
    mg_backward(ctx, loss);
    if (mg_ctx_error(ctx)) goto done; /* on_error printed it */

    e = calloc((size_t)np + 3, sizeof *e);
    names = calloc((size_t)np, sizeof *names);
    if (!e || !names) goto done;
    int ne = 0;
    e[ne++] = (mg_st_entry){.name = "output", .ndim = out->ndim, .data = out->data};
    memcpy(e[0].shape, out->shape, sizeof out->shape);
    e[ne++] = (mg_st_entry){.name = "loss", .ndim = 0, .data = loss->data};
    if (x->dtype == MG_F32) {
        e[ne] = (mg_st_entry){.name = "grad.input", .ndim = x->ndim, .data = x->grad};
        memcpy(e[ne++].shape, x->shape, sizeof x->shape);
    }
    for (int i = 0; i < np; i++) {
        mg_tensor *t = mg_params_at(P, i);
        size_t len = strlen(t->name) + 6;
        if (!(names[i] = malloc(len))) goto done;
        snprintf(names[i], len, "grad.%s", t->name);
        e[ne] = (mg_st_entry){.name = names[i], .ndim = t->ndim, .data = mg_params_grad(P) + mg_params_offset(P, i)};
        memcpy(e[ne++].shape, t->shape, sizeof t->shape);
    }
    rc = mg_safetensors_write(argv[3], e, ne, NULL, 0) == MG_OK ? 0 : fail("write");

done:
    for (int i = 0; names && i < np; i++) free(names[i]);
    free(names), free(e), free(ids), free(cls);
    if (dest) free(dest[np].data), free(dest[np + 1].data), free(dest);
    mg_st_close(f);
    mg_ctx_free(ctx);
    tr_cnn_free(&cnn), tr_lstm_lm_free(&lstm), tr_llama_block_free(&llama);
    mg_params_free(P);
    return rc;
}
