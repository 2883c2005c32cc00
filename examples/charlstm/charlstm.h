/* charlstm.h: a character-level LSTM language model, the recurrent counterpart of textgen's GPT.
 *
 *   ids (B,T) --embedding (V,E)--> (B,T,E) --lstm (num_layers, hidden H)--> (B,T,H)
 *             --linear head (H -> V)--> logits (B,T,V) --cross-entropy--> loss
 *
 * The text side (tokenizers, corpus files, the 90/10 split, batches, validation windows) is
 * textgen's library (textgen.h); the loop, checkpoints, resume and the loss curve are the library
 * trainer's (minigrad/train.h); options and run files are examples/common's. Parameters:
 * "embed.weight" (V,E), "lstm.weight_ih_l0" ... (PyTorch's nn.LSTM names), "head.weight" (H,V),
 * "head.bias" (V). Checkpoint metadata: the vocabulary (tokenizer, chars), "vocab_size", and the
 * run's settings as "charlstm.NAME" (block, embd, hidden, layers, steps, lr, ...).
 */
#ifndef CL_CHARLSTM_H
#define CL_CHARLSTM_H

#include "gpt_opts.h"
#include "textgen.h"

#include "minigrad/minigrad.h"
#include "minigrad/rnn.h"

#define CL_DEFAULT_OUT "out/charlstm"
#define CL_DEFAULT_CKPT CL_DEFAULT_OUT "/model.safetensors"
#define CL_META_PREFIX "charlstm"
#define CL_META_DATA "charlstm.data" /* corpus files, '\n'-separated; "" = the default corpus */

typedef struct cl_config {
    int64_t vocab, embd, hidden, layers;
} cl_config;

typedef struct cl_model {
    cl_config cfg;
    mg_params *P;
    mg_tensor *embed; /* (V,E) */
    mg_layer *lstm, *head;
} cl_model;

/* Declares and allocates the parameters, initialised from rng: the embedding N(0,1) and the LSTM
 * and head uniform(-1/sqrt(fan), 1/sqrt(fan)), PyTorch's defaults. Errors name the bad field. */
mg_status cl_model_new(cl_model *m, const cl_config *c, mg_rng *rng);
void cl_model_free(cl_model *m);

/* Logits (B,T,V) of ids (B,T). h0/c0 (layers,B,H) start the LSTM from a state (NULL: zeros); the
 * final state is then mg_rnn_final_state(m->lstm, ...). */
mg_tensor *cl_logits(cl_model *m, mg_ctx *ctx, mg_tensor *ids, mg_tensor *h0, mg_tensor *c0);
/* Mean cross-entropy of the next-character predictions. */
mg_tensor *cl_loss(cl_model *m, mg_ctx *ctx, mg_tensor *ids, mg_tensor *targets);

/* The model settings as "charlstm.*" rows for ex_settings_to_meta / ex_settings_from_ckpt. */
int cl_settings(int64_t *block, int64_t *embd, int64_t *hidden, int64_t *layers, ex_setting *rows);

/* Loads a checkpoint of `charlstm train`: its settings, the model and the vocabulary. *block_out
 * (may be NULL) gets the context length it was trained with. On failure nothing is left to free. */
mg_status cl_load(const char *path, cl_model *m, tg_vocab *v, int64_t *block_out);

/* Scores every target of the windows over ids (w->len each, the last one last_len when > 0), B
 * windows per forward pass, each from a zero state, on ctx (reset here). Adds into *sum. */
mg_status cl_eval_windows(cl_model *m, mg_ctx *ctx, const tg_vocab *v, const int32_t *ids, const tg_windows *w,
                          int64_t last_len, int64_t B, tg_loss *sum);

/* `charlstm compare` (compare.c). */
int cl_cmd_compare(int argc, char **argv);

#endif
