/* Unary elementwise ops, forward and backward side by side, as PyTorch computes them:
 *   silu   y = x / (1 + e^-x)        dx = dy s (1 + x (1 - s)),  s = 1 / (1 + e^-x)
 *   exp    y = e^x                   dx = dy y
 *   ln     y = ln x                  dx = dy / x    (PyTorch's log; mg_log is the logger)
 *   sqrt   y = sqrt x                dx = dy / (2 y)
 *   neg    y = -x                    dx = -dy
 *   abs    y = |x|                   dx = dy sgn(x), sgn(0) = sgn(NaN) = 0
 *   pow    y = x^p                   dx = dy p x^(p-1); 0 when p == 0
 *   clamp  y = min(max(x, lo), hi)   dx = dy where lo <= x <= hi, else 0
 * pow takes PyTorch's exact forms for the common exponents (x*x for 2, sqrt for 0.5, 1/x for -1,
 * ...), so that signed zeros and infinities come out as there. clamp: NaN x stays NaN (gradient 0);
 * with lo > hi every element becomes hi. */
#include "internal.h"

/* x^p with PyTorch's special cases. */
static inline float pow_f(float x, float p) {
    if (p == 0.0f) return 1.0f;
    if (p == 1.0f) return x;
    if (p == 2.0f) return x * x;
    if (p == 3.0f) return x * x * x;
    if (p == 0.5f) return sqrtf(x);
    if (p == -0.5f) return 1.0f / sqrtf(x);
    if (p == -1.0f) return 1.0f / x;
    if (p == -2.0f) return 1.0f / (x * x);
    return powf(x, p);
}

/* Defines mg_op_def_<name> and unary_<name>(ctx, x, p0, p1), which checks x, computes
 * y = (FWD) for every element and records the node with p0, p1 in n->f. The backward adds
 * (GRAD) to dx. FWD sees x, p0, p1; GRAD sees those and y and g (= dy). */
#define UNARY_OP(name, FWD, GRAD)                                                                  \
    static void name##_backward(mg_ctx *ctx, mg_node *n) {                                         \
        float *dx = mg_grad(ctx, n->in[0]);                                                        \
        if (!dx) return;                                                                           \
        const float *xs = n->in[0]->data, *ys = n->out->data, *gs = n->out->grad;                  \
        const float p0 = n->f[0], p1 = n->f[1];                                                    \
        const int64_t N = n->out->numel;                                                           \
        _Pragma("omp parallel for schedule(static) if (N > 65536)")                                \
        for (int64_t i = 0; i < N; i++) {                                                          \
            const float x = xs[i], y = ys[i], g = gs[i];                                           \
            (void)x, (void)y, (void)p0, (void)p1;                                                  \
            dx[i] += (GRAD);                                                                       \
        }                                                                                          \
    }                                                                                              \
    const mg_op_def mg_op_def_##name = {"mg_" #name, name##_backward};                             \
    static mg_tensor *unary_##name(mg_ctx *ctx, mg_tensor *x_, float p0, float p1) {               \
        MG_BAIL_IF_FAILED(ctx);                                                                    \
        if (!mg_expect_f32(ctx, "mg_" #name, "x", x_)) return mg_ctx_dummy(ctx);                   \
        mg_tensor *y_ = mg_op_output(ctx, "mg_" #name, x_->ndim, x_->shape);                       \
        if (!mg_ctx_ok(ctx)) return y_;                                                            \
        const float *xs = x_->data;                                                                \
        float *ys = y_->data;                                                                      \
        const int64_t N = x_->numel;                                                               \
        _Pragma("omp parallel for schedule(static) if (N > 65536)")                                \
        for (int64_t i = 0; i < N; i++) {                                                          \
            const float x = xs[i];                                                                 \
            (void)p0, (void)p1;                                                                    \
            ys[i] = (FWD);                                                                         \
        }                                                                                          \
        mg_node *n = mg_op_record(ctx, &mg_op_def_##name, y_, 1, (mg_tensor *[]){x_});             \
        if (n) n->f[0] = p0, n->f[1] = p1;                                                         \
        return y_;                                                                                 \
    }

/* min(max(x, lo), hi), NaN x staying NaN. */
static inline float clamp_f(float x, float lo, float hi) {
    const float t = x < lo ? lo : x;
    return t > hi ? hi : t;
}

static inline float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

UNARY_OP(silu, x / (1.0f + expf(-x)), g * sigmoid_f(x) * (1.0f + x * (1.0f - sigmoid_f(x))))
UNARY_OP(exp, expf(x), g * y)
UNARY_OP(ln, logf(x), g / x)
UNARY_OP(sqrt, sqrtf(x), g / (2.0f * y))
UNARY_OP(neg, -x, -g)
UNARY_OP(abs, fabsf(x), g * (x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f))
UNARY_OP(pow, pow_f(x, p0), p0 == 0.0f ? 0.0f : g * (p0 * pow_f(x, p0 - 1.0f)))
UNARY_OP(clamp, clamp_f(x, p0, p1), x >= p0 && x <= p1 ? g : 0.0f)

mg_tensor *mg_silu(mg_ctx *ctx, mg_tensor *x) { return unary_silu(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_exp(mg_ctx *ctx, mg_tensor *x) { return unary_exp(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_ln(mg_ctx *ctx, mg_tensor *x) { return unary_ln(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_sqrt(mg_ctx *ctx, mg_tensor *x) { return unary_sqrt(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_neg(mg_ctx *ctx, mg_tensor *x) { return unary_neg(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_abs(mg_ctx *ctx, mg_tensor *x) { return unary_abs(ctx, x, 0.0f, 0.0f); }
mg_tensor *mg_pow(mg_ctx *ctx, mg_tensor *x, float exponent) { return unary_pow(ctx, x, exponent, 0.0f); }

mg_tensor *mg_clamp(mg_ctx *ctx, mg_tensor *x, float min, float max) {
    MG_BAIL_IF_FAILED(ctx);
    if (isnan(min) || isnan(max)) {
        mg_ctx_fail(ctx, "mg_clamp: x%s: bounds min %g, max %g must not be NaN (use -INFINITY / INFINITY for no bound)",
                    MG_SHAPE(x), (double)min, (double)max);
        return mg_ctx_dummy(ctx);
    }
    return unary_clamp(ctx, x, min, max);
}
