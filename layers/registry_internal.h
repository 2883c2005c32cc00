/* Private to layers/: the registry's commit path (shared with the plugin loader) and small helpers
 * the layer files share. */
#ifndef MG_LAYERS_REGISTRY_INTERNAL_H
#define MG_LAYERS_REGISTRY_INTERNAL_H

#include "minigrad/layer.h"
#include "minigrad/nn.h"
#include "minigrad/op.h"
#include "minigrad/plugin.h"

#include <math.h>
#include <stdio.h>

/* Checks one vtable (ABI version, struct size, name, required functions); `origin` names who
 * registers it in the message. */
mg_status mg_reg_validate(const mg_layer_vtable *vt, const char *origin);
/* Adds n validated vtables atomically: all or none (name or scheme conflicts refuse them all). */
mg_status mg_reg_commit(const mg_layer_vtable *const *vts, int n, const char *origin);
/* Comma-separated registered layer names, or positional scheme names. */
void mg_reg_names(char *buf, size_t n, bool schemes);
/* The plugin folders this build knows (generated from layers/plugin_dirs.c.in by meson): the
 * installed one relative to the library's folder ("minigrad/plugins") and as configured (absolute),
 * the build tree's root and its plugins folder. */
extern const char mg_plugin_lib_subdir[], mg_plugin_install_dir[], mg_plugin_build_root[], mg_plugin_build_dir[];
/* 1234567 -> "1,234,567" */
void mg_fmt_count(int64_t n, char *buf, size_t len);
void mg_layer_print_rows(mg_layer *const *layers, int n, FILE *f);

/* What mg_gpt_generate allocates, kept by the model from one call to the next, so that repeated
 * calls neither allocate nor fault in fresh memory: the step context (arena, scratch, kept bf16
 * weights) and the KV cache slab. One call holds them at a time: mg_gpt_gen_take returns NULL while
 * another call has them, and that call then allocates its own. */
typedef struct mg_gen_buffers {
    mg_ctx *ctx;
    float *slab;
    size_t slab_bytes;
} mg_gen_buffers;
typedef struct mg_gpt mg_gpt;
mg_gen_buffers *mg_gpt_gen_take(mg_gpt *g);
void mg_gpt_gen_give(mg_gpt *g);
void mg_gen_buffers_free(mg_gen_buffers *b);

/* The built-in layers, one file each. */
extern const mg_layer_vtable mg_layer_linear, mg_layer_embedding, mg_layer_segment_embedding,
    mg_layer_learned_pos, mg_layer_sinusoidal_pos, mg_layer_learned_sinusoidal_pos, mg_layer_rope,
    mg_layer_layernorm, mg_layer_self_attention, mg_layer_mlp, mg_layer_decoder_block, mg_layer_gpt;
/* layers helper: norm and dropout layers */
extern const mg_layer_vtable mg_layer_rms_norm, mg_layer_dropout_vt; /* mg_layer_dropout is the helper above */
/* Recurrent layers (rnn.c). */
extern const mg_layer_vtable mg_layer_lstm, mg_layer_gru;
extern const mg_layer_vtable mg_layer_conv1d, mg_layer_conv2d;

/* Fills a vtable's ABI header: abi_version and struct_size. */
#define MG_LAYER_VT_HEADER .abi_version = MG_LAYER_ABI_VERSION, .struct_size = sizeof(mg_layer_vtable)

/* Raises a programming error on ctx prefixed with the layer's name and kind. */
void mg_layer_fail(mg_layer *l, mg_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Misuse found where no context is at hand (a setter that returns nothing): the next forward of l
 * raises it on its context, as mg_layer_fail would, and runs nothing. */
void mg_layer_fail_next_forward(mg_layer *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Initialiser chosen by the common keys init = normal|uniform|zeros, std, bound. */
mg_init mg_layer_init_from(mg_config *cfg, const char *def_kind, double def_std, double def_bound);

/* True when x is float32 with last dim `dim`; otherwise fails the layer with
 * "x(shape): need float32 with last dim <what>dim" (what: "" or a name such as "in = "). */
bool mg_layer_check_last_dim(mg_layer *l, mg_ctx *ctx, const mg_tensor *x, const char *what, int64_t dim);

/* The keys of the norm layers (layernorm, rms_norm): dim (required), eps (default def_eps; an
 * explicit 0 sets zero_eps), affine (default true), frozen (default false). */
mg_layernorm_cfg mg_layer_norm_keys(mg_config *cfg, double def_eps);

/* Dropout when training with p > 0 (raises if no rng is given); x itself otherwise. */
mg_tensor *mg_layer_dropout(mg_layer *l, mg_ctx *ctx, mg_tensor *x, float p, const mg_fwd *args);

/* Sublayers the composite layers make: Linear with normal(0, std) weights and zero bias; LayerNorm. */
mg_status mg_layer_child_linear(mg_layer *self, const char *local, int64_t in, int64_t out, bool bias, double std,
                                mg_params *params, mg_layer **child);
mg_status mg_layer_child_layernorm(mg_layer *self, const char *local, int64_t dim, double eps, mg_params *params,
                                   mg_layer **child);

/* The eps of a norm layer's typed config: checked (finite, >= 0; the message names the layer and
 * its kind), then 0 takes `def` unless zero_eps asks for exactly 0. */
mg_status mg_layer_norm_eps(mg_layer *self, const char *kind, float eps, bool zero_eps, float def, float *out);

/* An activation that only feeds a Linear, fused with it (mg_gelu_linear, mg_layernorm_linear,
 * mg_merge_heads_linear in minigrad/ops.h: in bf16 the activation is kept only as the Linear's
 * bf16 copy), where `lin` is the built-in linear (and `ln` the built-in layernorm) and x fits
 * them; otherwise the unfused calls, lin(gelu(x)), lin(ln(x)), lin(merge_heads(x)) through the
 * layers (fused.c). */
mg_tensor *mg_layer_gelu_linear(mg_layer *lin, mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind, const mg_fwd *args);
mg_tensor *mg_layer_norm_linear(mg_layer *ln, mg_layer *lin, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
mg_tensor *mg_layer_merge_heads_linear(mg_layer *lin, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
/* The parts of a built-in linear / layernorm layer; false (nothing set) for any other layer. */
bool mg_layer_linear_parts(const mg_layer *l, mg_tensor **w, mg_tensor **b, int64_t *in);
bool mg_layer_layernorm_parts(const mg_layer *l, mg_tensor **w, mg_tensor **b, float *eps, int64_t *dim);
/* l(ln(x)) as mg_layer_forward would run l on ln's output, for the layers whose first op is a
 * Linear on their input (self_attention, mlp), which then take the norm into it
 * (mg_layer_norm_linear); any other l runs unfused (registry.c). */
mg_tensor *mg_layer_forward_normed(mg_layer *l, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
mg_tensor *mg_self_attention_normed(mg_layer *self, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);
mg_tensor *mg_mlp_normed(mg_layer *self, mg_layer *ln, mg_ctx *ctx, mg_tensor *x, const mg_fwd *args);

/* "(2,5,16)" in a temporary that lives until the end of the enclosing block. */
#define MG_LSHAPE(t) mg_shape_str((t), (char[80]){0}, 80)

#endif
