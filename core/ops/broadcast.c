/* Broadcasting for the elementwise ops: the broadcast shape (with the error naming the clashing
 * operands), the iteration plan, and the gradient's reduction back to an operand's shape. */
#include "broadcast.h"

bool mg_broadcast_shape(mg_ctx *ctx, const char *op, int n, const char *const *names, mg_tensor *const *ts,
                        int *ndim, int64_t *shape) {
    int nd = 0;
    for (int k = 0; k < n; k++) nd = ts[k]->ndim > nd ? ts[k]->ndim : nd;
    for (int p = 1; p <= nd; p++) { /* dim -p */
        int64_t size = 1;
        int owner = -1;
        for (int k = 0; k < n; k++) {
            if (p > ts[k]->ndim) continue;
            const int64_t s = ts[k]->shape[ts[k]->ndim - p];
            if (s == 1) continue;
            if (owner < 0) {
                size = s, owner = k;
            } else if (s != size) {
                mg_ctx_fail(ctx, "%s: %s%s and %s%s cannot broadcast: dim -%d is %lld vs %lld", op, names[owner],
                            MG_SHAPE(ts[owner]), names[k], MG_SHAPE(ts[k]), p, (long long)size, (long long)s);
                return false;
            }
        }
        shape[nd - p] = size;
    }
    *ndim = nd;
    return true;
}

void mg_bcast_plan(mg_bcast *bc, int ndim, const int64_t *shape, int n, mg_tensor *const *ts) {
    memset(bc, 0, sizeof *bc);
    bc->n = n;
    bc->numel = 1;
    for (int d = 0; d < ndim; d++) bc->numel *= shape[d];
    if (bc->numel == 0) { /* nothing to visit */
        bc->ndim = 1, bc->shape[0] = 0, bc->inner = 0, bc->rows = 0;
        return;
    }
    int64_t tstride[MG_BC_MAX_OPS][MG_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        int64_t s = 1;
        for (int d = ts[k]->ndim - 1; d >= 0; d--) tstride[k][d] = s, s *= ts[k]->shape[d];
    }
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue; /* nobody moves along it */
        bc->shape[nd] = shape[d];
        bool merge = nd > 0;
        for (int k = 0; k < n; k++) {
            const int dk = d - (ndim - ts[k]->ndim);
            bc->stride[k][nd] = dk >= 0 && ts[k]->shape[dk] != 1 ? tstride[k][dk] : 0;
            if (nd > 0 && bc->stride[k][nd - 1] != bc->stride[k][nd] * shape[d]) merge = false;
        }
        if (merge) { /* every operand walks dims nd-1 and nd as one */
            bc->shape[nd - 1] *= shape[d];
            for (int k = 0; k < n; k++) bc->stride[k][nd - 1] = bc->stride[k][nd];
        } else {
            nd++;
        }
    }
    if (nd == 0) { /* one element */
        nd = 1, bc->shape[0] = 1;
        for (int k = 0; k < n; k++) bc->stride[k][0] = 0;
    }
    bc->ndim = nd;
    bc->inner = bc->shape[nd - 1];
    bc->rows = bc->numel / bc->inner;
}

/* Columns per task when t keeps the inner dim (partials on the stack), and elements per chunk of
 * the reduced rows (chunk partials combine in order). */
#define RED_SLAB 256
#define RED_CHUNK_ELEMS 16384

bool mg_bcast_reduce(mg_ctx *ctx, mg_tensor *t, int ndim, const int64_t *shape, const float *src, float sign,
                     float *dst) {
    mg_bcast bc;
    mg_bcast_plan(&bc, ndim, shape, 1, &t);
    if (bc.numel == 0) return true;
    const int nd = bc.ndim;
    const int64_t *sh = bc.shape, *st = bc.stride[0];
    int64_t ost[MG_MAX_DIMS]; /* the output's own strides */
    ost[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) ost[d] = ost[d + 1] * sh[d + 1];
    /* Outer dims t keeps (one task per position) and outer dims it is broadcast along (summed). */
    int kd[MG_MAX_DIMS], rd[MG_MAX_DIMS], nk = 0, nr = 0;
    int64_t nkept = 1, nred = 1;
    for (int d = 0; d < nd - 1; d++) {
        if (st[d]) kd[nk++] = d, nkept *= sh[d];
        else rd[nr++] = d, nred *= sh[d];
    }
    const bool inner_kept = st[nd - 1] != 0;
    const int64_t L = bc.inner, nslab = inner_kept ? (L + RED_SLAB - 1) / RED_SLAB : 1;
    const int64_t width = inner_kept ? (L < RED_SLAB ? L : RED_SLAB) : L;
    const int64_t rchunk = RED_CHUNK_ELEMS / width > 1 ? RED_CHUNK_ELEMS / width : 1;
    const int64_t nchunk = (nred + rchunk - 1) / rchunk, tn = t->numel;
    double *part = mg_ctx_alloc(ctx, (size_t)(nchunk * tn) * sizeof(double), "broadcast gradient reduction");
    if (!part) return false;
    const int64_t ntask = nkept * nslab * nchunk;
#pragma omp parallel for schedule(static) if (bc.numel > 65536)
    for (int64_t task = 0; task < ntask; task++) {
        const int64_t c = task % nchunk, slab = task / nchunk % nslab, row = task / nchunk / nslab;
        int64_t obase = 0, tbase = 0, q = row;
        for (int i = nk - 1; i >= 0; i--) {
            const int64_t idx = q % sh[kd[i]];
            q /= sh[kd[i]];
            obase += idx * ost[kd[i]], tbase += idx * st[kd[i]];
        }
        const int64_t m0 = c * rchunk, m1 = m0 + rchunk < nred ? m0 + rchunk : nred;
        int64_t idx[MG_MAX_DIMS], off = 0;
        q = m0;
        for (int i = nr - 1; i >= 0; i--) {
            idx[i] = q % sh[rd[i]];
            q /= sh[rd[i]];
            off += idx[i] * ost[rd[i]];
        }
        const int64_t j0 = slab * RED_SLAB, w = inner_kept ? (L - j0 < RED_SLAB ? L - j0 : RED_SLAB) : 1;
        double acc[RED_SLAB];
        for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
        for (int64_t m = m0; m < m1; m++) {
            const float *s = src + obase + off + j0;
            if (inner_kept)
                for (int64_t j = 0; j < w; j++) acc[j] += s[j];
            else
                for (int64_t j = 0; j < L; j++) acc[0] += s[j];
            for (int i = nr - 1; i >= 0; i--) { /* next reduced position, last dim fastest */
                off += ost[rd[i]];
                if (++idx[i] < sh[rd[i]]) break;
                off -= ost[rd[i]] * sh[rd[i]], idx[i] = 0;
            }
        }
        double *p = part + c * tn + tbase + j0;
        for (int64_t j = 0; j < w; j++) p[j] = acc[j];
    }
#pragma omp parallel for schedule(static) if (tn > 65536)
    for (int64_t e = 0; e < tn; e++) {
        double s = 0.0;
        for (int64_t c = 0; c < nchunk; c++) s += part[c * tn + e];
        dst[e] += sign * (float)s;
    }
    return true;
}
