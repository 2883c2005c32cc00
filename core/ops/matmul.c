/* Matrix product, with b either shared (2-D) or batched like a.
 *
 *   mg_matmul:    C = A @ B      A (...,M,K), B (K,N) | (...,K,N)
 *   mg_matmul_nt: C = A @ B^T    A (...,M,K), B (N,K) | (...,N,K)
 *
 * Backward (dC given):
 *   NN: dA += dC @ B^T,  dB += A^T @ dC
 *   NT: dA += dC @ B,    dB += dC^T @ A
 * When B is shared, A's leading dims fold into M (one GEMM over all rows), so dB sums over the
 * batch inside a single GEMM whose K is the row count: deterministic for any thread count.
 * In bf16 precision a shared B runs on bf16 copies (mm_bf16_forward, mm_bf16_backward below).
 */
#include "internal.h"
#include "minigrad/kernels.h"

typedef struct {
    int64_t batch, M, N, K;
    bool shared;
} mm_dims;

static bool mm_check(mg_ctx *ctx, const char *op, bool nt, const mg_tensor *a, const mg_tensor *b, mm_dims *d) {
    const char *sym = nt ? "@ b^T, b" : "@ b";
    if (!mg_expect_f32(ctx, op, "a", a) || !mg_expect_f32(ctx, op, "b", b)) return false;
    if (a->ndim < 2 || b->ndim < 2) {
        mg_ctx_fail(ctx, "%s: a%s %s%s: both operands need at least 2 dims", op, MG_SHAPE(a), sym, MG_SHAPE(b));
        return false;
    }
    int64_t K = a->shape[a->ndim - 1], M = a->shape[a->ndim - 2];
    int64_t bK = nt ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    int64_t N = nt ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    if (bK != K) {
        mg_ctx_fail(ctx, "%s: a%s %s%s: inner dims %lld != %lld", op, MG_SHAPE(a), sym, MG_SHAPE(b),
                    (long long)K, (long long)bK);
        return false;
    }
    d->M = M, d->N = N, d->K = K;
    d->batch = 1;
    for (int i = 0; i < a->ndim - 2; i++) d->batch *= a->shape[i];
    d->shared = b->ndim == 2;
    if (!d->shared) {
        bool same = b->ndim == a->ndim;
        for (int i = 0; same && i < a->ndim - 2; i++) same = a->shape[i] == b->shape[i];
        if (!same) {
            mg_ctx_fail(ctx, "%s: a%s %s%s: batch dims differ (b must be 2-D or share a's leading dims)",
                        op, MG_SHAPE(a), sym, MG_SHAPE(b));
            return false;
        }
    }
    return true;
}

/* ---- bf16 precision, shared B: rows = batch*M rows of A in one product ---- */

static bool mm_bf16_forward(mg_ctx *ctx, bool nt, const mg_tensor *a, const mg_tensor *b,
                            const mm_dims *d, float *c, const mg_bf16 **ab, const mg_bf16 **bb) {
    *ab = mg_bf16_copy(ctx, a->data, a->numel, "mg_matmul: a in bf16");
    *bb = mg_bf16_operand(ctx, b, "mg_matmul: b in bf16");
    if (!*ab || !*bb) return false;
    mg_bgemm(false, nt, d->batch * d->M, d->N, d->K, *ab, d->K, *bb, nt ? d->K : d->N, false, c, d->N);
    return true;
}

static void mm_bf16_backward(mg_ctx *ctx, mg_node *n, bool nt) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    const int64_t rows = n->i[0] * n->i[1], N = n->i[2], K = n->i[3];
    const mg_bf16 *ab = n->saved[0], *bb = n->saved[1];
    const mg_bf16 *dcb = mg_bf16_copy(ctx, n->out->grad, rows * N, "mg_matmul backward: dC in bf16");
    if (!dcb) return;
    if (mg_requires_grad(a)) {
        float *da = mg_grad(ctx, a);
        if (!da) return;
        mg_bgemm(false, !nt, rows, K, N, dcb, N, bb, nt ? K : N, true, da, K);
    }
    if (mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        if (!nt)
            mg_bgemm(true, false, K, N, rows, ab, K, dcb, N, true, db, N);
        else
            mg_bgemm(true, false, N, K, rows, dcb, N, ab, K, true, db, K);
    }
}

static mg_tensor *mm_forward(mg_ctx *ctx, const mg_op_def *def, bool nt, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    mm_dims d;
    if (!mm_check(ctx, def->name, nt, a, b, &d)) return mg_ctx_dummy(ctx);
    int64_t shape[MG_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
    shape[a->ndim - 1] = d.N;
    mg_tensor *c = mg_op_output(ctx, def->name, a->ndim, shape);
    if (!mg_ctx_ok(ctx)) return c;
    int64_t ldb = nt ? d.K : d.N;
    const mg_bf16 *ab = NULL, *bb = NULL;
    if (d.shared && mg_use_bf16(ctx)) {
        if (!mm_bf16_forward(ctx, nt, a, b, &d, c->data, &ab, &bb)) return c;
    } else if (d.shared)
        mg_sgemm(false, nt, d.batch * d.M, d.N, d.K, 1.0f, a->data, d.K, b->data, ldb, 0.0f, c->data, d.N);
    else
        mg_sgemm_batched(d.batch, false, nt, d.M, d.N, d.K, 1.0f, a->data, d.K, d.M * d.K, b->data, ldb,
                         d.K * d.N, 0.0f, c->data, d.N, d.M * d.N);
    mg_node *n = mg_op_record(ctx, def, c, 2, (mg_tensor *[]){a, b});
    if (n) n->i[0] = d.batch, n->i[1] = d.M, n->i[2] = d.N, n->i[3] = d.K;
    if (n) n->saved[0] = (void *)ab, n->saved[1] = (void *)bb;
    return c;
}

static void mm_backward(mg_ctx *ctx, mg_node *n, bool nt) {
    if (n->saved[0]) {
        mm_bf16_backward(ctx, n, nt);
        return;
    }
    mg_tensor *a = n->in[0], *b = n->in[1];
    const float *dc = n->out->grad;
    int64_t batch = n->i[0], M = n->i[1], N = n->i[2], K = n->i[3];
    bool shared = b->ndim == 2;
    if (mg_requires_grad(a)) {
        float *da = mg_grad(ctx, a);
        if (!da) return;
        /* dA (M,K) += dC (M,N) @ (NN: B^T, B is K x N | NT: B, B is N x K) */
        int64_t ldb = nt ? K : N;
        if (shared)
            mg_sgemm(false, !nt, batch * M, K, N, 1.0f, dc, N, b->data, ldb, 1.0f, da, K);
        else
            mg_sgemm_batched(batch, false, !nt, M, K, N, 1.0f, dc, N, M * N, b->data, ldb, K * N, 1.0f,
                             da, K, M * K);
    }
    if (mg_requires_grad(b)) {
        float *db = mg_grad(ctx, b);
        if (!db) return;
        int64_t rows = shared ? batch * M : M;
        int64_t nb = shared ? 1 : batch;
        if (!nt) /* dB (K,N) += A^T (K,rows) @ dC (rows,N) */
            mg_sgemm_batched(nb, true, false, K, N, rows, 1.0f, a->data, K, M * K, dc, N, M * N, 1.0f,
                             db, N, K * N);
        else /* dB (N,K) += dC^T (N,rows) @ A (rows,K) */
            mg_sgemm_batched(nb, true, false, N, K, rows, 1.0f, dc, N, M * N, a->data, K, M * K, 1.0f,
                             db, K, K * N);
    }
}

static void matmul_backward(mg_ctx *ctx, mg_node *n) { mm_backward(ctx, n, false); }
static void matmul_nt_backward(mg_ctx *ctx, mg_node *n) { mm_backward(ctx, n, true); }

const mg_op_def mg_op_def_matmul = {"mg_matmul", matmul_backward};
const mg_op_def mg_op_def_matmul_nt = {"mg_matmul_nt", matmul_nt_backward};

mg_tensor *mg_matmul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) { return mm_forward(ctx, &mg_op_def_matmul, false, a, b); }
mg_tensor *mg_matmul_nt(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) { return mm_forward(ctx, &mg_op_def_matmul_nt, true, a, b); }
