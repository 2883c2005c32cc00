/* Whole training steps: bit-identical parameters for 1 and 2 threads, and a tiny MLP that learns. */
#include "harness.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <string.h>

/* ---- a generated classification task: three interleaved spirals in 2-D ---- */
enum { N_PTS = 384, N_CLS = 3 };

static void spirals(float *x, int32_t *y, uint64_t seed) {
    mg_rng r = mg_rng_make(seed);
    for (int i = 0; i < N_PTS; i++) {
        int c = i % N_CLS;
        float t = (float)(i / N_CLS) / (N_PTS / N_CLS); /* 0..1 along the arm */
        float ang = 4.0f * t + 2.0943951f * (float)c + 0.15f * mg_rng_normal(&r);
        x[2 * i] = t * cosf(ang);
        x[2 * i + 1] = t * sinf(ang);
        y[i] = c;
    }
}

typedef struct {
    mg_params *P;
    mg_tensor *W1, *b1, *W2, *b2, *W3, *b3;
} mlp;

static mlp mlp_new(int64_t hidden, uint64_t seed) {
    mlp m;
    m.P = mg_params_new();
    float a1 = 1.0f / sqrtf(2.0f), a2 = 1.0f / sqrtf((float)hidden);
    m.W1 = mg_params_add(m.P, "fc1.weight", 2, (int64_t[]){2, hidden}, mg_init_uniform(-a1, a1), 0);
    m.b1 = mg_params_add(m.P, "fc1.bias", 1, (int64_t[]){hidden}, mg_init_zeros(), MG_NO_DECAY);
    m.W2 = mg_params_add(m.P, "fc2.weight", 2, (int64_t[]){hidden, hidden}, mg_init_uniform(-a2, a2), 0);
    m.b2 = mg_params_add(m.P, "fc2.bias", 1, (int64_t[]){hidden}, mg_init_zeros(), MG_NO_DECAY);
    m.W3 = mg_params_add(m.P, "head.weight", 2, (int64_t[]){hidden, N_CLS}, mg_init_uniform(-a2, a2), 0);
    m.b3 = mg_params_add(m.P, "head.bias", 1, (int64_t[]){N_CLS}, mg_init_zeros(), MG_NO_DECAY);
    mg_rng r = mg_rng_make(seed);
    ck_assert_int_eq(mg_params_alloc(m.P, &r), MG_OK);
    return m;
}

static mg_tensor *mlp_forward(mg_ctx *ctx, const mlp *m, mg_tensor *x) {
    mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, x, m->W1), m->b1), MG_GELU_TANH);
    h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, h, m->W2), m->b2), MG_GELU_TANH);
    return mg_add(ctx, mg_matmul(ctx, h, m->W3), m->b3);
}

START_TEST(mlp_learns_spirals) {
    static float x[2 * N_PTS];
    static int32_t y[N_PTS];
    spirals(x, y, 11);
    mlp m = mlp_new(64, 5);
    mg_adamw_cfg cfg = mg_adamw_defaults();
    cfg.weight_decay = 0.0f;
    mg_optim *opt = mg_adamw_new(m.P, cfg);
    mg_ctx *ctx = mg_ctx_new(0);
    float first = 0.0f, last = 0.0f;
    const int steps = 400;
    for (int s = 0; s < steps; s++) {
        mg_ctx_reset(ctx);
        mg_tensor *xt = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){N_PTS, 2}, x);
        mg_tensor *yt = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){N_PTS}, y);
        mg_tensor *loss = mg_cross_entropy(ctx, mlp_forward(ctx, &m, xt), yt, -1);
        mg_params_zero_grad(m.P);
        mg_backward(ctx, loss);
        mg_clip_grad_norm(m.P, 5.0f);
        mg_optim_step(opt, mg_lr_schedule(s, 20, steps, 2e-2f, 1e-3f));
        if (s == 0) first = loss->data[0];
        last = loss->data[0];
    }
    /* accuracy, no gradients */
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, false);
    mg_tensor *logits = mlp_forward(ctx, &m, mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){N_PTS, 2}, x));
    ck_assert_int_eq(mg_ctx_tape_len(ctx), 0);
    int correct = 0;
    for (int i = 0; i < N_PTS; i++) {
        int best = 0;
        for (int c = 1; c < N_CLS; c++)
            if (logits->data[i * N_CLS + c] > logits->data[i * N_CLS + best]) best = c;
        correct += best == y[i];
    }
    double acc = (double)correct / N_PTS;
    ck_assert_msg(first > 1.0f && last < 0.15f, "loss %g -> %g", first, last);
    ck_assert_msg(acc >= 0.97, "training accuracy %.3f after %d steps (loss %g)", acc, steps, last);
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(m.P);
}
END_TEST

/* One AdamW step of an MLP big enough that every parallel loop really splits; returns a copy of
 * the parameter slab. */
static float *one_step(int threads, int64_t *n_out) {
    mg_set_num_threads(threads);
    enum { B = 512 };
    static float x[2 * B];
    static int32_t y[B];
    mg_rng r = mg_rng_make(21);
    for (int i = 0; i < 2 * B; i++) x[i] = mg_rng_normal(&r);
    for (int i = 0; i < B; i++) y[i] = (int32_t)mg_rng_below(&r, N_CLS);
    mlp m = mlp_new(320, 8);
    mg_optim *opt = mg_adamw_new(m.P, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0);
    for (int s = 0; s < 2; s++) {
        mg_ctx_reset(ctx);
        mg_tensor *xt = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, x);
        mg_tensor *yt = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, y);
        mg_tensor *loss = mg_cross_entropy(ctx, mlp_forward(ctx, &m, xt), yt, -1);
        mg_params_zero_grad(m.P);
        mg_backward(ctx, loss);
        mg_clip_grad_norm(m.P, 1.0f);
        mg_optim_step(opt, 1e-3f);
    }
    int64_t n = mg_params_slab_size(m.P);
    float *copy = malloc((size_t)n * 4);
    memcpy(copy, mg_params_data(m.P), (size_t)n * 4);
    *n_out = n;
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(m.P);
    return copy;
}

START_TEST(mlp_step_thread_invariant) {
    if (!mg_have_openmp()) return; /* nothing to compare */
    int64_t n1, n2;
    float *a = one_step(1, &n1), *b = one_step(2, &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert_msg(memcmp(a, b, (size_t)n1 * 4) == 0, "parameters differ between 1 and 2 threads");
    free(a);
    free(b);
}
END_TEST

/* The same for a step through the other ops a Transformer uses. */
static float *block_step(int threads, int64_t *n_out) {
    mg_set_num_threads(threads);
    enum { B = 4, T = 48, C = 64, H = 4, V = 50 };
    mg_params *P = mg_params_new();
    mg_tensor *wte = mg_params_add(P, "wte", 2, (int64_t[]){V, C}, mg_init_normal(0, 0.5f), MG_NO_DECAY);
    mg_tensor *lw = mg_params_add(P, "ln.w", 1, (int64_t[]){C}, mg_init_ones(), MG_NO_DECAY);
    mg_tensor *lb = mg_params_add(P, "ln.b", 1, (int64_t[]){C}, mg_init_zeros(), MG_NO_DECAY);
    mg_tensor *wqkv = mg_params_add(P, "qkv", 2, (int64_t[]){C, 3 * C}, mg_init_normal(0, 0.1f), 0);
    mg_tensor *wo = mg_params_add(P, "proj", 2, (int64_t[]){C, C}, mg_init_normal(0, 0.1f), 0);
    mg_rng r = mg_rng_make(4);
    ck_assert_int_eq(mg_params_alloc(P, &r), MG_OK);
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)mg_rng_below(&r, V);
    mg_optim *opt = mg_adamw_new(P, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng drop = mg_rng_make(99);
    mg_tensor *it = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, ids);
    mg_tensor *x = mg_embedding(ctx, wte, it);
    mg_tensor *qkv = mg_matmul(ctx, mg_layernorm(ctx, x, lw, lb, 1e-5f), wqkv);
    mg_tensor *q = mg_rope(ctx, mg_split_heads(ctx, qkv, H, 0, C), 0, 10000.0f);
    mg_tensor *k = mg_rope(ctx, mg_split_heads(ctx, qkv, H, C, C), 0, 10000.0f);
    mg_tensor *v = mg_split_heads(ctx, qkv, H, 2 * C, C);
    mg_tensor *a = mg_merge_heads(ctx, mg_attention(ctx, q, k, v, &(mg_attn_opts){.causal = true}));
    x = mg_add(ctx, x, mg_dropout(ctx, mg_matmul(ctx, a, wo), 0.1f, &drop));
    mg_tensor *logits = mg_matmul_nt(ctx, x, wte);
    mg_tensor *loss = mg_cross_entropy(ctx, logits, it, -1);
    mg_backward(ctx, loss);
    ck_assert_ptr_null(mg_ctx_error(ctx));
    mg_optim_step(opt, 1e-2f);
    int64_t n = mg_params_slab_size(P);
    float *copy = malloc((size_t)n * 4);
    memcpy(copy, mg_params_data(P), (size_t)n * 4);
    *n_out = n;
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(P);
    return copy;
}

START_TEST(attention_block_step_thread_invariant) {
    if (!mg_have_openmp()) return;
    int64_t n1, n2;
    float *a = block_step(1, &n1), *b = block_step(2, &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert_msg(memcmp(a, b, (size_t)n1 * 4) == 0, "parameters differ between 1 and 2 threads");
    free(a);
    free(b);
}
END_TEST

static Suite *training_suite(void) {
    Suite *s = suite_create("training");
    TCase *tc = tcase_create("training");
    tcase_add_test(tc, mlp_learns_spirals);
    tcase_add_test(tc, mlp_step_thread_invariant);
    tcase_add_test(tc, attention_block_step_thread_invariant);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(training_suite)
