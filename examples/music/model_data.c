/* The corpus as training data: the split by piece, augmented random windows, fixed validation
 * windows (see music_model.h). */
#include "music_internal.h"
#include "music_model.h"

#include "minigrad/checked.h"

#include <stdlib.h>
#include <string.h>

void music_data_free(music_data *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->pieces[i].tok);
        free(d->pieces[i].name);
    }
    free(d->pieces);
    free(d->train_idx);
    free(d->train_cum);
    memset(d, 0, sizeof *d);
}

mg_status music_data_make(music_data *d, const music_corpus *c, const char *label) {
    memset(d, 0, sizeof *d);
    if (c->n == 0)
        return mg_set_error(MG_ERR_NOT_FOUND, "%s: no MIDI files (.mid or .midi) found", label);
    if (c->n_ok == 0)
        return mg_set_error(MG_ERR_NOT_FOUND,
                            "%s: none of the %zu MIDI files found could be used (the first: %s)",
                            label, c->n, c->items[0].error ? c->items[0].error : "no reason given");
    size_t idx_bytes, cum_bytes;
    if (mg_ckd_mul_size(&idx_bytes, c->n_ok, sizeof *d->train_idx) ||
        mg_ckd_mul_size(&cum_bytes, c->n_ok + 1, sizeof *d->train_cum))
        return mg_set_error(MG_ERR_INVALID, "%s: %zu pieces: too many", label, c->n_ok);
    d->pieces = calloc(c->n_ok, sizeof *d->pieces);
    d->train_idx = malloc(idx_bytes);
    d->train_cum = malloc(cum_bytes);
    if (!d->pieces || !d->train_idx || !d->train_cum) goto nomem;
    size_t N = c->n_ok, V = N < 2 ? 0 : (N + 5) / 10;
    if (N >= 2 && V == 0) V = 1;
    for (size_t i = 0; i < c->n; i++) {
        const music_item *it = &c->items[i];
        if (it->status) continue;
        if (it->encoding.n < 2) {
            music_data_free(d);
            return mg_set_error(MG_ERR_INVALID, "%s: the corpus was loaded without its tokens",
                                it->path);
        }
        music_piece *p = &d->pieces[d->n];
        size_t tok_bytes;
        p->tok = mg_ckd_mul_size(&tok_bytes, it->encoding.n, sizeof *p->tok) ? NULL : malloc(tok_bytes);
        p->name = strdup(it->path);
        if (!p->tok || !p->name) {
            free(p->tok), free(p->name);
            goto nomem;
        }
        memcpy(p->tok, it->encoding.v, it->encoding.n * sizeof *p->tok);
        p->n = it->encoding.n;
        size_t k = d->n++;
        p->val = V > 0 && (k + 1) * V / N > k * V / N;
        if (p->val) {
            d->n_val++;
            d->val_tokens += p->n;
        } else {
            d->train_idx[d->n_train++] = k;
            d->train_tokens += p->n;
        }
    }
    d->train_cum[0] = 0;
    for (size_t i = 0; i < d->n_train; i++)
        d->train_cum[i + 1] = d->train_cum[i] + d->pieces[d->train_idx[i]].n - 1;
    return MG_OK;
nomem:
    music_data_free(d);
    return mg_set_error(MG_ERR_NOMEM, "%s: out of memory for the token streams", label);
}

void music_scratch_free(music_scratch *s) {
    music_tokens_free(&s->aug);
}

/* ids / targets from tokens src[0, m) (m may be short of T + 1: padding follows). */
static void fill(const int32_t *src, size_t m, int64_t T, int32_t *ids, int32_t *targets) {
    for (int64_t i = 0; i < T; i++) {
        ids[i] = (size_t)i < m ? src[i] : MUSIC_PERF_PAD;
        targets[i] = (size_t)i + 1 < m ? src[i + 1] : -1;
    }
}

mg_status music_window(const int32_t *tok, size_t n, size_t start, int64_t T,
                          const music_augment_opts *aug, mg_rng *rng, music_scratch *s,
                          int32_t *ids, int32_t *targets) {
    if (T < 1 || start + 1 >= n)
        return mg_set_error(
            MG_ERR_INVALID,
            "music window: start %zu of a %zu-token piece leaves nothing to predict", start, n);
    size_t want = (size_t)T + 1, avail = n - start;
    if (!aug) {
        fill(tok + start, avail < want ? avail : want, T, ids, targets);
        return MG_OK;
    }
    /* Stretching by f changes how many TIME_SHIFTs a gap takes, so the window is cut from a slice
     * longer than T + 1 and the slice grows until its augmented form fills the window (or reaches
     * the piece's end). A retry draws the same shift and stretch again: the window depends only on
     * the generator's state on entry. */
    mg_rng entry = *rng;
    size_t take = want + want / 4 + 16;
    for (;;) {
        if (take > avail) take = avail;
        *rng = entry;
        mg_status st = music_augment_tokens(tok + start, take, aug, rng, &s->aug);
        if (st) return st;
        if (s->aug.n >= want || take == avail) break;
        take *= 2;
    }
    size_t m = s->aug.n;
    if (m > want) m = want;
    fill(s->aug.v, m, T, ids, targets);
    return MG_OK;
}

/* Index of the last cum entry <= u (cum ascending, cum[0] = 0 <= u < cum[n]). */
static size_t find_piece(const uint64_t *cum, size_t n, uint64_t u) {
    size_t lo = 0, hi = n; /* cum[lo] <= u < cum[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid] <= u)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

mg_status music_batch(const music_data *d, int64_t B, int64_t T, const music_augment_opts *aug,
                         mg_rng *rng, music_scratch *s, int32_t *ids, int32_t *targets) {
    if (d->n_train == 0 || d->train_cum[d->n_train] == 0)
        return mg_set_error(MG_ERR_INVALID, "music batch: there are no training pieces");
    uint64_t total = d->train_cum[d->n_train];
    for (int64_t b = 0; b < B; b++) {
        /* 64 random bits times the number of starts, high half: uniform up to 2^-64 bias */
        uint64_t u = (uint64_t)(((unsigned __int128)mg_rng_next(rng) * total) >> 64);
        size_t k = find_piece(d->train_cum, d->n_train, u);
        const music_piece *p = &d->pieces[d->train_idx[k]];
        mg_status st = music_window(p->tok, p->n, (size_t)(u - d->train_cum[k]), T, aug, rng, s,
                                       ids + b * T, targets + b * T);
        if (st) return st;
    }
    return MG_OK;
}

void music_windows_free(music_windows *w) {
    free(w->piece);
    free(w->start);
    memset(w, 0, sizeof *w);
}

mg_status music_val_windows(const music_data *d, int64_t T, size_t max_count,
                               music_windows *w) {
    memset(w, 0, sizeof *w);
    if (T < 1) return mg_set_error(MG_ERR_INVALID, "validation windows: T = %lld", (long long)T);
    size_t total = 0;
    for (size_t i = 0; i < d->n; i++)
        if (d->pieces[i].val) total += (d->pieces[i].n - 2) / (size_t)T + 1;
    if (total == 0) return MG_OK;
    size_t count = max_count > 0 && max_count < total ? max_count : total, bytes;
    if (mg_ckd_mul_size(&bytes, count, sizeof *w->start))
        return mg_set_error(MG_ERR_INVALID, "%zu validation windows: too many", count);
    w->piece = malloc(bytes);
    w->start = malloc(bytes);
    if (!w->piece || !w->start) {
        music_windows_free(w);
        return mg_set_error(MG_ERR_NOMEM, "out of memory for %zu validation windows", count);
    }
    /* walk the cover windows in order, keeping the j-th one when it is floor(k * total / count) */
    size_t j = 0, k = 0;
    for (size_t i = 0; i < d->n && k < count; i++) {
        const music_piece *p = &d->pieces[i];
        if (!p->val) continue;
        for (size_t s = 0; s + 1 < p->n && k < count; s += (size_t)T, j++) {
            if (j != (size_t)((unsigned __int128)k * total / count)) continue;
            w->piece[k] = i;
            w->start[k++] = s;
            size_t left = p->n - 1 - s;
            w->targets += left < (size_t)T ? left : (size_t)T;
        }
    }
    w->count = k;
    return MG_OK;
}
