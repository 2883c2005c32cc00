/* The whole GPT on the fast kernels against the same GPT on every reference twin (plain-loop
 * GEMM, materialised attention, scalar row ops): loss and the gradient of every parameter agree
 * within float tolerance, for several positional schemes and for each ISA path the CPU has.
 * Sizes are deliberately not multiples of any tile or vector width. */
#include "harness.h"
#include "layer_check.h"
#include "minigrad/gpt.h"
#include "minigrad/minigrad.h"
#include "minigrad/rowops.h"
#include "minigrad/testing.h"

#include <math.h>
#include <string.h>

enum { B = 2, T = 37, V = 53 };

typedef struct {
    float loss;
    float *grads; /* the gradient slab */
    int64_t n;
} result;

static result run(const char *pos, bool causal, bool reference) {
    mg_sgemm_set_reference(reference);
    mg_attn_set_impl(reference ? MG_ATTN_REFERENCE : MG_ATTN_FUSED);
    mg_rowops_set_impl(reference ? MG_ROWOPS_REFERENCE : MG_ROWOPS_FAST);
    mg_gpt_config c = mg_gpt_config_default();
    c.vocab_size = V, c.block_size = 40, c.n_layer = 2, c.n_head = 3, c.n_embd = 30;
    c.causal = causal;
    snprintf(c.pos, sizeof c.pos, "%s", pos);
    mg_rng rng = mg_rng_make(17);
    mg_gpt *g = NULL;
    ck_assert_msg(mg_gpt_new(&c, &rng, &g) == MG_OK, "%s", mg_last_error());
    int32_t ids[B * T], tg[B * T];
    mg_rng d = mg_rng_make(3);
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)mg_rng_below(&d, V), tg[i] = (int32_t)mg_rng_below(&d, V);
    tg[5] = -1; /* an ignored target */
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *it = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, ids);
    mg_tensor *tt = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, tg);
    mg_tensor *loss = mg_gpt_loss(g, ctx, it, tt, NULL);
    mg_params *P = mg_gpt_params(g);
    mg_params_zero_grad(P);
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    result r = {.loss = loss->data[0], .n = mg_params_slab_size(P)};
    r.grads = malloc((size_t)r.n * sizeof(float));
    memcpy(r.grads, mg_params_grad(P), (size_t)r.n * sizeof(float));
    mg_ctx_free(ctx);
    mg_gpt_free(g);
    return r;
}

/* Checked teardown: the fast kernels and the detected SIMD path back after every test, even one
 * that failed inside run() (under CK_FORK=no the next test shares the process). */
static void restore_switches(void) {
    mg_sgemm_set_reference(false);
    mg_attn_set_impl(MG_ATTN_FUSED);
    mg_rowops_set_impl(MG_ROWOPS_FAST);
    tu_restore_detected_isa();
}

static const struct {
    const char *pos;
    bool causal;
} cases[] = {{"learned", true}, {"rope", true}, {"alibi", true}, {"sinusoidal", false}, {"rope", false}};
enum { N_CASES = sizeof cases / sizeof cases[0] };

START_TEST(fast_equals_reference) {
    const char *pos = cases[_i].pos;
    bool causal = cases[_i].causal;
    result ref = run(pos, causal, true);
    for (int isa = MG_ISA_GENERIC; isa <= MG_ISA_AVX512; isa++) {
        if (!mg_isa_force((mg_isa)isa)) continue;
        result fast = run(pos, causal, false);
        ck_assert_int_eq(fast.n, ref.n);
        /* The loss: float rounding over a few thousand terms. */
        ck_assert_msg(fabsf(fast.loss - ref.loss) <= 1e-5f * fabsf(ref.loss) + 1e-6f, "%s causal=%d on %s: loss %.9g vs reference %.9g",
                      pos, causal, mg_isa_name((mg_isa)isa), fast.loss, ref.loss);
        /* Every gradient element, relative to the largest gradient of the model. */
        float gmax = 0.0f;
        for (int64_t i = 0; i < ref.n; i++) gmax = fmaxf(gmax, fabsf(ref.grads[i]));
        ck_assert(gmax > 0.0f);
        for (int64_t i = 0; i < ref.n; i++) /* Check logs every passing assertion: only failures reach it */
            if (!(fabsf(fast.grads[i] - ref.grads[i]) <= 2e-4f * gmax))
                ck_abort_msg("%s causal=%d on %s: gradient element %lld: %.9g vs reference %.9g (max |g| %.3g)", pos,
                             causal, mg_isa_name((mg_isa)isa), (long long)i, fast.grads[i], ref.grads[i], gmax);
        free(fast.grads);
    }
    free(ref.grads);
}
END_TEST

/* The switches really switch: the reference path gives different bits somewhere. */
START_TEST(switches_take_effect) {
    result ref = run("rope", true, true), fast = run("rope", true, false);
    ck_assert(memcmp(ref.grads, fast.grads, (size_t)ref.n * sizeof(float)) != 0);
    free(ref.grads);
    free(fast.grads);
}
END_TEST

static Suite *model_kernels_suite(void) {
    lc_use_build_plugins(); /* alibi from the build tree */
    mg_log_set(lc_quiet_log, NULL);
    Suite *s = suite_create("model_kernels");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, NULL, restore_switches);
    tcase_add_loop_test(tc, fast_equals_reference, 0, N_CASES);
    tcase_add_test(tc, switches_take_effect);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(model_kernels_suite)
