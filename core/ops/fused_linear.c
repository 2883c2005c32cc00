/* An activation made only to feed a linear layer, fused with it:
 *
 *   mg_gelu_linear(x, kind, W, b)                = mg_linear(mg_gelu(x, kind), W, b)
 *   mg_layernorm_linear(x, ln_w, ln_b, eps, W, b) = mg_linear(mg_layernorm(x, ln_w, ln_b, eps), W, b)
 *   mg_merge_heads_linear(x, W, b)               = mg_linear(mg_merge_heads(x), W, b)
 *
 * In fp32 they are those calls. In bf16 precision mg_linear reads its input only through the bf16
 * copy it rounds in forward (the products and dW), and neither GELU's backward (it reads x) nor
 * LayerNorm's (x, its mean and rstd) nor merge_heads' (only its output gradient) reads its own
 * output: the float32 activation h would be written once, rounded, and never read again. So here h is computed a block of rows at a time
 * into a small per-thread buffer and rounded straight into the bf16 copy mg_linear would have
 * made (the same kernels on the same values: the same bits), and only that copy is kept. The tape
 * holds the two nodes of the composition (the activation's and mg_linear's, as gelu.c,
 * layernorm.c and linear.c record them), so backward runs exactly their code; h is a tensor with
 * shape and no data between them (its gradient is made in backward, as for the composition).
 * Memory saved per call: h in float32, 4 bytes a value. Without a node to record (no gradient
 * wanted) the bf16 copy lives in the context's scratch for the call only.
 */
#include "internal.h"
#include "minigrad/rowops.h"

#ifdef _OPENMP
#include <omp.h>
#endif

extern const mg_op_def mg_op_def_gelu, mg_op_def_layernorm;

/* Values per block of the row-wise pass: 16 KB of float32, in L1 or L2 while it is rounded. */
enum { FUSED_BLOCK = 4096 };

static int fused_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int fused_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static bool fused_not_null(mg_ctx *ctx, const char *op, const mg_tensor *x, const mg_tensor *w) {
    if (x && w) return true;
    mg_ctx_fail(ctx, "%s: %s is NULL", op, !x ? "x" : "weight");
    return false;
}

/* The bf16 copy of h: in the arena when kept for backward, else in the scratch. */
static mg_bf16 *fused_copy(mg_ctx *ctx, bool keep, int64_t n, const char *what) {
    const size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(mg_bf16);
    return keep ? mg_ctx_alloc(ctx, bytes, what) : mg_ctx_scratch_alloc(ctx, bytes, what);
}

/* The activation's place on the tape: a tensor of x's shape without data. */
static mg_tensor *fused_hidden(mg_ctx *ctx, const mg_tensor *x) {
    return mg_tensor_wrap(ctx, MG_F32, x->ndim, x->shape, NULL);
}

/* ---- linear(gelu(x)) ---- */

/* Block k of gelu(x) into t, then rounded into hb: elementwise, so the bits of one call over all
 * of x. */
static inline void gelu_block(mg_gelu_kind kind, int64_t n, int64_t k, const float *x, float *t, mg_bf16 *hb) {
    const int64_t i0 = k * FUSED_BLOCK, len = n - i0 < FUSED_BLOCK ? n - i0 : FUSED_BLOCK;
    mg_gelu_fwd(kind, len, x + i0, t);
    mg_f32_to_bf16(len, t, hb + i0);
}

static mg_tensor *gelu_linear_bf16(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind, mg_tensor *w, mg_tensor *b) {
    static const char op[] = "mg_gelu_linear";
    const int64_t n = x->numel;
    const bool keep = mg_will_record(ctx, 3, (mg_tensor *[]){x, w, b});
    const size_t mark = mg_ctx_scratch_mark(ctx);
    const int nt = fused_threads();
    mg_bf16 *hb = fused_copy(ctx, keep, n, "mg_gelu_linear: gelu(x) in bf16");
    float *buf = mg_ctx_scratch_alloc(ctx, (size_t)nt * FUSED_BLOCK * sizeof(float), "mg_gelu_linear: gelu block");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    const int64_t nblk = (n + FUSED_BLOCK - 1) / FUSED_BLOCK;
    MG_PAR_FOR(n > 65536, k, nblk, gelu_block(kind, n, k, x->data, buf + (size_t)fused_tid() * FUSED_BLOCK, hb));
    mg_tensor *h = x;
    if (keep) {
        h = fused_hidden(ctx, x);
        mg_node *g = mg_op_record(ctx, &mg_op_def_gelu, h, 1, (mg_tensor *[]){x});
        if (g) g->i[0] = kind;
    }
    mg_tensor *y = mg_ctx_ok(ctx) ? mg_linear_bf16(ctx, op, h, hb, w, b) : mg_ctx_dummy(ctx);
    mg_ctx_scratch_release(ctx, mark);
    return y;
}

mg_tensor *mg_gelu_linear(mg_ctx *ctx, mg_tensor *x, mg_gelu_kind kind, mg_tensor *weight, mg_tensor *bias) {
    static const char op[] = "mg_gelu_linear";
    MG_BAIL_IF_FAILED(ctx);
    if (!fused_not_null(ctx, op, x, weight)) return mg_ctx_dummy(ctx);
    if (kind != MG_GELU_TANH && kind != MG_GELU_ERF) {
        mg_ctx_fail(ctx, "%s: unknown GELU kind %d (MG_GELU_TANH or MG_GELU_ERF)", op, (int)kind);
        return mg_ctx_dummy(ctx);
    }
    if (!mg_linear_check(ctx, op, x, weight, bias)) return mg_ctx_dummy(ctx);
    if (!mg_use_bf16(ctx)) return mg_linear(ctx, mg_gelu(ctx, x, kind), weight, bias);
    return gelu_linear_bf16(ctx, x, kind, weight, bias);
}

/* ---- linear(layernorm(x)) ---- */

/* Rows [k * rows, k * rows + rows) of layernorm(x) into t, then rounded into hb: row by row, so
 * the bits of one call over all of x; mean and rstd when kept. */
static inline void ln_block(int64_t R, int64_t C, int64_t rows, int64_t k, const float *x, const float *lw,
                            const float *lb, float eps, float *t, float *mean, float *rstd, mg_bf16 *hb) {
    const int64_t r0 = k * rows, nr = R - r0 < rows ? R - r0 : rows;
    mg_layernorm_fwd(nr, C, x + r0 * C, lw, lb, eps, t, mean ? mean + r0 : NULL, rstd ? rstd + r0 : NULL);
    mg_f32_to_bf16(nr * C, t, hb + r0 * C);
}

static mg_tensor *layernorm_linear_bf16(mg_ctx *ctx, mg_tensor *x, mg_tensor *lw, mg_tensor *lb, float eps,
                                        mg_tensor *w, mg_tensor *b) {
    static const char op[] = "mg_layernorm_linear";
    const int64_t R = mg_rows(x), C = mg_cols(x);
    const bool keep_ln = mg_will_record(ctx, 3, (mg_tensor *[]){x, lw, lb});
    const bool keep = keep_ln || mg_will_record(ctx, 2, (mg_tensor *[]){w, b});
    const size_t mark = mg_ctx_scratch_mark(ctx);
    const int nt = fused_threads();
    const int64_t rows = C < FUSED_BLOCK ? FUSED_BLOCK / C : 1; /* rows per block */
    mg_bf16 *hb = fused_copy(ctx, keep, R * C, "mg_layernorm_linear: layernorm(x) in bf16");
    float *buf = mg_ctx_scratch_alloc(ctx, (size_t)nt * (size_t)(rows * C) * sizeof(float),
                                      "mg_layernorm_linear: layernorm block");
    /* kept for LayerNorm's backward, as mg_layernorm keeps them */
    float *mean = keep_ln ? mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm mean") : NULL;
    float *rstd = keep_ln ? mg_ctx_alloc(ctx, (size_t)R * 4, "mg_layernorm rstd") : NULL;
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    const int64_t nblk = (R + rows - 1) / rows;
    const float *lwd = lw ? lw->data : NULL, *lbd = lb ? lb->data : NULL;
    MG_PAR_FOR(R * C > 32768, k, nblk,
               ln_block(R, C, rows, k, x->data, lwd, lbd, eps, buf + (size_t)fused_tid() * (size_t)(rows * C), mean,
                        rstd, hb));
    mg_tensor *h = x;
    if (keep) {
        h = fused_hidden(ctx, x);
        mg_node *n = mg_op_record(ctx, &mg_op_def_layernorm, h, 3, (mg_tensor *[]){x, lw, lb});
        if (n) n->saved[0] = mean, n->saved[1] = rstd, n->f[0] = eps;
    }
    mg_tensor *y = mg_ctx_ok(ctx) ? mg_linear_bf16(ctx, op, h, hb, w, b) : mg_ctx_dummy(ctx);
    mg_ctx_scratch_release(ctx, mark);
    return y;
}

mg_tensor *mg_layernorm_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *ln_weight, mg_tensor *ln_bias, float eps,
                               mg_tensor *weight, mg_tensor *bias) {
    static const char op[] = "mg_layernorm_linear";
    MG_BAIL_IF_FAILED(ctx);
    if (!fused_not_null(ctx, op, x, weight)) return mg_ctx_dummy(ctx);
    if (!mg_expect_f32(ctx, op, "x", x)) return mg_ctx_dummy(ctx);
    const int64_t C = mg_cols(x);
    if (x->ndim < 1 || C == 0) {
        mg_ctx_fail(ctx, "%s: x%s needs a non-empty last dim", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    if ((ln_weight && (!mg_expect_f32(ctx, op, "ln_weight", ln_weight))) ||
        (ln_bias && !mg_expect_f32(ctx, op, "ln_bias", ln_bias)))
        return mg_ctx_dummy(ctx);
    if ((ln_weight && (ln_weight->ndim != 1 || ln_weight->shape[0] != C)) ||
        (ln_bias && (ln_bias->ndim != 1 || ln_bias->shape[0] != C))) {
        mg_ctx_fail(ctx, "%s: x%s with ln_weight%s, ln_bias%s: both must be (%lld)", op, MG_SHAPE(x),
                    ln_weight ? MG_SHAPE(ln_weight) : "(none)", ln_bias ? MG_SHAPE(ln_bias) : "(none)",
                    (long long)C);
        return mg_ctx_dummy(ctx);
    }
    if (!(eps >= 0.0f)) {
        mg_ctx_fail(ctx, "%s: eps %g must be >= 0", op, (double)eps);
        return mg_ctx_dummy(ctx);
    }
    if (!mg_linear_check(ctx, op, x, weight, bias)) return mg_ctx_dummy(ctx);
    if (!mg_use_bf16(ctx)) return mg_linear(ctx, mg_layernorm(ctx, x, ln_weight, ln_bias, eps), weight, bias);
    return layernorm_linear_bf16(ctx, x, ln_weight, ln_bias, eps, weight, bias);
}

/* ---- linear(merge_heads(x)) ---- */

extern const mg_op_def mg_op_def_merge_heads;

static mg_tensor *merge_heads_linear_bf16(mg_ctx *ctx, mg_tensor *x, mg_tensor *w, mg_tensor *b) {
    static const char op[] = "mg_merge_heads_linear";
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3], C = H * D;
    const bool keep = mg_will_record(ctx, 3, (mg_tensor *[]){x, w, b});
    const size_t mark = mg_ctx_scratch_mark(ctx);
    mg_bf16 *hb = fused_copy(ctx, keep, B * T * C, "mg_merge_heads_linear: merged heads in bf16");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    /* row (b, t) of the merged layout, head h at columns h*D..: a copy, then the rounding */
    MG_PAR_FOR(B * T * C > 65536, r, B * T, {
        const int64_t bi = r / T, t = r % T;
        for (int64_t h = 0; h < H; h++) mg_f32_to_bf16(D, x->data + ((bi * H + h) * T + t) * D, hb + r * C + h * D);
    });
    mg_tensor *hx = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){B, T, C}, NULL); /* merge_heads' output */
    if (keep && mg_ctx_ok(ctx)) mg_op_record(ctx, &mg_op_def_merge_heads, hx, 1, (mg_tensor *[]){x});
    mg_tensor *y = mg_ctx_ok(ctx) ? mg_linear_bf16(ctx, op, hx, hb, w, b) : mg_ctx_dummy(ctx);
    mg_ctx_scratch_release(ctx, mark);
    return y;
}

mg_tensor *mg_merge_heads_linear(mg_ctx *ctx, mg_tensor *x, mg_tensor *weight, mg_tensor *bias) {
    static const char op[] = "mg_merge_heads_linear";
    MG_BAIL_IF_FAILED(ctx);
    if (!fused_not_null(ctx, op, x, weight)) return mg_ctx_dummy(ctx);
    if (!mg_expect_f32(ctx, op, "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim != 4) {
        mg_ctx_fail(ctx, "%s: x%s must be (B,H,T,D)", op, MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    const int64_t C = x->shape[1] * x->shape[3];
    mg_tensor merged = {.ndim = 3, .shape = {x->shape[0], x->shape[2], C}, .dtype = MG_F32}; /* for the checks */
    merged.numel = x->numel, merged.data = x->data;
    if (!mg_linear_check(ctx, "mg_merge_heads_linear, heads merged", &merged, weight, bias)) return mg_ctx_dummy(ctx);
    if (!mg_use_bf16(ctx)) return mg_linear(ctx, mg_merge_heads(ctx, x), weight, bias);
    return merge_heads_linear_bf16(ctx, x, weight, bias);
}
