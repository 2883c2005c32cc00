/* The GPT model: gradient checks of the whole model for every positional scheme, the golden
 * logits of docs/posenc-benchmark.md section 7 (the bidirectional classifier built from the same
 * layers) with its permutation (none) and reflection (alibi) equivariances, incremental decoding
 * and KV-cache generation against full recomputation, sampling rules, checkpoints (bit-exact round
 * trip, every malformed case at the model level, a good file never harmed, ln_eps and attn_scale
 * recorded and defaulted for older files), and exact resume.
 * alibi comes from the plugin in the build tree, loaded on demand as a user's model would. */
#include "layer_check.h"
#include "posenc_golden.h"
#include "test_util.h"
#include "minigrad/checkpoint.h"
#include "minigrad/gpt.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const schemes[] = {"none", "learned", "sinusoidal", "learned+sinusoidal", "rope", "alibi"};
enum { N_SCHEMES = 6 };

static char tmpdir[256];

static void setup(void) {
    mg_log_set(lc_quiet_log, NULL);
    lc_use_build_plugins();
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_test_gpt");
}

static void teardown(void) { ck_assert(tu_remove_tree(tmpdir)); }

static const char *tmp_path(const char *name) { return tu_path_in(tmpdir, name); }

static mg_gpt_config small(const char *pos) {
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = 11, c.block_size = 8, c.n_layer = 2, c.n_head = 2, c.n_embd = 8;
    c.init_std = 0.3f; /* larger than GPT-2's so attention and logits are far from uniform */
    snprintf(c.pos, sizeof c.pos, "%s", pos);
    return c;
}

/* The six, then for the decoding tests a plugin scheme whose logit bias is a trained table
 * (t5_bias, its table drawn wide so the bias matters). */
static mg_gpt_config small_any(int i) {
    if (i < N_SCHEMES) return small(schemes[i]);
    mg_gpt_config c = small("t5_bias");
    snprintf(c.pos_opts, sizeof c.pos_opts, "num_buckets=8,max_distance=6,init=uniform,bound=1");
    return c;
}

static mg_gpt *make(const mg_gpt_config *c, uint64_t seed) {
    mg_rng rng = mg_rng_make(seed);
    mg_gpt *g = NULL;
    ck_assert_msg(mg_gpt_new(c, &rng, &g) == MG_OK, "%s: %s", c->pos, mg_last_error());
    return g;
}

/* ---- gradient check of the whole model ---- */

typedef struct {
    mg_gpt *g;
    int32_t ids[2 * 6];
} gpt_run;

static mg_tensor *gpt_fwd(mg_ctx *ctx, mg_tensor *const *in, void *user) {
    (void)in; /* no float input: the ids go through user */
    gpt_run *r = user;
    return mg_gpt_forward(r->g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 6}, r->ids), NULL);
}

/* Every scheme on the causal GPT-2 layout, then the posenc classifier layout (bidirectional, erf,
 * sqrt(d) embedding scale, untied head with bias) with alibi and rope.
 * Tolerance: h 3e-3, atol 3e-3, rtol 3e-2, 24 elements per tensor: two blocks deep, h 1e-2 already
 * shows O(h^2) truncation with the sqrt(d)-scaled embedding, while float32 rounding costs only
 * about 1e-4 at h 3e-3 (L ~ 10, relative error 6e-8, divided by 2h). */
START_TEST(gpt_gradcheck) {
    mg_gpt_config c;
    if (_i < N_SCHEMES) {
        c = small(schemes[_i]);
    } else {
        c = small(_i == N_SCHEMES ? "alibi" : "rope");
        c.causal = false, c.gelu = MG_GELU_ERF, c.emb_scale = sqrtf(8.0f), c.tied_head = false, c.head_bias = true;
    }
    gpt_run r = {make(&c, 10 + (uint64_t)_i), {0}};
    mg_params *P = mg_gpt_params(r.g);
    mg_rng rng = mg_rng_make(99);
    for (int i = 0; i < mg_params_len(P); i++) { /* LayerNorm gains and biases off their 1 and 0 */
        mg_tensor *p = mg_params_at(P, i);
        if (strstr(p->name, "ln_") || strstr(p->name, "bias"))
            for (int64_t j = 0; j < p->numel; j++) p->data[j] += mg_rng_range(&rng, -0.3f, 0.3f);
    }
    for (int i = 0; i < 12; i++) r.ids[i] = (int32_t)mg_rng_below(&rng, 11);
    char what[96];
    snprintf(what, sizeof what, "gpt pos=%s%s", c.pos, c.causal ? "" : " (classifier layout)");
    int64_t n = lc_gradcheck(what, gpt_fwd, &r, P, NULL, 0, (lc_tol){3e-3f, 3e-3f, 3e-2f, 24}, 7 + (uint64_t)_i);
    int64_t want = 0; /* 24 elements of each parameter, all of a smaller one */
    for (int i = 0; i < mg_params_len(P); i++) want += mg_params_at(P, i)->numel < 24 ? mg_params_at(P, i)->numel : 24;
    ck_assert_int_eq(n, want);
    ck_assert_int_gt(n, 200);
    mg_gpt_free(r.g);
}
END_TEST

START_TEST(loss_is_mean_cross_entropy) {
    mg_gpt_config c = small("learned");
    mg_gpt *g = make(&c, 3);
    mg_ctx *ctx = mg_ctx_new(0);
    int32_t ids[12], tg[12];
    mg_rng rng = mg_rng_make(4);
    for (int i = 0; i < 12; i++) ids[i] = (int32_t)mg_rng_below(&rng, 11), tg[i] = (int32_t)mg_rng_below(&rng, 11);
    tg[5] = -1; /* ignored */
    mg_tensor *idt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 6}, ids);
    mg_tensor *tgt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 6}, tg);
    mg_tensor *logits = mg_gpt_forward(g, ctx, idt, NULL);
    ck_assert_int_eq(logits->shape[0], 2);
    ck_assert_int_eq(logits->shape[1], 6);
    ck_assert_int_eq(logits->shape[2], 11);
    double want = 0.0;
    for (int p = 0; p < 12; p++) {
        if (tg[p] < 0) continue;
        const float *l = logits->data + p * 11;
        double mx = l[0], s = 0.0;
        for (int v = 1; v < 11; v++) mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < 11; v++) s += exp(l[v] - mx);
        want += -(l[tg[p]] - mx - log(s));
    }
    want /= 11.0;
    mg_tensor *loss = mg_gpt_loss(g, ctx, idt, tgt, NULL);
    ck_assert_double_eq_tol(loss->data[0], want, 1e-5);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* ---- docs/posenc-benchmark.md section 7 ---- */

static mg_gpt *posenc_model(const char *pos) {
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = 16, c.block_size = 32, c.n_layer = 2, c.n_head = 4, c.n_embd = 64;
    c.causal = false, c.gelu = MG_GELU_ERF, c.emb_scale = 8.0f, c.tied_head = false, c.head_bias = true;
    snprintf(c.pos, sizeof c.pos, "%s", pos);
    mg_gpt *g = make(&c, 1);
    pg_fill_section7(g, pos);
    int n_expected = 1 + 2 * 12 + 2 + 2 + (strncmp(pos, "learned", 7) == 0);
    ck_assert_int_eq(mg_params_len(mg_gpt_params(g)), n_expected); /* every parameter was filled */
    ck_assert_int_eq(mg_params_numel(mg_gpt_params(g)), strncmp(pos, "learned", 7) == 0 ? 104208 : 102160);
    return g;
}

/* The first two sequences of rev/val (docs/posenc-benchmark.md section 2). */
static void rev_val_first2(int32_t x[64]) {
    mg_rng r = mg_rng_make(0x5EED0001);
    for (int i = 0; i < 64; i++) x[i] = (int32_t)mg_rng_below(&r, 16);
    static const int32_t row0[32] = {0, 13, 7, 2, 5, 9, 8, 14, 4, 10, 12, 2, 11, 11, 4, 7,
                                     3, 0, 14, 15, 2, 11, 7, 10, 14, 0, 0, 10, 0, 12, 4, 5};
    ck_assert_mem_eq(x, row0, sizeof row0);
}

static mg_tensor *logits_of(mg_gpt *g, mg_ctx *ctx, int32_t *x, int64_t B) {
    mg_tensor *y = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, 32}, x), NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    return y;
}

START_TEST(posenc_golden_logits) {
    mg_gpt *g = posenc_model(schemes[_i]);
    int32_t x[64];
    rev_val_first2(x);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *y = logits_of(g, ctx, x, 2);
    ck_assert_int_eq(y->numel, 2 * 32 * 16);
    pg_expect_golden_logits(y, schemes[_i], schemes[_i]);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* max |f(x')[i] - f(x)[map(i)]| over the 32 positions and 16 classes, where x'[i] = x[map(i)]. */
static double equivariance_gap(const char *pos, const int *map) {
    mg_gpt *g = posenc_model(pos);
    int32_t x[64], xp[32];
    rev_val_first2(x);
    for (int i = 0; i < 32; i++) xp[i] = x[map[i]];
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *a = logits_of(g, ctx, x, 1), *b = logits_of(g, ctx, xp, 1);
    double gap = 0.0;
    for (int i = 0; i < 32; i++)
        for (int v = 0; v < 16; v++) gap = fmax(gap, fabs(b->data[i * 16 + v] - a->data[map[i] * 16 + v]));
    mg_ctx_free(ctx);
    mg_gpt_free(g);
    return gap;
}

START_TEST(posenc_equivariances) {
    /* the perm task's pi (docs/posenc-benchmark.md section 2) as an arbitrary permutation; the
     * reversal */
    static const int pi[32] = {5, 10, 3, 27, 23, 24, 9, 22, 21, 17, 1, 8, 14, 0, 28, 12,
                               30, 15, 11, 25, 13, 6, 20, 2, 29, 18, 31, 26, 7, 16, 4, 19};
    int rev[32];
    for (int i = 0; i < 32; i++) rev[i] = 31 - i;
    double none_perm = equivariance_gap("none", pi), alibi_rev = equivariance_gap("alibi", rev);
    ck_assert_msg(none_perm < 2e-5, "none is not permutation-equivariant: gap %g", none_perm);
    ck_assert_msg(alibi_rev < 2e-5, "alibi is not reflection-equivariant: gap %g", alibi_rev);
    /* the property is not trivially true: schemes that see absolute order break it */
    ck_assert_msg(equivariance_gap("learned", pi) > 1e-2, "learned should not be permutation-equivariant");
    ck_assert_msg(equivariance_gap("alibi", pi) > 1e-2, "alibi should not be permutation-equivariant");
    ck_assert_msg(equivariance_gap("sinusoidal", rev) > 1e-2, "sinusoidal should not be reflection-equivariant");
}
END_TEST

/* ---- incremental decoding ---- */

/* Logits of a prefix run then one token at a time through KV caches equal the full forward. */
START_TEST(kv_cache_matches_full_forward) {
    mg_gpt_config c = small_any(_i);
    mg_gpt *g = make(&c, 20 + (uint64_t)_i);
    int32_t ids[7] = {3, 1, 4, 1, 5, 9, 2};
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *full = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 7}, ids), NULL);
    int64_t H = c.n_head, D = c.n_embd / c.n_head, cap = 8;
    float *slab = calloc((size_t)(2 * c.n_layer * H * cap * D), sizeof(float));
    mg_kv_cache kv[2];
    for (int l = 0; l < 2; l++) kv[l] = (mg_kv_cache){slab + 2 * l * H * cap * D, slab + (2 * l + 1) * H * cap * D, 1, H, cap, D, 0};
    int64_t pos = 0;
    for (int step = 0; pos < 7; step++) {
        int64_t T = step == 0 ? 3 : 1; /* a 3-token prompt, then one position per token */
        mg_fwd a = {.pos0 = pos, .kv = kv};
        mg_tensor *y = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, ids + pos), &a);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        ck_assert_int_eq(y->shape[1], T);
        for (int64_t t = 0; t < T; t++)
            for (int v = 0; v < 11; v++)
                ck_assert_msg(fabsf(y->data[t * 11 + v] - full->data[(pos + t) * 11 + v]) < 1e-5f,
                              "pos=%s position %lld token %d: cached %g vs full %g", c.pos, (long long)(pos + t), v,
                              (double)y->data[t * 11 + v], (double)full->data[(pos + t) * 11 + v]);
        pos += T;
        ck_assert_int_eq(kv[1].len, pos);
    }
    free(slab);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

typedef struct {
    int32_t tok[64];
    float logits[64][11];
    int n;
} gen_rec;

static bool record(void *user, int64_t step, int32_t token, const float *logits, int64_t vocab) {
    gen_rec *r = user;
    ck_assert_int_eq(step, r->n);
    ck_assert_int_eq(vocab, 11);
    r->tok[r->n] = token;
    memcpy(r->logits[r->n], logits, sizeof r->logits[0]);
    r->n++;
    return true;
}

/* 3 prompt tokens + 14 new ones: past block_size 8, so learned tables crop and re-run while the
 * other schemes keep extending their caches. Sampled tokens identical, logits within 1e-5. */
START_TEST(generation_with_cache_equals_recomputation) {
    mg_gpt_config c = small_any(_i);
    mg_gpt *g = make(&c, 30 + (uint64_t)_i);
    const int32_t prompt[3] = {2, 7, 1};
    gen_rec a = {.n = 0}, b = {.n = 0};
    int32_t out[14];
    int64_t n_out = 0;
    mg_gen_opts o = {.max_new_tokens = 14, .temperature = 0.9f, .top_k = 6, .top_p = 0.95f, .on_token = record, .user = &a};
    mg_rng r1 = mg_rng_make(5), r2 = mg_rng_make(5);
    ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, &r1, out, &n_out) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(n_out, 14);
    o.no_cache = true, o.user = &b;
    ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, &r2, NULL, NULL) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(a.n, 14);
    ck_assert_int_eq(b.n, 14);
    for (int s = 0; s < 14; s++) {
        ck_assert_int_eq(out[s], a.tok[s]);
        ck_assert_msg(a.tok[s] == b.tok[s], "pos=%s step %d: cached drew %d, recomputed %d", c.pos, s, a.tok[s], b.tok[s]);
        for (int v = 0; v < 11; v++)
            ck_assert_msg(fabsf(a.logits[s][v] - b.logits[s][v]) < 1e-5f, "pos=%s step %d token %d: %g vs %g", c.pos, s,
                          v, (double)a.logits[s][v], (double)b.logits[s][v]);
    }
    ck_assert(r1.s == r2.s); /* one draw per token on both paths */
    mg_gpt_free(g);
}
END_TEST

static bool stop_after_3(void *user, int64_t step, int32_t token, const float *logits, int64_t vocab) {
    (void)token, (void)logits, (void)vocab;
    *(int *)user += 1;
    return step < 2;
}

/* ---- bf16 decoding (mg_gen_opts.precision) ---- */

/* Greedy bf16 generation against the same steps run by hand on a bf16 context without kept weights
 * (every step converts them again): the same logits bit for bit, so keeping the copies across
 * resets changes nothing but the work; on 1 and 2 threads the same bits; and bf16 is not float32
 * (the products did change) yet close to it. */
START_TEST(generation_in_bf16) {
    mg_gpt_config c = small(_i ? "rope" : "learned");
    mg_gpt *g = make(&c, 70 + (uint64_t)_i);
    const int32_t prompt[3] = {2, 7, 1};
    gen_rec a = {.n = 0}, a2 = {.n = 0}, f = {.n = 0};
    mg_gen_opts o = {.max_new_tokens = 5, .on_token = record, .user = &a, .precision = MG_PRECISION_BF16};
    const int saved = mg_get_num_threads();
    mg_set_num_threads(1);
    ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
    mg_set_num_threads(2);
    o.user = &a2;
    ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
    mg_set_num_threads(saved);
    o.user = &f, o.precision = MG_PRECISION_FP32;
    ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(a.n, 5);
    /* by hand */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    int64_t H = c.n_head, D = c.n_embd / c.n_head, cap = 8;
    float *slab = calloc((size_t)(2 * c.n_layer * H * cap * D), sizeof(float));
    mg_kv_cache kv[2];
    for (int l = 0; l < 2; l++) kv[l] = (mg_kv_cache){slab + 2 * l * H * cap * D, slab + (2 * l + 1) * H * cap * D, 1, H, cap, D, 0};
    int32_t hist[8] = {2, 7, 1};
    int64_t len = 3, pos = 0;
    double diff = 0.0, big = 0.0;
    for (int s = 0; s < 5; s++) {
        mg_ctx_reset(ctx);
        const int64_t T = len - pos;
        mg_fwd fa = {.pos0 = pos, .kv = kv};
        mg_tensor *y = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, hist + pos), &fa);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        const float *row = y->data + (T - 1) * 11;
        for (int v = 0; v < 11; v++) {
            ck_assert_msg(a.logits[s][v] == row[v] && a2.logits[s][v] == row[v],
                          "pos=%s step %d token %d: generate %a (2 threads %a), by hand %a", c.pos, s, v,
                          (double)a.logits[s][v], (double)a2.logits[s][v], (double)row[v]);
            diff = fmax(diff, fabs((double)row[v] - f.logits[s][v]));
            big = fmax(big, fabs((double)f.logits[s][v]));
        }
        ck_assert_int_eq(a.tok[s], a2.tok[s]);
        hist[len++] = a.tok[s];
        pos += T;
        if (a.tok[s] != f.tok[s]) break; /* float32's later logits follow another history */
    }
    ck_assert_msg(diff > 0.0 && diff < 0.05 * big + 0.02, "pos=%s: bf16 vs float32 logits: %g of %g", c.pos, diff, big);
    free(slab);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* bf16 decoding reads its kept weights pre-packed (products of up to 16 rows: mg_bgemm_packed) and
 * the prompt's first step, of more rows, through mg_bgemm: on a wider model with odd sizes (vocab 37,
 * width 33, three heads of 11), a tied head (_i 0) and a Linear head with bias (_i 1), a 20-token
 * prompt, the logits of every step are bit for bit those of the steps run by hand on a bf16 context
 * that converts the weights at every step and multiplies with mg_bgemm, on 1 and 2 threads. */
typedef struct {
    int n;
    float logits[8][37];
    int32_t tok[8];
} wide_rec;

static bool record_wide(void *user, int64_t step, int32_t token, const float *logits, int64_t vocab) {
    wide_rec *r = user;
    ck_assert_int_eq(step, r->n);
    ck_assert_int_eq(vocab, 37);
    r->tok[r->n] = token;
    memcpy(r->logits[r->n], logits, sizeof r->logits[0]);
    r->n++;
    return true;
}

START_TEST(bf16_decoding_packed_weights_wide_model) {
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = 37, c.block_size = 40, c.n_layer = 2, c.n_head = 3, c.n_embd = 33, c.init_std = 0.3f;
    c.tied_head = _i == 0, c.head_bias = _i == 1;
    mg_gpt *g = make(&c, 90 + (uint64_t)_i);
    int32_t hist[40];
    for (int i = 0; i < 20; i++) hist[i] = (int32_t)((i * 7 + 3) % 37);
    wide_rec a = {.n = 0}, a2 = {.n = 0};
    mg_gen_opts o = {.max_new_tokens = 8, .on_token = record_wide, .user = &a, .precision = MG_PRECISION_BF16};
    const int saved = mg_get_num_threads();
    mg_set_num_threads(1);
    ck_assert_msg(mg_gpt_generate(g, hist, 20, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
    mg_set_num_threads(2);
    o.user = &a2;
    ck_assert_msg(mg_gpt_generate(g, hist, 20, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
    mg_set_num_threads(saved);
    ck_assert_int_eq(a.n, 8);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    const int64_t H = c.n_head, D = c.n_embd / c.n_head, cap = 40;
    float *slab = calloc((size_t)(2 * c.n_layer * H * cap * D), sizeof(float));
    ck_assert_ptr_nonnull(slab);
    mg_kv_cache kv[2];
    for (int l = 0; l < 2; l++) kv[l] = (mg_kv_cache){slab + 2 * l * H * cap * D, slab + (2 * l + 1) * H * cap * D, 1, H, cap, D, 0};
    int64_t len = 20, pos = 0;
    for (int s = 0; s < 8; s++) {
        mg_ctx_reset(ctx);
        const int64_t T = len - pos;
        mg_fwd fa = {.pos0 = pos, .kv = kv};
        mg_tensor *y = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, T}, hist + pos), &fa);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        const float *row = y->data + (T - 1) * 37;
        for (int v = 0; v < 37; v++)
            ck_assert_msg(memcmp(&a.logits[s][v], &row[v], sizeof row[v]) == 0 && memcmp(&a2.logits[s][v], &row[v], sizeof row[v]) == 0,
                          "head %s step %d token %d: generate %a (2 threads %a), by hand %a", _i ? "linear" : "tied", s, v,
                          (double)a.logits[s][v], (double)a2.logits[s][v], (double)row[v]);
        ck_assert_int_eq(a.tok[s], a2.tok[s]);
        hist[len++] = a.tok[s];
        pos += T;
    }
    free(slab);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* mg_ctx_keep_bf16_weights: a parameter's copy outlives mg_ctx_reset until keep is turned off. */
START_TEST(bf16_weights_kept_across_resets) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    mg_ctx_keep_bf16_weights(ctx, true);
    float wd[6] = {1, 2, 3, 4, 5, 6}, xd[3] = {1, 1, 1};
    mg_tensor w = {0};
    w.dtype = MG_F32, w.ndim = 2, w.shape[0] = 3, w.shape[1] = 2, w.numel = 6, w.data = wd, w.flags = MG_PARAM;
    float out[3][2];
    for (int step = 0; step < 3; step++) {
        if (step == 2) mg_ctx_keep_bf16_weights(ctx, false);
        mg_ctx_reset(ctx);
        mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){1, 3}, xd);
        mg_tensor *y = mg_linear(ctx, x, &w, NULL);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        memcpy(out[step], y->data, sizeof out[step]);
        wd[0] = 101.0f; /* the contract forbids this; here it shows which copy a step reads */
    }
    ck_assert_float_eq(out[0][0], 9.0f);
    ck_assert_float_eq(out[1][0], 9.0f);   /* the copy kept from step 0 */
    ck_assert_float_eq(out[2][0], 109.0f); /* keep off: converted afresh */
    mg_ctx_free(ctx);
}
END_TEST

/* mg_ctx_refresh_bf16_weights: the kept copies (packed, for one row; plain, for more rows than the
 * packed products take) are made again from the changed weights at their next use. */
START_TEST(bf16_kept_weights_refreshed) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    mg_ctx_keep_bf16_weights(ctx, true);
    ck_assert(mg_ctx_keeps_bf16_weights(ctx));
    float wd[6] = {1, 2, 3, 4, 5, 6}, xd[3 * 20];
    for (int i = 0; i < 60; i++) xd[i] = 1.0f;
    mg_tensor w = {0};
    w.dtype = MG_F32, w.ndim = 2, w.shape[0] = 3, w.shape[1] = 2, w.numel = 6, w.data = wd, w.flags = MG_PARAM;
    for (int step = 0; step < 4; step++) {
        if (step == 1) wd[0] = 101.0f; /* not yet seen: the copies are kept */
        if (step == 2) mg_ctx_refresh_bf16_weights(ctx);
        if (step == 3) wd[0] = 1.0f, mg_ctx_refresh_bf16_weights(ctx);
        const float want = step < 2 || step == 3 ? 9.0f : 109.0f;
        for (int rows = 1; rows <= 20; rows += 19) {
            mg_ctx_reset(ctx);
            mg_tensor *y = mg_linear(ctx, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){rows, 3}, xd), &w, NULL);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            for (int r = 0; r < rows; r++)
                ck_assert_msg(y->data[2 * r] == want && y->data[2 * r + 1] == 12.0f, "step %d, %d rows: row %d is (%g, %g)",
                              step, rows, r, (double)y->data[2 * r], (double)y->data[2 * r + 1]);
        }
    }
    mg_ctx_free(ctx);
}
END_TEST

/* The model keeps its generation buffers for the next call and reads its weights afresh on every
 * call: after the weights change, a call on the kept buffers gives, bit for bit, what a call on
 * fresh buffers (after mg_gpt_release_generation) gives; float32 (_i 0) and bf16 (_i 1), 1 and 2
 * threads. */
static void scale_weights(mg_gpt *g, float by) {
    const mg_params *p = mg_gpt_params(g);
    float *d = mg_params_data(p);
    for (int64_t i = 0; i < mg_params_slab_size(p); i++) d[i] *= by;
}

START_TEST(generation_buffers_kept_and_weights_reread) {
    mg_gpt_config c = small("learned");
    mg_gpt *g = make(&c, 140 + (uint64_t)_i);
    const int32_t prompt[3] = {4, 9, 2};
    mg_gen_opts o = {.max_new_tokens = 12, .on_token = record, .precision = _i ? MG_PRECISION_BF16 : MG_PRECISION_FP32};
    const int saved = mg_get_num_threads();
    for (int nt = 1; nt <= 2; nt++) {
        mg_set_num_threads(nt);
        gen_rec before = {.n = 0}, kept = {.n = 0}, fresh = {.n = 0}, again = {.n = 0};
        o.user = &before;
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        scale_weights(g, 1.25f);
        o.user = &kept;
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        mg_gpt_release_generation(g);
        mg_gpt_release_generation(g); /* twice: nothing left to free */
        o.user = &fresh;
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        o.user = &again; /* the kept buffers once more, the weights unchanged */
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        ck_assert_int_eq(kept.n, 12);
        ck_assert_int_eq(fresh.n, 12);
        ck_assert_int_eq(again.n, 12);
        ck_assert_msg(memcmp(before.logits, kept.logits, sizeof kept.logits) != 0, "the scaled weights changed nothing");
        ck_assert_msg(memcmp(kept.logits, fresh.logits, sizeof kept.logits) == 0 && memcmp(kept.tok, fresh.tok, sizeof kept.tok) == 0,
                      "%s, %d thread(s): the kept buffers read the old weights", _i ? "bf16" : "fp32", nt);
        ck_assert(memcmp(again.logits, fresh.logits, sizeof again.logits) == 0);
        scale_weights(g, 0.8f);
    }
    mg_set_num_threads(saved);
    mg_gpt_free(g);
}
END_TEST

/* Calls that need more KV cache than the kept one (a longer request, no crop with RoPE), one
 * without a cache between them, and the precision switched back and forth: each gives what the
 * same call on fresh buffers gives. */
START_TEST(generation_buffers_follow_the_request) {
    mg_gpt_config c = small("rope");
    mg_gpt *g = make(&c, 160);
    const int32_t prompt[3] = {3, 8, 6};
    static const struct {
        int64_t n;
        bool no_cache;
        mg_precision prec;
    } calls[] = {{2, false, MG_PRECISION_FP32}, {20, false, MG_PRECISION_FP32}, {9, true, MG_PRECISION_FP32},
                 {30, false, MG_PRECISION_BF16}, {5, false, MG_PRECISION_FP32}, {40, false, MG_PRECISION_BF16}};
    for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
        gen_rec kept = {.n = 0}, fresh = {.n = 0};
        mg_gen_opts o = {.max_new_tokens = calls[k].n, .no_cache = calls[k].no_cache, .precision = calls[k].prec,
                         .on_token = record, .user = &kept};
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        mg_gpt_release_generation(g);
        o.user = &fresh;
        ck_assert_msg(mg_gpt_generate(g, prompt, 3, &o, NULL, NULL, NULL) == MG_OK, "%s", mg_last_error());
        ck_assert_int_eq(kept.n, calls[k].n);
        ck_assert_msg(memcmp(&kept, &fresh, sizeof kept) == 0, "call %zu (%lld tokens%s, %s): kept and fresh buffers differ",
                      k, (long long)calls[k].n, calls[k].no_cache ? ", no cache" : "", mg_precision_name(calls[k].prec));
        if (k % 2) mg_gpt_release_generation(g); /* every other call starts from no kept buffers */
    }
    mg_gpt_free(g);
}
END_TEST

/* Two calls at once on one model: one holds the kept buffers, the other allocates its own; both
 * give what a call alone gives. */
typedef struct {
    mg_gpt *g;
    mg_precision prec;
    int32_t out[16];
    int64_t n;
    mg_status st;
} gen_job;

static void *gen_thread(void *arg) {
    gen_job *j = arg;
    const int32_t prompt[3] = {1, 5, 3};
    mg_gen_opts o = {.max_new_tokens = 16, .precision = j->prec};
    for (int rep = 0; rep < 20 && j->st == MG_OK; rep++) j->st = mg_gpt_generate(j->g, prompt, 3, &o, NULL, j->out, &j->n);
    return NULL;
}

START_TEST(concurrent_generation_on_one_model) {
    mg_gpt_config c = small("rope");
    mg_gpt *g = make(&c, 150);
    const mg_precision prec = _i ? MG_PRECISION_BF16 : MG_PRECISION_FP32;
    gen_job alone = {g, prec, {0}, 0, MG_OK};
    gen_thread(&alone);
    ck_assert_msg(alone.st == MG_OK, "%s", mg_last_error());
    gen_job jobs[2] = {{g, prec, {0}, 0, MG_OK}, {g, prec, {0}, 0, MG_OK}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) ck_assert_int_eq(pthread_create(&th[k], NULL, gen_thread, &jobs[k]), 0);
    for (int k = 0; k < 2; k++) ck_assert_int_eq(pthread_join(th[k], NULL), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(jobs[k].st, MG_OK);
        ck_assert_int_eq(jobs[k].n, 16);
        ck_assert_msg(memcmp(jobs[k].out, alone.out, sizeof alone.out) == 0, "thread %d generated other tokens", k);
    }
    mg_gpt_free(g);
}
END_TEST

START_TEST(generation_options_and_errors) {
    mg_gpt_config c = small("learned");
    mg_gpt *g = make(&c, 40);
    int32_t prompt[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2}, out[8];
    int64_t n = -1;
    int calls = 0;
    mg_gen_opts o = {.max_new_tokens = 8, .on_token = stop_after_3, .user = &calls};
    /* a prompt longer than the table is cropped; greedy needs no rng; the callback stops early */
    ck_assert_msg(mg_gpt_generate(g, prompt, 12, &o, NULL, out, &n) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(calls, 3);
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 0, &o, NULL, out, &n), MG_ERR_INVALID,
                  "mg_gpt_generate: the prompt needs at least one token, got 0");
    /* each missing or negative argument has its own message */
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, NULL, NULL, out, &n), MG_ERR_INVALID, "mg_gpt_generate: opts is NULL");
    TU_ASSERT_ERR(mg_gpt_generate(g, NULL, 3, &o, NULL, out, &n), MG_ERR_INVALID,
                  "mg_gpt_generate: prompt is NULL (3 tokens given)");
    TU_ASSERT_ERR(mg_gpt_generate(NULL, prompt, 3, &o, NULL, out, &n), MG_ERR_INVALID, "mg_gpt_generate: the model is NULL");
    o.max_new_tokens = -4;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 2, &o, NULL, out, &n), MG_ERR_INVALID,
                  "mg_gpt_generate: max_new_tokens = -4 must be >= 0");
    o.max_new_tokens = 8;
    prompt[1] = 11;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, NULL, out, &n), MG_ERR_INVALID, "prompt token 1 is 11, outside [0, 11)");
    prompt[1] = 2;
    o.temperature = 1.0f;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, NULL, out, &n), MG_ERR_INVALID, "needs an rng");
    o.max_context = 9;
    mg_rng r = mg_rng_make(1);
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "max_context 9 exceeds the positional table's 8 rows");
    o.max_context = 0;
    o.precision = (mg_precision)7;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID,
                  "mg_gpt_generate: precision 7: expected MG_PRECISION_FP32 or MG_PRECISION_BF16");
    o.precision = MG_PRECISION_FP32;
    /* sizes that once wrapped around: the history of prompt + max_new_tokens tokens (2^62 x 4
     * bytes is 0 modulo 2^64), and a sum past INT64_MAX; refused before anything is allocated or
     * generated */
    calls = 0;
    n = -1;
    o.max_new_tokens = (int64_t)1 << 62;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID,
                  "max_new_tokens 4611686018427387904 with a prompt of 3 tokens");
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(calls, 0);
    o.max_new_tokens = INT64_MAX;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID,
                  "max_new_tokens 9223372036854775807 with a prompt of 3 tokens");
    /* without a crop the KV cache grows with the whole history: 2^59 positions x 2 x 2 layers x
     * 8 floats overflow its size before the history's does */
    mg_gpt_config rc = small("rope");
    mg_gpt *gr = make(&rc, 41);
    o.max_new_tokens = (int64_t)1 << 59;
    TU_ASSERT_ERR(mg_gpt_generate(gr, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "a KV cache of 576460752303423491 positions");
    mg_gpt_free(gr);
    /* sampling options outside their meaning are refused rather than read as greedy or "all" */
    o.max_new_tokens = 2;
    o.temperature = -1.0f;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "temperature -1, top_k 0");
    o.temperature = NAN;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "temperature nan");
    o.temperature = 1.0f, o.top_k = -2;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "top_k -2");
    o.top_k = 0, o.top_p = -0.5f;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "top_p -0.5");
    o.top_p = 0.0f, o.max_context = -1;
    TU_ASSERT_ERR(mg_gpt_generate(g, prompt, 3, &o, &r, out, &n), MG_ERR_INVALID, "max_context -1");
    mg_gpt_free(g);
}
END_TEST

START_TEST(sampling_rules) {
    const float logits[6] = {0.5f, 2.0f, -1.0f, 1.9f, 0.0f, 2.0f};
    mg_rng r = mg_rng_make(11);
    ck_assert_int_eq(mg_sample_logits(logits, 6, 0.0f, 0, 0.0f, NULL, NULL), 1); /* greedy: first maximum */
    uint64_t s0 = r.s;
    ck_assert_int_eq(mg_sample_logits(logits, 6, 1.0f, 1, 0.0f, &r, NULL), 1); /* top-1 keeps the first max */
    ck_assert(r.s != s0);                                                     /* and still draws once */
    int counts[6] = {0};
    for (int i = 0; i < 20000; i++) counts[mg_sample_logits(logits, 6, 1.0f, 3, 0.0f, &r, NULL)]++;
    ck_assert_int_eq(counts[0] + counts[2] + counts[4], 0); /* top-3: only 1, 5, 3 */
    double z = exp(2.0) * 2 + exp(1.9);
    ck_assert_double_eq_tol(counts[3] / 20000.0, exp(1.9) / z, 0.015);
    ck_assert_double_eq_tol(counts[1] / 20000.0, exp(2.0) / z, 0.015);
    /* top-p 0.5: the two tokens at 2.0 already hold more than half of the mass */
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 4000; i++) counts[mg_sample_logits(logits, 6, 1.0f, 0, 0.5f, &r, NULL)]++;
    ck_assert_int_eq(counts[1] + counts[5], 4000);
    ck_assert_int_gt(counts[1], 1700);
    ck_assert_int_gt(counts[5], 1700);
    /* no filter, very low temperature: practically greedy among the tied maxima */
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 2000; i++) counts[mg_sample_logits(logits, 6, 1.0f, 0, 1.0f, &r, NULL)]++;
    for (int v = 0; v < 6; v++) ck_assert_int_gt(counts[v], v == 2 ? 10 : 50);
}
END_TEST

/* Bad arguments give -2 (never a token, never argmax in disguise), apart from -1, which means the
 * scratch could not be allocated; each leaves a message and draws nothing. */
START_TEST(sampling_bad_arguments) {
    const float logits[4] = {1, 2, 3, 4};
    mg_rng r = mg_rng_make(5);
    const uint64_t s0 = r.s;
    const struct {
        const float *logits;
        int64_t n;
        float temperature;
        int64_t top_k;
        float top_p;
        mg_rng *rng;
        const char *want;
    } bad[] = {
        {logits, 0, 1.0f, 0, 0.0f, &r, "need logits and 1..2147483647 of them (got 0)"},
        {logits, -3, 0.0f, 0, 0.0f, &r, "(got -3)"},
        {NULL, 4, 1.0f, 0, 0.0f, &r, "(got 4, logits NULL)"},
        {logits, 4, -1.0f, 0, 0.0f, &r, "temperature -1, top_k 0, top_p 0: each must be finite and at least 0"},
        {logits, 4, NAN, 0, 0.0f, &r, "temperature nan"},
        {logits, 4, INFINITY, 0, 0.0f, &r, "temperature inf"},
        {logits, 4, 1.0f, -2, 0.0f, &r, "top_k -2"},
        {logits, 4, 0.0f, -2, 0.0f, &r, "top_k -2"},
        {logits, 4, 1.0f, 0, -0.5f, &r, "top_p -0.5"},
        {logits, 4, 1.0f, 0, NAN, &r, "top_p nan"},
        {logits, 4, 1.0f, 0, 0.0f, NULL, "sampling at temperature 1 needs an rng"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mg_clear_error();
        int32_t tok = mg_sample_logits(bad[i].logits, bad[i].n, bad[i].temperature, bad[i].top_k, bad[i].top_p,
                                       bad[i].rng, NULL);
        ck_assert_msg(tok == -2, "case %zu: got %d", i, tok);
        ck_assert_msg(strstr(mg_last_error(), "mg_sample_logits: ") && strstr(mg_last_error(), bad[i].want),
                      "case %zu: want '%s' in: %s", i, bad[i].want, mg_last_error());
        ck_assert(r.s == s0);
    }
    /* greedy needs no rng */
    ck_assert_int_eq(mg_sample_logits(logits, 4, 0.0f, 0, 0.0f, NULL, NULL), 3);
}
END_TEST

/* ---- checkpoints ---- */

static void assert_same_params(mg_gpt *a, mg_gpt *b) {
    mg_params *pa = mg_gpt_params(a), *pb = mg_gpt_params(b);
    ck_assert_int_eq(mg_params_len(pa), mg_params_len(pb));
    for (int i = 0; i < mg_params_len(pa); i++) {
        mg_tensor *x = mg_params_at(pa, i), *y = mg_params_find(pb, x->name);
        ck_assert_msg(y != NULL, "%s missing", x->name);
        ck_assert_int_eq(x->numel, y->numel);
        ck_assert_msg(memcmp(x->data, y->data, (size_t)x->numel * 4) == 0, "%s differs", x->name);
    }
}

START_TEST(checkpoint_round_trip_bit_exact) {
    for (int k = 0; k < 3; k++) {
        mg_gpt_config c = small(k == 2 ? "t5_bias" : k ? "alibi" : "learned+sinusoidal");
        if (k == 2) { /* a plugin scheme with a trained table (the t5_bias plugin) */
            c.causal = false;
            snprintf(c.pos_opts, sizeof c.pos_opts, "num_buckets=8,max_distance=16,init=uniform,bound=0.5");
        } else if (k) { /* the classifier layout and a positional option survive too */
            c.causal = false, c.gelu = MG_GELU_ERF, c.emb_scale = 8.0f, c.tied_head = false, c.head_bias = true;
            c.dropout = 0.125f;
        } else {
            snprintf(c.pos_opts, sizeof c.pos_opts, "base=500,bound=0.25");
        }
        mg_gpt *g = make(&c, 50 + (uint64_t)k);
        const char *path = tmp_path("model.safetensors");
        mg_st_meta extra[2] = {{"tokenizer", "char"}, {"tokenizer.chars", "\n !abc\xc3\xa9"}};
        ck_assert_msg(mg_gpt_save(g, path, extra, 2) == MG_OK, "%s", mg_last_error());
        mg_gpt *h = NULL;
        mg_st_file *f = NULL;
        ck_assert_msg(mg_gpt_from_checkpoint(path, &h, &f) == MG_OK, "%s", mg_last_error());
        assert_same_params(g, h);
        const mg_gpt_config *hc = mg_gpt_cfg(h);
        ck_assert_int_eq(hc->n_layer, c.n_layer);
        ck_assert_str_eq(hc->pos, c.pos);
        ck_assert_str_eq(hc->pos_opts, c.pos_opts);
        ck_assert(hc->causal == c.causal && hc->gelu == c.gelu && hc->tied_head == c.tied_head);
        ck_assert(hc->head_bias == c.head_bias && hc->emb_scale == c.emb_scale && hc->dropout == c.dropout);
        ck_assert_str_eq(mg_st_meta_get(f, "format"), "minigrad-gpt");
        ck_assert_str_eq(mg_st_meta_get(f, "n_embd"), "8");
        ck_assert_str_eq(mg_st_meta_get(f, "tokenizer.chars"), "\n !abc\xc3\xa9");
        ck_assert_int_ge(mg_st_find(f, "wte.weight"), 0);
        ck_assert_int_eq(mg_st_find(f, "lm_head.weight") >= 0, !c.tied_head);
        if (k == 2) { /* T5's nn.Embedding layout: (num_buckets, n_head) */
            const int i = mg_st_find(f, "wpe.relative_attention_bias.weight");
            ck_assert_int_ge(i, 0);
            const mg_st_tensor_info *ti = mg_st_info(f, i);
            ck_assert(ti->ndim == 2 && ti->shape[0] == 8 && ti->shape[1] == c.n_head);
        }
        mg_st_close(f);
        /* the same logits from both */
        mg_ctx *ctx = mg_ctx_new(0);
        int32_t ids[5] = {1, 2, 3, 4, 5};
        mg_tensor *ya = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 5}, ids), NULL);
        mg_tensor *yb = mg_gpt_forward(h, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 5}, ids), NULL);
        ck_assert_mem_eq(ya->data, yb->data, (size_t)ya->numel * 4);
        mg_ctx_free(ctx);
        /* loading into an existing model of the same config */
        mg_gpt *z = make(&c, 999);
        ck_assert_msg(mg_gpt_load(z, path) == MG_OK, "%s", mg_last_error());
        assert_same_params(g, z);
        mg_gpt_free(z);
        mg_gpt_free(h);
        mg_gpt_free(g);
    }
}
END_TEST

/* Writes the model's tensors, minus `drop`, with tensor `reshape` given `new_dim0` rows, plus an
 * `extra` tensor when non-NULL, and the metadata with `key` set to `val` (NULL val: key left out). */
static const char zeros_for_files[8];

static void write_variant(mg_gpt *g, const char *path, const char *drop, const char *reshape, int64_t new_dim0,
                          const char *extra, const char *key, const char *val) {
    mg_params *P = mg_gpt_params(g);
    mg_st_entry e[64];
    int n = 0;
    static float zeros[1024];
    for (int i = 0; i < mg_params_len(P); i++) {
        mg_tensor *t = mg_params_at(P, i);
        if (drop && strcmp(t->name, drop) == 0) continue;
        e[n] = (mg_st_entry){t->name, t->ndim, {0}, t->data};
        for (int d = 0; d < t->ndim; d++) e[n].shape[d] = t->shape[d];
        if (reshape && strcmp(t->name, reshape) == 0) e[n].shape[0] = new_dim0, e[n].data = zeros;
        n++;
    }
    if (extra) e[n++] = (mg_st_entry){extra, 1, {3}, zeros};
    mg_st_meta meta[MG_GPT_META_MAX];
    char buf[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int m = mg_gpt_config_to_meta(mg_gpt_cfg(g), meta, buf), k = 0;
    mg_st_meta out[MG_GPT_META_MAX];
    for (int i = 0; i < m; i++) {
        if (key && strcmp(meta[i].key, key) == 0) {
            if (val) out[k++] = (mg_st_meta){key, val};
        } else {
            out[k++] = meta[i];
        }
    }
    ck_assert_msg(mg_safetensors_write(path, e, n, out, k) == MG_OK, "%s", mg_last_error());
}

/* The process's address space now (VmSize), in bytes; 0 when /proc cannot say. */
static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* Metadata that claims a context of 2^24 positions beside tensors made for 8: the file is
 * refused, or loads, without allocating for the claimed size. Run in a child whose address space
 * may grow by 512 MiB only (not under AddressSanitizer, which reserves terabytes up front): before
 * the parameters were checked against the file ahead of allocation, the learned table of
 * 2^24 x 16 floats (1 GiB, twice: values and gradients) was allocated first and the shape refused
 * after; the sinusoidal table of the same size was computed in full at create. */
START_TEST(metadata_sizes_are_checked_before_allocating) {
    static const char *const pos[] = {"learned", "sinusoidal", "learned+sinusoidal"};
    for (int k = 0; k < 3; k++) {
        mg_gpt_config c = small(pos[k]);
        c.n_embd = 16;
        mg_gpt *g = make(&c, 70);
        const char *p = tmp_path("claims.safetensors");
        write_variant(g, p, NULL, NULL, 0, NULL, "block_size", "16777216");
        mg_gpt_free(g);
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            size_t now = vm_size();
            if (!SANITIZED && now > 0) {
                struct rlimit lim = {now + ((size_t)512 << 20), now + ((size_t)512 << 20)};
                if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(90);
            }
            mg_gpt *h = NULL;
            mg_status st = mg_gpt_from_checkpoint(p, &h, NULL);
            if (k == 1) { /* no parameter depends on the context: it loads, and works */
                if (st != MG_OK) {
                    fprintf(stderr, "sinusoidal: %s\n", mg_last_error());
                    _exit(1);
                }
                int32_t prompt[1] = {1}, out[4];
                mg_gen_opts o = {.max_new_tokens = 4};
                _exit(mg_gpt_generate(h, prompt, 1, &o, NULL, out, NULL) == MG_OK &&
                              mg_gpt_cfg(h)->block_size == 16777216
                          ? 0
                          : 2);
            }
            const char *want = "shape in file (8,16) vs model (16777216,16)";
            if (st != MG_ERR_FORMAT || !strstr(mg_last_error(), want) || !strstr(mg_last_error(), "block_size 16777216") ||
                h != NULL) {
                fprintf(stderr, "%s: status %d, '%s' (want '%s')\n", pos[k], st, mg_last_error(), want);
                _exit(3);
            }
            _exit(0);
        }
        int ws;
        ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
        ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "pos %s: the child ended with status %d", pos[k], ws);
    }
}
END_TEST

/* Sizes each within its key's range can still make a model too large to exist: the parameter
 * count is computed with checked arithmetic and refused, naming the keys, before anything is
 * built. */
/* Fields of a C config that the model could not honour are refused by name, not run as something
 * else: a GELU kind outside the enum (which ran as tanh, and was saved as "gelu=tanh"), a negative
 * or non-finite attention scale (which ran as the default). */
START_TEST(config_enums_and_scale_are_checked) {
    mg_gpt_config c = small("learned");
    mg_rng r = mg_rng_make(1);
    mg_gpt *g = (mg_gpt *)1;
    c.gelu = (mg_gelu_kind)7;
    TU_ASSERT_ERR(mg_gpt_new(&c, &r, &g), MG_ERR_INVALID,
                  "gpt config: gelu = 7 is not a GELU kind (MG_GELU_TANH or MG_GELU_ERF)");
    ck_assert_ptr_null(g);
    mg_st_meta meta[MG_GPT_META_MAX];
    char buf[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int n = mg_gpt_config_to_meta(&c, meta, buf), seen = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(meta[i].key, "gelu") == 0) {
            ck_assert_str_eq(meta[i].value, "7");
            seen++;
        }
    ck_assert_int_eq(seen, 1);
    c.gelu = MG_GELU_ERF;
    c.attn_scale = -0.5f;
    TU_ASSERT_ERR(mg_gpt_new(&c, &r, &g), MG_ERR_INVALID,
                  "gpt config: attn_scale = -0.5 must be finite and >= 0 (0: 1/sqrt(head dim))");
    c.attn_scale = INFINITY;
    TU_ASSERT_ERR(mg_gpt_new(&c, &r, &g), MG_ERR_INVALID, "gpt config: attn_scale = inf must be finite");
    TU_ASSERT_ERR(mg_gpt_new(NULL, &r, &g), MG_ERR_INVALID, "mg_gpt_new: the config is NULL");
    TU_ASSERT_ERR(mg_gpt_new(&c, &r, NULL), MG_ERR_INVALID, "mg_gpt_new: out is NULL");
    c.attn_scale = 0.0f;
    ck_assert_msg(mg_gpt_new(&c, &r, &g) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(mg_gpt_cfg(g)->gelu, MG_GELU_ERF);
    mg_gpt_free(g);
}
END_TEST

START_TEST(config_sizes_are_held_to_a_parameter_budget) {
    mg_config *kv = mg_config_new("big.cfg");
    ck_assert_ptr_nonnull(kv);
    ck_assert_int_eq(mg_config_set(kv, "vocab_size", "2147483647"), MG_OK);
    ck_assert_int_eq(mg_config_set(kv, "n_embd", "1048576"), MG_OK);
    ck_assert_int_eq(mg_config_set(kv, "n_head", "1"), MG_OK);
    ck_assert_int_eq(mg_config_set(kv, "n_layer", "65536"), MG_OK);
    mg_gpt_config c = mg_gpt_config_default();
    TU_ASSERT_ERR(mg_gpt_config_from(kv, &c), MG_ERR_INVALID,
                  "big.cfg: vocab_size 2147483647, n_layer 65536 and n_embd 1048576 make 866943821620969472 parameters, "
                  "more than the 68719476736 a model may have");
    ck_assert_int_eq(c.vocab_size, mg_gpt_config_default().vocab_size); /* *out untouched */
    mg_config_free(kv);
    /* in a checkpoint's metadata, the same: refused before any tensor is compared or allocated */
    mg_gpt_config s = small("learned");
    mg_gpt *g = make(&s, 71);
    const char *p = tmp_path("vast.safetensors");
    write_variant(g, p, NULL, NULL, 0, NULL, "n_layer", "65536");
    mg_gpt_free(g);
    tu_set_meta(p, "n_embd", "1048576");
    tu_set_meta(p, "n_head", "1");
    mg_gpt *h = (mg_gpt *)1;
    TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_INVALID, "more than the 68719476736 a model may have");
    ck_assert_ptr_null(h);
}
END_TEST

START_TEST(malformed_checkpoints_at_model_level) {
    mg_gpt_config c = small("learned");
    mg_gpt *g = make(&c, 60);
    mg_params *P = mg_gpt_params(g);
    int64_t slab = mg_params_slab_size(P);
    float *before = malloc((size_t)slab * 4);
    memcpy(before, mg_params_data(P), (size_t)slab * 4);
    mg_gpt *other = make(&c, 61); /* source of the files' (different) values */
    const char *p = tmp_path("bad.safetensors");
#define UNTOUCHED() ck_assert_msg(memcmp(before, mg_params_data(P), (size_t)slab * 4) == 0, "a failed load wrote into the model")

    write_variant(other, p, NULL, "ln_f.weight", 7, NULL, NULL, NULL);
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "ln_f.weight: shape in file (7) vs model (8)");
    UNTOUCHED();
    write_variant(other, p, "h.1.attn.c_proj.bias", NULL, 0, NULL, NULL, NULL);
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_NOT_FOUND, "missing tensor 'h.1.attn.c_proj.bias'");
    UNTOUCHED();
    write_variant(other, p, NULL, NULL, 0, "lm_head.bias", NULL, NULL);
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "unexpected tensor 'lm_head.bias'");
    UNTOUCHED();
    write_variant(other, p, NULL, NULL, 0, NULL, "n_layer", "3");
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_INVALID, "__metadata__ n_layer = '3' but the model has n_layer = '2'");
    UNTOUCHED();
    write_variant(other, p, NULL, NULL, 0, NULL, "pos", "rope");
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_INVALID, "pos = 'rope' but the model has pos = 'learned'");
    write_variant(other, p, NULL, NULL, 0, NULL, "head", "linear");
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_INVALID, "head = 'linear' but the model has head = 'tied'");
    write_variant(other, p, NULL, NULL, 0, NULL, "n_head", NULL);
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "__metadata__ lacks the key 'n_head'");
    write_variant(other, p, NULL, NULL, 0, NULL, "format", "gguf");
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "format is 'gguf', expected 'minigrad-gpt'");
    write_variant(other, p, NULL, NULL, 0, NULL, "n_embd", "eight");
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_INVALID, "__metadata__: key 'n_embd': expected an integer, got 'eight'");
    write_variant(other, p, NULL, NULL, 0, NULL, "n_head", "3");
    mg_gpt *h = (mg_gpt *)1;
    TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_INVALID, "n_embd 8 is not a multiple of n_head 3");
    ck_assert_ptr_null(h);
    /* a scheme nothing provides: the message names the file, as the others do */
    write_variant(other, p, NULL, NULL, 0, NULL, "pos", "bogus");
    h = (mg_gpt *)1;
    TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_NOT_FOUND,
                  "bad.safetensors: pos: positional scheme 'bogus' not found");
    ck_assert_ptr_null(h);
    /* dropout is training, not architecture: a different value loads */
    write_variant(other, p, NULL, NULL, 0, NULL, "dropout", "0.5");
    ck_assert_msg(mg_gpt_load(g, p) == MG_OK, "%s", mg_last_error());
    assert_same_params(g, other);
    memcpy(mg_params_data(P), before, (size_t)slab * 4);

    /* file-level corruption: a truncated checkpoint and a header length beyond the file */
    const char *good = tmp_path("good.safetensors");
    ck_assert_int_eq(mg_gpt_save(other, good, NULL, 0), MG_OK);
    size_t size;
    char *bytes = tu_read_file(good, &size);
    tu_write_bytes(p, bytes, size - 100);
    ck_assert_int_ne(mg_gpt_load(g, p), MG_OK);
    ck_assert_msg(strstr(mg_last_error(), "bad.safetensors"), "%s", mg_last_error());
    UNTOUCHED();
    ck_assert_int_ne(mg_gpt_from_checkpoint(p, &h, NULL), MG_OK);
    uint64_t huge = 1u << 30;
    memcpy(bytes, &huge, 8);
    tu_write_bytes(p, bytes, size);
    ck_assert_int_ne(mg_gpt_load(g, p), MG_OK);
    UNTOUCHED();
    /* hand-made headers: malformed JSON, a dtype other than F32, tensors overlapping */
    static const char *const headers[3] = {
        "{\"wte.weight\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]",
        "{\"wte.weight\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}",
        ("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}"),
    };
    static const char *const why[3] = {"bad.safetensors", "unsupported dtype F16", "overlap"};
    for (int k = 0; k < 3; k++) {
        uint64_t n = strlen(headers[k]);
        FILE *f = fopen(p, "wb");
        fwrite(&n, 8, 1, f); /* little-endian on the machines we run on */
        fwrite(headers[k], 1, n, f);
        fwrite(zeros_for_files, 1, 8, f);
        fclose(f);
        TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "bad.safetensors", why[k]);
        UNTOUCHED();
        h = (mg_gpt *)1;
        ck_assert_int_eq(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_FORMAT);
        ck_assert_ptr_null(h);
    }
    TU_ASSERT_ERR(mg_gpt_load(g, tmp_path("absent.safetensors")), MG_ERR_IO, "absent.safetensors");
    /* a save that cannot happen leaves the good file as it was */
    ck_assert_int_ne(mg_gpt_save(g, tmp_path("no/such/dir/x.safetensors"), NULL, 0), MG_OK);
    mg_st_meta clash = {"n_layer", "5"};
    TU_ASSERT_ERR(mg_gpt_save(g, good, &clash, 1), MG_ERR_INVALID, "extra metadata key 'n_layer' is a model config key");
    mg_gpt *again = NULL;
    ck_assert_int_eq(mg_gpt_from_checkpoint(good, &again, NULL), MG_OK);
    assert_same_params(again, other);
    mg_gpt_free(again);
#undef UNTOUCHED
    free(bytes);
    free(before);
    mg_gpt_free(other);
    mg_gpt_free(g);
}
END_TEST

/* Every config key is required; only a file without a checksum (an older version's) may lack
 * ln_eps, attn_scale and pos_opts. A misspelt key is a missing one. */
START_TEST(every_config_key_is_required) {
    static const char *const keys[] = {"vocab_size", "block_size", "n_layer", "n_head",    "n_embd",   "pos",
                                       "pos_opts",   "dropout",    "causal",  "gelu",      "emb_scale", "head",
                                       "head_bias",  "init_std",   "ln_eps",  "attn_scale", NULL};
    mg_gpt_config c = small("learned");
    mg_gpt *g = make(&c, 80);
    const char *p = tmp_path("keys.safetensors");
    ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
    mg_st_file *f;
    TU_OK(mg_safetensors_open(p, &f));
    for (int k = 0; keys[k]; k++) ck_assert_msg(mg_st_meta_get(f, keys[k]), "mg_gpt_save does not write '%s'", keys[k]);
    ck_assert_str_eq(mg_st_meta_get(f, "pos_opts"), "");
    mg_st_close(f);
    for (int k = 0; keys[k]; k++) {
        char want[100];
        snprintf(want, sizeof want, "__metadata__ lacks the key '%s'", keys[k]);
        for (int old = 0; old < 2; old++) {
            write_variant(g, p, NULL, NULL, 0, NULL, keys[k], NULL);
            if (old) tu_strip_checksum(p);
            bool may_lack = old && (!strcmp(keys[k], "ln_eps") || !strcmp(keys[k], "attn_scale") ||
                                    !strcmp(keys[k], "pos_opts"));
            mg_gpt *h = (mg_gpt *)1;
            if (may_lack) {
                ck_assert_msg(mg_gpt_from_checkpoint(p, &h, NULL) == MG_OK, "%s: %s", keys[k], mg_last_error());
                mg_gpt_free(h);
                TU_OK(mg_gpt_load(g, p));
            } else {
                TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_FORMAT, want, "keys.safetensors");
                ck_assert_ptr_null(h);
                TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, want);
            }
        }
    }
    /* misspelt, in a file with its checksum and in one without */
    for (int old = 0; old < 2; old++) {
        ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
        if (old) tu_strip_checksum(p);
        size_t n;
        char *b = tu_read_file(p, &n), *at = strstr(b + 8, "\"causal\":");
        ck_assert_ptr_nonnull(at);
        memcpy(at, "\"casual\":", 9);
        tu_write_bytes(p, b, n);
        free(b);
        mg_gpt *h = (mg_gpt *)1;
        TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_FORMAT, "__metadata__ lacks the key 'causal'");
        ck_assert_ptr_null(h);
    }
    mg_gpt_free(g);
}
END_TEST

/* A flipped bit in a weight or a hand-edited metadata value is an error naming the file; NaN or
 * infinite weights are refused naming the tensor. Nothing is written into the model. */
START_TEST(damaged_and_non_finite_weights_are_refused) {
    mg_gpt_config c = small("rope");
    mg_gpt *g = make(&c, 81), *h = (mg_gpt *)1;
    mg_params *P = mg_gpt_params(g);
    int64_t slab = mg_params_slab_size(P);
    float *before = malloc((size_t)slab * 4);
    memcpy(before, mg_params_data(P), (size_t)slab * 4);
    const char *p = tmp_path("w.safetensors");
    ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
    tu_flip_bit(p, -77, 3);
    TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_FORMAT, "w.safetensors", "checksum mismatch");
    ck_assert_ptr_null(h);
    TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_FORMAT, "w.safetensors", "checksum mismatch");
    ck_assert(memcmp(before, mg_params_data(P), (size_t)slab * 4) == 0);
    /* emb_scale 1 -> 3: the same tensors, another model; and pos rope -> none, neither with tensors */
    static const char *const edits[2][2] = {{"\"emb_scale\":\"1\"", "\"emb_scale\":\"3\""},
                                            {"\"pos\":\"rope\"", "\"pos\":\"none\""}};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
        size_t n;
        char *b = tu_read_file(p, &n), *at = strstr(b + 8, edits[k][0]);
        ck_assert_ptr_nonnull(at);
        memcpy(at, edits[k][1], strlen(edits[k][1]));
        tu_write_bytes(p, b, n);
        free(b);
        mg_st_file *f;
        TU_OK(mg_safetensors_open(p, &f));
        TU_ASSERT_ERR(mg_st_verify(f), MG_ERR_FORMAT, "checksum mismatch");
        mg_st_close(f);
    }
    ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
    {
        size_t n;
        char *b = tu_read_file(p, &n), *at = strstr(b + 8, edits[0][0]);
        memcpy(at, edits[0][1], strlen(edits[0][1]));
        tu_write_bytes(p, b, n);
        free(b);
    }
    TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_FORMAT, "checksum mismatch");
    ck_assert_ptr_null(h);

    /* NaN and infinite weights, saved as they are (a diverged model) */
    mg_tensor *w = mg_params_find(P, "h.1.mlp.c_fc.weight");
    ck_assert_ptr_nonnull(w);
    const float bad[2] = {NAN, -INFINITY};
    for (int k = 0; k < 2; k++) {
        w->data[5] = bad[k];
        ck_assert_int_eq(mg_gpt_save(g, p, NULL, 0), MG_OK);
        memcpy(mg_params_data(P), before, (size_t)slab * 4);
        TU_ASSERT_ERR(mg_gpt_from_checkpoint(p, &h, NULL), MG_ERR_NONFINITE, "w.safetensors",
                      "tensor 'h.1.mlp.c_fc.weight' holds", k ? "-inf" : "NaN", "element 5 of");
        ck_assert_ptr_null(h);
        TU_ASSERT_ERR(mg_gpt_load(g, p), MG_ERR_NONFINITE, "h.1.mlp.c_fc.weight");
        ck_assert(memcmp(before, mg_params_data(P), (size_t)slab * 4) == 0);
    }
    free(before);
    mg_gpt_free(g);
}
END_TEST

/* ---- every number the forward pass needs is in the metadata ---- */

/* The model's tensors with its metadata minus the keys in `drop` (NULL-terminated): a file as an
 * older minigrad wrote it. */
static void write_without(mg_gpt *g, const char *path, const char *const *drop) {
    mg_params *P = mg_gpt_params(g);
    mg_st_entry e[64];
    int n = 0;
    for (int i = 0; i < mg_params_len(P); i++) {
        mg_tensor *t = mg_params_at(P, i);
        e[n] = (mg_st_entry){t->name, t->ndim, {0}, t->data};
        for (int d = 0; d < t->ndim; d++) e[n].shape[d] = t->shape[d];
        n++;
    }
    mg_st_meta meta[MG_GPT_META_MAX], out[MG_GPT_META_MAX];
    char buf[MG_GPT_META_MAX][MG_GPT_META_LEN];
    int m = mg_gpt_config_to_meta(mg_gpt_cfg(g), meta, buf), k = 0;
    for (int i = 0; i < m; i++) {
        bool keep = true;
        for (int j = 0; drop[j]; j++) keep = keep && strcmp(meta[i].key, drop[j]) != 0;
        if (keep) out[k++] = meta[i];
    }
    ck_assert_int_eq(k, m - 2);
    ck_assert_msg(mg_safetensors_write(path, e, n, out, k) == MG_OK, "%s", mg_last_error());
    tu_strip_checksum(path); /* older versions wrote none */
}

/* logits (1,5,11) of a fixed sequence into out (room for 55) */
static void fixed_logits(mg_gpt *g, float *out) {
    mg_ctx *ctx = mg_ctx_new(0);
    int32_t ids[5] = {3, 1, 4, 1, 5};
    mg_tensor *y = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 5}, ids), NULL);
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(y->numel, 5 * 11);
    memcpy(out, y->data, sizeof(float) * 5 * 11);
    mg_ctx_free(ctx);
}

START_TEST(eps_and_attention_scale_in_metadata) {
    static const char *const new_keys[] = {"ln_eps", "attn_scale", NULL};
    float a[55], b[55];
    /* defaults: written as the values in use (head dim 4: scale 0.5) */
    mg_gpt_config c = small("rope");
    mg_gpt *g = make(&c, 70);
    ck_assert(mg_gpt_cfg(g)->attn_scale == 0.5f && mg_gpt_cfg(g)->ln_eps == 1e-5f);
    const char *path = tmp_path("m.safetensors");
    ck_assert_msg(mg_gpt_save(g, path, NULL, 0) == MG_OK, "%s", mg_last_error());
    mg_gpt *h = NULL;
    mg_st_file *f = NULL;
    ck_assert_msg(mg_gpt_from_checkpoint(path, &h, &f) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(mg_st_meta_get(f, "ln_eps"), "1e-05");
    ck_assert_str_eq(mg_st_meta_get(f, "attn_scale"), "0.5");
    mg_st_close(f);
    mg_gpt_free(h);

    /* an older file without the two keys: today's defaults, the same logits */
    const char *old = tmp_path("old.safetensors");
    write_without(g, old, new_keys);
    ck_assert_msg(mg_gpt_from_checkpoint(old, &h, NULL) == MG_OK, "%s", mg_last_error());
    ck_assert(mg_gpt_cfg(h)->ln_eps == 1e-5f && mg_gpt_cfg(h)->attn_scale == 0.5f);
    fixed_logits(g, a);
    fixed_logits(h, b);
    ck_assert_mem_eq(a, b, sizeof a);
    mg_gpt_free(h);
    ck_assert_msg(mg_gpt_load(g, old) == MG_OK, "%s", mg_last_error());

    /* other values survive the round trip and are what the model computes with */
    mg_gpt_config o = small("alibi");
    o.ln_eps = 0.01f, o.attn_scale = 0.3f;
    mg_gpt *go = make(&o, 71);
    const char *po = tmp_path("other.safetensors");
    ck_assert_msg(mg_gpt_save(go, po, NULL, 0) == MG_OK, "%s", mg_last_error());
    ck_assert_msg(mg_gpt_from_checkpoint(po, &h, &f) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(mg_st_meta_get(f, "ln_eps"), "0.01");
    ck_assert_str_eq(mg_st_meta_get(f, "attn_scale"), "0.3");
    mg_st_close(f);
    ck_assert(mg_gpt_cfg(h)->ln_eps == 0.01f && mg_gpt_cfg(h)->attn_scale == 0.3f);
    fixed_logits(go, a);
    fixed_logits(h, b);
    ck_assert_mem_eq(a, b, sizeof a);
    mg_gpt_free(h);
    for (int k = 0; k < 2; k++) { /* the same weights with either number at its default compute otherwise */
        mg_gpt_config d = o;
        if (k) d.attn_scale = 0.0f;
        else d.ln_eps = 1e-5f;
        mg_gpt *gd = make(&d, 72);
        mg_params *Pd = mg_gpt_params(gd), *Po = mg_gpt_params(go);
        ck_assert_int_eq(mg_params_slab_size(Pd), mg_params_slab_size(Po));
        memcpy(mg_params_data(Pd), mg_params_data(Po), (size_t)mg_params_slab_size(Po) * 4);
        fixed_logits(gd, b);
        ck_assert_msg(memcmp(a, b, sizeof a) != 0, "%s does not change the logits", k ? "attn_scale" : "ln_eps");
        TU_ASSERT_ERR(mg_gpt_load(gd, po), MG_ERR_INVALID,
                      k ? "__metadata__ attn_scale = '0.3' but the model has attn_scale = '0.5'"
                        : "__metadata__ ln_eps = '0.01' but the model has ln_eps = '1e-05'");
        mg_gpt_free(gd);
    }
    mg_gpt_free(go);
    mg_gpt_free(g);

    /* both are config keys, checked like the others */
    mg_config *kv = mg_config_new("test");
    ck_assert_int_eq(mg_config_set(kv, "attn_scale", "-1"), MG_OK);
    mg_gpt_config bad = mg_gpt_config_default();
    TU_ASSERT_ERR(mg_gpt_config_from(kv, &bad), MG_ERR_INVALID, "attn_scale");
    mg_config_free(kv);
}
END_TEST

/* ---- exact resume ---- */

static void train_steps(mg_gpt *g, mg_optim *o, mg_rng *drop, int from, int to) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_params *P = mg_gpt_params(g);
    for (int step = from; step < to; step++) {
        mg_rng data = mg_rng_make(5000 + (uint64_t)step); /* batch t depends on t only */
        int32_t ids[2 * 7];
        for (int i = 0; i < 14; i++) ids[i] = (int32_t)mg_rng_below(&data, 11);
        int32_t x[12], y[12];
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 6; t++) x[b * 6 + t] = ids[b * 7 + t], y[b * 6 + t] = ids[b * 7 + t + 1];
        mg_ctx_reset(ctx);
        mg_fwd a = {.train = true, .rng = drop};
        mg_tensor *loss = mg_gpt_loss(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 6}, x),
                                      mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 6}, y), &a);
        mg_params_zero_grad(P);
        mg_backward(ctx, loss);
        ck_assert(mg_ctx_ok(ctx));
        mg_optim_step(o, 3e-3f);
    }
    mg_ctx_free(ctx);
}

START_TEST(resume_is_exact) {
    mg_gpt_config c = small("rope");
    c.dropout = 0.1f; /* so the dropout generator's state matters */
    mg_adamw_cfg ac = mg_adamw_defaults();

    mg_gpt *a = make(&c, 70);
    mg_optim *oa = mg_adamw_new(mg_gpt_params(a), ac);
    mg_rng da = mg_rng_make(71);
    train_steps(a, oa, &da, 0, 20);

    mg_gpt *b = make(&c, 70);
    mg_optim *ob = mg_adamw_new(mg_gpt_params(b), ac);
    mg_rng db = mg_rng_make(71);
    train_steps(b, ob, &db, 0, 10);
    const char *wp = tmp_path("ckpt.safetensors"), *sp = tmp_path("ckpt.state.safetensors");
    ck_assert_msg(mg_gpt_save(b, wp, NULL, 0) == MG_OK, "%s", mg_last_error());
    char rs[24];
    mg_st_meta meta = {"rng.dropout", mg_meta_fmt_u64(rs, db.s)};
    ck_assert_msg(mg_train_state_save(sp, ob, mg_gpt_params(b), &meta, 1) == MG_OK, "%s", mg_last_error());
    mg_optim_free(ob);
    mg_gpt_free(b);

    mg_gpt *r = NULL;
    ck_assert_msg(mg_gpt_from_checkpoint(wp, &r, NULL) == MG_OK, "%s", mg_last_error());
    mg_optim *orr = mg_adamw_new(mg_gpt_params(r), ac);
    mg_st_file *sf = NULL;
    ck_assert_msg(mg_train_state_load(sp, orr, mg_gpt_params(r), &sf) == MG_OK, "%s", mg_last_error());
    mg_rng dr;
    ck_assert_int_eq(mg_meta_get_u64(sf, "rng.dropout", &dr.s), MG_OK);
    mg_st_close(sf);
    ck_assert_int_eq(mg_optim_steps(orr), 10);
    train_steps(r, orr, &dr, 10, 20);
    ck_assert_int_eq(mg_optim_steps(orr), 20);
    assert_same_params(a, r);
    ck_assert(dr.s == da.s);
    mg_optim_free(orr);
    mg_gpt_free(r);
    mg_optim_free(oa);
    mg_gpt_free(a);
}
END_TEST

START_TEST(summary_and_names) {
    mg_gpt_config c = small("learned");
    c.n_layer = 1;
    mg_gpt *g = make(&c, 80);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mg_gpt_print(g, f);
    fclose(f);
    ck_assert_msg(strstr(buf, "(model)") && strstr(buf, "gpt") && strstr(buf, "wte") && strstr(buf, "wpe") &&
                      strstr(buf, "learned_pos") && strstr(buf, "ln_f"),
                  "%s", buf);
    static const char *const names[] = {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight",
                                        "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.ln_2.bias",
                                        "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(mg_params_find(mg_gpt_params(g), names[i]), "no %s", names[i]);
    ck_assert_ptr_null(mg_params_find(mg_gpt_params(g), "lm_head.weight")); /* tied */
    mg_tensor *w = mg_params_find(mg_gpt_params(g), "wpe.weight");
    ck_assert_int_eq(w->shape[0], 8);
    for (int64_t i = 0; i < w->numel; i++) ck_assert(w->data[i] >= -0.1f && w->data[i] < 0.1f);
    char total[32];
    snprintf(total, sizeof total, "%lld", (long long)mg_params_numel(mg_gpt_params(g)));
    ck_assert_int_eq(mg_params_numel(mg_gpt_params(g)), 11 * 8 + 8 * 8 + 872 + 16);
    free(buf);
    mg_gpt_free(g);
}
END_TEST

/* A GPT of many tiny layers built, saved and loaded back whole: names, children and tensors are
 * found by hash or by sorted search, so this takes seconds, not the minutes of one search per
 * parameter through all the others. Correctness only; the time is not measured here. */
START_TEST(deep_model_round_trip) {
    enum { L = 4096 };
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = 3, c.block_size = 2, c.n_layer = L, c.n_head = 1, c.n_embd = 2;
    mg_gpt *g = make(&c, 7);
    mg_params *P = mg_gpt_params(g);
    ck_assert_int_eq(mg_params_len(P), 12 * L + 4); /* per block: 2 LayerNorms, 4 Linears; wte, wpe, ln_f */
    mg_layer *root = mg_gpt_layer(g);
    ck_assert_int_eq(mg_layer_child_count(root), L + 3);
    static const int blocks[] = {0, 1, 15, 16, 17, L / 2, L - 1};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "h.%d", blocks[i]);
        mg_layer *b = mg_layer_find_child(root, name);
        ck_assert_msg(b != NULL, "no child %s", name);
        ck_assert_str_eq(mg_layer_prefix(b), name);
        ck_assert_ptr_eq(b, mg_layer_child_at(root, 2 + blocks[i])); /* after wte and wpe */
        ck_assert_str_eq(mg_layer_prefix(mg_layer_find_child(mg_layer_find_child(b, "attn"), "c_proj")),
                         strcat(name, ".attn.c_proj"));
    }
    ck_assert_ptr_eq(mg_layer_find_child(root, "ln_f"), mg_layer_child_at(root, L + 2));
    ck_assert_ptr_null(mg_layer_find_child(root, "h.4096"));
    ck_assert_ptr_null(mg_layer_find_child(root, "h."));
    ck_assert_ptr_nonnull(mg_params_find(P, "h.4095.mlp.c_proj.bias"));
    ck_assert_ptr_null(mg_params_find(P, "h.4096.mlp.c_proj.bias"));

    const char *path = tmp_path("deep.safetensors");
    ck_assert_msg(mg_gpt_save(g, path, NULL, 0) == MG_OK, "%s", mg_last_error());
    mg_gpt *h = NULL;
    ck_assert_msg(mg_gpt_from_checkpoint(path, &h, NULL) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(mg_gpt_cfg(h)->n_layer, L);
    assert_same_params(g, h);
    for (int i = 0; i < mg_params_len(P); i++) /* and in the same order */
        ck_assert_str_eq(mg_params_at(P, i)->name, mg_params_at(mg_gpt_params(h), i)->name);
    mg_ctx *ctx = mg_ctx_new(0);
    int32_t ids[2] = {1, 2};
    mg_tensor *ya = mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 2}, ids), NULL);
    mg_tensor *yb = mg_gpt_forward(h, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 2}, ids), NULL);
    ck_assert_int_eq(ya->numel, 2 * 3);
    for (int64_t i = 0; i < ya->numel; i++) ck_assert(isfinite(ya->data[i]));
    ck_assert_mem_eq(ya->data, yb->data, (size_t)ya->numel * 4);
    mg_ctx_free(ctx);
    mg_gpt_free(h);
    h = make(&c, 8); /* into an existing model of the same config */
    ck_assert_msg(mg_gpt_load(h, path) == MG_OK, "%s", mg_last_error());
    assert_same_params(g, h);
    mg_gpt_free(h);
    mg_gpt_free(g);
}
END_TEST

static Suite *gpt_suite(void) {
    Suite *s = suite_create("gpt");
    TCase *tg = tcase_create("gradcheck");
    tcase_add_checked_fixture(tg, setup, teardown);
    tcase_add_loop_test(tg, gpt_gradcheck, 0, N_SCHEMES + 2);
    tcase_add_test(tg, loss_is_mean_cross_entropy);
    suite_add_tcase(s, tg);
    TCase *tp = tcase_create("posenc_golden");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_add_loop_test(tp, posenc_golden_logits, 0, N_SCHEMES);
    tcase_add_test(tp, posenc_equivariances);
    suite_add_tcase(s, tp);
    TCase *tk = tcase_create("generation");
    tcase_add_checked_fixture(tk, setup, teardown);
    tcase_add_loop_test(tk, kv_cache_matches_full_forward, 0, N_SCHEMES + 1);
    tcase_add_loop_test(tk, generation_with_cache_equals_recomputation, 0, N_SCHEMES + 1);
    tcase_add_test(tk, generation_options_and_errors);
    tcase_add_test(tk, sampling_rules);
    tcase_add_test(tk, sampling_bad_arguments);
    tcase_add_loop_test(tk, generation_in_bf16, 0, 2);
    tcase_add_test(tk, bf16_weights_kept_across_resets);
    tcase_add_test(tk, bf16_kept_weights_refreshed);
    tcase_add_loop_test(tk, generation_buffers_kept_and_weights_reread, 0, 2);
    tcase_add_loop_test(tk, concurrent_generation_on_one_model, 0, 2);
    tcase_add_test(tk, generation_buffers_follow_the_request);
    tcase_add_loop_test(tk, bf16_decoding_packed_weights_wide_model, 0, 2);
    suite_add_tcase(s, tk);
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, checkpoint_round_trip_bit_exact);
    tcase_add_test(tc, malformed_checkpoints_at_model_level);
    tcase_add_test(tc, metadata_sizes_are_checked_before_allocating);
    tcase_add_test(tc, config_sizes_are_held_to_a_parameter_budget);
    tcase_add_test(tc, config_enums_and_scale_are_checked);
    tcase_add_test(tc, every_config_key_is_required);
    tcase_add_test(tc, damaged_and_non_finite_weights_are_refused);
    tcase_add_test(tc, eps_and_attention_scale_in_metadata);
    tcase_add_test(tc, resume_is_exact);
    tcase_add_test(tc, summary_and_names);
    tcase_add_test(tc, deep_model_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(gpt_suite)
