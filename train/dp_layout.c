/* How the gradient slab is cut into buckets and per-rank slices (dp.h). */
#include "dp.h"

dp_layout dp_layout_make(int64_t n, int nranks, int64_t bucket) {
    if (bucket < DP_ALIGN) bucket = DP_ALIGN;
    bucket = (bucket + DP_ALIGN - 1) / DP_ALIGN * DP_ALIGN;
    dp_layout L = {.n = n, .bucket = bucket, .nranks = nranks < 1 ? 1 : nranks};
    L.nbuckets = n > 0 ? (int)((n + bucket - 1) / bucket) : 0;
    return L;
}

void dp_slice(const dp_layout *L, int b, int r, int64_t *lo, int64_t *hi) {
    int64_t b0 = (int64_t)b * L->bucket, b1 = b0 + L->bucket < L->n ? b0 + L->bucket : L->n;
    int64_t len = b1 - b0, per = (len + L->nranks - 1) / L->nranks;
    per = (per + DP_ALIGN - 1) / DP_ALIGN * DP_ALIGN;
    int64_t a = b0 + (int64_t)r * per, z = a + per;
    *lo = a < b1 ? a : b1;
    *hi = z < b1 ? z : b1;
}

int64_t dp_owned(const dp_layout *L, int r) {
    int64_t total = 0, lo, hi;
    for (int b = 0; b < L->nbuckets; b++) {
        dp_slice(L, b, r, &lo, &hi);
        total += hi - lo;
    }
    return total;
}
