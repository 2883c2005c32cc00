/* Sampling and generation with a KV cache.
 *
 * The prompt runs once, filling one cache per block; then each new token runs alone at position
 * pos0 = the cache length and attends over the cache (mg_attention's q_pos0). When a crop length
 * applies (learned positional tables, or opts->max_context) and the context would outgrow it, the
 * last `crop` tokens are re-run from position 0: that is what "crop the context to block_size"
 * means for a table indexed by absolute position, and it keeps the cached and uncached paths
 * computing the same thing. */
#include "minigrad/checked.h"
#include "minigrad/gpt.h"
#include "registry_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float p;
    int32_t i;
} cand;

/* Descending by value; ties by index so the order is total and the draw reproducible. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

int32_t mg_sample_logits(const float *logits, int64_t n, float temperature, int64_t top_k, float top_p, mg_rng *rng,
                         void *scratch) {
    /* Bad arguments are -2, kept apart from -1 (no scratch): either way no token, and a message. */
    if (!logits || n <= 0 || n > INT32_MAX) {
        mg_set_error(MG_ERR_INVALID, "mg_sample_logits: need logits and 1..%d of them (got %lld%s)", INT32_MAX,
                     (long long)n, logits ? "" : ", logits NULL");
        return -2;
    }
    if (!(temperature >= 0.0f) || !isfinite(temperature) || top_k < 0 || !(top_p >= 0.0f) || !isfinite(top_p)) {
        mg_set_error(MG_ERR_INVALID,
                     "mg_sample_logits: temperature %g, top_k %lld, top_p %g: each must be finite and at least 0",
                     (double)temperature, (long long)top_k, (double)top_p);
        return -2;
    }
    if (temperature > 0.0f && !rng) {
        mg_set_error(MG_ERR_INVALID, "mg_sample_logits: sampling at temperature %g needs an rng", (double)temperature);
        return -2;
    }
    if (temperature == 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        return (int32_t)best;
    }
    void *own = NULL;
    if (!scratch && !(scratch = own = malloc(MG_SAMPLE_SCRATCH(n)))) {
        mg_set_error(MG_ERR_NOMEM, "mg_sample_logits: cannot allocate %zu bytes of scratch", MG_SAMPLE_SCRATCH(n));
        return -1;
    }
    cand *c = scratch;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int64_t i = 0; i < n; i++) c[i] = (cand){logits[i], (int32_t)i};
    int64_t keep = n;
    bool filter = (top_k > 0 && top_k < n) || (top_p > 0.0f && top_p < 1.0f);
    if (filter) {
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        if (top_k > 0 && top_k < n) keep = top_k;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < keep; i++) {
        c[i].p = expf((c[i].p - mx) / temperature);
        sum += c[i].p;
    }
    if (filter && top_p > 0.0f && top_p < 1.0f) {
        double acc = 0.0;
        int64_t j = 0;
        while (j < keep) {
            acc += c[j].p;
            j++;
            if (acc >= (double)top_p * sum) break;
        }
        keep = j;
        sum = acc;
    }
    double u = mg_rng_double(rng) * sum, acc = 0.0;
    int32_t tok = c[keep - 1].i;
    for (int64_t i = 0; i < keep; i++) {
        acc += c[i].p;
        if (u < acc) {
            tok = c[i].i;
            break;
        }
    }
    free(own);
    return tok;
}

typedef struct {
    char msg[1024];
} gen_err;

static void on_ctx_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx;
    gen_err *e = user;
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "%s", msg);
}

mg_status mg_gpt_generate(mg_gpt *g, const int32_t *prompt, int64_t n_prompt, const mg_gen_opts *opts, mg_rng *rng,
                          int32_t *out, int64_t *n_out) {
    if (n_out) *n_out = 0;
    if (!g) return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: the model is NULL");
    if (!opts) return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: opts is NULL");
    if (!prompt) return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: prompt is NULL (%lld tokens given)", (long long)n_prompt);
    if (n_prompt < 1)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: the prompt needs at least one token, got %lld",
                            (long long)n_prompt);
    if (opts->max_new_tokens < 0)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: max_new_tokens = %lld must be >= 0",
                            (long long)opts->max_new_tokens);
    const mg_gpt_config *c = mg_gpt_cfg(g);
    if (!(opts->temperature >= 0.0f && isfinite(opts->temperature)) || opts->top_k < 0 ||
        !(opts->top_p >= 0.0f && isfinite(opts->top_p)) || opts->max_context < 0)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: temperature %g, top_k %lld, top_p %g, max_context %lld: "
                                            "each must be finite and at least 0",
                            (double)opts->temperature, (long long)opts->top_k, (double)opts->top_p,
                            (long long)opts->max_context);
    if (opts->precision != MG_PRECISION_FP32 && opts->precision != MG_PRECISION_BF16)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: precision %d: expected MG_PRECISION_FP32 or "
                                            "MG_PRECISION_BF16", (int)opts->precision);
    if (opts->temperature > 0.0f && !rng)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: sampling at temperature %g needs an rng",
                            (double)opts->temperature);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab_size)
            return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: prompt token %lld is %d, outside [0, %lld)",
                                (long long)i, prompt[i], (long long)c->vocab_size);
    int64_t limit = mg_layer_pos_limit(mg_gpt_layer(g)), crop = opts->max_context > 0 ? opts->max_context : limit;
    if (limit > 0 && crop > limit)
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: max_context %lld exceeds the positional table's %lld rows",
                            (long long)crop, (long long)limit);
    /* Every size below comes from the caller's numbers: checked, so that none wraps around into a
     * small buffer that the loop would then overrun. */
    int64_t total, cap, slab_n;
    size_t hist_bytes, slab_bytes = 0;
    if (mg_ckd_add_i64(&total, n_prompt, opts->max_new_tokens) || mg_ckd_bytes(&hist_bytes, total, sizeof(int32_t)))
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: max_new_tokens %lld with a prompt of %lld tokens: the "
                                            "token history does not fit in memory's address range",
                            (long long)opts->max_new_tokens, (long long)n_prompt);
    cap = crop > 0 && crop < total ? crop : total;
    int64_t L = c->n_layer, H = c->n_head, D = c->n_embd / c->n_head, V = c->vocab_size;

    bool use_cache = !opts->no_cache && L > 0;
    if (use_cache && (mg_ckd_count3(&slab_n, 2 * L, H, cap) || mg_ckd_mul_i64(&slab_n, slab_n, D) ||
                      mg_ckd_bytes(&slab_bytes, slab_n, sizeof(float))))
        return mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: a KV cache of %lld positions for %lld layers x %lld "
                                            "heads x %lld dims does not fit in memory's address range (max_new_tokens "
                                            "%lld; set max_context or no_cache)",
                            (long long)cap, (long long)L, (long long)H, (long long)D, (long long)opts->max_new_tokens);
    /* The model's buffers from its last call when no other call holds them, else this call's own */
    mg_gen_buffers own = {NULL, NULL, 0}, *gb = mg_gpt_gen_take(g);
    const bool kept = gb != NULL;
    if (!kept) gb = &own;
    if (use_cache && gb->slab_bytes < slab_bytes + 1) {
        free(gb->slab);
        gb->slab = malloc(slab_bytes + 1);
        gb->slab_bytes = gb->slab ? slab_bytes + 1 : 0;
    }
    if (!gb->ctx) gb->ctx = mg_ctx_new(0);
    int32_t *hist = malloc(hist_bytes);
    mg_kv_cache *kv = calloc((size_t)(L ? L : 1), sizeof *kv);
    float *slab = use_cache ? gb->slab : NULL;
    void *scratch = malloc(MG_SAMPLE_SCRATCH(V));
    mg_ctx *ctx = gb->ctx;
    gen_err err = {""};
    mg_status st = MG_OK;
    if (!hist || !kv || (use_cache && !slab) || !scratch || !ctx) {
        st = mg_set_error(MG_ERR_NOMEM, "mg_gpt_generate: out of memory (KV cache of %lld positions)", (long long)cap);
        goto done;
    }
    mg_ctx_clear_error(ctx);
    mg_ctx_set_error_handler(ctx, on_ctx_error, &err);
    mg_ctx_set_grad_enabled(ctx, false);
    if (mg_ctx_precision(ctx) != opts->precision) mg_ctx_set_precision(ctx, opts->precision); /* drops bf16 copies */
    if (opts->precision == MG_PRECISION_BF16) {
        if (!mg_ctx_keeps_bf16_weights(ctx)) mg_ctx_keep_bf16_weights(ctx, true);
        else mg_ctx_refresh_bf16_weights(ctx); /* the weights may have changed since the last call */
    }
    for (int64_t l = 0; l < L && slab; l++)
        kv[l] = (mg_kv_cache){slab + (2 * l) * H * cap * D, slab + (2 * l + 1) * H * cap * D, 1, H, cap, D, 0};
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    int64_t len = n_prompt, made = 0;
    bool fresh = true;
    while (made < opts->max_new_tokens) {
        mg_ctx_reset(ctx);
        int64_t start, pos0;
        if (!use_cache || fresh || (crop > 0 && kv[0].len + 1 > crop)) {
            start = crop > 0 && len > crop ? len - crop : 0; /* (re-)run the whole cropped window */
            pos0 = 0;
            for (int64_t l = 0; l < L; l++) kv[l].len = 0;
            fresh = false;
        } else {
            start = len - 1; /* one new position */
            pos0 = kv[0].len;
        }
        int64_t T = len - start;
        mg_tensor *ids = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, hist + start);
        mg_fwd a = {.pos0 = pos0, .kv = use_cache ? kv : NULL};
        mg_tensor *logits = mg_gpt_forward(g, ctx, ids, &a);
        if (!mg_ctx_ok(ctx)) {
            st = mg_set_error(MG_ERR_INVALID, "mg_gpt_generate: %s", err.msg[0] ? err.msg : mg_ctx_error(ctx));
            break;
        }
        const float *row = logits->data + (T - 1) * V;
        int32_t tok = mg_sample_logits(row, V, opts->temperature, opts->top_k, opts->top_p, rng, scratch);
        hist[len++] = tok;
        if (out) out[made] = tok;
        made++;
        if (n_out) *n_out = made;
        if (opts->on_token && !opts->on_token(opts->user, made - 1, tok, row, V)) break;
    }
done:
    if (ctx) mg_ctx_set_error_handler(ctx, NULL, NULL); /* err goes out of scope */
    if (kept) mg_gpt_gen_give(g);
    else mg_gen_buffers_free(&own);
    free(scratch);
    free(kv);
    free(hist);
    return st;
}
