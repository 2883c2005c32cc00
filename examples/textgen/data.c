/* The train / validation split, random training batches and fixed validation windows. */
#include "textgen.h"

#include "minigrad/checked.h"

#include <stdlib.h>
#include <string.h>

mg_status tg_data_make(tg_data *d, const tg_vocab *v, const char *text, size_t n, int64_t block,
                            const char *name) {
    memset(d, 0, sizeof *d);
    if (block < 1) return mg_set_error(MG_ERR_INVALID, "the context length must be at least 1, got %lld", (long long)block);
    if (n == 0) return mg_set_error(MG_ERR_FORMAT, "%s: the text is empty", name);
    size_t bytes;
    if (mg_ckd_mul_size(&bytes, n, sizeof *d->ids))
        return mg_set_error(MG_ERR_INVALID, "%s: %zu bytes of text: too many tokens to hold", name, n);
    d->ids = malloc(bytes);
    if (!d->ids) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory for %zu tokens", name, n);
    mg_status st = tg_encode(v, text, n, d->ids, &d->n, name);
    if (st != MG_OK) {
        tg_data_free(d);
        return st;
    }
    d->n_train = d->n / 10 * 9 + d->n % 10 * 9 / 10; /* floor(0.9 n) without overflow */
    if (d->n_train < 2) { /* no context length fits: a context of 1 and its target need 2 */
        st = mg_set_error(MG_ERR_FORMAT, "%s: the text is too short: %zu byte%s (%zu token%s); training needs at "
                          "least 3 tokens (its first 90%% must hold one token and the next one as its target)",
                          name, n, n == 1 ? "" : "s", d->n, d->n == 1 ? "" : "s");
        tg_data_free(d);
    } else if (d->n_train < (size_t)block + 1) {
        st = mg_set_error(MG_ERR_FORMAT, "%s: too short: %zu tokens give a training split (the first 90%%) of %zu, "
                          "shorter than one context window of %lld tokens plus its next-token target; use a longer "
                          "text or a smaller --block-size (at most %lld here)", name, d->n, d->n_train,
                          (long long)block, (long long)d->n_train - 1);
        tg_data_free(d);
    }
    return st;
}

void tg_data_free(tg_data *d) {
    free(d->ids);
    memset(d, 0, sizeof *d);
}

void tg_batch(const tg_data *d, int64_t B, int64_t T, mg_rng *rng, int32_t *ids, int32_t *targets) {
    uint64_t starts = d->n_train - (size_t)T; /* offsets 0 .. n_train - T - 1 */
    for (int64_t b = 0; b < B; b++) {
        /* Multiply-shift maps 64 random bits onto [0, starts) for corpora of any size. */
        size_t off = (size_t)(((unsigned __int128)mg_rng_next(rng) * starts) >> 64);
        const int32_t *src = d->ids + off;
        memcpy(ids + b * T, src, (size_t)T * sizeof *ids);
        memcpy(targets + b * T, src + 1, (size_t)T * sizeof *targets);
    }
}

void tg_windows_free(tg_windows *w) {
    free(w->start);
    memset(w, 0, sizeof *w);
}

mg_status tg_val_windows(tg_windows *w, size_t n, int64_t T, size_t count) {
    memset(w, 0, sizeof *w);
    if (n < 2 || count == 0 || T < 1) return MG_OK;
    w->len = (size_t)T < n - 1 ? T : (int64_t)(n - 1);
    size_t span = n - 1 - (size_t)w->len; /* last possible start */
    if (count > span + 1) count = span + 1;
    size_t bytes;
    if (mg_ckd_mul_size(&bytes, count, sizeof *w->start))
        return mg_set_error(MG_ERR_INVALID, "%zu validation windows: too many", count);
    w->start = malloc(bytes);
    if (!w->start) return mg_set_error(MG_ERR_NOMEM, "out of memory for %zu validation windows", count);
    for (size_t i = 0; i < count; i++)
        w->start[i] = count == 1 ? 0 : (size_t)((unsigned __int128)span * i / (count - 1));
    w->count = count;
    return MG_OK;
}

mg_status tg_cover_windows(tg_windows *w, size_t n, int64_t T, int64_t *last_len) {
    memset(w, 0, sizeof *w);
    *last_len = 0;
    if (n < 2 || T < 1) return MG_OK;
    size_t targets = n - 1, count = targets / (size_t)T + (targets % (size_t)T != 0), bytes;
    if (mg_ckd_mul_size(&bytes, count, sizeof *w->start))
        return mg_set_error(MG_ERR_INVALID, "%zu windows: too many", count);
    w->start = malloc(bytes);
    if (!w->start) return mg_set_error(MG_ERR_NOMEM, "out of memory for %zu windows", count);
    for (size_t i = 0; i < count; i++) w->start[i] = i * (size_t)T;
    w->count = count;
    w->len = T;
    *last_len = (int64_t)(targets - (count - 1) * (size_t)T);
    return MG_OK;
}
