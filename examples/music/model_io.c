/* Music checkpoints (a GPT that speaks the performance encoding) and the validation loss. */
#include "music_model.h"

#include "cli.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mg_status music_load(const char *path, mg_gpt **g, mg_st_file **file_out) {
    *g = NULL;
    if (file_out) *file_out = NULL;
    mg_st_file *f = NULL;
    mg_status st = mg_gpt_from_checkpoint(path, g, &f);
    if (st != MG_OK) return st;
    const char *tok = mg_st_meta_get(f, MUSIC_META_TOKENIZER);
    if (!tok || strcmp(tok, MUSIC_TOKENIZER) != 0) {
        if (tok)
            st = mg_set_error(MG_ERR_FORMAT,
                              "%s: not a music model: metadata '%s' is '%s'%s, a music checkpoint "
                              "has '%s' (written by music train)",
                              path, MUSIC_META_TOKENIZER, tok,
                              strcmp(tok, "char") == 0 || strcmp(tok, "byte") == 0
                                  ? " (a textgen checkpoint?)"
                                  : "",
                              MUSIC_TOKENIZER);
        else
            st = mg_set_error(MG_ERR_FORMAT,
                              "%s: not a music model: metadata '%s' is missing, a music checkpoint "
                              "has '%s' (written by music train)",
                              path, MUSIC_META_TOKENIZER, MUSIC_TOKENIZER);
    } else if (mg_gpt_cfg(*g)->vocab_size != MUSIC_PERF_VOCAB) {
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: metadata 'vocab_size' is %lld, the performance encoding has %d",
                          path, (long long)mg_gpt_cfg(*g)->vocab_size, MUSIC_PERF_VOCAB);
    } else if (mg_gpt_cfg(*g)->block_size < 2) {
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: metadata 'block_size' is %lld, a music model needs 2 or more (music "
                          "train --block-size takes 2..%d)",
                          path, (long long)mg_gpt_cfg(*g)->block_size, EX_MAX_BLOCK);
    }
    if (st != MG_OK) {
        mg_st_close(f);
        mg_gpt_free(*g);
        *g = NULL;
        return st;
    }
    if (file_out)
        *file_out = f;
    else
        mg_st_close(f);
    return MG_OK;
}

mg_status music_eval_windows(ex_evaluator *e, mg_gpt *g, const music_data *d,
                                const music_windows *w, double *nats, int64_t *tokens) {
    double sum = 0;
    int64_t count = 0;
    for (size_t i = 0; i < w->count; i += (size_t)e->B) {
        int64_t nb = w->count - i < (size_t)e->B ? (int64_t)(w->count - i) : e->B, scored = 0;
        for (int64_t b = 0; b < nb; b++) {
            const music_piece *p = &d->pieces[w->piece[i + (size_t)b]];
            mg_status st = music_window(p->tok, p->n, w->start[i + (size_t)b], e->T, NULL, NULL,
                                           NULL, e->x + b * e->T, e->y + b * e->T);
            if (st != MG_OK) return st;
        }
        for (int64_t k = 0; k < nb * e->T; k++) scored += e->y[k] >= 0;
        float loss;
        mg_status st = ex_evaluator_loss(e, g, nb, e->T, &loss);
        if (st != MG_OK) return st;
        sum += (double)loss * (double)scored;
        count += scored;
    }
    if (nats) *nats = sum;
    if (tokens) *tokens = count;
    return MG_OK;
}
