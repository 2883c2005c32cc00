/* minigrad/gpt.h: a GPT assembled from registered layers by name, its loss, generation with a KV
 * cache, and safetensors checkpoints with GPT-2 names. The computation is given as equations in
 * docs/gpt.md, the checkpoint's tensors and metadata keys in docs/checkpoint-format.md.
 *
 * The model is the layer kind "gpt" (layers/gpt.c): token embedding `wte` (times emb_scale), the
 * positional scheme named by `pos` (any layer registered with that pos_scheme; when none is
 * registered the plugin of that name is loaded from the plugin search path), dropout, n_layer
 * pre-LN decoder blocks `h.{i}`, final LayerNorm `ln_f`, and a head tied to wte or its own Linear
 * `lm_head` (optionally with bias). The defaults are GPT-2's; the bidirectional classifier of
 * docs/posenc-benchmark.md is the same model with causal=false, gelu=erf, emb_scale=sqrt(d), an
 * untied head with bias.
 *
 * Ownership: mg_gpt_new / mg_gpt_from_checkpoint return a model the caller frees with
 * mg_gpt_free; it owns its layers and parameter store (mg_gpt_params is borrowed). Tensors it
 * returns live in the caller's ctx arena.
 * Errors: construction, checkpoints and generation return mg_status with mg_last_error naming the
 * key, file or tensor; shape misuse in forward is raised on the ctx.
 */
#ifndef MINIGRAD_GPT_H
#define MINIGRAD_GPT_H

#include "minigrad/export.h"

#include "minigrad/layer.h"
#include "minigrad/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MG_GPT_FORMAT "minigrad-gpt" /* __metadata__ "format" */

typedef struct mg_gpt_config {
    int64_t vocab_size, block_size, n_layer, n_head, n_embd;
    char pos[32];        /* none | learned | sinusoidal | learned+sinusoidal | rope | alibi | a plugin's */
    char pos_opts[128];  /* extra keys for the positional layer, "k=v,k=v" ("" for none) */
    float dropout;       /* embedding, attention output and MLP output (0: none) */
    bool causal;         /* true: decoder; false: bidirectional encoder */
    mg_gelu_kind gelu;   /* MG_GELU_TANH (GPT-2) or MG_GELU_ERF */
    float emb_scale;     /* token embedding multiplier (1; sqrt(n_embd) for the posenc classifier) */
    bool tied_head;      /* true: logits = x wte^T; false: Linear `lm_head` [n_embd, vocab] */
    bool head_bias;      /* untied head only */
    float init_std;      /* normal(0, init_std) for Linear weights and wte; c_proj / sqrt(2 n_layer) */
    float ln_eps;        /* epsilon of every LayerNorm (ln_1, ln_2, ln_f): 1e-5 */
    float attn_scale;    /* attention logits are scaled by this; 0: 1/sqrt(n_embd / n_head). A model
                            built from a config reports the value it uses (never 0) */
} mg_gpt_config;

/* GPT-2 style defaults with small sizes: vocab 256, block 128, 4 layers, 4 heads, 128 wide,
 * pos learned, dropout 0, causal, tanh GELU, scale 1, tied head, init_std 0.02, ln_eps 1e-5,
 * attn_scale 0 (1/sqrt(head dim)). */
MG_API mg_gpt_config mg_gpt_config_default(void);

/* Reads a config from keys (the names of the fields; gelu = tanh|erf; head = tied|linear;
 * emb_scale accepts "sqrt" for sqrt(n_embd)), starting from `*out` for absent keys. Checks
 * every key was known and the sizes are consistent (n_embd % n_head == 0, even head dim for
 * rope...). */
MG_API mg_status mg_gpt_config_from(mg_config *kv, mg_gpt_config *out);
/* Reads the [gpt] section of a config file (the only section allowed), starting from the defaults. */
MG_API mg_status mg_gpt_config_read(const char *path, mg_gpt_config *out);
/* Checkpoint metadata: format and every config key, ln_eps and attn_scale as the values the model
 * computes with (docs/checkpoint-format.md); strings written into `buf` (the mg_st_meta point into
 * it). Returns the number of entries (<= MG_GPT_META_MAX). */
#define MG_GPT_META_MAX 24
#define MG_GPT_META_LEN 128
MG_API int mg_gpt_config_to_meta(const mg_gpt_config *cfg, mg_st_meta *meta, char buf[MG_GPT_META_MAX][MG_GPT_META_LEN]);
/* From an open checkpoint's metadata: format must be minigrad-gpt and every config key present
 * (the message names a missing one). Only a file without a checksum (from an older version, or
 * another tool) may lack ln_eps, attn_scale and pos_opts, which then get 1e-5, 1/sqrt(head dim)
 * and none, the values such files were made with (docs/checkpoint-format.md). Unknown keys are
 * ignored (programs add their own, e.g. a tokenizer). Reads the header only: the checksum and the
 * weights are checked when they are loaded. */
MG_API mg_status mg_gpt_config_from_file(const mg_st_file *f, mg_gpt_config *out);

typedef struct mg_gpt mg_gpt;

/* Builds the model and initialises its parameters from rng (may be NULL only if nothing random
 * is wanted, which for a GPT is never: pass one). */
MG_API mg_status mg_gpt_new(const mg_gpt_config *cfg, mg_rng *rng, mg_gpt **out);
MG_API void mg_gpt_free(mg_gpt *g);
MG_API const mg_gpt_config *mg_gpt_cfg(const mg_gpt *g);
MG_API mg_params *mg_gpt_params(const mg_gpt *g);
MG_API mg_layer *mg_gpt_layer(const mg_gpt *g); /* the root "gpt" layer */
MG_API void mg_gpt_print(const mg_gpt *g, FILE *f); /* summary table (f NULL: the log) */

/* ids (B,T) int32 -> logits (B,T,vocab). args may be NULL (evaluation from position 0). With
 * learned tables, pos0 + T must not exceed block_size (raised on ctx). */
MG_API mg_tensor *mg_gpt_forward(mg_gpt *g, mg_ctx *ctx, mg_tensor *ids, const mg_fwd *args);
/* Mean cross-entropy of forward(ids) against targets (B,T) int32; targets of -1 are ignored. */
MG_API mg_tensor *mg_gpt_loss(mg_gpt *g, mg_ctx *ctx, mg_tensor *ids, mg_tensor *targets, const mg_fwd *args);

/* ---- checkpoints (safetensors; the weights only, under the parameter names) ---- */

/* Writes every parameter with the config's metadata followed by `extra` (e.g. a tokenizer's
 * table; keys must not repeat the config's). Atomic. */
MG_API mg_status mg_gpt_save(const mg_gpt *g, const char *path, const mg_st_meta *extra, int n_extra);
/* Loads weights into an existing model. The file's metadata must describe this model (format and
 * every config key present in the file; the message names the key and both values), then every
 * tensor is checked (missing, extra, shape), the file's checksum and that every weight is finite,
 * before anything is written. */
MG_API mg_status mg_gpt_load(mg_gpt *g, const char *path);
/* Builds a model from a checkpoint's metadata alone and loads its weights. *file_out (optional)
 * receives the open file for more metadata; the caller closes it with mg_st_close. */
MG_API mg_status mg_gpt_from_checkpoint(const char *path, mg_gpt **out, mg_st_file **file_out);

/* ---- generation ---- */

/* Called for each generated token with the logits it was drawn from (before temperature and
 * filtering). Return false to stop. */
typedef bool (*mg_gen_token_fn)(void *user, int64_t step, int32_t token, const float *logits,
                                int64_t vocab);

typedef struct mg_gen_opts {
    int64_t max_new_tokens;
    float temperature;   /* 0: greedy (argmax, first maximum on ties) */
    int64_t top_k;       /* keep the k most likely tokens (0: all) */
    float top_p;         /* keep the smallest set whose probability reaches top_p (0 or >= 1: all) */
    int64_t max_context; /* crop the context to the last max_context tokens (0: the positional
                            table's length for learned tables, no limit otherwise) */
    bool no_cache;       /* recompute the whole (cropped) context for each token: the reference
                            the KV cache is tested against */
    mg_gen_token_fn on_token;
    void *user;
    /* MG_PRECISION_BF16: the products run in bf16 (mg_ctx_set_precision), the weights rounded once
     * per call and kept for every token (mg_ctx_keep_bf16_weights); attention over the KV cache
     * stays float32. Default (0) float32. */
    mg_precision precision;
} mg_gen_opts;

/* Generates up to max_new_tokens after `prompt` (n_prompt >= 1 tokens, each < vocab_size) with a
 * KV cache: the prompt is run once, then each new token costs one position. When the context
 * would outgrow the crop length, the last `crop` tokens are re-run from position 0 (what a
 * learned table demands). Tokens are written to out (room for max_new_tokens; may be NULL) and
 * their number to *n_out (may be NULL). Randomness only from rng. Memory: a step context (arena,
 * and with bf16 the weights' bf16 copies) and the KV cache, which the model keeps for its next call
 * (mg_gpt_release_generation frees them; a call made while another runs on the same model uses
 * buffers of its own). The weights are read afresh on every call. MG_ERR_INVALID (nothing generated) for a negative or
 * non-finite temperature, top_k, top_p or max_context, and for a max_new_tokens whose history or
 * KV cache would not fit the address space. */
MG_API mg_status mg_gpt_generate(mg_gpt *g, const int32_t *prompt, int64_t n_prompt, const mg_gen_opts *opts,
                          mg_rng *rng, int32_t *out, int64_t *n_out);
/* Frees the buffers mg_gpt_generate keeps for the model's next call (mg_gpt_free does too); the
 * next call allocates them again. Does nothing while a generation runs on the model. */
MG_API void mg_gpt_release_generation(mg_gpt *g);

/* Picks a token from logits (n values) with the temperature / top-k / top-p rules above, drawing
 * at most one number from rng (none when greedy). scratch: MG_SAMPLE_SCRATCH(n) bytes, or NULL to
 * have it allocated and freed inside. temperature 0 is greedy (the first maximum). Returns a
 * token in [0, n), or a negative value with mg_last_error set and nothing drawn: -1 if scratch
 * cannot be allocated; -2 for bad arguments: logits NULL, n outside 1..INT32_MAX, a temperature,
 * top_k or top_p that is negative or not finite, or a temperature > 0 without an rng. */
#define MG_SAMPLE_SCRATCH(n) ((size_t)(n) * 8u)
MG_API int32_t mg_sample_logits(const float *logits, int64_t n, float temperature, int64_t top_k, float top_p,
                         mg_rng *rng, void *scratch);

#ifdef __cplusplus
}
#endif
#endif
