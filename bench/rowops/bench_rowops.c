/* bench_rowops: the row and elementwise kernels (minigrad/rowops.h), fast against their plain
 * reference twins, on the shapes one training step of the two benchmark configurations runs:
 *
 *   textgen: B*T = 4096 rows, C = 256, MLP width 4C = 1024, V = 256, 2.47 M parameters
 *   music:   B*T = 4096 rows, C = 512, MLP width 4C = 2048, V = 390, 20.2 M parameters
 *
 * For each kernel it times the reference (single-threaded by design) and the fast kernel on 1
 * thread and on all threads, alternating call by call so that noise hits both alike, and prints
 * the median milliseconds, the effective bandwidth (the bytes the kernel must move at least, read
 * plus written, over the median time) and the speedup over the reference. "bias+residual" also
 * runs as the two separate adds it replaces (a bias add, then the residual add), so the table
 * shows what fusing them saves.
 *
 * Last, the fused op mg_linear against mg_matmul + mg_add on the GPT's three Linear shapes: one
 * training step of the op alone (forward, a sum as the loss, backward), its time and the arena
 * bytes the step used.
 *
 *   bench_rowops [--quick] [--reps N] [--min] [--json FILE] [--isa avx512|avx2|generic]
 *                [--config NAME]
 *
 * --min reports the fastest call instead of the median, the calls spaced 2 ms apart: on a machine
 * shared with other work it approximates the time of a call that was not preempted.
 *
 * --json writes one object per measurement: bench, config, kernel, shape, impl (reference or
 * minigrad), isa, threads, ms, gbps, speedup (minigrad rows: over the reference).
 */
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/minigrad.h"
#include "minigrad/rng.h"
#include "minigrad/rowops.h"
#include "minigrad/testing.h" /* the *_ref twins, mg_isa_force (source tree only) */
#include "../common/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool use_min; /* --min: the fastest call instead of the median */

/* With --min, a pause between calls (outside the timed region), so that the calls of one
 * measurement span many scheduler time slices instead of falling into one busy moment. */
static void spread(void) {
    if (!use_min) return;
    const struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

typedef struct config {
    const char *name;
    int64_t R, C, V, params;
} config;

static const config configs[] = {
    {"textgen", 4096, 256, 256, 2470000},
    {"music", 4096, 512, 390, 20160000},
};

/* Buffers sized for the largest kernel of a configuration. */
typedef struct bufs {
    int64_t R, C, V, H, P; /* H = 4C */
    float *x, *y, *h, *dy, *dx, *w, *b, *dw, *db, *mean, *rstd, *ws;
    float *table, *dtable, *pw, *pg, *pm, *pv, *mx, *ls;
    double *loss;
    int32_t *ids, *tgt;
} bufs;

static float *alloc_f(int64_t n, mg_rng *r, float lo, float hi) {
    float *p = mg_aligned_alloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_rowops: out of memory (%lld floats)\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = mg_rng_range(r, lo, hi);
    return p;
}

static bufs bufs_make(const config *c) {
    mg_rng r = mg_rng_make(42);
    bufs b = {.R = c->R, .C = c->C, .V = c->V, .H = 4 * c->C, .P = c->params};
    const int64_t big = b.R * b.H;
    b.x = alloc_f(big, &r, -3.0f, 3.0f);
    b.y = alloc_f(big, &r, 0.0f, 0.0f);
    b.h = alloc_f(big, &r, -1.0f, 1.0f);
    b.dy = alloc_f(big, &r, -1e-3f, 1e-3f);
    b.dx = alloc_f(big, &r, 0.0f, 0.0f);
    b.w = alloc_f(b.H, &r, 0.5f, 1.5f);
    b.b = alloc_f(b.H, &r, -1.0f, 1.0f);
    b.dw = alloc_f(b.H, &r, 0.0f, 0.0f);
    b.db = alloc_f(b.H, &r, 0.0f, 0.0f);
    b.mean = alloc_f(b.R, &r, 0.0f, 0.0f);
    b.rstd = alloc_f(b.R, &r, 0.0f, 0.0f);
    b.ws = mg_aligned_alloc(mg_layernorm_bwd_workspace(b.R, b.H));
    b.table = alloc_f(b.V * b.C, &r, -1.0f, 1.0f);
    b.dtable = alloc_f(b.V * b.C, &r, 0.0f, 0.0f);
    b.pw = alloc_f(b.P, &r, -0.1f, 0.1f);
    b.pg = alloc_f(b.P, &r, -1e-3f, 1e-3f);
    b.pm = alloc_f(b.P, &r, 0.0f, 0.0f);
    b.pv = alloc_f(b.P, &r, 0.0f, 0.0f);
    b.mx = alloc_f(b.R, &r, 0.0f, 0.0f);
    b.ls = alloc_f(b.R, &r, 0.0f, 0.0f);
    b.loss = mg_aligned_alloc((size_t)b.R * sizeof(double));
    b.ids = mg_aligned_alloc((size_t)b.R * sizeof(int32_t));
    b.tgt = mg_aligned_alloc((size_t)b.R * sizeof(int32_t));
    if (!b.ws || !b.loss || !b.ids || !b.tgt) {
        fprintf(stderr, "bench_rowops: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < b.R; i++) {
        b.ids[i] = (int32_t)mg_rng_below(&r, (uint32_t)b.V);
        b.tgt[i] = (int32_t)mg_rng_below(&r, (uint32_t)b.V);
    }
    /* LayerNorm backward reads mean/rstd of the rows it differentiates */
    mg_layernorm_fwd_ref(b.R, b.H, b.x, b.w, b.b, 1e-5f, b.y, b.mean, b.rstd);
    mg_xent_fwd_ref(b.R, b.V, b.x, b.tgt, -1, b.mx, b.ls, b.loss);
    return b;
}

static void bufs_free(bufs *b) {
    float *f[] = {b->x,    b->y,  b->h,     b->dy,     b->dx, b->w,  b->b,  b->dw, b->db, b->mean,
                  b->rstd, b->ws, b->table, b->dtable, b->pw, b->pg, b->pm, b->pv, b->mx, b->ls};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) mg_aligned_free(f[i]);
    mg_aligned_free(b->loss);
    mg_aligned_free(b->ids);
    mg_aligned_free(b->tgt);
}

/* ---- the kernels, each as (reference, fast) -------------------------------------------------- */

typedef struct kernel {
    const char *name;
    void (*run)(bufs *b, bool fast);
    void (*shape)(const bufs *b, char *out, size_t n);
    double (*bytes)(const bufs *b); /* least traffic: floats read + written, times 4 */
} kernel;

#define RC(b) ((double)(b)->R * (double)(b)->C)
#define RH(b) ((double)(b)->R * (double)(b)->H)

static void shape_rc(const bufs *b, char *o, size_t n) {
    snprintf(o, n, "(%lld,%lld)", (long long)b->R, (long long)b->C);
}
static void shape_rh(const bufs *b, char *o, size_t n) {
    snprintf(o, n, "(%lld,%lld)", (long long)b->R, (long long)b->H);
}
static void shape_rv(const bufs *b, char *o, size_t n) {
    snprintf(o, n, "(%lld,%lld)", (long long)b->R, (long long)b->V);
}
static void shape_p(const bufs *b, char *o, size_t n) {
    snprintf(o, n, "(%lld)", (long long)b->P);
}
static void shape_emb(const bufs *b, char *o, size_t n) {
    snprintf(o, n, "%lld ids of (%lld,%lld)", (long long)b->R, (long long)b->V, (long long)b->C);
}

static void k_ln_fwd(bufs *b, bool f) {
    (f ? mg_layernorm_fwd : mg_layernorm_fwd_ref)(b->R, b->C, b->x, b->w, b->b, 1e-5f, b->y,
                                                  b->mean, b->rstd);
}
static double by_ln_fwd(const bufs *b) {
    return 4.0 * 2.0 * RC(b);
}

static void k_ln_bwd(bufs *b, bool f) {
    if (f)
        mg_layernorm_bwd(b->R, b->C, b->x, b->w, b->mean, b->rstd, b->dy, b->dx, b->dw, b->db,
                         b->ws);
    else
        mg_layernorm_bwd_ref(b->R, b->C, b->x, b->w, b->mean, b->rstd, b->dy, b->dx, b->dw, b->db);
}
static double by_ln_bwd(const bufs *b) {
    return 4.0 * 4.0 * RC(b);
}

static void k_gelu_fwd(bufs *b, bool f) {
    (f ? mg_gelu_fwd : mg_gelu_fwd_ref)(MG_GELU_TANH, b->R * b->H, b->x, b->y);
}
static double by_gelu_fwd(const bufs *b) {
    return 4.0 * 2.0 * RH(b);
}
static void k_gelu_bwd(bufs *b, bool f) {
    (f ? mg_gelu_bwd : mg_gelu_bwd_ref)(MG_GELU_TANH, b->R * b->H, b->x, b->dy, b->dx);
}
static double by_gelu_bwd(const bufs *b) {
    return 4.0 * 4.0 * RH(b);
}

static void k_bias_add(bufs *b, bool f) {
    (f ? mg_add_rows : mg_add_rows_ref)(b->R, b->H, b->x, b->b, b->y);
}
static double by_bias_add(const bufs *b) {
    return 4.0 * 2.0 * RH(b);
}

static void k_bias_residual(bufs *b, bool f) {
    (f ? mg_add_residual : mg_add_residual_ref)(b->R, b->C, b->x, b->h, b->b, b->y);
}
static double by_bias_residual(const bufs *b) {
    return 4.0 * 3.0 * RC(b);
}
/* What the fused add replaces: h + b into a temporary, then x + that. Same bytes counted as the
 * fused kernel's least traffic, so the GB/s columns compare directly. */
static void k_bias_then_residual(bufs *b, bool f) {
    (f ? mg_add_rows : mg_add_rows_ref)(b->R, b->C, b->h, b->b, b->dx);
    (f ? mg_add_rows : mg_add_rows_ref)(1, b->R * b->C, b->x, b->dx, b->y);
}

static void k_bias_grad(bufs *b, bool f) {
    (f ? mg_sum_rows : mg_sum_rows_ref)(b->R, b->H, b->dy, b->db);
}
static double by_bias_grad(const bufs *b) {
    return 4.0 * RH(b);
}

static void k_acc(bufs *b, bool f) {
    (f ? mg_accumulate : mg_accumulate_ref)(b->R * b->C, b->dx, b->dy);
}
static double by_acc(const bufs *b) {
    return 4.0 * 3.0 * RC(b);
}

static void k_softmax_fwd(bufs *b, bool f) {
    (f ? mg_softmax_fwd : mg_softmax_fwd_ref)(b->R, b->V, b->x, b->y);
}
static double by_softmax_fwd(const bufs *b) {
    return 4.0 * 2.0 * (double)b->R * (double)b->V;
}

static void k_xent_fwd(bufs *b, bool f) {
    (f ? mg_xent_fwd : mg_xent_fwd_ref)(b->R, b->V, b->x, b->tgt, -1, b->mx, b->ls, b->loss);
}
static double by_xent_fwd(const bufs *b) {
    return 4.0 * (double)b->R * (double)b->V;
}
static void k_xent_bwd(bufs *b, bool f) {
    (f ? mg_xent_bwd : mg_xent_bwd_ref)(b->R, b->V, b->x, b->tgt, -1, b->mx, b->ls,
                                        1.0f / (float)b->R, b->dx);
}
static double by_xent_bwd(const bufs *b) {
    return 4.0 * 3.0 * (double)b->R * (double)b->V;
}

static void k_emb_fwd(bufs *b, bool f) {
    (f ? mg_embedding_fwd : mg_embedding_fwd_ref)(b->R, b->C, b->table, b->ids, b->y);
}
static double by_emb_fwd(const bufs *b) {
    return 4.0 * 2.0 * RC(b);
}
static void k_emb_bwd(bufs *b, bool f) {
    (f ? mg_embedding_bwd : mg_embedding_bwd_ref)(b->R, b->C, b->ids, b->dy, b->dtable);
}
static double by_emb_bwd(const bufs *b) {
    return 4.0 * (RC(b) + 2.0 * (double)b->V * (double)b->C);
}

static void k_adamw(bufs *b, bool f) {
    const mg_adamw_hyper h = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.2f};
    (f ? mg_adamw_update : mg_adamw_update_ref)(b->P, b->pw, b->pg, b->pm, b->pv, &h);
}
static double by_adamw(const bufs *b) {
    return 4.0 * 7.0 * (double)b->P;
}

static const kernel kernels[] = {
    {"layernorm fwd", k_ln_fwd, shape_rc, by_ln_fwd},
    {"layernorm bwd", k_ln_bwd, shape_rc, by_ln_bwd},
    {"gelu fwd", k_gelu_fwd, shape_rh, by_gelu_fwd},
    {"gelu bwd", k_gelu_bwd, shape_rh, by_gelu_bwd},
    {"bias add", k_bias_add, shape_rh, by_bias_add},
    {"bias+residual", k_bias_residual, shape_rc, by_bias_residual},
    {"bias, residual (2 adds)", k_bias_then_residual, shape_rc, by_bias_residual},
    {"bias grad (sum rows)", k_bias_grad, shape_rh, by_bias_grad},
    {"residual grad (acc)", k_acc, shape_rc, by_acc},
    {"softmax fwd", k_softmax_fwd, shape_rv, by_softmax_fwd},
    {"cross-entropy fwd", k_xent_fwd, shape_rv, by_xent_fwd},
    {"cross-entropy bwd", k_xent_bwd, shape_rv, by_xent_bwd},
    {"embedding fwd", k_emb_fwd, shape_emb, by_emb_fwd},
    {"embedding bwd", k_emb_bwd, shape_emb, by_emb_bwd},
    {"adamw", k_adamw, shape_p, by_adamw},
};
enum { NK = sizeof kernels / sizeof kernels[0] };

/* ---- timing ---------------------------------------------------------------------------------- */

/* The median of the calls, or with --min the fastest. */
static double median(double *v, int n) {
    const double m = bench_median(v, n); /* sorts v */
    return use_min ? v[0] : m;
}

/* One JSON line per measurement; negative gbps, speedup or arena_mb are left out. */
static void json_row(FILE *f, const char *cfg, const char *kern, const char *shape,
                     const char *impl, const char *isa, int threads, double ms, double gbps,
                     double speedup, double arena_mb) {
    if (!f) return;
    fprintf(f, "{\"bench\":\"rowops\",\"config\":\"%s\",\"kernel\":\"%s\",\"shape\":\"%s\",", cfg,
            kern, shape);
    fprintf(f, "\"impl\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"ms\":%.4f,\"stat\":\"%s\"", impl,
            isa, threads, ms, use_min ? "min" : "median");
    if (gbps >= 0.0) fprintf(f, ",\"gbps\":%.3f", gbps);
    if (speedup >= 0.0) fprintf(f, ",\"speedup\":%.3f", speedup);
    if (arena_mb >= 0.0) fprintf(f, ",\"arena_mb\":%.2f", arena_mb);
    fprintf(f, "}\n");
}

/* ---- the fused linear op against matmul + add ---------------------------------------------------
 */

typedef struct lin_case {
    const char *name;
    int64_t K, N; /* in, out */
} lin_case;

/* One step of the op alone: forward, loss = sum(y), backward. Returns the arena bytes it used. */
static size_t linear_step(mg_ctx *ctx, bool fused, int64_t M, int64_t K, int64_t N, float *x,
                          float *w, float *b) {
    mg_ctx_reset(ctx);
    mg_tensor *tx = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){M, K}, x);
    mg_tensor *tw = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){K, N}, w);
    mg_tensor *tb = mg_tensor_wrap(ctx, MG_F32, 1, (int64_t[]){N}, b);
    tx->flags |= MG_REQUIRES_GRAD;
    tw->flags |= MG_REQUIRES_GRAD;
    tb->flags |= MG_REQUIRES_GRAD;
    mg_tensor *y = fused ? mg_linear(ctx, tx, tw, tb) : mg_add(ctx, mg_matmul(ctx, tx, tw), tb);
    mg_backward(ctx, mg_sum(ctx, y));
    if (!mg_ctx_ok(ctx)) {
        fprintf(stderr, "bench_rowops: %s\n", mg_ctx_error(ctx));
        exit(1);
    }
    return mg_ctx_used_bytes(ctx);
}

static void bench_linear(const config *c, int reps, int max_threads, FILE *json, double *t_a,
                         double *t_b) {
    const lin_case cases[] = {
        {"c_attn", c->C, 3 * c->C}, {"c_fc", c->C, 4 * c->C}, {"mlp c_proj", 4 * c->C, c->C}};
    const int64_t M = c->R;
    mg_rng r = mg_rng_make(7);
    printf("\n%-8s %-24s %-22s %3s %10s %10s %8s %8s %8s\n", c->name, "linear step (fwd+bwd)",
           "shape", "thr", "mm+add ms", "fused ms", "MB", "fused MB", "speedup");
    for (int k = 0; k < 3; k++) {
        const int64_t K = cases[k].K, N = cases[k].N;
        float *x = alloc_f(M * K, &r, -1.0f, 1.0f), *w = alloc_f(K * N, &r, -0.1f, 0.1f);
        float *b = alloc_f(N, &r, -0.1f, 0.1f);
        mg_ctx *ca = mg_ctx_new(0), *cb = mg_ctx_new(0);
        if (!ca || !cb) exit(1);
        char shape[64];
        snprintf(shape, sizeof shape, "(%lld,%lld)@(%lld,%lld)", (long long)M, (long long)K,
                 (long long)K, (long long)N);
        const int thread_counts[2] = {1, max_threads};
        for (int ti = 0; ti < (max_threads > 1 ? 2 : 1); ti++) {
            const int threads = thread_counts[ti];
            mg_set_num_threads(threads);
            size_t mem_a =
                linear_step(ca, false, M, K, N, x, w, b); /* warm, and sizes the arenas */
            size_t mem_b = linear_step(cb, true, M, K, N, x, w, b);
            for (int i = 0; i < reps; i++) {
                const double t0 = mg_time();
                mem_a = linear_step(ca, false, M, K, N, x, w, b);
                const double t1 = mg_time();
                mem_b = linear_step(cb, true, M, K, N, x, w, b);
                const double t2 = mg_time();
                t_a[i] = t1 - t0;
                t_b[i] = t2 - t1;
                spread();
            }
            const double ms_a = 1e3 * median(t_a, reps), ms_b = 1e3 * median(t_b, reps);
            printf("%-8s %-24s %-22s %3d %10.3f %10.3f %8.1f %8.1f %7.2fx\n", c->name,
                   cases[k].name, shape, threads, ms_a, ms_b, (double)mem_a / 1048576.0,
                   (double)mem_b / 1048576.0, ms_a / ms_b);
            char kname[64];
            snprintf(kname, sizeof kname, "linear step %s", cases[k].name);
            json_row(json, c->name, kname, shape, "minigrad mg_matmul+mg_add",
                     mg_isa_name(mg_isa_active()), threads, ms_a, -1.0, -1.0,
                     (double)mem_a / 1048576.0);
            json_row(json, c->name, kname, shape, "minigrad mg_linear",
                     mg_isa_name(mg_isa_active()), threads, ms_b, -1.0, ms_a / ms_b,
                     (double)mem_b / 1048576.0);
        }
        mg_ctx_free(ca);
        mg_ctx_free(cb);
        mg_aligned_free(x);
        mg_aligned_free(w);
        mg_aligned_free(b);
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_rowops [--quick] [--reps N] [--min] [--json FILE] [--isa avx512|avx2|generic]\n"
            "                    [--config textgen|music]\n"
            "Measures minigrad's row and elementwise kernels (LayerNorm, GELU, bias and residual adds, softmax,\n"
            "cross-entropy, embedding gather and scatter, AdamW) against their plain single-threaded reference\n"
            "twins, on the shapes of one training step of bench_train's textgen and music models; the fast\n"
            "kernel on 1 thread and all threads, alternating call by call with the reference: median ms, GB/s\n"
            "(least bytes read + written / time) and speedup. Last, the fused mg_linear against mg_matmul +\n"
            "mg_add on the GPT's three Linear shapes.\n"
            "  --quick          5 calls per measurement instead of 15 (what `meson test --benchmark` runs)\n"
            "  --reps N         calls per measurement (default 15; 1..1000)\n"
            "  --min            the fastest call instead of the median, calls 2 ms apart (for a busy machine)\n"
            "  --json FILE      one JSON object per measurement\n"
            "  --isa NAME       a SIMD path other than the detected one\n"
            "  --config NAME    one configuration only (default both)\n"
            "  --help           this text\n"
            "--quick takes about 12 s on 2 cores (bench/README.md); a default run about three times that.\n");
}

int main(int argc, char **argv) {
    bench_stdout_begin();
    int reps = 15;
    const char *json_path = NULL, *isa_name = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        if (!strcmp(a, "--quick"))
            reps = 5;
        else if (!strcmp(a, "--reps") && has_value) {
            if (!bench_int_flag("bench_rowops", "--reps", argv[++i], 1, 1000, &reps)) return 2;
        }
        else if (!strcmp(a, "--min"))
            use_min = true;
        else if (!strcmp(a, "--json") && has_value)
            json_path = argv[++i];
        else if (!strcmp(a, "--isa") && has_value)
            isa_name = argv[++i];
        else if (!strcmp(a, "--config") && has_value)
            only = argv[++i];
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_rowops: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (isa_name) {
        mg_isa want = MG_ISA_GENERIC;
        if (!strcmp(isa_name, "avx512"))
            want = MG_ISA_AVX512;
        else if (!strcmp(isa_name, "avx2"))
            want = MG_ISA_AVX2;
        else if (strcmp(isa_name, "generic")) {
            fprintf(stderr, "bench_rowops: --isa '%s': expected avx512, avx2 or generic\n",
                    isa_name);
            return 2;
        }
        if (!mg_isa_force(want)) {
            fprintf(stderr, "bench_rowops: --isa %s: this CPU (or this build) lacks it\n",
                    isa_name);
            return 2;
        }
    }
    if (only && strcmp(only, "textgen") && strcmp(only, "music")) {
        fprintf(stderr, "bench_rowops: --config '%s': expected textgen or music\n", only);
        return 2;
    }
    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        fprintf(stderr, "bench_rowops: cannot write %s\n", json_path);
        return 1;
    }
    const int max_threads = mg_get_num_threads();
    const char *isa = mg_isa_name(mg_isa_active());
    char cpu[320];
    printf("cpu: %s\n", bench_cpu(cpu, sizeof cpu));
    printf("bench_rowops: path %s, threads 1 and %d, %s of %d calls, reference and fast "
           "alternating\n",
           isa, max_threads, use_min ? "fastest" : "median", reps);
    printf("GB/s = least bytes read + written / time; speedup = reference ms / fast ms\n");
    double *t_ref = malloc((size_t)reps * sizeof(double)),
           *t_fast = malloc((size_t)reps * sizeof(double));
    if (!t_ref || !t_fast) return 1;
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        const config *c = &configs[ci];
        if (only && strcmp(only, c->name)) continue;
        bufs b = bufs_make(c);
        printf("\n%-8s %-24s %-22s %3s %10s %10s %8s %8s %8s\n", c->name, "kernel", "shape", "thr",
               "ref ms", "fast ms", "ref GB/s", "GB/s", "speedup");
        for (int k = 0; k < NK; k++) {
            const kernel *K = &kernels[k];
            char shape[64];
            K->shape(&b, shape, sizeof shape);
            const double bytes = K->bytes(&b);
            double ref_ms = 0.0;
            const int thread_counts[2] = {1, max_threads};
            for (int ti = 0; ti < (max_threads > 1 ? 2 : 1); ti++) {
                const int threads = thread_counts[ti];
                mg_set_num_threads(threads);
                K->run(&b, false); /* warm: page in, and the caches as a step would leave them */
                K->run(&b, true);
                for (int r = 0; r < reps; r++) {
                    double t0 = mg_time();
                    if (threads == 1) K->run(&b, false);
                    double t1 = mg_time();
                    K->run(&b, true);
                    double t2 = mg_time();
                    t_ref[r] = t1 - t0;
                    t_fast[r] = t2 - t1;
                    spread();
                }
                if (threads == 1) ref_ms = 1e3 * median(t_ref, reps);
                const double fast_ms = 1e3 * median(t_fast, reps);
                const double speedup = ref_ms / fast_ms;
                printf("%-8s %-24s %-22s %3d %10.3f %10.3f %8.1f %8.1f %7.2fx\n", c->name, K->name,
                       shape, threads, ref_ms, fast_ms, bytes / (ref_ms * 1e-3) / 1e9,
                       bytes / (fast_ms * 1e-3) / 1e9, speedup);
                if (threads == 1)
                    json_row(json, c->name, K->name, shape, "reference", "scalar", 1, ref_ms,
                             bytes / (ref_ms * 1e-3) / 1e9, -1.0, -1.0);
                json_row(json, c->name, K->name, shape, "minigrad", isa, threads, fast_ms,
                         bytes / (fast_ms * 1e-3) / 1e9, speedup, -1.0);
            }
        }
        bufs_free(&b);
        bench_linear(c, reps, max_threads, json, t_ref, t_fast);
    }
    mg_set_num_threads(max_threads);
    free(t_ref);
    free(t_fast);
    if (json && !bench_json_close("bench_rowops", json, json_path)) return 1;
    return bench_exit_status("bench_rowops", 0);
}
