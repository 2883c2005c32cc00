/* Row and elementwise kernels (minigrad/rowops.h): plain references, and the drivers that split
 * the work among threads and run it on the active path's kernels (rowops_tmpl.h, compiled once per
 * SIMD path as rowops_ISA.c; isa.c hands out the table).
 */
#include "isa.h"
#include "rowops_internal.h"
#include "workspace.h"
#include "minigrad/kernels.h"
#include "minigrad/rowops.h"
#include "minigrad/testing.h" /* the *_ref twins and the switch: exported, not installed */

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define RO_SLAB 2048 /* columns per slab of a column sum: its partial sums stay in L1 */

/* ==== references: single-threaded loops with libm, what the fast kernels are checked against == */

void mg_layernorm_fwd_ref(int64_t R, int64_t C, const float *x, const float *w, const float *b,
                          float eps, float *y, float *mean, float *rstd) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        double m = 0.0, v = 0.0;
        for (int64_t j = 0; j < C; j++) m += xr[j];
        m /= (double)C;
        for (int64_t j = 0; j < C; j++) v += ((double)xr[j] - m) * ((double)xr[j] - m);
        v /= (double)C;
        const float mf = (float)m, s = (float)(1.0 / sqrt(v + (double)eps));
        if (mean) mean[r] = mf;
        if (rstd) rstd[r] = s;
        for (int64_t j = 0; j < C; j++)
            y[r * C + j] = (xr[j] - mf) * s * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
    }
}

void mg_layernorm_bwd_ref(int64_t R, int64_t C, const float *x, const float *w, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dw, float *db) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C, *gr = dy + r * C;
        const float m = mean[r], s = rstd[r];
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = 0; j < C; j++) {
            const float g = gr[j] * (w ? w[j] : 1.0f), xh = (xr[j] - m) * s;
            sg += g;
            sgx += g * xh;
            if (dw) dw[j] += gr[j] * xh;
            if (db) db[j] += gr[j];
        }
        if (!dx) continue;
        sg /= (float)C;
        sgx /= (float)C;
        for (int64_t j = 0; j < C; j++) {
            const float g = gr[j] * (w ? w[j] : 1.0f), xh = (xr[j] - m) * s;
            dx[r * C + j] += s * (g - sg - xh * sgx);
        }
    }
}

static float gelu_tanh_ref(float x) {
    const float u = RO_GELU_S * (x + RO_GELU_C * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
static float gelu_tanh_grad_ref(float x) {
    const float u = RO_GELU_S * (x + RO_GELU_C * x * x * x), t = tanhf(u);
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * RO_GELU_S * (1.0f + 3.0f * RO_GELU_C * x * x);
}
static float gelu_erf_ref(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
static float gelu_erf_grad_ref(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
           x * expf(-0.5f * x * x) * 0.3989422804014327f;
}

void mg_gelu_fwd_ref(mg_gelu_kind kind, int64_t n, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++)
        y[i] = kind == MG_GELU_ERF ? gelu_erf_ref(x[i]) : gelu_tanh_ref(x[i]);
}

void mg_gelu_bwd_ref(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx) {
    for (int64_t i = 0; i < n; i++)
        dx[i] += dy[i] * (kind == MG_GELU_ERF ? gelu_erf_grad_ref(x[i]) : gelu_tanh_grad_ref(x[i]));
}

void mg_add_rows_ref(int64_t R, int64_t N, const float *a, const float *b, float *c) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < N; j++) c[r * N + j] = a[r * N + j] + b[j];
}

void mg_add_residual_ref(int64_t R, int64_t N, const float *x, const float *h, const float *b,
                         float *y) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < N; j++)
            y[r * N + j] = x[r * N + j] + (h[r * N + j] + (b ? b[j] : 0.0f));
}

void mg_accumulate_ref(int64_t n, float *dst, const float *src) {
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

void mg_sum_rows_ref(int64_t R, int64_t N, const float *src, float *dst) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < N; j++) dst[j] += src[r * N + j];
}

void mg_softmax_fwd_ref(int64_t R, int64_t C, const float *x, float *y) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mx = -INFINITY;
        bool nan = false;
        for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx, nan |= isnan(xr[j]);
        if (mx == -INFINITY && !nan) {
            for (int64_t j = 0; j < C; j++) yr[j] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < C; j++) sum += (yr[j] = expf(xr[j] - mx));
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < C; j++) yr[j] *= inv;
    }
}

void mg_softmax_bwd_ref(int64_t R, int64_t C, const float *y, const float *dy, float *dx) {
    for (int64_t r = 0; r < R; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float dot = 0.0f;
        for (int64_t j = 0; j < C; j++) dot += gr[j] * yr[j];
        for (int64_t j = 0; j < C; j++) dx[r * C + j] += yr[j] * (gr[j] - dot);
    }
}

void mg_xent_fwd_ref(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                     float *mx, float *ls, double *loss) {
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * V;
        float m = -INFINITY;
        for (int64_t j = 0; j < V; j++) m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < V; j++) s += expf(xr[j] - m);
        mx[r] = m;
        ls[r] = logf(s);
        loss[r] = t[r] == ignore ? 0.0 : ((double)m - (double)xr[t[r]]) + (double)ls[r];
    }
}

void mg_xent_bwd_ref(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                     const float *mx, const float *ls, float g, float *dx) {
    for (int64_t r = 0; r < R; r++) {
        if (t[r] == ignore) continue;
        const float *xr = x + r * V;
        float *dr = dx + r * V;
        for (int64_t j = 0; j < V; j++) dr[j] += g * expf((xr[j] - mx[r]) - ls[r]);
        dr[t[r]] -= g;
    }
}

void mg_embedding_fwd_ref(int64_t n, int64_t C, const float *W, const int32_t *ids, float *y) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < C; j++) y[i * C + j] = W[(int64_t)ids[i] * C + j];
}

void mg_embedding_bwd_ref(int64_t n, int64_t C, const int32_t *ids, const float *dy, float *dW) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < C; j++) dW[(int64_t)ids[i] * C + j] += dy[i * C + j];
}

void mg_adamw_update_ref(int64_t n, float *w, const float *g, float *m, float *v,
                         const mg_adamw_hyper *h) {
    const float b1 = h->beta1, b2 = h->beta2;
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        const float mh = m[i] / h->bc1, vh = v[i] / h->bc2;
        w[i] -= h->lr * (mh / (sqrtf(vh) + h->eps) + h->weight_decay * w[i]);
    }
}

void mg_sgd_update_ref(int64_t n, float *w, const float *g, float *buf, float lr, float momentum,
                       float weight_decay, bool first) {
    for (int64_t i = 0; i < n; i++) {
        const float d = g[i] + weight_decay * w[i];
        buf[i] = (momentum != 0.0f && !first) ? momentum * buf[i] + d : d;
        w[i] -= lr * buf[i];
    }
}

static const mgk_rowops_impl *ro_active(void) {
    return mgk_rowops_active();
}

/* ==== drivers: split the work among threads =================================================== */

static atomic_int ro_impl_choice = MG_ROWOPS_FAST;

void mg_rowops_set_impl(mg_rowops_impl impl) {
    atomic_store_explicit(&ro_impl_choice,
                          impl == MG_ROWOPS_REFERENCE ? MG_ROWOPS_REFERENCE : MG_ROWOPS_FAST,
                          memory_order_relaxed);
}

mg_rowops_impl mg_rowops_get_impl(void) {
    return (mg_rowops_impl)atomic_load_explicit(&ro_impl_choice, memory_order_relaxed);
}

static bool ro_use_ref(void) {
    return mg_rowops_get_impl() == MG_ROWOPS_REFERENCE;
}

static int ro_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

typedef void (*ro_part)(const void *args, int64_t i0, int64_t i1);

/* Runs part over [0, n) cut into one contiguous piece per thread, the cuts at multiples of `align`
 * (whole cache lines of output for elementwise kernels), each piece at least `grain` items: below
 * that, waking a thread costs more than it saves. */
static void ro_run(int64_t n, int64_t align, int64_t grain, ro_part part, const void *args) {
    if (n <= 0) return;
    const int64_t units = (n + align - 1) / align, most = n / (grain > 0 ? grain : 1);
    int nt = ro_threads();
    if (nt > most) nt = (int)most;
    if (nt > units) nt = (int)units;
    if (nt <= 1) {
        part(args, 0, n);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        /* The runtime may grant fewer threads than asked: the pieces are then shared out. */
        const int got = omp_get_num_threads();
        for (int t = omp_get_thread_num(); t < nt; t += got) {
            int64_t i0 = units * t / nt * align, i1 = units * (t + 1) / nt * align;
            i0 = i0 < n ? i0 : n;
            i1 = i1 < n ? i1 : n;
            if (i0 < i1) part(args, i0, i1);
        }
    }
#endif
}

/* Items of `per_item` elements each that make one thread's worth of `elems` elements. */
static int64_t ro_grain(int64_t elems, int64_t per_item) {
    const int64_t g = per_item > 0 ? elems / per_item : elems;
    return g > 1 ? g : 1;
}

/* Elements of work below which a kernel stays on one thread (rough costs: adds are pure memory
 * traffic, the exp-based kernels a few ns per element on the portable path). */
enum { GRAIN_MEM = 65536, GRAIN_ROW = 32768, GRAIN_EXP = 16384 };

#define CHUNK MG_ROWOPS_CHUNK

/* Columns per thread for the kernels that split columns and walk every row: at least 16 KB of each
 * row. With less, each thread streams short pieces of every page and the prefetchers, which stop
 * at page ends, never get going: on 1-8 KB rows two threads ran slower than one. */
static int64_t col_grain(int64_t rows) {
    const int64_t g = ro_grain(GRAIN_MEM, rows);
    return g > 4096 ? g : 4096;
}

/* ---- LayerNorm ---- */

typedef struct {
    const mgk_rowops_impl *im;
    int64_t R, C;
    const float *x, *w, *b, *mean, *rstd, *dy;
    float eps, *y, *mean_out, *rstd_out, *dx, *part;
} ln_args;

static void ln_fwd_part(const void *p, int64_t r0, int64_t r1) {
    const ln_args *a = p;
    a->im->ln_fwd(r0, r1, a->C, a->x, a->w, a->b, a->eps, a->y, a->mean_out, a->rstd_out);
}

void mg_layernorm_fwd(int64_t R, int64_t C, const float *x, const float *w, const float *b,
                      float eps, float *y, float *mean, float *rstd) {
    if (ro_use_ref()) {
        mg_layernorm_fwd_ref(R, C, x, w, b, eps, y, mean, rstd);
        return;
    }
    if (R <= 0 || C <= 0) return;
    const ln_args a = {.im = ro_active(),
                       .R = R,
                       .C = C,
                       .x = x,
                       .w = w,
                       .b = b,
                       .eps = eps,
                       .y = y,
                       .mean_out = mean,
                       .rstd_out = rstd};
    ro_run(R, 1, ro_grain(GRAIN_ROW, C), ln_fwd_part, &a);
}

size_t mg_layernorm_bwd_workspace(int64_t R, int64_t C) {
    if (R <= 0 || C <= 0) return 0;
    return (size_t)((R + CHUNK - 1) / CHUNK) * 2 * (size_t)C * sizeof(float);
}

/* Chunks [c0, c1): each chunk's dw/db partials start from zero in its own slot of the scratch. */
static void ln_bwd_part(const void *p, int64_t c0, int64_t c1) {
    const ln_args *a = p;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t r0 = c * CHUNK, r1 = r0 + CHUNK < a->R ? r0 + CHUNK : a->R;
        float *pw = a->part ? a->part + c * 2 * a->C : NULL;
        if (pw) memset(pw, 0, (size_t)(2 * a->C) * sizeof(float));
        a->im->ln_bwd(r0, r1, a->C, a->x, a->w, a->mean, a->rstd, a->dy, a->dx, pw,
                      pw ? pw + a->C : NULL);
    }
}

void mg_layernorm_bwd(int64_t R, int64_t C, const float *x, const float *w, const float *mean,
                      const float *rstd, const float *dy, float *dx, float *dw, float *db,
                      float *ws) {
    if (ro_use_ref()) {
        mg_layernorm_bwd_ref(R, C, x, w, mean, rstd, dy, dx, dw, db);
        return;
    }
    if (R <= 0 || C <= 0 || (!dx && !dw && !db)) return;
    const ln_args a = {.im = ro_active(),
                       .R = R,
                       .C = C,
                       .x = x,
                       .w = w,
                       .mean = mean,
                       .rstd = rstd,
                       .dy = dy,
                       .dx = dx,
                       .part = (dw || db) ? ws : NULL};
    const int64_t nchunk = (R + CHUNK - 1) / CHUNK;
    ro_run(nchunk, 1, ro_grain(GRAIN_ROW, CHUNK * C), ln_bwd_part, &a);
    for (int64_t c = 0; a.part && c < nchunk; c++) {
        if (dw) a.im->acc(C, dw, a.part + c * 2 * C);
        if (db) a.im->acc(C, db, a.part + c * 2 * C + C);
    }
}

/* ---- GELU ---- */

typedef struct {
    const mgk_rowops_impl *im;
    int kind;
    const float *x, *dy;
    float *y;
    bool fresh; /* backward: y (dx) holds nothing yet */
} gelu_args;

static void gelu_fwd_part(const void *p, int64_t i0, int64_t i1) {
    const gelu_args *a = p;
    a->im->gelu_fwd(a->kind, i1 - i0, a->x + i0, a->y + i0);
}
static void gelu_bwd_part(const void *p, int64_t i0, int64_t i1) {
    const gelu_args *a = p;
    a->im->gelu_bwd(a->kind, i1 - i0, a->x + i0, a->dy + i0, a->y + i0, a->fresh);
}

void mg_gelu_fwd(mg_gelu_kind kind, int64_t n, const float *x, float *y) {
    if (ro_use_ref()) {
        mg_gelu_fwd_ref(kind, n, x, y);
        return;
    }
    const gelu_args a = {ro_active(), (int)kind, x, NULL, y, false};
    ro_run(n, 16, GRAIN_EXP, gelu_fwd_part, &a);
}

static void gelu_bwd_any(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx,
                         bool fresh) {
    if (ro_use_ref()) {
        if (fresh && n > 0) memset(dx, 0, (size_t)n * sizeof *dx);
        mg_gelu_bwd_ref(kind, n, x, dy, dx);
        return;
    }
    const gelu_args a = {ro_active(), (int)kind, x, dy, dx, fresh};
    ro_run(n, 16, GRAIN_EXP, gelu_bwd_part, &a);
}

void mg_gelu_bwd(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx) {
    gelu_bwd_any(kind, n, x, dy, dx, false);
}

void mg_gelu_bwd_fresh(mg_gelu_kind kind, int64_t n, const float *x, const float *dy, float *dx) {
    gelu_bwd_any(kind, n, x, dy, dx, true);
}

/* ---- adds ---- */

typedef struct {
    const mgk_rowops_impl *im;
    int64_t N;
    const float *a, *h, *b;
    float *c;
} add_args;

/* Flat elements [i0, i1) of R rows of N, one call per row segment so the bias lines up. */
static void add_part(const void *p, int64_t i0, int64_t i1) {
    const add_args *a = p;
    for (int64_t i = i0; i < i1;) {
        const int64_t j = i % a->N, len = a->N - j < i1 - i ? a->N - j : i1 - i;
        if (a->h)
            a->im->add3(len, a->a + i, a->h + i, a->b ? a->b + j : NULL, a->c + i);
        else
            a->im->add2(len, a->a + i, a->b + j, a->c + i);
        i += len;
    }
}

void mg_add_rows(int64_t R, int64_t N, const float *a, const float *b, float *c) {
    if (ro_use_ref()) {
        mg_add_rows_ref(R, N, a, b, c);
        return;
    }
    if (R <= 0 || N <= 0) return;
    const add_args args = {ro_active(), N, a, NULL, b, c};
    ro_run(R * N, 16, GRAIN_MEM, add_part, &args);
}

void mg_add_residual(int64_t R, int64_t N, const float *x, const float *h, const float *b,
                     float *y) {
    if (ro_use_ref()) {
        mg_add_residual_ref(R, N, x, h, b, y);
        return;
    }
    if (R <= 0 || N <= 0) return;
    const add_args args = {ro_active(), N, x, h, b, y};
    ro_run(R * N, 16, GRAIN_MEM, add_part, &args);
}

static void acc_part(const void *p, int64_t i0, int64_t i1) {
    const add_args *a = p;
    a->im->acc(i1 - i0, a->c + i0, a->a + i0);
}

void mg_accumulate(int64_t n, float *dst, const float *src) {
    if (ro_use_ref()) {
        mg_accumulate_ref(n, dst, src);
        return;
    }
    const add_args args = {.im = ro_active(), .a = src, .c = dst};
    ro_run(n, 16, GRAIN_MEM, acc_part, &args);
}

static void acc_fresh_part(const void *p, int64_t i0, int64_t i1) {
    const add_args *a = p;
    a->im->acc_fresh(i1 - i0, a->c + i0, a->a + i0);
}

void mg_accumulate_fresh(int64_t n, float *dst, const float *src) {
    if (ro_use_ref()) {
        if (n > 0) memset(dst, 0, (size_t)n * sizeof *dst);
        mg_accumulate_ref(n, dst, src);
        return;
    }
    const add_args args = {.im = ro_active(), .a = src, .c = dst};
    ro_run(n, 16, GRAIN_MEM, acc_fresh_part, &args);
}

typedef struct {
    const mgk_rowops_impl *im;
    int64_t R, N;
    const float *src;
    float *dst;
    float *parts; /* the chunk-parallel form: chunk c's column sums at parts + c * N */
    mg_bf16 *bdst; /* mg_sum_rows_bf16: src in bf16, written as each row segment is added */
} sum_args;

/* part[0:n) += the row segment at src (offset `at` in src), and its bf16 copy when asked for. */
static void sum_acc(const sum_args *a, int64_t n, float *part, int64_t at) {
    if (a->bdst) a->im->acc_bf16(n, part, a->src + at, a->bdst + at);
    else a->im->acc(n, part, a->src + at);
}

/* Columns [j0, j1) in slabs whose chunk partials live in a buffer on the stack: each row segment is
 * streamed once and added to the partial (which stays in L1), the partial then to dst. */
static void sum_rows_part(const void *p, int64_t j0, int64_t j1) {
    const sum_args *a = p;
    _Alignas(64) float part[RO_SLAB]; /* whole cache lines: no split vector accesses */
    for (int64_t s0 = j0; s0 < j1; s0 += RO_SLAB) {
        const int64_t nc = j1 - s0 < RO_SLAB ? j1 - s0 : RO_SLAB;
        for (int64_t r0 = 0; r0 < a->R; r0 += CHUNK) {
            const int64_t r1 = a->R - r0 < CHUNK ? a->R : r0 + CHUNK;
            memset(part, 0, (size_t)nc * sizeof(float));
            for (int64_t r = r0; r < r1; r++) sum_acc(a, nc, part, r * a->N + s0);
            a->im->acc(nc, a->dst + s0, part);
        }
    }
}

/* Chunks [c0, c1) of CHUNK rows: each chunk's column sums, in row order from zero, into its own
 * row of parts (what sum_rows_part adds to dst chunk by chunk). */
static void chunk_sums_part(const void *p, int64_t c0, int64_t c1) {
    const sum_args *a = p;
    for (int64_t c = c0; c < c1; c++) {
        float *part = a->parts + c * a->N;
        const int64_t r1 = a->R - c * CHUNK < CHUNK ? a->R : (c + 1) * CHUNK;
        memset(part, 0, (size_t)a->N * sizeof(float));
        for (int64_t r = c * CHUNK; r < r1; r++) sum_acc(a, a->N, part, r * a->N);
    }
}

static void sum_rows(int64_t R, int64_t N, const float *src, float *dst, mg_bf16 *bdst) {
    if (ro_use_ref()) {
        mg_sum_rows_ref(R, N, src, dst);
        if (bdst && R > 0 && N > 0) mg_f32_to_bf16(R * N, src, bdst);
        return;
    }
    if (R <= 0 || N <= 0) return;
    sum_args a = {ro_active(), R, N, src, dst, NULL, bdst};
    const int64_t nchunk = (R + CHUNK - 1) / CHUNK;
    /* Too few columns to give each thread 16 KB of every row (col_grain), yet work for several:
     * the chunks' sums in parallel into a buffer, then added to dst in chunk order, one pass over
     * N x nchunk floats. The same additions in the same order as the column split, so the same
     * bits for any thread count. Either form reads (and converts) each element once. */
    if (ro_threads() > 1 && N < 2 * col_grain(R) && nchunk >= 2 && R * N >= 2 * GRAIN_MEM &&
        (a.parts = thread_workspace((size_t)(nchunk * N) * sizeof(float))) != NULL) {
        ro_run(nchunk, 1, ro_grain(GRAIN_MEM, CHUNK * N), chunk_sums_part, &a);
        for (int64_t c = 0; c < nchunk; c++) a.im->acc(N, dst, a.parts + c * N);
        return;
    }
    ro_run(N, 16, col_grain(R), sum_rows_part, &a);
}

void mg_sum_rows(int64_t R, int64_t N, const float *src, float *dst) {
    sum_rows(R, N, src, dst, NULL);
}

void mg_sum_rows_bf16(int64_t R, int64_t N, const float *src, float *dst, mg_bf16 *bdst) {
    sum_rows(R, N, src, dst, bdst);
}

/* ---- softmax, cross-entropy ---- */

typedef struct {
    const mgk_rowops_impl *im;
    int64_t C;
    const float *x, *y, *dy, *mx, *ls;
    const int32_t *t;
    int32_t ignore;
    float g, *out, *mx_out, *ls_out;
    double *loss;
} sm_args;

static void softmax_fwd_part(const void *p, int64_t r0, int64_t r1) {
    const sm_args *a = p;
    a->im->softmax_fwd(r0, r1, a->C, a->x, a->out);
}
static void softmax_bwd_part(const void *p, int64_t r0, int64_t r1) {
    const sm_args *a = p;
    a->im->softmax_bwd(r0, r1, a->C, a->y, a->dy, a->out);
}

void mg_softmax_fwd(int64_t R, int64_t C, const float *x, float *y) {
    if (ro_use_ref()) {
        mg_softmax_fwd_ref(R, C, x, y);
        return;
    }
    if (R <= 0 || C <= 0) return;
    const sm_args a = {.im = ro_active(), .C = C, .x = x, .out = y};
    ro_run(R, 1, ro_grain(GRAIN_EXP, C), softmax_fwd_part, &a);
}

void mg_softmax_bwd(int64_t R, int64_t C, const float *y, const float *dy, float *dx) {
    if (ro_use_ref()) {
        mg_softmax_bwd_ref(R, C, y, dy, dx);
        return;
    }
    if (R <= 0 || C <= 0) return;
    const sm_args a = {.im = ro_active(), .C = C, .y = y, .dy = dy, .out = dx};
    ro_run(R, 1, ro_grain(GRAIN_ROW, C), softmax_bwd_part, &a);
}

static void xent_fwd_part(const void *p, int64_t r0, int64_t r1) {
    const sm_args *a = p;
    a->im->xent_fwd(r0, r1, a->C, a->x, a->t, a->ignore, a->mx_out, a->ls_out, a->loss);
}
static void xent_bwd_part(const void *p, int64_t r0, int64_t r1) {
    const sm_args *a = p;
    a->im->xent_bwd(r0, r1, a->C, a->x, a->t, a->ignore, a->mx, a->ls, a->g, a->out);
}

void mg_xent_fwd(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore, float *mx,
                 float *ls, double *loss) {
    if (ro_use_ref()) {
        mg_xent_fwd_ref(R, V, x, t, ignore, mx, ls, loss);
        return;
    }
    if (R <= 0) return;
    if (V <= 0) { /* no classes: only ignored rows can exist, and they cost nothing */
        for (int64_t r = 0; r < R; r++) mx[r] = ls[r] = -INFINITY, loss[r] = 0.0;
        return;
    }
    const sm_args a = {.im = ro_active(),
                       .C = V,
                       .x = x,
                       .t = t,
                       .ignore = ignore,
                       .mx_out = mx,
                       .ls_out = ls,
                       .loss = loss};
    ro_run(R, 1, ro_grain(GRAIN_EXP, V), xent_fwd_part, &a);
}

void mg_xent_bwd(int64_t R, int64_t V, const float *x, const int32_t *t, int32_t ignore,
                 const float *mx, const float *ls, float g, float *dx) {
    if (ro_use_ref()) {
        mg_xent_bwd_ref(R, V, x, t, ignore, mx, ls, g, dx);
        return;
    }
    if (R <= 0 || V <= 0) return;
    const sm_args a = {.im = ro_active(),
                       .C = V,
                       .x = x,
                       .t = t,
                       .ignore = ignore,
                       .mx = mx,
                       .ls = ls,
                       .g = g,
                       .out = dx};
    ro_run(R, 1, ro_grain(GRAIN_EXP, V), xent_bwd_part, &a);
}

/* ---- embedding ---- */

typedef struct {
    const mgk_rowops_impl *im;
    int64_t n, C;
    const float *src;
    const int32_t *ids;
    float *dst;
} emb_args;

static void emb_fwd_part(const void *p, int64_t i0, int64_t i1) {
    const emb_args *a = p;
    for (int64_t i = i0; i < i1; i++)
        memcpy(a->dst + i * a->C, a->src + (int64_t)a->ids[i] * a->C, (size_t)a->C * sizeof(float));
}

void mg_embedding_fwd(int64_t n, int64_t C, const float *W, const int32_t *ids, float *y) {
    if (ro_use_ref()) {
        mg_embedding_fwd_ref(n, C, W, ids, y);
        return;
    }
    if (n <= 0 || C <= 0) return;
    const emb_args a = {ro_active(), n, C, W, ids, y};
    ro_run(n, 1, ro_grain(GRAIN_MEM, C), emb_fwd_part, &a);
}

/* Columns [j0, j1) of every row of dW, the ids walked in order. */
static void emb_bwd_part(const void *p, int64_t j0, int64_t j1) {
    const emb_args *a = p;
    for (int64_t i = 0; i < a->n; i++)
        a->im->acc(j1 - j0, a->dst + (int64_t)a->ids[i] * a->C + j0, a->src + i * a->C + j0);
}

void mg_embedding_bwd(int64_t n, int64_t C, const int32_t *ids, const float *dy, float *dW) {
    if (ro_use_ref()) {
        mg_embedding_bwd_ref(n, C, ids, dy, dW);
        return;
    }
    if (n <= 0 || C <= 0) return;
    const emb_args a = {ro_active(), n, C, dy, ids, dW};
    ro_run(C, 16, col_grain(n), emb_bwd_part, &a);
}

/* ---- optimizer updates ---- */

typedef struct {
    const mgk_rowops_impl *im;
    float *w, *m, *v;
    const float *g;
    const mg_adamw_hyper *h;
    float lr, mu, wd;
    bool first;
} opt_args;

static void adamw_part(const void *p, int64_t i0, int64_t i1) {
    const opt_args *a = p;
    a->im->adamw(i1 - i0, a->w + i0, a->g + i0, a->m + i0, a->v + i0, a->h);
}
static void sgd_part(const void *p, int64_t i0, int64_t i1) {
    const opt_args *a = p;
    a->im->sgd(i1 - i0, a->w + i0, a->g + i0, a->m + i0, a->lr, a->mu, a->wd, a->first);
}

void mg_adamw_update(int64_t n, float *w, const float *g, float *m, float *v,
                     const mg_adamw_hyper *h) {
    if (ro_use_ref()) {
        mg_adamw_update_ref(n, w, g, m, v, h);
        return;
    }
    const opt_args a = {.im = ro_active(), .w = w, .m = m, .v = v, .g = g, .h = h};
    ro_run(n, 16, GRAIN_ROW, adamw_part, &a);
}

void mg_sgd_update(int64_t n, float *w, const float *g, float *buf, float lr, float momentum,
                   float weight_decay, bool first) {
    if (ro_use_ref()) {
        mg_sgd_update_ref(n, w, g, buf, lr, momentum, weight_decay, first);
        return;
    }
    const opt_args a = {.im = ro_active(),
                        .w = w,
                        .m = buf,
                        .g = g,
                        .lr = lr,
                        .mu = momentum,
                        .wd = weight_decay,
                        .first = first};
    ro_run(n, 16, GRAIN_MEM, sgd_part, &a);
}
