/* minigrad/layer.h: layers as modules behind one versioned vtable, the registry that maps names to
 * them, and sequential models described by a config file.
 *
 * A layer kind is an mg_layer_vtable: create from a key/value config (declaring its parameters in
 * an mg_params store), forward (composing ops, so no hand-written backward), optional parameter
 * visitor and destroy, and optional positional hooks. Built-in layers and plugins register their
 * vtables through the same call (mg_plugin_host.register_layer, see plugin.h); the registry checks
 * the ABI version and struct size of every vtable it is given.
 *
 * A positional scheme is a layer whose vtable names a `pos_scheme` (`pos=` in a model config). It
 * acts at one or more of four places:
 *   - forward:   added to the input embedding (learned, sinusoidal, both); identity otherwise;
 *   - rotate_qk: rotates each head's q and k after the projection (RoPE);
 *   - attn_bias: adds a constant bias to the attention logits (ALiBi, through mg_attn_bias_fn);
 *   - attn_bias_tensor: gives a bias tensor for the logits, made from its parameters with ops so
 *     that training reaches them (a learned relative-position bias: T5's buckets).
 * Attention layers find the scheme in mg_fwd.pos and call its hooks, so a model never needs to
 * know which scheme it runs.
 *
 * Parameters: a layer declares them with mg_layer_param, under "<prefix>.<local name>" (dotted
 * PyTorch-style paths, e.g. "h.0.attn.c_attn.weight"), which is also their checkpoint name.
 * Composite layers create their sublayers by registry name with mg_layer_child.
 *
 * Ownership:
 *  - mg_layer_create returns a layer the caller frees with mg_layer_free; a layer owns its state
 *    (vt->instance_size zeroed bytes), its children and copies of its names. Parameters belong to
 *    the mg_params store, which must outlive the layer.
 *  - Registered vtables are borrowed and must stay valid for the life of the process (a plugin is
 *    never unloaded once one of its layers is registered).
 *  - An mg_model owns its parameter store and layers.
 * Errors: create/build functions return mg_status with mg_last_error naming the layer, file, line
 * and key; misuse in forward (wrong shapes) is a programming error raised on the mg_ctx.
 * Thread safety: the registry is guarded by a lock; a layer instance is not (one step at a time).
 */
#ifndef MINIGRAD_LAYER_H
#define MINIGRAD_LAYER_H

#include "minigrad/export.h"

#include <stdio.h>

#include "minigrad/config.h"
#include "minigrad/ops.h"
#include "minigrad/params.h"
#include "minigrad/rng.h"
#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any change to the layout of mg_layer_vtable, mg_fwd or mg_kv_cache, or to the meaning
 * of a hook. The registry accepts every version from MG_LAYER_ABI_MIN on: a newer one only adds
 * optional hooks in what an older one left zero (reserved), which an older vtable never sets.
 *   1: the first.
 *   2: attn_bias_tensor, in the first reserved slot. A host of ABI 1 would leave that hook uncalled
 *      (silently training without the scheme's bias), so it must refuse a vtable of ABI 2. */
#define MG_LAYER_ABI_VERSION 2u
#define MG_LAYER_ABI_MIN 1u

typedef struct mg_layer mg_layer;

/* Per-attention-layer key/value cache for incremental decoding. Whoever makes it owns k and v. */
typedef struct mg_kv_cache {
    float *k, *v;          /* (B, H, cap, D) each */
    int64_t B, H, cap, D;  /* shape the buffers were made for */
    int64_t len;           /* positions filled; the attention layer appends and advances it */
} mg_kv_cache;

/* What a forward pass needs besides its input. A zeroed struct means: evaluation, positions from
 * 0, no cache. */
typedef struct mg_fwd {
    int64_t pos0;       /* absolute position of the first row of x (incremental decoding) */
    bool train;         /* dropout active */
    mg_rng *rng;        /* dropout masks; required when train and a dropout p > 0 */
    mg_layer *pos;      /* the model's positional scheme, for attention hooks; may be NULL */
    mg_kv_cache *kv;    /* a self_attention layer's cache; a model passes one per block (NULL: none) */
    void *reserved[4];
} mg_fwd;

typedef void (*mg_param_visitor)(void *user, const char *name, mg_tensor *t);

typedef struct mg_layer_vtable {
    uint32_t abi_version;   /* MG_LAYER_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(mg_layer_vtable) as the layer was compiled */
    const char *name;       /* registry key: lower-case, [a-z0-9_], e.g. "linear" */
    const char *summary;    /* one line for listings */
    const char *pos_scheme; /* positional schemes: the name `pos=` selects ("alibi"); NULL otherwise */
    size_t instance_size;   /* bytes of private state the host allocates (zeroed) for each instance */

    /* Reads keys from cfg (mg_config_* getters), declares parameters with mg_layer_param, creates
     * sublayers with mg_layer_child, sets its output shape string. Return MG_OK or an error with
     * mg_set_error (a config getter error: return mg_config_status(cfg)). Called before the
     * store is allocated: parameter data is not there yet. */
    mg_status (*create)(mg_layer *self, mg_config *cfg, mg_params *params);
    /* Composes ops. args is never NULL. */
    mg_tensor *(*forward)(mg_layer *self, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
    /* Optional: NULL visits what mg_layer_param declared, then the children. */
    void (*visit_params)(mg_layer *self, mg_param_visitor fn, void *user);
    /* Optional: frees what the layer allocated itself (not its state block, not children). */
    void (*destroy)(mg_layer *self);

    /* Positional hooks (optional). q and k are (B,H,T,D); q's first row sits at absolute position
     * q_pos0, k's at k_pos0. The hook replaces *q and *k with rotated tensors. */
    void (*rotate_qk)(mg_layer *self, mg_ctx *ctx, mg_tensor **q, mg_tensor **k, int64_t q_pos0,
                      int64_t k_pos0);
    /* Sets opts->bias and opts->bias_user (data the layer owns) for attention with n_head heads;
     * opts->causal says which kind of attention it is. Raise on ctx if it cannot serve n_head. */
    void (*attn_bias)(mg_layer *self, mg_ctx *ctx, int64_t n_head, mg_attn_opts *opts);
    /* (ABI 2) Gives the bias tensor for the logits of attention with n_head heads, Tq queries (the
     * first at absolute position opts->q_pos0) and Tk keys (positions 0..Tk-1), opts->causal
     * saying which kind: float32 (H,Tq,Tk) or (1,H,Tq,Tk), made with ops from the layer's
     * parameters so their gradient flows through the tape (mg_attn_opts.bias_tensor). NULL: no
     * bias. Raise on ctx if it cannot serve the shape. */
    mg_tensor *(*attn_bias_tensor)(mg_layer *self, mg_ctx *ctx, int64_t n_head, int64_t Tq, int64_t Tk,
                                   const mg_attn_opts *opts);

    void *reserved[3]; /* zero: room to grow without breaking plugins */
} mg_layer_vtable;

/* ---- registry ---- */

/* Registers a vtable (what mg_plugin_host.register_layer does for built-ins and plugins alike).
 * Refused: wrong abi_version, struct_size smaller than this header's vtable, missing name, create
 * or forward, a name already registered, a pos_scheme already taken. The message names the layer,
 * both versions or sizes, and who registered the other one. */
MG_API mg_status mg_register_layer(const mg_layer_vtable *vt);
MG_API const mg_layer_vtable *mg_layer_find(const char *name);
MG_API const mg_layer_vtable *mg_layer_find_pos(const char *scheme); /* by pos_scheme */
MG_API int mg_layer_registered_count(void);
MG_API const mg_layer_vtable *mg_layer_registered(int i); /* registration order; NULL if out of range */
/* Where a layer kind came from: "built-in" or the plugin's path. */
MG_API const char *mg_layer_origin(const char *name);

/* ---- instances ---- */

/* Creates a layer of kind `type` named `prefix` ("" for a root whose parameters have plain names).
 * Declares its parameters in `params` (not yet allocated). Checks that every key of cfg was used. */
MG_API mg_status mg_layer_create(const char *type, const char *prefix, mg_config *cfg, mg_params *params,
                          mg_layer **out);
MG_API void mg_layer_free(mg_layer *l); /* NULL is a no-op */

/* Typed construction, the main path from C: makes a layer of kind vt named `prefix` and runs
 * init(self, cfg, params) in place of vt->create, with cfg the layer's own config struct (e.g. an
 * mg_linear_cfg). A layer kind with a typed constructor has its vt->create read the string config
 * into that struct and call the same init. Returns NULL with mg_last_error on failure. */
typedef mg_status (*mg_layer_init_fn)(mg_layer *self, const void *cfg, mg_params *params);
MG_API mg_layer *mg_layer_new(const mg_layer_vtable *vt, const char *prefix, mg_params *params, mg_layer_init_fn init,
                              const void *cfg);

/* Runs vt->forward (the placeholder if ctx has failed). args may be NULL (a zeroed mg_fwd).
 * Forward runs inside the error scope "<prefix> (<kind>)" (tensor.h: mg_ctx_push_scope), so an op
 * failing anywhere inside names the innermost layer, built-in or plugin alike.
 * What forward returns is checked: not NULL, a well-formed tensor (known dtype, 0..MG_MAX_DIMS dims
 * whose product is numel, data present), and of the shape the layer declared with
 * mg_layer_set_shape, when it declared one in the form "(B,T,768)" or "(...,768)": each number is
 * the size of the output's dim at that place counted from the end; a name (B, T, C) matches any
 * size. A fault is raised on ctx naming the layer, its kind and where that kind comes from (the
 * plugin's file), and the placeholder is returned, never NULL. */
MG_API mg_tensor *mg_layer_forward(mg_layer *l, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
/* As mg_layer_forward, and the output must also have exactly `ndim` dims of sizes `shape` (-1:
 * any size): what the caller needs of a layer it did not write, e.g. a positional scheme from a
 * plugin that must give back (B,T,C). ndim < 0 checks no more than mg_layer_forward. */
MG_API mg_tensor *mg_layer_forward_expect(mg_layer *l, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args, int ndim,
                                          const int64_t *shape);

MG_API const mg_layer_vtable *mg_layer_vt(const mg_layer *l);
MG_API const char *mg_layer_prefix(const mg_layer *l);
MG_API void *mg_layer_state(const mg_layer *l);

/* For use inside create: */
/* Declares "<prefix>.<local>" (or `local` at a root) and remembers it as this layer's. NULL (with
 * mg_last_error) on failure; the store's rules apply (unique name, positive dims). */
MG_API mg_tensor *mg_layer_param(mg_layer *self, mg_params *params, const char *local, int ndim,
                          const int64_t *shape, mg_init init, uint32_t flags);
/* Declares a buffer "<prefix>.<local>": state the layer keeps and updates itself (running
 * statistics, a fixed table), saved and loaded with the weights but never trained (MG_BUFFER,
 * params.h: no gradient, no optimizer update, no weight decay). Same rules and result as
 * mg_layer_param. */
MG_API mg_tensor *mg_layer_buffer(mg_layer *self, mg_params *params, const char *local, int ndim,
                                  const int64_t *shape, mg_init init);
/* Creates sublayer "<prefix>.<local>" of kind `type` ("" for local keeps the parent's prefix, so a
 * wrapper can own a layer under its own name). The parent owns it. */
MG_API mg_status mg_layer_child(mg_layer *self, const char *local, const char *type, mg_config *cfg,
                         mg_params *params, mg_layer **out);
/* The output shape shown by the summary, e.g. "(B,T,768)", and checked after every forward (see
 * mg_layer_forward). */
MG_API void mg_layer_set_shape(mg_layer *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Positional layers with a table: how many positions it covers (generation crops the context to
 * it). 0 (the default) means any position works. */
MG_API void mg_layer_set_pos_limit(mg_layer *self, int64_t n);
MG_API int64_t mg_layer_pos_limit(const mg_layer *l);

/* This layer's own parameter declared as `local` ("weight"), or NULL. */
MG_API mg_tensor *mg_layer_get_param(const mg_layer *l, const char *local);

MG_API int mg_layer_child_count(const mg_layer *l);
MG_API mg_layer *mg_layer_child_at(const mg_layer *l, int i);
MG_API mg_layer *mg_layer_find_child(const mg_layer *l, const char *local);
/* The first layer in l's subtree (l included, depth first) with a pos_scheme, or NULL. */
MG_API mg_layer *mg_layer_find_positional(mg_layer *l);

/* Visits every parameter of the layer and its sublayers (buffers included). */
MG_API void mg_layer_visit_params(mg_layer *l, mg_param_visitor fn, void *user);
MG_API int64_t mg_layer_numel(mg_layer *l);
MG_API int64_t mg_layer_trainable_numel(mg_layer *l); /* without frozen parameters and buffers */

/* The summary table (one row per layer, indented by depth: name, kind, output shape, parameter
 * shapes and counts; a total at the end, which also says how many are trainable when some are
 * frozen or buffers), written to f, or to the log at INFO level when f is
 * NULL. */
MG_API void mg_layer_print(mg_layer *l, FILE *f);

/* ---- sequential models from a config file ---- */

typedef struct mg_model mg_model;

/* One layer per section, in order, each section naming a registered layer kind; the reserved key
 * `name` gives its parameter prefix (default "layers.<i>"). Parameters are allocated and
 * initialised from rng. Prints the summary table to the log. */
MG_API mg_status mg_model_build(const mg_cfg_file *f, mg_rng *rng, mg_model **out);
MG_API mg_status mg_model_from_file(const char *path, mg_rng *rng, mg_model **out);
MG_API void mg_model_free(mg_model *m);
MG_API mg_params *mg_model_params(const mg_model *m);
MG_API int mg_model_count(const mg_model *m);
MG_API mg_layer *mg_model_layer(const mg_model *m, int i);
/* Runs the layers in order. When args->pos is NULL the model's first positional layer is used. */
MG_API mg_tensor *mg_model_forward(mg_model *m, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
MG_API void mg_model_print(const mg_model *m, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
