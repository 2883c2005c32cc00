/* Matrix product; b shared (2-D), batched like a, or with batch dims that broadcast against a's.
 *
 *   mg_matmul:    C = A @ B      A (...,M,K), B (K,N) | (...,K,N)
 *   mg_matmul_nt: C = A @ B^T    A (...,M,K), B (N,K) | (...,N,K)
 *   mg_bmm:       mg_matmul restricted to A (B,M,K), B (B,K,N)
 *
 * Backward (dC given):
 *   NN: dA += dC @ B^T,  dB += A^T @ dC
 *   NT: dA += dC @ B,    dB += dC^T @ A
 * When B is shared, A's leading dims fold into M (one GEMM over all rows), so dB sums over the
 * batch inside a single GEMM whose K is the row count: deterministic for any thread count.
 * Broadcast batch dims (NumPy rules over the leading dims, e.g. (2,1,M,K) @ (3,K,N) -> (2,3,M,N))
 * run one batched GEMM over the innermost batch dim per index of the outer ones, a broadcast
 * operand taking stride 0. In backward a broadcast operand's gradient sums its products in batch
 * order (a shared output of mg_sgemm_batched accumulates in order, and the outer indices run one
 * after another): deterministic too.
 * In bf16 precision a shared B runs on bf16 copies (mm_bf16_forward, mm_bf16_backward below): A
 * rounded once in forward and kept in the node (in the scratch when no node is recorded), dC once
 * in backward, in the scratch; a kept weight (mg_ctx_keep_bf16_weights) is read pre-packed by
 * products of few rows.
 */
#include "internal.h"
#include "minigrad/kernels.h"

typedef enum { MM_SHARED, MM_SAME, MM_BCAST } mm_mode;

typedef struct {
    int64_t batch, M, N, K;
    mm_mode mode; /* SHARED: b is one matrix, a's rows fold; SAME: equal batch dims; BCAST: broadcast */
    int ndim;     /* of the output */
    int64_t shape[MG_MAX_DIMS];
    /* BCAST: the output's batch dims (ndim - 2 of them) and, per batch dim, the step from one
     * matrix of a (of b) to the next: 0 where that operand broadcasts. */
    int64_t step_a[MG_MAX_DIMS], step_b[MG_MAX_DIMS];
} mm_dims;

/* Batch dim k (0-based among out's nb batch dims) of t, aligned from the right; 1 if t lacks it. */
static int64_t mm_batch_dim(const mg_tensor *t, int nb, int k) {
    int tk = k - (nb - (t->ndim - 2));
    return tk >= 0 ? t->shape[tk] : 1;
}

/* Fills d from the shapes. Returns 0, or what is wrong: 1 an operand under 2 dims, 2 the inner dims
 * differ, 3 batch dim sizes *bad_a and *bad_b do not broadcast. */
static int mm_shape(bool nt, const mg_tensor *a, const mg_tensor *b, mm_dims *d, int64_t *bad_a, int64_t *bad_b) {
    if (a->ndim < 2 || b->ndim < 2) return 1;
    int64_t K = a->shape[a->ndim - 1], M = a->shape[a->ndim - 2];
    int64_t bK = nt ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    int64_t N = nt ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    *bad_a = K, *bad_b = bK;
    if (bK != K) return 2;
    d->M = M, d->N = N, d->K = K;
    d->batch = 1;
    for (int i = 0; i < a->ndim - 2; i++) d->batch *= a->shape[i];
    bool same = b->ndim == a->ndim, b_one = b->ndim <= a->ndim;
    for (int i = 0; same && i < a->ndim - 2; i++) same = a->shape[i] == b->shape[i];
    for (int i = 0; b_one && i < b->ndim - 2; i++) b_one = b->shape[i] == 1;
    /* b 2-D and equal batch dims: the paths every model takes, kept as they always were */
    d->mode = b->ndim == 2 ? MM_SHARED : same ? MM_SAME : b_one ? MM_SHARED : MM_BCAST;
    d->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    const int nb = d->ndim - 2;
    int64_t sa = M * K, sb = K * N;
    for (int k = nb - 1; k >= 0; k--) {
        int64_t da = mm_batch_dim(a, nb, k), db = mm_batch_dim(b, nb, k);
        if (da != db && da != 1 && db != 1) {
            *bad_a = da, *bad_b = db;
            return 3;
        }
        d->shape[k] = da > db ? da : db;
        d->step_a[k] = da == 1 ? 0 : sa;
        d->step_b[k] = db == 1 ? 0 : sb;
        sa *= da, sb *= db;
    }
    d->shape[nb] = M, d->shape[nb + 1] = N;
    return 0;
}

static bool mm_check(mg_ctx *ctx, const char *op, bool nt, const mg_tensor *a, const mg_tensor *b, mm_dims *d) {
    const char *sym = nt ? "@ b^T, b" : "@ b";
    if (!mg_expect_f32(ctx, op, "a", a) || !mg_expect_f32(ctx, op, "b", b)) return false;
    int64_t x, y;
    switch (mm_shape(nt, a, b, d, &x, &y)) {
    case 0: return true;
    case 1:
        mg_ctx_fail(ctx, "%s: a%s %s%s: both operands need at least 2 dims", op, MG_SHAPE(a), sym, MG_SHAPE(b));
        return false;
    case 2:
        mg_ctx_fail(ctx, "%s: a%s %s%s: inner dims %lld != %lld", op, MG_SHAPE(a), sym, MG_SHAPE(b), (long long)x,
                    (long long)y);
        return false;
    default:
        mg_ctx_fail(ctx, "%s: a%s %s%s: batch dims differ and do not broadcast (%lld vs %lld)", op, MG_SHAPE(a), sym,
                    MG_SHAPE(b), (long long)x, (long long)y);
        return false;
    }
}

/* The plan of a product mm_check accepted before (backward). */
static mm_dims mm_plan(bool nt, const mg_tensor *a, const mg_tensor *b) {
    mm_dims d;
    int64_t x, y;
    mm_shape(nt, a, b, &d, &x, &y);
    return d;
}

/* BCAST runs, for each index u of the outer batch dims (all but the innermost) in order, one batched
 * GEMM over the innermost batch dim: L matrices, a's and b's steps 0 where they broadcast. */
typedef struct {
    int64_t L, step_a, step_b, outer;
} mm_loop;

static mm_loop mm_loop_of(const mm_dims *d) {
    const int nb = d->ndim - 2;
    mm_loop l = {d->shape[nb - 1], d->step_a[nb - 1], d->step_b[nb - 1], 1};
    for (int k = 0; k < nb - 1; k++) l.outer *= d->shape[k];
    return l;
}

static void mm_offsets(const mm_dims *d, int64_t u, int64_t *off_a, int64_t *off_b) {
    *off_a = 0, *off_b = 0;
    for (int k = d->ndim - 4; k >= 0; k--) {
        int64_t i = u % d->shape[k];
        u /= d->shape[k];
        *off_a += i * d->step_a[k], *off_b += i * d->step_b[k];
    }
}

/* ---- bf16 precision, shared B: rows = batch*M rows of A in one product ---- */

/* keep: a node will be recorded, so a's copy goes to the arena for backward (else to the scratch,
 * which the caller releases). */
static bool mm_bf16_forward(mg_ctx *ctx, bool nt, const mg_tensor *a, const mg_tensor *b, const mm_dims *d,
                            bool keep, float *c, const mg_bf16 **ab, const mg_bf16 **bb) {
    const int64_t rows = d->batch * d->M;
    *ab = keep ? mg_bf16_copy(ctx, a->data, a->numel, "mg_matmul: a in bf16")
               : mg_bf16_scratch(ctx, a->data, a->numel, "mg_matmul: a in bf16");
    if (!*ab) return false;
    const uint32_t *bp = mg_bf16_packed(ctx, b, nt, rows); /* kept weights */
    if (bp && mg_bgemm_packed(rows, d->N, d->K, *ab, d->K, bp, false, c, d->N)) return true;
    *bb = mg_bf16_operand(ctx, b, "mg_matmul: b in bf16");
    if (!*bb) return false;
    mg_bgemm(false, nt, rows, d->N, d->K, *ab, d->K, *bb, nt ? d->K : d->N, false, c, d->N);
    return true;
}

static void mm_bf16_backward(mg_ctx *ctx, mg_node *n, bool nt) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    const int64_t rows = n->i[0] * n->i[1], N = n->i[2], K = n->i[3];
    const mg_bf16 *ab = n->saved[0], *bb = n->saved[1];
    const mg_bf16 *dcb = mg_bf16_scratch(ctx, n->out->grad, rows * N, "mg_matmul backward: dC in bf16");
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
    mg_tensor *c = mg_op_output(ctx, def->name, d.ndim, d.shape);
    if (!mg_ctx_ok(ctx)) return c;
    int64_t ldb = nt ? d.K : d.N;
    const mg_bf16 *ab = NULL, *bb = NULL;
    const size_t mark = mg_ctx_scratch_mark(ctx);
    if (d.mode == MM_SHARED && mg_use_bf16(ctx)) {
        const bool keep = mg_will_record(ctx, 2, (mg_tensor *[]){a, b});
        const bool ok = mm_bf16_forward(ctx, nt, a, b, &d, keep, c->data, &ab, &bb);
        if (!keep) mg_ctx_scratch_release(ctx, mark), ab = NULL;
        if (!ok) return c;
    } else if (d.mode == MM_SHARED)
        mg_sgemm(false, nt, d.batch * d.M, d.N, d.K, 1.0f, a->data, d.K, b->data, ldb, 0.0f, c->data, d.N);
    else if (d.mode == MM_SAME)
        mg_sgemm_batched(d.batch, false, nt, d.M, d.N, d.K, 1.0f, a->data, d.K, d.M * d.K, b->data, ldb,
                         d.K * d.N, 0.0f, c->data, d.N, d.M * d.N);
    else {
        const mm_loop l = mm_loop_of(&d);
        for (int64_t u = 0; u < l.outer; u++) {
            int64_t oa, ob;
            mm_offsets(&d, u, &oa, &ob);
            mg_sgemm_batched(l.L, false, nt, d.M, d.N, d.K, 1.0f, a->data + oa, d.K, l.step_a, b->data + ob, ldb,
                             l.step_b, 0.0f, c->data + u * l.L * d.M * d.N, d.N, d.M * d.N);
        }
    }
    mg_node *n = mg_op_record(ctx, def, c, 2, (mg_tensor *[]){a, b});
    if (n) n->i[0] = d.batch, n->i[1] = d.M, n->i[2] = d.N, n->i[3] = d.K;
    if (n && ab && !bb) bb = mg_bf16_operand(ctx, b, "mg_matmul: b in bf16"); /* read pre-packed */
    if (n) n->saved[0] = (void *)ab, n->saved[1] = (void *)bb;
    return c;
}

static void mm_backward_bcast(mg_ctx *ctx, mg_node *n, bool nt, const mm_dims *d) {
    mg_tensor *a = n->in[0], *b = n->in[1];
    const float *dc = n->out->grad;
    const int64_t M = d->M, N = d->N, K = d->K, ldb = nt ? K : N;
    const mm_loop l = mm_loop_of(d);
    float *da = mg_requires_grad(a) ? mg_grad(ctx, a) : NULL;
    float *db = mg_requires_grad(b) ? mg_grad(ctx, b) : NULL;
    if (!mg_ctx_ok(ctx)) return;
    for (int64_t u = 0; u < l.outer; u++) {
        int64_t oa, ob;
        mm_offsets(d, u, &oa, &ob);
        const float *dcu = dc + u * l.L * M * N;
        if (da) /* dA (M,K) += dC (M,N) @ (NN: B^T | NT: B) */
            mg_sgemm_batched(l.L, false, !nt, M, K, N, 1.0f, dcu, N, M * N, b->data + ob, ldb, l.step_b, 1.0f,
                             da + oa, K, l.step_a);
        if (db && !nt) /* dB (K,N) += A^T (K,M) @ dC (M,N) */
            mg_sgemm_batched(l.L, true, false, K, N, M, 1.0f, a->data + oa, K, l.step_a, dcu, N, M * N, 1.0f,
                             db + ob, N, l.step_b);
        else if (db) /* dB (N,K) += dC^T (N,M) @ A (M,K) */
            mg_sgemm_batched(l.L, true, false, N, K, M, 1.0f, dcu, N, M * N, a->data + oa, K, l.step_a, 1.0f,
                             db + ob, K, l.step_b);
    }
}

static void mm_backward(mg_ctx *ctx, mg_node *n, bool nt) {
    if (n->saved[0]) {
        mm_bf16_backward(ctx, n, nt);
        return;
    }
    mg_tensor *a = n->in[0], *b = n->in[1];
    const float *dc = n->out->grad;
    const mm_dims d = mm_plan(nt, a, b);
    if (d.mode == MM_BCAST) {
        mm_backward_bcast(ctx, n, nt, &d);
        return;
    }
    int64_t batch = n->i[0], M = n->i[1], N = n->i[2], K = n->i[3];
    bool shared = d.mode == MM_SHARED;
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
const mg_op_def mg_op_def_bmm = {"mg_bmm", matmul_backward};

mg_tensor *mg_matmul(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) { return mm_forward(ctx, &mg_op_def_matmul, false, a, b); }
mg_tensor *mg_matmul_nt(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) { return mm_forward(ctx, &mg_op_def_matmul_nt, true, a, b); }

mg_tensor *mg_bmm(mg_ctx *ctx, mg_tensor *a, mg_tensor *b) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_bmm", "a", a) || !mg_expect_f32(ctx, "mg_bmm", "b", b)) return mg_ctx_dummy(ctx);
    if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0]) {
        mg_ctx_fail(ctx, "mg_bmm: a%s @ b%s: both must be 3-D, (B,M,K) and (B,K,N) with the same B", MG_SHAPE(a),
                    MG_SHAPE(b));
        return mg_ctx_dummy(ctx);
    }
    return mm_forward(ctx, &mg_op_def_bmm, false, a, b);
}
