/* The charlstm model: embedding, LSTM, linear head; loading a checkpoint; scoring windows. */
#include "charlstm.h"

#include "minigrad/checkpoint.h"
#include "minigrad/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

mg_status cl_model_new(cl_model *m, const cl_config *c, mg_rng *rng) {
    memset(m, 0, sizeof *m);
    if (c->vocab < 1 || c->embd < 1 || c->hidden < 1 || c->layers < 1 || c->layers > MG_RNN_MAX_LAYERS)
        return mg_set_error(MG_ERR_INVALID, "charlstm model: vocab %lld, embd %lld, hidden %lld must be >= 1 and layers %lld in [1, %d]",
                            (long long)c->vocab, (long long)c->embd, (long long)c->hidden, (long long)c->layers,
                            MG_RNN_MAX_LAYERS);
    m->cfg = *c;
    if (!(m->P = mg_params_new())) return MG_ERR_NOMEM;
    m->embed = mg_params_add(m->P, "embed.weight", 2, (int64_t[]){c->vocab, c->embd}, mg_init_normal(0.0f, 1.0f), 0);
    if (m->embed)
        m->lstm = mg_lstm_new(m->P, "lstm",
                              &(mg_lstm_cfg){.input_size = c->embd, .hidden_size = c->hidden, .num_layers = c->layers});
    if (m->lstm) m->head = mg_linear_new(m->P, "head", &(mg_linear_cfg){.in = c->hidden, .out = c->vocab, .bias = true});
    mg_status st = m->head ? mg_params_alloc(m->P, rng) : MG_ERR_INVALID;
    if (st != MG_OK) cl_model_free(m);
    return st;
}

void cl_model_free(cl_model *m) {
    mg_layer_free(m->lstm);
    mg_layer_free(m->head);
    mg_params_free(m->P);
    memset(m, 0, sizeof *m);
}

mg_tensor *cl_logits(cl_model *m, mg_ctx *ctx, mg_tensor *ids, mg_tensor *h0, mg_tensor *c0) {
    mg_tensor *x = mg_embedding(ctx, m->embed, ids);
    if (h0 || c0) mg_rnn_set_initial_state(m->lstm, h0, c0);
    mg_tensor *h = mg_layer_forward(m->lstm, ctx, x, NULL);
    return mg_layer_forward(m->head, ctx, h, NULL);
}

mg_tensor *cl_loss(cl_model *m, mg_ctx *ctx, mg_tensor *ids, mg_tensor *targets) {
    return mg_cross_entropy(ctx, cl_logits(m, ctx, ids, NULL, NULL), targets, -1);
}

int cl_settings(int64_t *block, int64_t *embd, int64_t *hidden, int64_t *layers, ex_setting *rows) {
    rows[0] = (ex_setting){"block", block, NULL};
    rows[1] = (ex_setting){"embd", embd, NULL};
    rows[2] = (ex_setting){"hidden", hidden, NULL};
    rows[3] = (ex_setting){"layers", layers, NULL};
    return 4;
}

mg_status cl_load(const char *path, cl_model *m, tg_vocab *v, int64_t *block_out) {
    memset(m, 0, sizeof *m);
    memset(v, 0, sizeof *v);
    mg_st_file *f = NULL;
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) return st;
    ex_train_opts o = {0};
    int64_t block = 0, embd = 0, hidden = 0, layers = 0;
    ex_setting rows[4];
    int nr = cl_settings(&block, &embd, &hidden, &layers, rows);
    st = ex_settings_from_ckpt(f, CL_META_PREFIX, &o, rows, nr);
    const char *vs = mg_st_meta_get(f, "vocab_size");
    if (st == MG_OK && (!vs || block < 1 || embd < 1 || hidden < 1 || layers < 1))
        st = mg_set_error(MG_ERR_FORMAT, "%s: not a charlstm checkpoint (metadata vocab_size and "
                                         CL_META_PREFIX ".block/embd/hidden/layers missing)", path);
    if (st == MG_OK)
        st = tg_vocab_from_meta(v, mg_st_meta_get(f, TG_META_TOKENIZER), mg_st_meta_get(f, TG_META_CHARS),
                                strtoll(vs, NULL, 10), path);
    mg_st_close(f);
    mg_rng init = mg_rng_make(0); /* the checkpoint's values replace what it draws */
    if (st == MG_OK) st = cl_model_new(m, &(cl_config){v->size, embd, hidden, layers}, &init);
    if (st == MG_OK) st = mg_checkpoint_load(path, m->P, NULL);
    if (st != MG_OK) {
        cl_model_free(m);
        tg_vocab_free(v);
        return st;
    }
    if (block_out) *block_out = block;
    return MG_OK;
}

/* Characters among the targets: every one for char ids; for bytes, those that start a UTF-8
 * sequence. */
static int64_t count_chars(const tg_vocab *v, const int32_t *t, int64_t n) {
    if (v->kind != TG_TOKENIZER_BYTE) return n;
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += (t[i] & 0xC0) != 0x80;
    return c;
}

static mg_status eval_batch(cl_model *m, mg_ctx *ctx, const tg_vocab *v, const int32_t *ids, const size_t *starts,
                            int64_t nb, int64_t len, tg_loss *sum) {
    mg_ctx_reset(ctx);
    mg_tensor *x = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){nb, len});
    mg_tensor *y = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){nb, len});
    if (!mg_ctx_ok(ctx)) return mg_set_error(MG_ERR_NOMEM, "charlstm eval: %s", mg_ctx_error(ctx));
    for (int64_t b = 0; b < nb; b++) {
        memcpy(x->i32 + b * len, ids + starts[b], (size_t)len * sizeof(int32_t));
        memcpy(y->i32 + b * len, ids + starts[b] + 1, (size_t)len * sizeof(int32_t));
    }
    mg_tensor *loss = cl_loss(m, ctx, x, y);
    if (!mg_ctx_ok(ctx)) return mg_set_error(MG_ERR_INVALID, "charlstm eval: %s", mg_ctx_error(ctx));
    sum->nats += (double)loss->data[0] * (double)(nb * len);
    sum->tokens += nb * len;
    sum->chars += count_chars(v, y->i32, nb * len);
    return MG_OK;
}

mg_status cl_eval_windows(cl_model *m, mg_ctx *ctx, const tg_vocab *v, const int32_t *ids, const tg_windows *w,
                          int64_t last_len, int64_t B, tg_loss *sum) {
    bool prev = mg_ctx_set_grad_enabled(ctx, false);
    size_t full = last_len > 0 && w->count > 0 ? w->count - 1 : w->count;
    mg_status st = MG_OK;
    for (size_t i = 0; i < full && st == MG_OK; i += (size_t)B) {
        int64_t nb = (int64_t)(full - i) < B ? (int64_t)(full - i) : B;
        st = eval_batch(m, ctx, v, ids, w->start + i, nb, w->len, sum);
    }
    if (st == MG_OK && full < w->count) st = eval_batch(m, ctx, v, ids, w->start + full, 1, last_len, sum);
    mg_ctx_set_grad_enabled(ctx, prev);
    return st;
}
