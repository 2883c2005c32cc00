/* docs/posenc-benchmark.md section 7, shared by the gpt suite (the classifier configured by hand)
 * and the posenc suite (the same classifier from the program's builder): every weight filled from
 * sm64(0x601DE0) in the benchmark's order, and the float64 golden logits of the first two rev/val
 * sequences for each positional scheme. One copy, so that the two suites check the same numbers.
 * Header-only; nothing here allocates. */
#ifndef MG_TEST_POSENC_GOLDEN_H
#define MG_TEST_POSENC_GOLDEN_H

#include "harness.h"
#include "minigrad/gpt.h"
#include "minigrad/rng.h"

#include <math.h>
#include <string.h>

/* The parameter of that name; fails the test when the model has none. */
static inline mg_tensor *pg_param(mg_gpt *g, const char *name) {
    mg_tensor *t = mg_params_find(mg_gpt_params(g), name);
    ck_assert_msg(t != NULL, "no parameter %s", name);
    return t;
}

/* Fills rows x cols values of a PyTorch-layout tensor in row-major order: w = c + a (2u - 1).
 * transpose: the store holds it [cols][rows] (minigrad's Linear is [in][out]). */
static inline void pg_fill(mg_rng *r, mg_tensor *t, int64_t rows, int64_t cols, bool transpose, double c,
                           double a) {
    ck_assert_int_eq(t->numel, rows * cols);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            t->data[transpose ? j * rows + i : i * cols + j] = (float)(c + a * (2.0 * mg_rng_double(r) - 1.0));
}

/* Every weight of the section-7 classifier (d 64, 2 layers, d_ff 256, 16 classes, T 32) with
 * positional scheme pos (a GPT pos name), in the benchmark's order; the learned table comes last. */
static inline void pg_fill_section7(mg_gpt *g, const char *pos) {
    const int64_t d = 64, dff = 256, V = 16, L = 32;
    const double s = 1.0 / sqrt((double)d), s2 = 1.0 / sqrt((double)dff);
    mg_rng r = mg_rng_make(0x601DE0);
    char n[64];
    pg_fill(&r, pg_param(g, "wte.weight"), V, d, false, 0, 0.1);
    for (int l = 0; l < 2; l++) {
#define PG_NM(x) (snprintf(n, sizeof n, "h.%d." x, l), n)
        pg_fill(&r, pg_param(g, PG_NM("ln_1.weight")), 1, d, false, 1, 0.1);
        pg_fill(&r, pg_param(g, PG_NM("ln_1.bias")), 1, d, false, 0, 0.1);
        pg_fill(&r, pg_param(g, PG_NM("attn.c_attn.weight")), 3 * d, d, true, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("attn.c_attn.bias")), 1, 3 * d, false, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("attn.c_proj.weight")), d, d, true, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("attn.c_proj.bias")), 1, d, false, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("ln_2.weight")), 1, d, false, 1, 0.1);
        pg_fill(&r, pg_param(g, PG_NM("ln_2.bias")), 1, d, false, 0, 0.1);
        pg_fill(&r, pg_param(g, PG_NM("mlp.c_fc.weight")), dff, d, true, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("mlp.c_fc.bias")), 1, dff, false, 0, s);
        pg_fill(&r, pg_param(g, PG_NM("mlp.c_proj.weight")), d, dff, true, 0, s2);
        pg_fill(&r, pg_param(g, PG_NM("mlp.c_proj.bias")), 1, d, false, 0, s2);
#undef PG_NM
    }
    pg_fill(&r, pg_param(g, "ln_f.weight"), 1, d, false, 1, 0.1);
    pg_fill(&r, pg_param(g, "ln_f.bias"), 1, d, false, 0, 0.1);
    pg_fill(&r, pg_param(g, "lm_head.weight"), V, d, true, 0, s);
    pg_fill(&r, pg_param(g, "lm_head.bias"), 1, V, false, 0, s);
    if (strncmp(pos, "learned", 7) == 0) pg_fill(&r, pg_param(g, "wpe.weight"), L, d, false, 0, 0.1);
}

/* The golden logits of one scheme: their sum over [2, 32, 16] and logits[0, 0, 0..3]. */
typedef struct {
    const char *pos;
    double sum, first[4];
} pg_golden;

static inline const pg_golden *pg_golden_of(const char *pos) {
    static const pg_golden goldens[] = {
        {"none", -42.041883, {-1.453762, 0.425762, -1.162289, 0.571421}},
        {"sinusoidal", -27.875574, {-1.246886, 0.681284, -0.388223, 0.459728}},
        {"learned", -44.261774, {-1.482104, 0.361975, -1.037306, 0.559513}},
        {"learned+sinusoidal", -29.917710, {-1.268311, 0.631044, -0.334061, 0.446623}},
        {"rope", -43.212427, {-1.438766, 0.347271, -1.172973, 0.568156}},
        {"alibi", -42.227777, {-1.503081, 0.400652, -1.120994, 0.536787}},
    };
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++)
        if (strcmp(goldens[i].pos, pos) == 0) return &goldens[i];
    ck_abort_msg("no section-7 golden for pos '%s'", pos);
    return NULL;
}

/* y: the logits [2, 32, 16] of the first two rev/val sequences; label names the scheme in
 * messages. Tolerances: 1e-4 on each of the first four, 2e-3 on the sum of 1024. */
static inline void pg_expect_golden_logits(const mg_tensor *y, const char *pos, const char *label) {
    const pg_golden *w = pg_golden_of(pos);
    double sum = 0.0;
    for (int64_t i = 0; i < y->numel; i++) sum += y->data[i];
    for (int k = 0; k < 4; k++)
        ck_assert_msg(fabs(y->data[k] - w->first[k]) < 1e-4, "%s: logits[0,0,%d] = %.6f, golden %.6f", label, k,
                      (double)y->data[k], w->first[k]);
    ck_assert_msg(fabs(sum - w->sum) < 2e-3, "%s: sum of logits %.6f, golden %.6f", label, sum, w->sum);
}

#endif
