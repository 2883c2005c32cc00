/* minigrad/rnn.h: recurrent layers, lstm and gru, as PyTorch's nn.LSTM and nn.GRU with
 * batch_first=True: one layer object runs a stack of num_layers recurrent layers over a whole
 * sequence, x (B,T,input_size) -> (B,T,hidden_size), the top layer's hidden state at every step.
 * (PyTorch's default layout is sequence-first (T,B,in); these layers take the batch first.)
 *
 * Parameters, named and shaped as PyTorch's so a state_dict copies over one to one (k = 0 ..
 * num_layers-1; in_k = input_size for k = 0, hidden_size above; G = 4 for lstm, 3 for gru):
 *   weight_ih_l<k> (G*H, in_k), weight_hh_l<k> (G*H, H), bias_ih_l<k> (G*H), bias_hh_l<k> (G*H)
 * with the gate blocks in PyTorch's order: lstm i, f, g, o; gru r, z, n. Every parameter starts
 * uniform in (-1/sqrt(H), 1/sqrt(H)), as PyTorch's.
 *
 *   lstm: i = sig(W_ii x + b_ii + W_hi h + b_hi)   f = sig(... f rows ...)   g = tanh(... g rows ...)
 *         o = sig(... o rows ...)   c' = f c + i g   h' = o tanh(c')
 *   gru:  r = sig(W_ir x + b_ir + W_hr h + b_hr)   z = sig(... z rows ...)
 *         n = tanh(W_in x + b_in + r (W_hn h + b_hn))   h' = (1 - z) n + z h
 *
 * The input projection of all T steps is one matrix product; the recurrence then composes ops step
 * by step (so backward is the ops' own). The state starts at zero unless mg_rnn_set_initial_state
 * gave one for the next forward; the final state of the last forward is mg_rnn_final_state.
 * Dropout between stacked layers (PyTorch's dropout argument) is not offered.
 *
 * String config keys (model files, mg_layer_create): input_size, hidden_size (required),
 * num_layers (1), bias (true).
 */
#ifndef MINIGRAD_RNN_H
#define MINIGRAD_RNN_H

#include "minigrad/export.h"
#include "minigrad/layer.h"
#include "minigrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most stacked layers one lstm or gru layer holds. */
#define MG_RNN_MAX_LAYERS 16

typedef struct mg_lstm_cfg {
    int64_t input_size;  /* required, >= 1 */
    int64_t hidden_size; /* required, >= 1 */
    int64_t num_layers;  /* 0: 1; at most MG_RNN_MAX_LAYERS */
    bool no_bias;        /* true: no bias_ih/bias_hh (PyTorch's bias=False); false (zero): biases */
    const mg_init *init; /* NULL: PyTorch's uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for all */
} mg_lstm_cfg;

/* The same fields, meaning the same, for a GRU. */
typedef struct mg_gru_cfg {
    int64_t input_size;  /* required, >= 1 */
    int64_t hidden_size; /* required, >= 1 */
    int64_t num_layers;  /* 0: 1; at most MG_RNN_MAX_LAYERS */
    bool no_bias;        /* true: no bias_ih/bias_hh (PyTorch's bias=False); false (zero): biases */
    const mg_init *init; /* NULL: PyTorch's uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for all */
} mg_gru_cfg;

/* Typed constructors (the pattern of minigrad/nn.h): parameters declared under "<name>.", e.g.
 * "enc.weight_ih_l0". NULL with mg_last_error() naming the layer and the bad field. */
MG_API mg_layer *mg_lstm_new(mg_params *params, const char *name, const mg_lstm_cfg *cfg);
MG_API mg_layer *mg_gru_new(mg_params *params, const char *name, const mg_gru_cfg *cfg);

/* The initial state of the next forward of an lstm or gru layer l, as PyTorch's (h_0, c_0): each
 * (num_layers, B, hidden_size), float32; c0 is for lstm only (NULL for gru). NULL h0 (or c0) means
 * zeros. Gradients flow into them like into any input. The tensors are borrowed: they must live
 * until that forward, which uses them once and forgets them. An error on l's kind or shapes is
 * raised by the forward on its context; clearing (both NULL) is a no-op on a layer without state. */
MG_API void mg_rnn_set_initial_state(mg_layer *l, mg_tensor *h0, mg_tensor *c0);

/* The final state of the last forward of l: h_n (num_layers, B, hidden_size), and for an lstm c_n
 * into *c_n when c_n is not NULL (NULL for a gru). They live in that forward's arena (until
 * mg_ctx_reset). NULL before any forward, or when l is not an lstm or gru layer. */
MG_API mg_tensor *mg_rnn_final_state(mg_layer *l, mg_tensor **c_n);

#ifdef __cplusplus
}
#endif
#endif
