/* The model side of the text generator: the vocabulary in checkpoints, loading, evaluation. */
#include "textgen.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_vocab_meta(const tg_vocab *v, mg_st_meta meta[2]) {
    meta[0] = (mg_st_meta){TG_META_TOKENIZER, tg_tokenizer_name(v->kind)};
    if (v->kind == TG_TOKENIZER_BYTE) return 1;
    meta[1] = (mg_st_meta){TG_META_CHARS, v->chars};
    return 2;
}

mg_status tg_load(const char *path, mg_gpt **g, tg_vocab *v, mg_st_file **file_out) {
    mg_st_file *f = NULL;
    *g = NULL;
    memset(v, 0, sizeof *v);
    if (file_out) *file_out = NULL;
    mg_status st = mg_gpt_from_checkpoint(path, g, &f);
    if (st != MG_OK) return st;
    st = tg_vocab_from_meta(v, mg_st_meta_get(f, TG_META_TOKENIZER), mg_st_meta_get(f, TG_META_CHARS),
                                 mg_gpt_cfg(*g)->vocab_size, path);
    if (st != MG_OK) {
        mg_st_close(f);
        mg_gpt_free(*g);
        *g = NULL;
        return st;
    }
    if (file_out) *file_out = f;
    else mg_st_close(f);
    return MG_OK;
}

/* One forward pass over nb windows of length len starting at starts[0..nb). */
static mg_status eval_batch(ex_evaluator *e, mg_gpt *g, const tg_vocab *v, const int32_t *ids,
                            const size_t *starts, int64_t nb, int64_t len, tg_loss *sum) {
    int64_t chars = 0;
    for (int64_t b = 0; b < nb; b++) {
        memcpy(e->x + b * len, ids + starts[b], (size_t)len * sizeof *e->x);
        memcpy(e->y + b * len, ids + starts[b] + 1, (size_t)len * sizeof *e->y);
    }
    if (v->kind == TG_TOKENIZER_BYTE)
        for (int64_t i = 0; i < nb * len; i++) chars += (e->y[i] & 0xC0) != 0x80;
    else
        chars = nb * len;
    float loss;
    mg_status st = ex_evaluator_loss(e, g, nb, len, &loss);
    if (st != MG_OK) return st;
    sum->nats += (double)loss * (double)(nb * len);
    sum->tokens += nb * len;
    sum->chars += chars;
    return MG_OK;
}

mg_status tg_eval_windows(ex_evaluator *e, mg_gpt *g, const tg_vocab *v, const int32_t *ids,
                               const tg_windows *w, int64_t last_len, tg_loss *sum) {
    if (w->len > e->T)
        return mg_set_error(MG_ERR_INVALID, "evaluation windows of %lld tokens exceed the %lld the buffers hold",
                            (long long)w->len, (long long)e->T);
    size_t full = last_len > 0 && w->count > 0 ? w->count - 1 : w->count;
    mg_status st = MG_OK;
    for (size_t i = 0; i < full && st == MG_OK; i += (size_t)e->B) {
        int64_t nb = full - i < (size_t)e->B ? (int64_t)(full - i) : e->B;
        st = eval_batch(e, g, v, ids, w->start + i, nb, w->len, sum);
    }
    if (st == MG_OK && full < w->count) st = eval_batch(e, g, v, ids, w->start + full, 1, last_len, sum);
    return st;
}
