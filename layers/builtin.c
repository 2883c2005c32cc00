/* The built-in layers register here, through the host table a plugin's init gets: nothing about
 * them is special to the registry. */
#include "registry_internal.h"

mg_status mg_builtin_layers_init(const mg_plugin_host *host) {
    static const mg_layer_vtable *const builtins[] = {
        &mg_layer_linear,       &mg_layer_embedding,      &mg_layer_segment_embedding,
        &mg_layer_learned_pos,  &mg_layer_sinusoidal_pos, &mg_layer_learned_sinusoidal_pos,
        &mg_layer_rope,         &mg_layer_layernorm,      &mg_layer_self_attention,
        &mg_layer_mlp,          &mg_layer_decoder_block,  &mg_layer_gpt,
        /* norm and dropout layers */
        &mg_layer_rms_norm,     &mg_layer_dropout_vt,
        &mg_layer_lstm,         &mg_layer_gru,
        &mg_layer_conv1d,       &mg_layer_conv2d,
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        mg_status s = host->register_layer(host, builtins[i]);
        if (s != MG_OK) return s;
    }
    return MG_OK;
}
