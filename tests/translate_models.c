/* Three PyTorch models translated line by line (see translate_models.h). The blocks between the
 * translate-*:begin/end markers are shown verbatim in docs/pytorch.md, each beside the PyTorch
 * code it translates (the same markers in tests/test_translate.py). */
#include "translate_models.h"

#include <stdio.h>
#include <stdlib.h>

/* translate-cnn:begin */
/* class CNN(nn.Module), input (N, 1, 12, 12) */
bool tr_cnn_init(tr_cnn *m, mg_params *P) {
    m->conv1 = mg_conv2d_new(P, "conv1", &(mg_conv2d_cfg){.in = 1, .out = 4, .kernel = {3, 3}, .padding = {1, 1}, .bias = true});
    m->conv2 = mg_conv2d_new(P, "conv2", &(mg_conv2d_cfg){.in = 4, .out = 8, .kernel = {3, 3}, .padding = {1, 1}, .bias = true});
    m->fc = mg_linear_new(P, "fc", &(mg_linear_cfg){.in = 8 * 3 * 3, .out = 10, .bias = true});
    return m->conv1 && m->conv2 && m->fc;
}

mg_tensor *tr_cnn_forward(tr_cnn *m, mg_ctx *ctx, mg_tensor *x) {
    const mg_pool2d_opts pool = {.kernel = {2, 2}}; /* stride 0: the kernel size, as PyTorch */
    x = mg_max_pool2d(ctx, mg_relu(ctx, mg_layer_forward(m->conv1, ctx, x, NULL)), &pool);
    x = mg_max_pool2d(ctx, mg_relu(ctx, mg_layer_forward(m->conv2, ctx, x, NULL)), &pool);
    x = mg_reshape(ctx, x, 2, (int64_t[]){x->shape[0], -1}); /* torch.flatten(x, 1) */
    return mg_layer_forward(m->fc, ctx, x, NULL);
}

mg_tensor *tr_cnn_loss(mg_ctx *ctx, mg_tensor *logits, mg_tensor *y) {
    /* PyTorch's default ignore_index is -100; minigrad asks for it */
    return mg_cross_entropy_smooth(ctx, logits, y, -100, 0.1f);
}
/* translate-cnn:end */

void tr_cnn_free(tr_cnn *m) {
    mg_layer_free(m->conv1), mg_layer_free(m->conv2), mg_layer_free(m->fc);
}

/* translate-lstm:begin */
/* class LSTMLM(nn.Module) */
bool tr_lstm_lm_init(tr_lstm_lm *m, mg_params *P, int64_t vocab, int64_t emb_dim, int64_t hidden) {
    m->emb = mg_embedding_new(P, "emb", &(mg_embedding_cfg){.vocab = vocab, .dim = emb_dim});
    m->lstm = mg_lstm_new(P, "lstm", &(mg_lstm_cfg){.input_size = emb_dim, .hidden_size = hidden, .num_layers = 2});
    m->head = mg_linear_new(P, "head", &(mg_linear_cfg){.in = hidden, .out = vocab, .bias = true});
    return m->emb && m->lstm && m->head;
}

mg_tensor *tr_lstm_lm_forward(tr_lstm_lm *m, mg_ctx *ctx, mg_tensor *ids) {
    mg_tensor *x = mg_layer_forward(m->emb, ctx, ids, NULL); /* ids: int32 (B, T) */
    x = mg_layer_forward(m->lstm, ctx, x, NULL);             /* always batch first; (h_n, c_n): mg_rnn_final_state */
    return mg_layer_forward(m->head, ctx, x, NULL);          /* (B, T, vocab) */
}

mg_tensor *tr_lstm_lm_loss(mg_ctx *ctx, mg_tensor *logits, mg_tensor *targets) {
    /* the class dim is the last one: (B, T, vocab) against (B, T), no reshape needed */
    return mg_cross_entropy(ctx, logits, targets, -100);
}
/* translate-lstm:end */

void tr_lstm_lm_free(tr_lstm_lm *m) {
    mg_layer_free(m->emb), mg_layer_free(m->lstm), mg_layer_free(m->head);
}

/* translate-llama-name:begin */
/* "<prefix>.<local>" into buf (a layer's name, which is also its parameters' prefix). */
static const char *tr_name(char *buf, size_t cap, const char *prefix, const char *local) {
    snprintf(buf, cap, "%s.%s", prefix, local);
    return buf;
}
/* translate-llama-name:end */

/* translate-llama:begin */
/* class TransformerBlock(nn.Module): Attention, FeedForward and two RMSNorms */
bool tr_llama_block_init(tr_llama_block *b, mg_params *P, const char *name, const tr_llama_cfg *cfg) {
    char n[128];
    const int64_t dim = cfg->dim, hidden = cfg->hidden_dim, D = cfg->dim / cfg->n_heads;
    b->cfg = *cfg;
    tr_name(b->attn_scope, sizeof b->attn_scope, name, "attention");
    tr_name(b->ffn_scope, sizeof b->ffn_scope, name, "feed_forward");
    b->attention_norm = mg_rms_norm_new(P, tr_name(n, sizeof n, name, "attention_norm"), &(mg_rms_norm_cfg){.dim = dim, .eps = cfg->norm_eps});
    b->wq = mg_linear_new(P, tr_name(n, sizeof n, name, "attention.wq"), &(mg_linear_cfg){.in = dim, .out = dim});
    b->wk = mg_linear_new(P, tr_name(n, sizeof n, name, "attention.wk"), &(mg_linear_cfg){.in = dim, .out = dim});
    b->wv = mg_linear_new(P, tr_name(n, sizeof n, name, "attention.wv"), &(mg_linear_cfg){.in = dim, .out = dim});
    b->wo = mg_linear_new(P, tr_name(n, sizeof n, name, "attention.wo"), &(mg_linear_cfg){.in = dim, .out = dim});
    b->ffn_norm = mg_rms_norm_new(P, tr_name(n, sizeof n, name, "ffn_norm"), &(mg_rms_norm_cfg){.dim = dim, .eps = cfg->norm_eps});
    b->w1 = mg_linear_new(P, tr_name(n, sizeof n, name, "feed_forward.w1"), &(mg_linear_cfg){.in = dim, .out = hidden});
    b->w2 = mg_linear_new(P, tr_name(n, sizeof n, name, "feed_forward.w2"), &(mg_linear_cfg){.in = hidden, .out = dim});
    b->w3 = mg_linear_new(P, tr_name(n, sizeof n, name, "feed_forward.w3"), &(mg_linear_cfg){.in = dim, .out = hidden});
    /* rotate_half pairs element i with i + D/2; mg_rope pairs 2i with 2i + 1. Reordering the head
     * dim as (0, D/2, 1, D/2 + 1, ...) before mg_rope rotates the same pairs by the same angles;
     * q.k is the same sum in another order, so nothing needs to be put back. */
    b->rope_perm = malloc(sizeof(int32_t) * (size_t)(D > 0 ? D : 1));
    for (int64_t i = 0; b->rope_perm && i < D; i++) b->rope_perm[i] = (int32_t)(i % 2 ? D / 2 + i / 2 : i / 2);
    return b->rope_perm && b->attention_norm && b->wq && b->wk && b->wv && b->wo && b->ffn_norm && b->w1 && b->w2 &&
           b->w3;
}

static mg_tensor *tr_llama_attention(tr_llama_block *b, mg_ctx *ctx, mg_tensor *x) {
    const int64_t B = x->shape[0], T = x->shape[1], H = b->cfg.n_heads, D = b->cfg.dim / H;
    mg_ctx_push_scope(ctx, b->attn_scope); /* an op failing below names "blk.attention" */
    mg_tensor *q = mg_layer_forward(b->wq, ctx, x, NULL);
    mg_tensor *k = mg_layer_forward(b->wk, ctx, x, NULL);
    mg_tensor *v = mg_layer_forward(b->wv, ctx, x, NULL);
    /* .view(B, T, H, D).transpose(1, 2): (B, H, T, D), a copy rather than a view */
    q = mg_transpose(ctx, mg_reshape(ctx, q, 4, (int64_t[]){B, T, H, D}), 1, 2);
    k = mg_transpose(ctx, mg_reshape(ctx, k, 4, (int64_t[]){B, T, H, D}), 1, 2);
    v = mg_transpose(ctx, mg_reshape(ctx, v, 4, (int64_t[]){B, T, H, D}), 1, 2);
    if (!b->cfg.meta_rope) { /* Hugging Face's halves: reorder them into mg_rope's pairs */
        mg_tensor *perm = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){D}, b->rope_perm);
        q = mg_index_select(ctx, q, -1, perm);
        k = mg_index_select(ctx, k, -1, perm);
    }
    q = mg_rope(ctx, q, 0, b->cfg.rope_theta);
    k = mg_rope(ctx, k, 0, b->cfg.rope_theta);
    /* softmax(q k^T / sqrt(D) + causal mask) v */
    mg_tensor *y = mg_attention(ctx, q, k, v, &(mg_attn_opts){.causal = true});
    y = mg_reshape(ctx, mg_transpose(ctx, y, 1, 2), 3, (int64_t[]){B, T, H * D});
    y = mg_layer_forward(b->wo, ctx, y, NULL);
    mg_ctx_pop_scope(ctx);
    return y;
}

static mg_tensor *tr_llama_feed_forward(tr_llama_block *b, mg_ctx *ctx, mg_tensor *x) {
    mg_ctx_push_scope(ctx, b->ffn_scope);
    mg_tensor *gate = mg_silu(ctx, mg_layer_forward(b->w1, ctx, x, NULL));
    mg_tensor *y = mg_layer_forward(b->w2, ctx, mg_mul(ctx, gate, mg_layer_forward(b->w3, ctx, x, NULL)), NULL);
    mg_ctx_pop_scope(ctx);
    return y;
}

mg_tensor *tr_llama_block_forward(tr_llama_block *b, mg_ctx *ctx, mg_tensor *x) {
    mg_tensor *h = mg_add(ctx, x, tr_llama_attention(b, ctx, mg_layer_forward(b->attention_norm, ctx, x, NULL)));
    return mg_add(ctx, h, tr_llama_feed_forward(b, ctx, mg_layer_forward(b->ffn_norm, ctx, h, NULL)));
}
/* translate-llama:end */

void tr_llama_block_free(tr_llama_block *b) {
    mg_layer *ls[] = {b->attention_norm, b->wq, b->wk, b->wv, b->wo, b->ffn_norm, b->w1, b->w2, b->w3};
    for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) mg_layer_free(ls[i]);
    free(b->rope_perm);
    b->rope_perm = NULL;
}
