/* bert_embedding: BERT's input embedding from minigrad layers,
 *     LayerNorm(token_embedding[ids] + position_embedding[0..T-1] + segment_embedding[segments])
 * The point it makes: positions come from their own [max_len, dim] table, never from the token
 * table, so a sequence may be longer than the vocabulary is large (here T = 10 > vocab = 6).
 * Indexing positions into the token table would fail at position 6.
 * Parameter names follow Hugging Face's BERT (embeddings.word_embeddings.weight, ...).
 *     bert_embedding   (no options; --help says what it does) */
#include "minigrad/minigrad.h"
#include "minigrad/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = 6, MAX_LEN = 16, DIM = 8, B = 2, T = 10 };

static mg_layer *make(const char *type, const char *name, const char *keys, mg_params *P) {
    mg_config *c = mg_config_new(type);
    mg_layer *l = NULL;
    if (!c || mg_config_set_list(c, keys) != MG_OK || mg_layer_create(type, name, c, P, &l) != MG_OK) {
        fprintf(stderr, "bert_embedding: %s\n", mg_last_error());
        exit(1);
    }
    mg_config_free(c);
    return l;
}

static void show(const char *what, const mg_tensor *t, int rows) {
    char shp[64];
    printf("%-28s %s\n", what, mg_shape_str(t, shp, sizeof shp));
    int64_t C = t->shape[t->ndim - 1];
    for (int r = 0; r < rows; r++) {
        printf("    [%d]", r);
        for (int64_t c = 0; c < C; c++) printf(" %7.4f", (double)t->data[r * C + c]);
        printf("\n");
    }
}

int main(int argc, char **argv) {
    if (argc > 1) {
        if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            printf("usage: bert_embedding\n\n"
                   "Builds BERT's input embedding from minigrad layers,\n"
                   "    LayerNorm(token_embedding[ids] + position_embedding[0..T-1] + segment_embedding[segments]),\n"
                   "runs it on two packed sentences of T = %d tokens over a vocabulary of %d (positions have their\n"
                   "own table of %d rows, so a sequence may be longer than the vocabulary is large), prints the\n"
                   "parameters and the embeddings, and checks that every output row is normalised.\n"
                   "It takes no options.\n", T, VOCAB, MAX_LEN);
            return 0;
        }
        const char *a = argv[1];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) a = argv[2]; /* --help with something else */
        if (!strncmp(a, "-", 1))
            fprintf(stderr, "bert_embedding: unknown option '%s': it takes no options (see --help)\n", a);
        else
            fprintf(stderr, "bert_embedding: unexpected argument '%s': it takes no arguments (see --help)\n", a);
        return 2;
    }
    mg_params *P = mg_params_new();
    char keys[128];
    snprintf(keys, sizeof keys, "vocab=%d,dim=%d", VOCAB, DIM);
    mg_layer *tok = make("embedding", "embeddings.word_embeddings", keys, P);
    snprintf(keys, sizeof keys, "max_len=%d,dim=%d", MAX_LEN, DIM);
    mg_layer *pos = make("learned_pos", "embeddings.position_embeddings", keys, P);
    snprintf(keys, sizeof keys, "n_segments=2,dim=%d", DIM);
    mg_layer *seg = make("segment_embedding", "embeddings.token_type_embeddings", keys, P);
    snprintf(keys, sizeof keys, "dim=%d,eps=1e-12", DIM); /* BERT's LayerNorm eps */
    mg_layer *ln = make("layernorm", "embeddings.LayerNorm", keys, P);
    mg_rng rng = mg_rng_make(2024);
    if (mg_params_alloc(P, &rng) != MG_OK) {
        fprintf(stderr, "bert_embedding: %s\n", mg_last_error());
        return 1;
    }
    printf("parameters:\n");
    for (int i = 0; i < mg_params_len(P); i++) {
        char shp[64];
        mg_tensor *p = mg_params_at(P, i);
        printf("    %-40s %s\n", p->name, mg_shape_str(p, shp, sizeof shp));
    }

    /* two sentences packed as [A A A A B B B B B B] and [A A A A A A A B B B] */
    int32_t ids[B * T] = {0, 3, 5, 1, 0, 2, 4, 4, 1, 5, /* */ 0, 1, 1, 2, 3, 5, 1, 0, 4, 1};
    int32_t segs[B * T] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, /* */ 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *idt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, ids);
    mg_tensor *sgt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, segs);
    printf("\nsequence length T = %d exceeds the token vocabulary (%d): positions use their own table (%d rows)\n\n",
           T, VOCAB, MAX_LEN);
    mg_tensor *te = mg_layer_forward(tok, ctx, idt, NULL);
    mg_tensor *tp = mg_layer_forward(pos, ctx, te, NULL); /* + position rows 0..T-1 */
    mg_tensor *sg = mg_layer_forward(seg, ctx, sgt, NULL);
    mg_tensor *sum = mg_add(ctx, tp, sg);
    mg_tensor *out = mg_layer_forward(ln, ctx, sum, NULL);
    if (!mg_ctx_ok(ctx)) return 1;
    show("token embeddings", te, 0);
    show("token + position", tp, 0);
    show("segment embeddings", sg, 0);
    show("sum", sum, 0);
    show("LayerNorm(sum), batch 0", out, T);
    /* every row of the output has mean 0 and variance 1 (the LayerNorm gain is 1, bias 0) */
    double worst = 0;
    for (int r = 0; r < B * T; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < DIM; c++) m += out->data[r * DIM + c];
        m /= DIM;
        for (int c = 0; c < DIM; c++) v += (out->data[r * DIM + c] - m) * (out->data[r * DIM + c] - m);
        v /= DIM;
        worst = fmax(worst, fmax(fabs(m), fabs(v - 1)));
    }
    printf("\nrows normalised: max |mean|, |var - 1| = %.2e\n", worst);
    mg_ctx_free(ctx);
    mg_layer_free(ln), mg_layer_free(seg), mg_layer_free(pos), mg_layer_free(tok);
    mg_params_free(P);
    if (mg_stdout_check() != MG_OK) { /* the report was lost (a full disk): say so */
        fprintf(stderr, "bert_embedding: %s\n", mg_last_error());
        return 1;
    }
    return worst < 1e-4 ? 0 : 1;
}
