/* The posenc comparison program (examples/posenc): its scheme catalogue, the classifier its model
 * builder makes (the sizes and initialisation of docs/posenc-benchmark.md, "the spec", its
 * section-7 golden logits, RoPE pairing, ALiBi sign and slopes and the sinusoid layout checked on
 * tiny inputs against values worked out by hand), evaluation, attention maps against the attention
 * layer itself, short training runs, and the `posenc` binary end to end: tables, CSV and PNGs well
 * formed, clear errors for a bad scheme or a missing plugin, a plugin scheme joining the
 * comparison, a Ctrl-C or SIGTERM that reports the runs finished so far, and results that do not depend on the thread count or on the worker processes. The
 * data side has its own suite (posenc_data). */
#include "layer_check.h"
#include "posenc_golden.h"
#include "test_util.h"
#include "posenc.h"

#include "minigrad/op.h"

#include <stb_image.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const spec_labels[6] = {"none",        "sin",  "learned",
                                           "learned_sin", "rope", "alibi"};
static const char *const spec_names[6] = {"none", "sinusoidal", "learned", "learned+sinusoidal",
                                          "rope", "alibi"};

/* The spec's six, then a scheme from a plugin of the build tree whose bias trains (t5_bias). */
static const char *const all_names[7] = {"none", "sinusoidal", "learned", "learned+sinusoidal", "rope", "alibi",
                                         "t5_bias"};

static char tmpdir[256];

static void setup(void) {
    mg_log_set(lc_quiet_log, NULL);
    lc_use_build_plugins();
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_test_posenc");
}

static void teardown(void) {
    ck_assert(tu_remove_tree(tmpdir));
}

static const char *tmp_path(const char *name) {
    return tu_path_in(tmpdir, name);
}

static mg_gpt *model(const char *scheme, uint32_t seed) {
    mg_gpt *g = NULL;
    ck_assert_msg(posenc_model_new(scheme, seed, &g) == MG_OK, "%s: %s", scheme, mg_last_error());
    return g;
}

static void set_all(mg_tensor *t, float v) {
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = v;
}

/* ---- the catalogue ---- */

START_TEST(catalogue_lists_the_spec_schemes_in_order) {
    posenc_catalog c;
    ck_assert_int_eq(posenc_catalog_discover(&c, NULL),
                     MG_OK); /* MINIGRAD_PLUGIN_PATH: the build's */
    ck_assert_int_ge(c.n, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(c.s[i].label, spec_labels[i]);
        ck_assert_str_eq(c.s[i].name, spec_names[i]);
        ck_assert_str_eq(posenc_scheme_label(spec_names[i]), spec_labels[i]);
        ck_assert_str_eq(posenc_scheme_name(spec_labels[i]), spec_names[i]);
        ck_assert_ptr_eq(posenc_catalog_find(&c, spec_labels[i]), &c.s[i]); /* both spellings */
        ck_assert_ptr_eq(posenc_catalog_find(&c, spec_names[i]), &c.s[i]);
    }
    ck_assert_str_eq(c.s[1].origin, "built-in");
    ck_assert_msg(strstr(c.s[5].origin, "libalibi.so"), "alibi comes from %s", c.s[5].origin);
    ck_assert_ptr_null(posenc_catalog_find(&c, "sinus"));
    ck_assert_str_eq(posenc_scheme_label("logbias"), "logbias"); /* others keep their name */
    /* the build's folder holds working plugins only (the loader's test plugins live elsewhere) */
    ck_assert_msg(c.skipped[0] == 0, "%s", c.skipped);
    char names[256];
    posenc_catalog_names(&c, names, sizeof names);
    ck_assert_msg(strncmp(names, "none, sin, learned, learned_sin, rope, alibi", 44) == 0, "%s",
                  names);
}
END_TEST

START_TEST(selecting_schemes) {
    posenc_catalog c;
    posenc_catalog_discover(&c, NULL);
    int idx[POSENC_MAX_SCHEMES], n = -1;
    char notes[512];
    ck_assert_int_eq(
        posenc_catalog_select(&c, "rope,sin,learned+sinusoidal", idx, 32, &n, notes, sizeof notes),
        MG_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(idx[0], 4);
    ck_assert_int_eq(idx[1], 1);
    ck_assert_int_eq(idx[2], 3);
    ck_assert_int_eq(posenc_catalog_select(&c, "all", idx, 32, &n, notes, sizeof notes), MG_OK);
    ck_assert_int_eq(n, c.n);
    ck_assert_str_eq(notes, "");

    ck_assert_int_eq(posenc_catalog_select(&c, "sin,bogus", idx, 32, &n, NULL, 0),
                     MG_ERR_NOT_FOUND);
    tu_assert_error_has("unknown positional scheme 'bogus' (available: none, sin, learned, "
                        "learned_sin, rope, alibi");
    tu_assert_error_has("plugin directories searched: ");
    ck_assert_int_eq(posenc_catalog_select(&c, "rope,rope", idx, 32, &n, NULL, 0), MG_ERR_INVALID);
    tu_assert_error_has("'rope' is listed twice");
    ck_assert_int_eq(posenc_catalog_select(&c, "rope,,sin", idx, 32, &n, NULL, 0), MG_ERR_INVALID);
    tu_assert_error_has("empty or overlong entry");
    ck_assert_int_eq(posenc_catalog_select(&c, "sin,rope", idx, 1, &n, NULL, 0), MG_ERR_INVALID);
    tu_assert_error_has("more than 1 schemes");
}
END_TEST

/* ---- the classifier ---- */

START_TEST(model_has_the_spec_shape_and_initialisation) {
    const char *scheme = spec_names[_i];
    mg_gpt *g = model(scheme, 7), *same = model(scheme, 7), *other = model(scheme, 8);
    const mg_gpt_config *c = mg_gpt_cfg(g);
    ck_assert_int_eq(c->vocab_size, 16);
    ck_assert_int_eq(c->block_size, 32);
    ck_assert_int_eq(c->n_embd, 64);
    ck_assert_int_eq(c->n_head, 4);
    ck_assert_int_eq(c->n_layer, 2);
    ck_assert(!c->causal && c->gelu == MG_GELU_ERF && !c->tied_head && c->head_bias);
    ck_assert_float_eq(c->emb_scale, 8.0f);
    ck_assert_float_eq(c->dropout, 0.0f);
    bool learned = strncmp(scheme, "learned", 7) == 0;
    mg_params *P = mg_gpt_params(g);
    /* docs/posenc-benchmark.md section 4 */
    ck_assert_int_eq(mg_params_numel(P), learned ? 104208 : 102160);
    /* d_ff = 256 */
    ck_assert_int_eq(pg_param(g, "h.1.mlp.c_fc.weight")->shape[1], 256);
    for (int i = 0; i < mg_params_len(P); i++) {
        mg_tensor *t = mg_params_at(P, i);
        double lo = 1e9, hi = -1e9;
        for (int64_t j = 0; j < t->numel; j++) lo = fmin(lo, t->data[j]), hi = fmax(hi, t->data[j]);
        double bound;
        if (strstr(t->name, "ln_")) {
            double want = strstr(t->name, ".weight") ? 1.0 : 0.0;
            ck_assert_msg(lo == want && hi == want, "%s: LayerNorm not %g (%g..%g)", t->name, want,
                          lo, hi);
            continue;
        }
        if (strncmp(t->name, "wte.", 4) == 0 || strncmp(t->name, "wpe.", 4) == 0)
            bound = 0.1;
        else if (strstr(t->name, "mlp.c_proj"))
            bound = 1.0 / 16.0; /* fan-in 256 */
        else
            bound = 1.0 / 8.0; /* fan-in 64 */
        /* U(-bound, bound): inside, and spread over most of it (checked from 64 draws on) */
        ck_assert_msg(lo >= -bound && hi < bound, "%s: %g..%g outside +-%g", t->name, lo, hi,
                      bound);
        if (t->numel >= 64)
            ck_assert_msg(lo < -0.8 * bound && hi > 0.8 * bound, "%s: %g..%g does not fill +-%g",
                          t->name, lo, hi, bound);
        /* seeded: the same seed gives the same weights, another seed others */
        ck_assert_mem_eq(t->data, pg_param(same, t->name)->data, (size_t)t->numel * sizeof(float));
        ck_assert_msg(
            memcmp(t->data, pg_param(other, t->name)->data, (size_t)t->numel * sizeof(float)) != 0,
            "%s: seed 8 gives seed 7's weights", t->name);
    }
    /* the shared weights do not depend on the scheme: only the positional parameters differ */
    mg_gpt *ref = model("none", 7);
    mg_params *R = mg_gpt_params(ref);
    for (int i = 0; i < mg_params_len(R); i++) {
        mg_tensor *t = mg_params_at(R, i);
        ck_assert_mem_eq(t->data, pg_param(g, t->name)->data, (size_t)t->numel * sizeof(float));
    }
    mg_gpt_free(ref);
    mg_gpt_free(g);
    mg_gpt_free(same);
    mg_gpt_free(other);
}
END_TEST

/* docs/posenc-benchmark.md section 7, through the program's builder: every weight filled from
 * sm64(0x601DE0) with w = c + a (2u - 1) in the spec's order, logits of the first two rev/val
 * sequences against the float64 goldens. */
START_TEST(golden_logits_of_section_7) {
    mg_gpt *g = model(spec_names[_i], 0);
    pg_fill_section7(g, spec_names[_i]);

    posenc_data val;
    ck_assert_int_eq(posenc_data_make(&val, POSENC_REV, POSENC_VAL, 2), MG_OK);
    mg_ctx *ctx = posenc_ctx_new();
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *y =
        mg_gpt_forward(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){2, 32}, val.x), NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    pg_expect_golden_logits(y, spec_names[_i], spec_labels[_i]);
    mg_ctx_free(ctx);
    posenc_data_free(&val);
    mg_gpt_free(g);
}
END_TEST

/* A model whose first block's attention sees only the c_attn bias: ln_1 gain and bias 0, so the
 * projection input is 0 and q, k, v are the bias for every position. head0_q / head0_k: index
 * within head 0 set to `amp` in q and in k (-1: none). */
static mg_gpt *bias_only_attention(const char *scheme, int head0_q, int head0_k, float amp) {
    mg_gpt *g = model(scheme, 1);
    set_all(pg_param(g, "h.0.ln_1.weight"), 0.0f);
    set_all(pg_param(g, "h.0.ln_1.bias"), 0.0f);
    set_all(pg_param(g, "h.0.attn.c_attn.weight"), 0.0f);
    mg_tensor *b = pg_param(g, "h.0.attn.c_attn.bias");
    set_all(b, 0.0f);
    if (head0_q >= 0) b->data[head0_q] = amp;      /* q: columns 0..63, head 0 = 0..15 */
    if (head0_k >= 0) b->data[64 + head0_k] = amp; /* k: columns 64..127 */
    return g;
}

static float *attention_of(mg_gpt *g, int T) {
    static const int32_t x[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    float *p = malloc(sizeof(float) * 2 * 4 * (size_t)(T * T));
    mg_ctx *ctx = posenc_ctx_new();
    ck_assert_msg(posenc_attention(g, ctx, x, T, p) == MG_OK, "%s", mg_last_error());
    mg_ctx_free(ctx);
    return p;
}

/* RoPE, interleaved pairs: q = 2 e_2, k = 2 e_3 at every position. Rotating pair (2,3) of the
 * query at i by i*theta_1 and of the key at j by j*theta_1 (theta_1 = 10000^(-2/16)) gives
 * q.k = 4 sin((i - j) theta_1), so head 0 scores s_ij = sin((i-j) theta_1) (q.k / sqrt(16)).
 * Worked out by hand (5 positions):
 *   query 0: 0.3209790 0.2351896 0.1777270 0.1424124 0.1236920
 *   query 3: 0.3149013 0.2523300 0.1906795 0.1397158 0.1023734
 * Rotating the other way would mirror these rows; pairing (i, i + 8) instead of (2i, 2i+1) would
 * leave q.k = 0 (uniform 0.2); the other heads have q = k = 0: uniform. */
START_TEST(rope_pairs_and_rotates_as_worked_out) {
    static const double q0[5] = {0.3209790, 0.2351896, 0.1777270, 0.1424124, 0.1236920};
    static const double q3[5] = {0.3149013, 0.2523300, 0.1906795, 0.1397158, 0.1023734};
    mg_gpt *g = bias_only_attention("rope", 2, 3, 2.0f);
    float *p = attention_of(g, 5);
    for (int j = 0; j < 5; j++) {
        ck_assert_msg(fabs(p[0 * 5 + j] - q0[j]) < 2e-6, "query 0 key %d: %.7f, by hand %.7f", j,
                      (double)p[j], q0[j]);
        ck_assert_msg(fabs(p[3 * 5 + j] - q3[j]) < 2e-6, "query 3 key %d: %.7f, by hand %.7f", j,
                      (double)p[15 + j], q3[j]);
        for (int h = 1; h < 4; h++) ck_assert_float_eq_tol(p[(h * 5 + 2) * 5 + j], 0.2f, 1e-7f);
    }
    /* the same weights without rotation: nothing but uniform attention */
    mg_gpt *n = bias_only_attention("none", 2, 3, 2.0f);
    float *u = attention_of(n, 5);
    for (int k = 0; k < 4 * 25; k++) ck_assert_float_eq_tol(u[k], 0.2f, 1e-7f);
    free(p);
    free(u);
    mg_gpt_free(g);
    mg_gpt_free(n);
}
END_TEST

/* ALiBi with q = k = 0: the scores are the bias alone, -m_h |i - j| with m_h = 1/4, 1/16, 1/64,
 * 1/256. By hand, query 2 of 5: head 0 (1/4): 0.1608552 0.2065421 0.2652054 0.2065421 0.1608552;
 * head 1 (1/16): 0.1900368 0.2022932 0.2153400 0.2022932 0.1900368. The nearest key gets the most
 * weight (a negative sign), symmetrically (bidirectional). */
START_TEST(alibi_sign_and_slopes_as_worked_out) {
    static const double h0[5] = {0.1608552, 0.2065421, 0.2652054, 0.2065421, 0.1608552};
    static const double h1[5] = {0.1900368, 0.2022932, 0.2153400, 0.2022932, 0.1900368};
    mg_gpt *g = bias_only_attention("alibi", -1, -1, 0.0f);
    float *p = attention_of(g, 5);
    for (int j = 0; j < 5; j++) {
        ck_assert_msg(fabs(p[(0 * 5 + 2) * 5 + j] - h0[j]) < 2e-6,
                      "head 0 key %d: %.7f, by hand %.7f", j, (double)p[10 + j], h0[j]);
        ck_assert_msg(fabs(p[(1 * 5 + 2) * 5 + j] - h1[j]) < 2e-6,
                      "head 1 key %d: %.7f, by hand %.7f", j, (double)p[35 + j], h1[j]);
    }
    /* every head, every query: softmax_j(-m_h |i - j|) with m_h = 2^(-2(h+1)) */
    for (int h = 0; h < 4; h++)
        for (int i = 0; i < 5; i++) {
            double m = pow(2.0, -2.0 * (h + 1)), z = 0.0;
            for (int j = 0; j < 5; j++) z += exp(-m * abs(i - j));
            for (int j = 0; j < 5; j++)
                ck_assert_msg(fabs(p[(h * 5 + i) * 5 + j] - exp(-m * abs(i - j)) / z) < 2e-6,
                              "head %d query %d key %d", h, i, j);
        }
    free(p);
    mg_gpt_free(g);
}
END_TEST

/* The sinusoid as the model adds it: P[pos, 2k] = sin(pos 10000^(-2k/64)), P[pos, 2k+1] = cos(...).
 * By hand: P[1,0..1] = 0.8414710 0.5403023; P[5,2..3] = -0.5711272 -0.8208616;
 * P[31,6..7] = 0.4848757 0.8745831; P[17,62..63] = 0.0022670 0.9999974. */
START_TEST(sinusoid_layout_as_worked_out) {
    static const struct {
        int pos, dim;
        double v;
    } by_hand[8] = {{1, 0, 0.8414710},   {1, 1, 0.5403023},  {5, 2, -0.5711272},
                    {5, 3, -0.8208616},  {31, 6, 0.4848757}, {31, 7, 0.8745831},
                    {17, 62, 0.0022670}, {17, 63, 0.9999974}};
    mg_ctx *ctx = posenc_ctx_new();
    float *tab = malloc(sizeof(float) * 32 * 64), *both = malloc(sizeof(float) * 32 * 64);
    bool nz = false;
    mg_gpt *g = model("sin", 3);
    ck_assert_int_eq(posenc_additive_table(g, ctx, 32, tab, &nz), MG_OK);
    ck_assert(nz);
    for (int k = 0; k < 8; k++)
        ck_assert_msg(fabs(tab[by_hand[k].pos * 64 + by_hand[k].dim] - by_hand[k].v) < 1e-6,
                      "P[%d,%d] = %.7f, by hand %.7f", by_hand[k].pos, by_hand[k].dim,
                      (double)tab[by_hand[k].pos * 64 + by_hand[k].dim], by_hand[k].v);
    for (int d = 0; d < 64; d++) ck_assert_float_eq(tab[d], d % 2 ? 1.0f : 0.0f); /* position 0 */
    int rows = -1, cols = -1;
    posenc_trained_table(g, both, 32 * 64, &rows, &cols);
    ck_assert_int_eq(rows, 0); /* fixed: nothing trained */
    mg_gpt_free(g);

    /* learned_sin adds P_sin + P_learn; learned adds P_learn alone */
    g = model("learned_sin", 3);
    ck_assert_int_eq(posenc_additive_table(g, ctx, 32, both, &nz), MG_OK);
    const float *w = pg_param(g, "wpe.weight")->data;
    for (int i = 0; i < 32 * 64; i++) ck_assert_float_eq_tol(both[i], tab[i] + w[i], 1e-6f);
    posenc_trained_table(g, both, 32 * 64, &rows, &cols);
    ck_assert_int_eq(rows, 32);
    ck_assert_int_eq(cols, 64);
    ck_assert_mem_eq(both, w, sizeof(float) * 32 * 64);
    mg_gpt_free(g);
    for (int s = 0; s < 6; s++) {
        if (s == 1 || s == 3) continue;
        g = model(spec_names[s], 3);
        ck_assert_int_eq(posenc_additive_table(g, ctx, 32, both, &nz), MG_OK);
        ck_assert_msg(nz == (s == 2), "%s: additive table nonzero = %d", spec_names[s], nz);
        if (s == 2)
            ck_assert_mem_eq(both, pg_param(g, "wpe.weight")->data, sizeof(float) * 32 * 64);
        mg_gpt_free(g);
    }
    free(tab);
    free(both);
    mg_ctx_free(ctx);
}
END_TEST

/* The probe draws each scheme from its own forward and hooks: the additive table for the
 * embedding schemes, the logit bias per head for alibi (-m_h |i - j|) and t5_bias (its table at
 * the bucket of j - i: below 8 apart, bucket i - j for keys before the query and 16 + j - i after,
 * bidirectional with 32 buckets), the rotated q.k for rope (a function of i - j, 1 on the
 * diagonal); learned exactly when the scheme has parameters. */
START_TEST(probe_draws_what_each_scheme_does) {
    const char *name = all_names[_i];
    mg_gpt *g = model(name, 3);
    mg_ctx *ctx = posenc_ctx_new();
    posenc_probe *p = malloc(sizeof *p);
    float *tab = malloc(sizeof(float) * 32 * 64);
    ck_assert_msg(posenc_scheme_probe(g, ctx, p) == MG_OK, "%s: %s", name, mg_last_error());
    const bool embed = _i >= 1 && _i <= 3, learned = _i == 2 || _i == 3 || _i == 6;
    ck_assert_msg(p->has_embed == embed && p->has_rot == (_i == 4) && p->has_bias == (_i == 5 || _i == 6),
                  "%s: embed %d rot %d bias %d", name, p->has_embed, p->has_rot, p->has_bias);
    ck_assert_msg(p->learned == learned, "%s: learned %d", name, p->learned);
    bool nz = false;
    ck_assert_int_eq(posenc_additive_table(g, ctx, 32, tab, &nz), MG_OK);
    if (embed) ck_assert_mem_eq(p->embed, tab, sizeof(float) * 32 * 64);
    if (_i == 4)
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++) {
                if (i + 5 < 32 && j + 5 < 32)
                    ck_assert_float_eq_tol(p->rot[i * 32 + j], p->rot[(i + 5) * 32 + j + 5], 1e-5f);
                if (i == j) ck_assert_float_eq_tol(p->rot[i * 32 + j], 1.0f, 1e-5f);
            }
    if (_i == 5)
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < 32; i++)
                for (int j = 0; j < 32; j++)
                    ck_assert_float_eq_tol(p->bias[(h * 32 + i) * 32 + j],
                                           -exp2f(-8.0f * (float)(h + 1) / 4.0f) * (float)abs(i - j), 1e-6f);
    if (_i == 6) {
        const mg_tensor *w = mg_params_find(mg_gpt_params(g), "wpe.relative_attention_bias.weight");
        ck_assert_ptr_nonnull(w);
        ck_assert(w->shape[0] == 32 && w->shape[1] == 4);
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < 32; i++)
                for (int j = 0; j < 32; j++) {
                    const int r = j - i;
                    if (abs(r) >= 8) continue;
                    const int b = r > 0 ? 16 + r : -r;
                    ck_assert_float_eq(p->bias[(h * 32 + i) * 32 + j], w->data[b * 4 + h]);
                }
    }
    free(tab);
    free(p);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* The attention map equals what the attention layer computes: c_proj(sum_j p_ij v_j) from the
 * map's probabilities matches the layer's output, for every scheme and both layers. */
START_TEST(attention_map_matches_the_layer) {
    mg_gpt *g = model(all_names[_i], 5);
    /* a learned logit bias (t5_bias) far from its small initial values, so it shows in the map */
    mg_tensor *tb = mg_params_find(mg_gpt_params(g), "wpe.relative_attention_bias.weight");
    mg_rng tr = mg_rng_make(78);
    for (int64_t i = 0; tb && i < tb->numel; i++) tb->data[i] = mg_rng_range(&tr, -2.0f, 2.0f);
    mg_rng r = mg_rng_make(77);
    int32_t x[32];
    for (int i = 0; i < 32; i++) x[i] = (int32_t)mg_rng_below(&r, 16);
    /* sharper attention than at initialisation, so the check is not about near-uniform rows */
    for (int l = 0; l < 2; l++) {
        char n[64];
        snprintf(n, sizeof n, "h.%d.attn.c_attn.weight", l);
        mg_tensor *w = pg_param(g, n);
        for (int64_t i = 0; i < w->numel; i++) w->data[i] *= 3.0f;
    }
    float *p = malloc(sizeof(float) * 2 * 4 * 32 * 32);
    mg_ctx *ctx = posenc_ctx_new();
    ck_assert_msg(posenc_attention(g, ctx, x, 32, p) == MG_OK, "%s", mg_last_error());
    double pmax = 0.0;
    for (int k = 0; k < 2 * 4 * 32 * 32; k++) pmax = fmax(pmax, p[k]);
    ck_assert_msg(pmax > 0.3, "attention too flat to test (max %g)", pmax);

    mg_ctx_set_grad_enabled(ctx, false);
    mg_layer *root = mg_gpt_layer(g), *wpe = mg_layer_find_child(root, "wpe");
    mg_fwd a = {.pos = wpe};
    mg_tensor *h = mg_layer_forward(mg_layer_find_child(root, "wte"), ctx,
                                    mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, 32}, x), &a);
    if (wpe) h = mg_layer_forward(wpe, ctx, h, &a);
    for (int l = 0; l < 2; l++) {
        char n[16];
        snprintf(n, sizeof n, "h.%d", l);
        mg_layer *blk = mg_layer_find_child(root, n), *att = mg_layer_find_child(blk, "attn");
        mg_tensor *in = mg_layer_forward(mg_layer_find_child(blk, "ln_1"), ctx, h, &a);
        mg_tensor *want = mg_layer_forward(att, ctx, in, &a);
        mg_tensor *qkv = mg_layer_forward(mg_layer_find_child(att, "c_attn"), ctx, in, &a);
        mg_tensor *o = mg_zeros(ctx, 3, (int64_t[]){1, 32, 64});
        for (int hh = 0; hh < 4; hh++)
            for (int i = 0; i < 32; i++)
                for (int j = 0; j < 32; j++) {
                    float pij = p[((l * 4 + hh) * 32 + i) * 32 + j];
                    for (int e = 0; e < 16; e++)
                        o->data[i * 64 + hh * 16 + e] +=
                            pij * qkv->data[j * 192 + 128 + hh * 16 + e];
                }
        mg_tensor *got = mg_layer_forward(mg_layer_find_child(att, "c_proj"), ctx, o, &a);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        for (int k = 0; k < 32 * 64; k++)
            ck_assert_msg(fabsf(got->data[k] - want->data[k]) < 2e-5f,
                          "%s layer %d element %d: map gives %g, layer %g", posenc_scheme_label(all_names[_i]), l, k,
                          (double)got->data[k], (double)want->data[k]);
        h = mg_layer_forward(blk, ctx, h, &a);
    }
    free(p);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* ---- evaluation ---- */

START_TEST(evaluation_counts_ties_and_loss) {
    mg_gpt *g = model("learned", 2);
    set_all(pg_param(g, "lm_head.weight"), 0.0f);
    mg_tensor *bias = pg_param(g, "lm_head.bias");
    set_all(bias, 0.0f);
    posenc_data d;
    ck_assert_int_eq(posenc_data_make(&d, POSENC_SORT, POSENC_VAL, 40), MG_OK);
    int64_t zeros = 0, threes = 0, all_zero = 0;
    for (int s = 0; s < 40; s++) {
        bool z = true;
        for (int i = 0; i < 32; i++) {
            zeros += d.y[s * 32 + i] == 0, threes += d.y[s * 32 + i] == 3;
            z = z && d.y[s * 32 + i] == 0;
        }
        all_zero += z;
    }
    mg_ctx *ctx = posenc_ctx_new();
    posenc_metrics m;
    /* equal logits: argmax is the first class (0), the loss log 16 */
    ck_assert_int_eq(posenc_evaluate(g, ctx, &d, 0, &m), MG_OK);
    ck_assert_int_eq(m.n, 40);
    ck_assert_double_eq_tol(m.acc, zeros / 1280.0, 1e-12);
    ck_assert_double_eq_tol(m.seq, all_zero / 40.0, 1e-12);
    ck_assert_double_eq_tol(m.loss, log(16.0), 1e-6);
    /* class 3 favoured by 5: every prediction 3; loss log(15 + e^5) - 5 [y = 3] */
    bias->data[3] = 5.0f;
    ck_assert_int_eq(posenc_evaluate(g, ctx, &d, 0, &m), MG_OK);
    ck_assert_double_eq_tol(m.acc, threes / 1280.0, 1e-12);
    ck_assert_double_eq_tol(m.seq, 0.0, 1e-12);
    ck_assert_double_eq_tol(m.loss, log(15.0 + exp(5.0)) - 5.0 * threes / 1280.0, 1e-5);
    /* the first n sequences only */
    ck_assert_int_eq(posenc_evaluate(g, ctx, &d, 7, &m), MG_OK);
    ck_assert_int_eq(m.n, 7);
    /* a learned table refuses longer sequences: an error, not a crash */
    posenc_data longer;
    ck_assert_int_eq(posenc_data_make_length(&longer, POSENC_REV, 48, 4), MG_OK);
    char why[96] = "";
    ck_assert(!posenc_model_accepts(g, 48, why, sizeof why));
    ck_assert_str_eq(why, "learned table has 32 rows");
    ck_assert(posenc_model_accepts(g, 32, why, sizeof why));
    ck_assert_int_eq(posenc_evaluate(g, ctx, &longer, 0, &m), MG_ERR_INVALID);
    tu_assert_error_has("outside the table's 32 rows");
    ck_assert_int_eq(posenc_evaluate(g, ctx, &d, 3, &m), MG_OK); /* the context is usable again */
    posenc_data_free(&longer);
    posenc_data_free(&d);
    mg_ctx_free(ctx);
    mg_gpt_free(g);
}
END_TEST

/* ---- training runs ---- */

static posenc_run_cfg quick(const char *scheme, posenc_task task, int steps) {
    posenc_run_cfg c = posenc_run_defaults();
    c.task = task;
    snprintf(c.scheme, sizeof c.scheme, "%s", scheme);
    c.steps = steps, c.eval_every = steps / 2, c.eval_n = 64, c.threads = 1;
    c.batch = 8; /* the spec's 32 only costs time here */
    c.n_lengths = 1, c.lengths[0] = 48;
    return c;
}

START_TEST(short_run_loss_falls) {
    posenc_cache cache;
    posenc_cache_init(&cache);
    const char *label = posenc_scheme_label(all_names[_i]);
    posenc_run_cfg c = quick(all_names[_i], POSENC_LMAX, 24);
    posenc_result *r = malloc(sizeof *r);
    ck_assert_msg(posenc_run(&c, &cache, NULL, NULL, r) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(r->status, MG_OK);
    /* step 0, the log-spaced early points below eval_every 12, then every 12 */
    static const int steps[10] = {0, 1, 2, 3, 4, 6, 8, 11, 12, 24};
    ck_assert_int_eq(r->n_curve, 10);
    for (int k = 0; k < 10; k++) ck_assert_int_eq(r->curve_step[k], steps[k]);
    ck_assert(isnan(r->curve_batch_loss[0]));
    for (int k = 1; k < 10; k++) ck_assert(isfinite(r->curve_batch_loss[k]) && isfinite(r->curve_val_loss[k]));
    ck_assert_msg(r->curve_val_loss[9] < r->curve_val_loss[0] - 0.2, "%s: val loss %.4f -> %.4f", label,
                  r->curve_val_loss[0], r->curve_val_loss[9]);
    ck_assert_msg(r->curve_batch_loss[9] < r->curve_batch_loss[1], "%s: batch loss %.4f -> %.4f", label,
                  r->curve_batch_loss[1], r->curve_batch_loss[9]);
    ck_assert_double_eq(r->val.acc, r->curve_val_acc[9]);
    /* the best of the regular points (12 and 24) only */
    ck_assert_double_eq(r->best_val_acc, fmax(r->curve_val_acc[8], r->curve_val_acc[9]));
    ck_assert_int_eq(r->train.n, 64);
    ck_assert(r->train.acc > 0.0 && r->train.acc <= 1.0 && r->train.loss > 0.0);
    ck_assert(r->seconds > 0.0 && r->train_seconds > 0.0 && r->train_seconds <= r->seconds);
    /* 48 positions: the tables cannot, everything else answers */
    bool table = _i == 2 || _i == 3;
    ck_assert_int_eq(r->n_len, 1);
    ck_assert_int_eq(r->len[0].L, 48);
    ck_assert_int_eq(r->len[0].done, !table);
    if (table) {
        ck_assert_msg(strstr(r->len[0].why, "table has 32 rows"), "%s", r->len[0].why);
    } else {
        ck_assert_int_eq(r->len[0].m.n, 64);
        ck_assert(r->len[0].m.acc > 0.0);
    }
    ck_assert_int_eq(r->table_rows, table ? 32 : 0);
    /* attention rows are distributions over the first val sequence */
    ck_assert_mem_eq(r->attn_x, cache.val[POSENC_LMAX].x, sizeof r->attn_x);
    for (int row = 0; row < 2 * 4 * 32; row++) {
        double s = 0.0;
        for (int j = 0; j < 32; j++) s += r->attn[row * 32 + j];
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    free(r);
    posenc_cache_free(&cache);
}
END_TEST

static void assert_same_numbers(const posenc_result *a, const posenc_result *b) {
    ck_assert_mem_eq(&a->train, &b->train, sizeof a->train);
    ck_assert_mem_eq(&a->val, &b->val, sizeof a->val);
    ck_assert_double_eq(a->best_val_acc, b->best_val_acc);
    ck_assert_int_eq(a->n_curve, b->n_curve);
    ck_assert_mem_eq(a->curve_val_acc, b->curve_val_acc, sizeof(double) * (size_t)a->n_curve);
    ck_assert_mem_eq(a->curve_val_loss, b->curve_val_loss, sizeof(double) * (size_t)a->n_curve);
    ck_assert_mem_eq(a->len, b->len, sizeof a->len);
    ck_assert_mem_eq(a->attn, b->attn, sizeof a->attn);
    ck_assert_mem_eq(a->table, b->table, sizeof a->table);
}

START_TEST(runs_do_not_depend_on_threads) {
    posenc_cache cache;
    posenc_cache_init(&cache);
    posenc_result *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    posenc_run_cfg c = quick(_i == 0 ? "rope" : "learned_sin", POSENC_REV, 12);
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, a), MG_OK);
    c.threads = 2;
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, b), MG_OK);
    assert_same_numbers(a, b);
    c.seed = 1; /* and the seed matters */
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, b), MG_OK);
    ck_assert(a->val.loss != b->val.loss);
    free(a);
    free(b);
    posenc_cache_free(&cache);
    mg_set_num_threads(1);
}
END_TEST

START_TEST(run_errors_are_reported) {
    posenc_cache cache;
    posenc_cache_init(&cache);
    posenc_result *r = malloc(sizeof *r);
    posenc_run_cfg c = quick("sinusoidal", POSENC_PERM, 2);
    c.eval_every = 1;
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, r), MG_OK);
    ck_assert(!r->len[0].done); /* perm has no 48-position version */
    ck_assert_str_eq(r->len[0].why, "perm: pi is defined for 32 positions only");

    c = quick("bogus_scheme", POSENC_REV, 2);
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, r), MG_ERR_NOT_FOUND);
    ck_assert_int_eq(r->status, MG_ERR_NOT_FOUND);
    tu_assert_has("text", r->error, "rev/bogus_scheme seed 0");
    tu_assert_has("text", r->error, "bogus_scheme");
    c = quick("rope", POSENC_REV, 0);
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, r), MG_ERR_INVALID);
    tu_assert_has("text", r->error, "steps 0");
    c = quick("rope", POSENC_REV, 4000);
    c.eval_every = 1;
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, r), MG_ERR_INVALID);
    tu_assert_has("text", r->error, "raise the evaluation interval");
    c = quick("rope", POSENC_REV, 2);
    c.lengths[0] = 5000;
    ck_assert_int_eq(posenc_run(&c, &cache, NULL, NULL, r), MG_ERR_INVALID);
    tu_assert_has("text", r->error, "length 5000 out of range");
    free(r);
    posenc_cache_free(&cache);
}
END_TEST

/* ---- the program ---- */

static tu_program posenc = {.name = "posenc", .rel = "examples/posenc/posenc", .max_status = 2};
static char plugin_so[1024];

static void find_binary(void) {
    tu_find_program(&posenc);
    tu_build_path(plugin_so, sizeof plugin_so, "examples/posenc/libposenc_logbias.so");
}

/* Runs `ENV posenc ARGS` with stdout and stderr captured; a crash fails the test. */
static int run_env(const char *env, const char *args) {
    return tu_run_in(&posenc, tmpdir, env, args);
}
static int run(const char *args) {
    return run_env("", args);
}

static int count_lines(const char *text) {
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

static void assert_png(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int w = 0, h = 0, ch = 0;
    unsigned char *px = stbi_load(path, &w, &h, &ch, 3);
    ck_assert_msg(px != NULL, "%s: not a decodable image (%s)", path, stbi_failure_reason());
    ck_assert_msg(w >= 200 && h >= 200, "%s: %d x %d", path, w, h);
    /* not blank: a chart has both light and dark pixels */
    int dark = 0, light = 0;
    for (int i = 0; i < w * h; i++) {
        int s = px[3 * i] + px[3 * i + 1] + px[3 * i + 2];
        dark += s<200, light += s> 600;
    }
    ck_assert_msg(dark > 100 && light > 100, "%s: looks blank (%d dark, %d light pixels)", path,
                  dark, light);
    stbi_image_free(px);
}

/* Splits a CSV line into fields (no quoting in results.csv). */
static int split_csv(char *line, char **f, int max) {
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

START_TEST(program_writes_tables_csv_and_pngs) {
    find_binary();
    const char *out = tmp_path("out");
    char args[1024];
    snprintf(args, sizeof args,
             "--tasks rev,perm --schemes none,sin,learned,alibi --seeds 0,1 --steps 6 "
             "--batch 8 --eval-every 3 --eval-n 32 --jobs 2 --threads 2 --out '%s'",
             out);
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(
        &posenc,
        "2 tasks x 4 schemes x 2 seeds = 16 runs of 6 steps of 8, 2 at a time with 1 thread "
        "each");
    tu_assert_stdout_has(&posenc, "[16/16]");
    tu_assert_stdout_has(&posenc, "rev  (2 seeds, 6 steps of 8; mean ± sd over seeds)");
    tu_assert_stdout_has(&posenc, "n/a (learned table has 32 rows)");
    tu_assert_stdout_has(&posenc, "n/a (perm: pi is defined for 32 positions only)");

    static char csv[1 << 15];
    char path[1024];
    snprintf(path, sizeof path, "%s/results.csv", out);
    tu_read_into(path, csv, sizeof csv);
    ck_assert_int_eq(count_lines(csv), 1 + 16);
    char *save = NULL, *line = strtok_r(csv, "\n", &save);
    ck_assert_str_eq(line, "task,scheme,seed,train_acc,val_acc,val_seq_exact,train_loss,val_loss,"
                           "best_val_acc,seconds");
    /* rows in table order: task, scheme (the spec's spelling), seed */
    static const char *const order[4] = {"none", "sin", "learned", "alibi"};
    for (int k = 0; k < 16; k++) {
        line = strtok_r(NULL, "\n", &save);
        ck_assert_ptr_nonnull(line);
        char *f[12];
        ck_assert_int_eq(split_csv(line, f, 12), 10);
        ck_assert_str_eq(f[0], k < 8 ? "rev" : "perm");
        ck_assert_str_eq(f[1], order[(k / 2) % 4]);
        ck_assert_int_eq(atoi(f[2]), k % 2);
        for (int c = 3; c < 10; c++) {
            char *end;
            double v = strtod(f[c], &end);
            ck_assert_msg(*end == 0 && isfinite(v) && v >= 0.0, "row %d column %d: '%s'", k, c,
                          f[c]);
            if (c != 6 && c != 7 && c != 9)
                ck_assert_msg(v <= 1.0, "row %d column %d: %g is not a fraction", k, c, v);
        }
        ck_assert_msg(strtod(f[9], NULL) > 0.0, "row %d: no time", k);
    }
    snprintf(path, sizeof path, "%s/length.csv", out);
    tu_read_into(path, csv, sizeof csv);
    ck_assert_int_eq(count_lines(csv), 1 + 16 * 3); /* 32 (val), 48, 64 per run */
    tu_assert_has("text", csv, "task,scheme,seed,length,token_acc,seq_exact,loss,note\n");
    tu_assert_has("text", csv, "rev,learned,1,64,,,,\"n/a (learned table has 32 rows)\"\n");
    snprintf(path, sizeof path, "%s/curves.csv", out);
    tu_read_into(path, csv, sizeof csv);
    ck_assert_int_eq(count_lines(csv), 1 + 16 * 5); /* steps 0, 1, 2 (early), 3, 6 */
    snprintf(path, sizeof path, "%s/results.md", out);
    tu_read_into(path, csv, sizeof csv);
    tu_assert_has("text", csv, "### rev (2 seeds, 6 steps of 8; mean ± sd over seeds)");
    tu_assert_has("text", csv, "| scheme ");
    tu_assert_has("text", csv, "|:--");
    tu_assert_has("text", csv, "| alibi ");
    tu_assert_has("text", csv, "Command: `posenc --tasks rev,perm");
    assert_png(out, "curves_rev.png");
    assert_png(out, "curves_perm.png");
    assert_png(out, "length_rev.png");
    assert_png(out, "table_sin.png");
    assert_png(out, "table_alibi.png"); /* fixed logit bias, drawn from the scheme's hook */
    assert_png(out, "table_learned_rev.png");
    assert_png(out, "table_learned_perm.png");
    for (int s = 0; s < 4; s++) {
        char name[64];
        snprintf(name, sizeof name, "attention_%s.png", order[s]);
        assert_png(out, name);
    }
    snprintf(path, sizeof path, "%s/length_perm.png", out);
    ck_assert_msg(access(path, F_OK) != 0, "perm has nothing past 32 to plot");
    snprintf(path, sizeof path, "%s/table_none.png", out);
    ck_assert_msg(access(path, F_OK) != 0, "none has no table");
}
END_TEST

/* The CSV row of one run, seconds cut off. */
static void one_row(const char *args, char *row, size_t n) {
    ck_assert_int_eq(run(args), 0);
    char path[1024], csv[4096];
    snprintf(path, sizeof path, "%s/det/results.csv", tmpdir);
    tu_read_into(path, csv, sizeof csv);
    char *nl = strchr(csv, '\n');
    ck_assert_ptr_nonnull(nl);
    snprintf(row, n, "%s", nl + 1);
    char *last = strrchr(row, ',');
    ck_assert_ptr_nonnull(last);
    *last = 0;
}

START_TEST(program_is_deterministic_across_threads_and_workers) {
    find_binary();
    char a[512], b[512], c[4096], d[4096];
    one_row("--tasks lmax --schemes rope --seeds 2 --steps 6 --eval-every 3 --eval-n 32 "
            "--batch 8 --lengths 48 --threads 1 --out det",
            a, sizeof a);
    one_row("--tasks lmax --schemes rope --seeds 2 --steps 6 --eval-every 3 --eval-n 32 "
            "--batch 8 --lengths 48 --threads 2 --out det",
            b, sizeof b);
    ck_assert_str_eq(a, b);
    ck_assert_msg(strncmp(a, "lmax,rope,2,", 12) == 0, "%s", a);
    /* the same run among others, in worker processes, then in one process */
    const char *more = "--tasks lmax,rev --schemes alibi,rope --seeds 2 --steps 6 --eval-every 3 "
                       "--eval-n 32 --batch 8 --lengths 48 --out det";
    char args[512];
    snprintf(args, sizeof args, "%s --jobs 2", more);
    ck_assert_int_eq(run(args), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/det/results.csv", tmpdir);
    tu_read_into(path, c, sizeof c);
    snprintf(args, sizeof args, "%s --jobs 1 --threads 1", more);
    ck_assert_int_eq(run(args), 0);
    tu_read_into(path, d, sizeof d);
    tu_assert_has("text", c, a);
    tu_assert_has("text", d, a);
    /* every row equal apart from the time */
    char *sc = NULL, *sd = NULL;
    for (char *x = strtok_r(c, "\n", &sc), *y = strtok_r(d, "\n", &sd); x || y;
         x = strtok_r(NULL, "\n", &sc), y = strtok_r(NULL, "\n", &sd)) {
        ck_assert(x && y);
        ck_assert_int_eq(strrchr(x, ',') - x, strrchr(y, ',') - y);
        ck_assert_msg(strncmp(x, y, (size_t)(strrchr(x, ',') - x)) == 0, "'%s' vs '%s'", x, y);
    }
}
END_TEST

/* A full disk under the report: results.csv a link to /dev/full, results.md the same, the tables
 * on standard output. Each fails the program with the file's name and the reason. */
START_TEST(program_report_on_a_full_disk_fails_by_name) {
    find_binary();
    const char *out = tmp_path("full");
    ck_assert_int_eq(mkdir(out, 0755), 0);
    char csv[1024], args[1024];
    snprintf(csv, sizeof csv, "%s/results.csv", out);
    ck_assert_int_eq(symlink("/dev/full", csv), 0);
    const char *tiny = "--tasks rev --schemes none --seeds 0 --steps 2 --batch 8 --eval-every 1 --eval-n 8 "
                       "--jobs 1 --threads 1";
    snprintf(args, sizeof args, "%s --out '%s'", tiny, out);
    ck_assert_int_eq(run(args), 1);
    char want[1200];
    snprintf(want, sizeof want, "%s: write failed: No space left on device", csv);
    tu_assert_stderr_has(&posenc, want);
    ck_assert_int_eq(unlink(csv), 0);
    snprintf(csv, sizeof csv, "%s/results.md", out);
    ck_assert_int_eq(symlink("/dev/full", csv), 0);
    ck_assert_int_eq(run(args), 1);
    snprintf(want, sizeof want, "%s: write failed: No space left on device", csv);
    tu_assert_stderr_has(&posenc, want);
    ck_assert_int_eq(unlink(csv), 0);
    ck_assert_int_eq(tu_run_stdout_to(&posenc, tmpdir, args, "/dev/full"), 1);
    tu_assert_stderr_has(&posenc, "posenc: standard output: write failed: No space left on device");
    tu_assert_dev_full_intact();
}
END_TEST

START_TEST(program_bad_scheme_lists_the_available_ones) {
    find_binary();
    ck_assert_int_eq(run("--schemes sin,bogus --out o"), 2);
    tu_assert_stderr_has(&posenc,
                         "posenc: unknown positional scheme 'bogus' (available: none, sin, "
                         "learned, learned_sin, rope, "
                         "alibi, t5_bias; plugin directories searched: ");
    ck_assert_msg(access(tmp_path("o"), F_OK) != 0, "nothing is written for a bad command");
    ck_assert_int_eq(run("--schemes 'learned+sin' --out o"), 2);
    tu_assert_stderr_has(&posenc, "unknown positional scheme 'learned+sin'");
    ck_assert_int_eq(run("--tasks rev,reverse --out o"), 2);
    tu_assert_stderr_has(&posenc, "\"reverse\"");
    tu_assert_stderr_has(&posenc, "valid: rev, sort, lmax, perm");
    ck_assert_int_eq(run("--seeds 0,x --out o"), 2);
    tu_assert_stderr_has(&posenc, "--seeds '0,x'");
    ck_assert_int_eq(run("--seeds 1,1 --out o"), 2);
    tu_assert_stderr_has(&posenc, "1 is listed twice");
    ck_assert_int_eq(run("--steps 0 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--steps: 0 is out of range 1..1000000");
    /* numbers past int were once cut to int: 2^32 + 1 became an evaluation every step */
    ck_assert_int_eq(run("--eval-every 4294967297 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--eval-every: 4294967297 is out of range 1..1000000");
    ck_assert_int_eq(run("--threads 4294967297 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--threads: 4294967297 is out of range 0..1024");
    ck_assert_int_eq(run("--jobs -1 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--jobs: -1 is out of range 0..1024");
    ck_assert_int_eq(run("--batch 99999999999999999999 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--batch: 99999999999999999999 is out of range 1..4096");
    ck_assert_int_eq(run("--precision fp16 --out o"), 2);
    tu_assert_stderr_has(&posenc, "posenc: --precision 'fp16': expected fp32 or bf16");
    ck_assert_msg(access(tmp_path("o"), F_OK) != 0, "nothing is written for a bad --precision");
    ck_assert_int_eq(run("--eval-n 12x --out o"), 2);
    tu_assert_stderr_has(&posenc, "--eval-n expects an integer in 0..");
    ck_assert_int_eq(run("--lengths 48,9999 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--lengths '48,9999'");
    ck_assert_int_eq(run("--steps 1500 --eval-every 1 --out o"), 2);
    tu_assert_stderr_has(&posenc, "--eval-every is too small");
    ck_assert_int_eq(run("--bogus"), 2);
    tu_assert_stderr_has(&posenc, "unknown option '--bogus'");
    ck_assert_int_eq(run("--help"), 0);
    tu_assert_stdout_has(&posenc, "--schemes S");
    ck_assert_int_eq(access(tmp_path("o"), F_OK) != 0, 1);
}
END_TEST

START_TEST(program_missing_plugin_is_explained) {
    find_binary();
    ck_assert_int_eq(mkdir(tmp_path("empty"), 0755), 0);
    char env[1024], args[1024];
    snprintf(env, sizeof env, "MINIGRAD_PLUGIN_PATH=");
    snprintf(args, sizeof args, "--plugin-path '%s' --schemes rope,alibi --out o",
             tmp_path("empty"));
    ck_assert_int_eq(run_env(env, args), 2);
    char want[1200];
    snprintf(want, sizeof want,
             "posenc: unknown positional scheme 'alibi': its plugin was not found or did not load "
             "(available: none, "
             "sin, learned, learned_sin, rope; plugin directories searched: %s)",
             tmp_path("empty"));
    tu_assert_stderr_has(&posenc, want);
    /* the listing shows the same */
    snprintf(args, sizeof args, "--plugin-path '%s' --list-schemes", tmp_path("empty"));
    ck_assert_int_eq(run_env(env, args), 0);
    ck_assert_msg(!strstr(posenc.out, "alibi"), "%s", posenc.out);
    /* a folder named on the command line that is not there is said so, before anything runs */
    snprintf(args, sizeof args, "--plugin-path '%s:%s' --list-schemes", tmp_path("empty"), tmp_path("nowhere"));
    ck_assert_int_eq(run_env(env, args), 2);
    snprintf(want, sizeof want, "posenc: --plugin-path: directory %s does not exist\n", tmp_path("nowhere"));
    tu_assert_stderr_has(&posenc, want);
    ck_assert_int_eq(run_env(env, "--plugin-path /nonexistent --list-schemes"), 2);
    tu_assert_stderr_has(&posenc, "posenc: --plugin-path: directory /nonexistent does not exist\n");
    ck_assert_int_eq(run_env(env, "--plugin-path /dev/null --list-schemes"), 2);
    tu_assert_stderr_has(&posenc, "posenc: --plugin-path: /dev/null is not a directory\n");
}
END_TEST

/* A scheme nobody told the program about, dropped in as a plugin, joins "all". */
START_TEST(program_picks_up_a_plugin_scheme) {
    find_binary();
    ck_assert_msg(access(plugin_so, F_OK) == 0, "%s not built", plugin_so);
    ck_assert_int_eq(mkdir(tmp_path("plugins"), 0755), 0);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", plugin_so, tmp_path("plugins"));
    ck_assert_int_eq(system(cmd), 0);
    char env[1024];
    snprintf(env, sizeof env, "MINIGRAD_PLUGIN_PATH='%s'", tmp_path("plugins"));
    ck_assert_int_eq(run_env(env, "--list-schemes"), 0);
    tu_assert_stdout_has(&posenc, "  alibi ");
    tu_assert_stdout_has(&posenc, "  t5_bias ");
    tu_assert_stdout_has(&posenc, "  logbias      logbias              ");
    tu_assert_stdout_has(&posenc, "libposenc_logbias.so");
    ck_assert_int_eq(run_env(env, "--tasks lmax --seeds 0 --steps 4 --batch 8 --eval-every 2 "
                                  "--eval-n 32 --lengths 64 --out p"),
                     0);
    tu_assert_stdout_has(&posenc, "1 task x 8 schemes x 1 seed = 8 runs");
    char path[1024], csv[4096];
    snprintf(path, sizeof path, "%s/p/results.csv", tmpdir);
    tu_read_into(path, csv, sizeof csv);
    ck_assert_int_eq(count_lines(csv), 9);
    tu_assert_has("text", csv, "\nlmax,logbias,0,");
    tu_assert_has("text", csv, "\nlmax,t5_bias,0,");
    snprintf(path, sizeof path, "%s/p", tmpdir);
    assert_png(path, "attention_logbias.png");
    assert_png(path, "table_logbias.png");       /* a fixed bias from a plugin's callback */
    assert_png(path, "table_t5_bias_lmax.png");  /* a learned one, after training */
    assert_png(path, "table_rope.png");          /* a rotation */
    assert_png(path, "table_learned_lmax.png");
}
END_TEST

/* A first SIGINT (Ctrl-C) or SIGTERM ends the comparison after the runs under way: the report of
 * the runs that finished is written (results.csv as soon as the first is in), the message says
 * how many finished, which, and where they went, and the exit status is 128 + the signal. In
 * worker processes (the parent passes the stop on) and in one process. */
static void check_interrupted(int sig, const char *jobs) {
    find_binary();
    char *argv[] = {"posenc", "--tasks", "rev,sort", "--schemes", "none,sin", "--seeds",
                    "0,1,2,3,4,5,6,7,8,9", "--steps", "40", "--batch", "8", "--eval-every", "20",
                    "--eval-n", "32", "--lengths", "", "--jobs", (char *)jobs, "--threads",
                    (char *)jobs, "--out", "out", NULL};
    int st = tu_run_signalled(&posenc, tmpdir, argv, "out/results.csv",
                              (long)strlen(POSENC_CSV_HEADER) + 1, sig);
    ck_assert_msg(WIFEXITED(st), "posenc did not exit on its own after %s (wait status %d); stderr: %s",
                  sig == SIGINT ? "SIGINT" : "SIGTERM", st, posenc.err);
    ck_assert_int_eq(WEXITSTATUS(st), 128 + sig);
    char path[1024];
    static char csv[1 << 15];
    snprintf(path, sizeof path, "%s/out/results.csv", tmpdir);
    tu_read_into(path, csv, sizeof csv);
    int rows = count_lines(csv) - 1;
    ck_assert_msg(rows >= 1 && rows < 40, "%d rows in results.csv", rows);
    char said[128];
    snprintf(said, sizeof said, "posenc: interrupted (%s): %d of 40 runs finished (",
             sig == SIGINT ? "SIGINT" : "SIGTERM", rows);
    tu_assert_stderr_has(&posenc, said);
    tu_assert_stderr_has(&posenc, "rev/none seed 0");
    tu_assert_stderr_has(&posenc, "); their results are in out/; the other ");
    tu_assert_stdout_has(&posenc, "posenc: interrupted (");
    tu_assert_stdout_has(&posenc, "no new run starts");
    tu_assert_stdout_has(&posenc, "rev  (");
    tu_assert_stdout_has(&posenc, "wrote out/results.md, results.csv, length.csv, curves.csv and the PNGs");
    tu_assert_stdout_has(&posenc, "; the finished runs only)\n");
    snprintf(path, sizeof path, "%s/out", tmpdir);
    assert_png(path, "curves_rev.png");
    snprintf(path, sizeof path, "%s/out/results.md", tmpdir);
    ck_assert_int_eq(access(path, F_OK), 0);
}

START_TEST(program_interrupted_reports_the_finished_runs) {
    check_interrupted(SIGINT, "2");
}
END_TEST

START_TEST(program_terminated_reports_the_finished_runs) {
    check_interrupted(SIGTERM, "1");
}
END_TEST

/* A --plugin-path folder whose path is longer than 1024 bytes is searched like any other. */
START_TEST(program_searches_a_long_plugin_path) {
    find_binary();
    ck_assert_msg(access(plugin_so, F_OK) == 0, "%s not built", plugin_so);
    char deep[2048], name[201];
    memset(name, 'd', 200);
    name[200] = 0;
    snprintf(deep, sizeof deep, "%s", tmpdir);
    for (int i = 0; i < 6; i++) {
        size_t n = strlen(deep);
        snprintf(deep + n, sizeof deep - n, "/%s", name);
        ck_assert_int_eq(mkdir(deep, 0755), 0);
    }
    ck_assert_uint_gt(strlen(deep), 1024);
    char cmd[2600], args[2600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", plugin_so, deep);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(args, sizeof args, "--plugin-path '%s' --list-schemes", deep);
    ck_assert_int_eq(run_env("MINIGRAD_PLUGIN_PATH=", args), 0);
    tu_assert_stdout_has(&posenc, "  logbias      logbias              ");
}
END_TEST

static Suite *posenc_suite(void) {
    Suite *s = suite_create("posenc");
    TCase *m = tcase_create("model");
    tcase_add_checked_fixture(m, setup, teardown);
    tcase_add_test(m, catalogue_lists_the_spec_schemes_in_order);
    tcase_add_test(m, selecting_schemes);
    tcase_add_loop_test(m, model_has_the_spec_shape_and_initialisation, 0, 6);
    tcase_add_loop_test(m, golden_logits_of_section_7, 0, 6);
    tcase_add_test(m, rope_pairs_and_rotates_as_worked_out);
    tcase_add_test(m, alibi_sign_and_slopes_as_worked_out);
    tcase_add_test(m, sinusoid_layout_as_worked_out);
    tcase_add_loop_test(m, attention_map_matches_the_layer, 0, 7);
    tcase_add_loop_test(m, probe_draws_what_each_scheme_does, 0, 7);
    tcase_add_test(m, evaluation_counts_ties_and_loss);
    suite_add_tcase(s, m);
    TCase *r = tcase_create("runs");
    tcase_add_checked_fixture(r, setup, teardown);
    tcase_add_loop_test(r, short_run_loss_falls, 0, 7);
    tcase_add_loop_test(r, runs_do_not_depend_on_threads, 0, 2);
    tcase_add_test(r, run_errors_are_reported);
    suite_add_tcase(s, r);
    TCase *p = tcase_create("program");
    tcase_add_checked_fixture(p, setup, teardown);
    tcase_add_test(p, program_writes_tables_csv_and_pngs);
    tcase_add_test(p, program_is_deterministic_across_threads_and_workers);
    tcase_add_test(p, program_bad_scheme_lists_the_available_ones);
    if (tu_have_dev_full())
        tcase_add_test(p, program_report_on_a_full_disk_fails_by_name);
    else
        fprintf(stderr, "# /dev/full not found: program_report_on_a_full_disk_fails_by_name skipped\n");
    tcase_add_test(p, program_missing_plugin_is_explained);
    tcase_add_test(p, program_picks_up_a_plugin_scheme);
    tcase_add_test(p, program_searches_a_long_plugin_path);
    suite_add_tcase(s, p);
    TCase *sig = tcase_create("signals");
    tcase_add_checked_fixture(sig, setup, teardown);
    tcase_add_test(sig, program_interrupted_reports_the_finished_runs);
    tcase_add_test(sig, program_terminated_reports_the_finished_runs);
    suite_add_tcase(s, sig);
    return s;
}

MG_TEST_MAIN(posenc_suite)
