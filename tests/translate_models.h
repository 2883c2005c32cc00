/* Three small PyTorch models translated into minigrad line by line, from the public API only (no
 * custom op): a CNN, an LSTM language model and a Llama-style transformer block. docs/pytorch.md
 * shows each beside its PyTorch original (tests/test_translate.py, which also checks that both give
 * the same outputs and gradients); tests/test_translate_scopes.c checks that the page shows this
 * very code and what the errors of a badly shaped model say. The page shows the structs between
 * the translate-*-types:begin/end markers too, checked the same way.
 *
 * Each model declares its parameters in an mg_params store under the names of the PyTorch
 * model's state_dict (nn.Linear weights stored transposed, (in, out)), runs forward on a context
 * and frees its layers with *_free (the store is the caller's). */
#ifndef TRANSLATE_MODELS_H
#define TRANSLATE_MODELS_H

#include "minigrad/minigrad.h"
#include "minigrad/nn.h"

/* ---- CNN: conv-relu-pool twice, then a linear head; x (N,1,12,12) -> logits (N,10) ---- */
/* translate-cnn-types:begin */
typedef struct tr_cnn {
    mg_layer *conv1, *conv2, *fc;
} tr_cnn;
/* translate-cnn-types:end */
bool tr_cnn_init(tr_cnn *m, mg_params *P);
mg_tensor *tr_cnn_forward(tr_cnn *m, mg_ctx *ctx, mg_tensor *x);
mg_tensor *tr_cnn_loss(mg_ctx *ctx, mg_tensor *logits, mg_tensor *y);
void tr_cnn_free(tr_cnn *m);

/* ---- LSTM language model: embedding, 2-layer LSTM (batch first), linear head;
 *      ids (B,T) int32 -> logits (B,T,V) ---- */
/* translate-lstm-types:begin */
typedef struct tr_lstm_lm {
    mg_layer *emb, *lstm, *head;
} tr_lstm_lm;
/* translate-lstm-types:end */
bool tr_lstm_lm_init(tr_lstm_lm *m, mg_params *P, int64_t vocab, int64_t emb_dim, int64_t hidden);
mg_tensor *tr_lstm_lm_forward(tr_lstm_lm *m, mg_ctx *ctx, mg_tensor *ids);
mg_tensor *tr_lstm_lm_loss(mg_ctx *ctx, mg_tensor *logits, mg_tensor *targets);
void tr_lstm_lm_free(tr_lstm_lm *m);

/* ---- Llama-style block: RMSNorm, causal attention with RoPE, SiLU-gated MLP, residuals;
 *      x (B,T,dim) -> (B,T,dim) ---- */
/* translate-llama-types:begin */
typedef struct tr_llama_cfg {
    int64_t dim, n_heads, hidden_dim;
    float norm_eps, rope_theta;
    bool meta_rope; /* rotary pairs (2i, 2i+1) as Meta's Llama code; false: (i, i + D/2) as Hugging Face's */
} tr_llama_cfg;

typedef struct tr_llama_block {
    tr_llama_cfg cfg;
    char attn_scope[64], ffn_scope[64]; /* "blk.attention", "blk.feed_forward": where errors happen */
    int32_t *rope_perm;                 /* the head dim reordered: Llama's halves -> mg_rope's pairs */
    mg_layer *attention_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w1, *w2, *w3;
} tr_llama_block;
/* translate-llama-types:end */
bool tr_llama_block_init(tr_llama_block *b, mg_params *P, const char *name, const tr_llama_cfg *cfg);
mg_tensor *tr_llama_block_forward(tr_llama_block *b, mg_ctx *ctx, mg_tensor *x);
void tr_llama_block_free(tr_llama_block *b);

#endif
