/* gpt2_positions: how GPT-2 adds positions, at GPT-2 XL's sizes. The prompt "this is a prompt" is
 * 4 tokens (GPT-2's BPE ids for "this", " is", " a", " prompt") at positions 0..3; the learned
 * position table is 1,024 x 1,600 and the token table 50,257 x 1,600. The model input is the
 * 4 x 1,600 token matrix plus the 4 x 1,600 position matrix, rows 0..3 of the table.
 * Weights are random (normal(0, 0.02) tokens, uniform(-0.1, 0.1) positions), not GPT-2's.
 *     gpt2_positions [--vocab N]   (a smaller token table for quick runs; --help) */
#include "minigrad/minigrad.h"
#include "minigrad/layer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_CTX = 1024, N_EMBD = 1600, T = 4 };

static mg_layer *make(const char *type, const char *name, const char *keys, mg_params *P) {
    mg_config *c = mg_config_new(type);
    mg_layer *l = NULL;
    if (!c || mg_config_set_list(c, keys) != MG_OK || mg_layer_create(type, name, c, P, &l) != MG_OK) {
        fprintf(stderr, "gpt2_positions: %s\n", mg_last_error());
        exit(1);
    }
    mg_config_free(c);
    return l;
}

static void show(const char *what, const mg_tensor *t) {
    char shp[64];
    printf("%-30s %-12s", what, mg_shape_str(t, shp, sizeof shp));
    int64_t C = t->shape[t->ndim - 1];
    for (int r = 0; r < T; r++) {
        printf("%s[%d]", r ? "\n                                           " : " ", r);
        for (int c = 0; c < 4; c++) printf(" %8.5f", (double)t->data[r * C + c]);
        printf(" ...");
    }
    printf("\n");
}

int main(int argc, char **argv) {
    long vocab = 50257;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: gpt2_positions [--vocab N]\n\n"
                   "How GPT-2 adds positions, at GPT-2 XL's sizes (random weights): the 4-token prompt\n"
                   "\"this is a prompt\" through the token table and the %d x %d learned position table.\n\n"
                   "options:\n"
                   "  --vocab N   rows of the token table (1..%d, default 50257; smaller for quick runs)\n",
                   N_CTX, N_EMBD, INT32_MAX);
            return 0;
        }
        const char *v = NULL;
        if (!strcmp(a, "--vocab")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gpt2_positions: --vocab needs a value (a whole number in 1..%d)\n", INT32_MAX);
                return 2;
            }
            v = argv[++i];
        } else if (!strncmp(a, "--vocab=", 8)) {
            v = a + 8;
        } else if (a[0] == '-') {
            fprintf(stderr, "gpt2_positions: unknown option '%s' (the one option is --vocab N; see --help)\n", a);
            return 2;
        } else {
            fprintf(stderr, "gpt2_positions: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
        char *end;
        errno = 0;
        vocab = strtol(v, &end, 10);
        if (end == v || *end || errno || vocab < 1 || vocab > INT32_MAX) {
            fprintf(stderr, "gpt2_positions: --vocab: '%s' is not a whole number in 1..%d\n", v, INT32_MAX);
            return 2;
        }
    }
    int32_t ids[T] = {5661, 318, 257, 6152}; /* "this", " is", " a", " prompt" */
    if (vocab <= 6152) /* a small table for quick runs: the same words, ids folded into it */
        for (int i = 0; i < T; i++) ids[i] %= (int32_t)(vocab > 0 ? vocab : 1);
    mg_params *P = mg_params_new();
    char keys[128];
    snprintf(keys, sizeof keys, "vocab=%ld,dim=%d", vocab, N_EMBD);
    mg_layer *wte = make("embedding", "wte", keys, P);
    snprintf(keys, sizeof keys, "max_len=%d,dim=%d", N_CTX, N_EMBD);
    mg_layer *wpe = make("learned_pos", "wpe", keys, P);
    mg_rng rng = mg_rng_make(1600);
    /* GPT-2 XL's token table is 80M values: seconds to fill, said before it starts */
    printf("gpt2_positions: filling the token table (%ld x %d) and the position table (%d x %d) at random...\n", vocab,
           N_EMBD, N_CTX, N_EMBD);
    fflush(stdout);
    if (mg_params_alloc(P, &rng) != MG_OK) {
        fprintf(stderr, "gpt2_positions: %s\n", mg_last_error());
        return 1;
    }
    mg_layer_print(wte, stdout);
    mg_layer_print(wpe, stdout);
    printf("\nprompt \"this is a prompt\": ids %d %d %d %d at positions 0 1 2 3\n\n", ids[0], ids[1], ids[2], ids[3]);

    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *idt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, ids);
    mg_tensor *tok = mg_layer_forward(wte, ctx, idt, NULL);                            /* (1,4,1600) */
    mg_tensor *pos = mg_layer_forward(wpe, ctx, mg_zeros(ctx, 2, (int64_t[]){T, N_EMBD}), NULL); /* rows 0..3 */
    mg_tensor *sum = mg_layer_forward(wpe, ctx, tok, NULL);                            /* what GPT-2 feeds on */
    if (!mg_ctx_ok(ctx)) return 1;
    show("token matrix wte[ids]", tok);
    show("position matrix wpe[0..3]", pos);
    show("input = tokens + positions", sum);
    int bad = 0;
    for (int i = 0; i < T * N_EMBD; i++) bad += sum->data[i] != tok->data[i] + pos->data[i];
    printf("\nsum checked element by element: %s\n", bad ? "MISMATCH" : "exact");
    mg_ctx_free(ctx);
    mg_layer_free(wpe), mg_layer_free(wte);
    mg_params_free(P);
    if (mg_stdout_check() != MG_OK) { /* the report was lost (a full disk): say so */
        fprintf(stderr, "gpt2_positions: %s\n", mg_last_error());
        return 1;
    }
    return bad ? 1 : 0;
}
