/* Attention head layout changes (copies, so every later kernel sees contiguous heads):
 *   mg_split_heads: x (B,T,W), columns [col0, col0+width) -> (B,H,T,D), D = width/H
 *                   y[b,h,t,d] = x[b,t,col0 + h*D + d]
 *   mg_merge_heads: (B,H,T,D) -> (B,T,H*D), the inverse layout.
 * Backward is the opposite copy, accumulated (or written as 0 + value into a gradient buffer made
 * for it); each destination element has exactly one source. */
#include "internal.h"

typedef enum { COPY, ACCUMULATE, ACCUMULATE_FRESH } copy_mode;

/* One row (b, t) of the copy. Into rows with ACCUMULATE_FRESH (a gradient buffer just made), the
 * columns of each row outside the slice are set to 0 too, so that the buffer needs no zeroing pass
 * of its own. */
static inline void split_row(float *x, float *y, int64_t b, int64_t t, int64_t T, int64_t W,
                             int64_t H, int64_t D, int64_t col0, bool to_heads, copy_mode mode) {
    if (!to_heads && mode == ACCUMULATE_FRESH) {
        float *row = x + (b * T + t) * W;
        memset(row, 0, (size_t)col0 * sizeof(float));
        memset(row + col0 + H * D, 0, (size_t)(W - col0 - H * D) * sizeof(float));
    }
    for (int64_t h = 0; h < H; h++) {
        float *hp = y + ((b * H + h) * T + t) * D;        /* head layout */
        float *rp = x + (b * T + t) * W + col0 + h * D;   /* row layout */
        float *dst = to_heads ? hp : rp;
        const float *src = to_heads ? rp : hp;
        if (mode == ACCUMULATE)
            for (int64_t d = 0; d < D; d++) dst[d] += src[d];
        else if (mode == ACCUMULATE_FRESH)
            for (int64_t d = 0; d < D; d++) dst[d] = 0.0f + src[d];
        else
            memcpy(dst, src, (size_t)D * 4);
    }
}

/* Row by row; a small copy (a decoding step's few rows) without entering OpenMP. */
static void split_copy(float *x, float *y, int64_t B, int64_t T, int64_t W, int64_t H, int64_t D,
                       int64_t col0, bool to_heads, copy_mode mode) {
    MG_PAR_FOR(B * T * H * D > 16384, r, B * T,
               split_row(x, y, r / T, r % T, T, W, H, D, col0, to_heads, mode));
}

static void split_heads_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    bool fresh; /* a slice of x's columns: in a new buffer the rest must be zeroed */
    float *dx = mg_grad_for_write(ctx, x, &fresh);
    if (!dx) return;
    int64_t B = x->shape[0], T = x->shape[1], W = x->shape[2], H = n->i[0], col0 = n->i[1], D = n->out->shape[3];
    split_copy(dx, n->out->grad, B, T, W, H, D, col0, false, fresh ? ACCUMULATE_FRESH : ACCUMULATE);
}

static void merge_heads_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    bool fresh;
    float *dx = mg_grad_for_write(ctx, x, &fresh);
    if (!dx) return;
    int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    split_copy(n->out->grad, dx, B, T, H * D, H, D, 0, true, fresh ? ACCUMULATE_FRESH : ACCUMULATE);
}

const mg_op_def mg_op_def_split_heads = {"mg_split_heads", split_heads_backward};
const mg_op_def mg_op_def_merge_heads = {"mg_merge_heads", merge_heads_backward};

mg_tensor *mg_split_heads(mg_ctx *ctx, mg_tensor *x, int64_t H, int64_t col0, int64_t width) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_split_heads", "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim != 3 || H <= 0 || width <= 0 || width % H != 0 || col0 < 0 || col0 + width > x->shape[2]) {
        mg_ctx_fail(ctx, "mg_split_heads: x%s, %lld heads over columns [%lld, %lld): need x (B,T,W), "
                         "the columns inside W and divisible by the head count",
                    MG_SHAPE(x), (long long)H, (long long)col0, (long long)(col0 + width));
        return mg_ctx_dummy(ctx);
    }
    int64_t B = x->shape[0], T = x->shape[1], D = width / H;
    mg_tensor *y = mg_op_output(ctx, "mg_split_heads", 4, (int64_t[]){B, H, T, D});
    if (!mg_ctx_ok(ctx)) return y;
    split_copy(x->data, y->data, B, T, x->shape[2], H, D, col0, true, COPY);
    mg_node *n = mg_op_record(ctx, &mg_op_def_split_heads, y, 1, (mg_tensor *[]){x});
    if (n) n->i[0] = H, n->i[1] = col0;
    return y;
}

mg_tensor *mg_merge_heads(mg_ctx *ctx, mg_tensor *x) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_merge_heads", "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim != 4) {
        mg_ctx_fail(ctx, "mg_merge_heads: x%s must be (B,H,T,D)", MG_SHAPE(x));
        return mg_ctx_dummy(ctx);
    }
    int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    mg_tensor *y = mg_op_output(ctx, "mg_merge_heads", 3, (int64_t[]){B, T, H * D});
    if (!mg_ctx_ok(ctx)) return y;
    split_copy(y->data, x->data, B, T, H * D, H, D, 0, false, COPY);
    mg_op_record(ctx, &mg_op_def_merge_heads, y, 1, (mg_tensor *[]){x});
    return y;
}
