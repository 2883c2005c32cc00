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

/* Columns per task when t keeps the inner dim (partials on the stack), and output elements per
 * chunk of a reduction (chunk partials are combined in chunk order). */
#define RED_SLAB 256
#define RED_CHUNK 16384

/* The output offset of reduced position m (the reduced dims rd[0..nr) in row-major order). */
static int64_t reduced_offset(int64_t m, int nr, const int *rd, const int64_t *sh, const int64_t *ost) {
    int64_t off = 0;
    for (int i = nr - 1; i >= 0; i--) off += m % sh[rd[i]] * ost[rd[i]], m /= sh[rd[i]];
    return off;
}

/* Every element of t sums the nred positions of the reduced outer dims (rd), times L more along
 * the inner dim when t does not keep it. The sums are cut into chunks of about RED_CHUNK output
 * elements, each a task with a double partial per element of t (tasks also split t's elements:
 * its outer positions, and slabs of RED_SLAB columns when it keeps the inner dim); the partials
 * then add up in chunk order. Which task runs on which thread changes nothing. */
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
    int kd[MG_MAX_DIMS], rd[MG_MAX_DIMS], nk = 0, nr = 0;
    int64_t nkept = 1, nred = 1;
    for (int d = 0; d < nd - 1; d++) {
        if (st[d]) kd[nk++] = d, nkept *= sh[d];
        else rd[nr++] = d, nred *= sh[d];
    }
    const bool inner_kept = st[nd - 1] != 0;
    const int64_t L = bc.inner, tn = t->numel;
    /* inner kept: a chunk is rchunk reduced positions of one slab; else q = m L + j runs over
     * [0, nred L) in chunks of RED_CHUNK */
    const int64_t nslab = inner_kept ? (L + RED_SLAB - 1) / RED_SLAB : 1;
    const int64_t width = L < RED_SLAB ? L : RED_SLAB;
    const int64_t rchunk = RED_CHUNK / width > 1 ? RED_CHUNK / width : 1;
    const int64_t nchunk = inner_kept ? (nred + rchunk - 1) / rchunk : (nred * L + RED_CHUNK - 1) / RED_CHUNK;
    double *part = mg_ctx_alloc(ctx, (size_t)(nchunk * tn) * sizeof(double), "broadcast gradient reduction");
    if (!part) return false;
    const int64_t ntask = nkept * nslab * nchunk;
    MG_PAR_FOR(bc.numel > 65536, task, ntask, {
        const int64_t c = task % nchunk, slab = task / nchunk % nslab, row = task / nchunk / nslab;
        int64_t obase = 0, tbase = 0, q = row;
        for (int i = nk - 1; i >= 0; i--) {
            const int64_t idx = q % sh[kd[i]];
            q /= sh[kd[i]];
            obase += idx * ost[kd[i]], tbase += idx * st[kd[i]];
        }
        if (inner_kept) {
            const int64_t j0 = slab * RED_SLAB, w = L - j0 < RED_SLAB ? L - j0 : RED_SLAB;
            const int64_t m0 = c * rchunk, m1 = m0 + rchunk < nred ? m0 + rchunk : nred;
            double acc[RED_SLAB];
            for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
            for (int64_t m = m0; m < m1; m++) {
                const float *s = src + obase + reduced_offset(m, nr, rd, sh, ost) + j0;
                for (int64_t j = 0; j < w; j++) acc[j] += s[j];
            }
            double *p = part + c * tn + tbase + j0;
            for (int64_t j = 0; j < w; j++) p[j] = acc[j];
        } else {
            const int64_t q0 = c * RED_CHUNK, q1 = q0 + RED_CHUNK < nred * L ? q0 + RED_CHUNK : nred * L;
            double acc = 0.0;
            for (int64_t qq = q0; qq < q1;) { /* a run along the inner dim at reduced position m */
                const int64_t m = qq / L, j = qq % L, len = L - j < q1 - qq ? L - j : q1 - qq;
                const float *s = src + obase + reduced_offset(m, nr, rd, sh, ost) + j;
                for (int64_t k = 0; k < len; k++) acc += s[k];
                qq += len;
            }
            part[c * tn + tbase] = acc;
        }
    });
    MG_PAR_FOR(tn > 65536, e, tn, {
        double s = 0.0;
        for (int64_t c = 0; c < nchunk; c++) s += part[c * tn + e];
        dst[e] += sign * (float)s;
    });
    return true;
}
