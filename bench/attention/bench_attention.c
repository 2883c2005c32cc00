/* bench_attention: the fused attention kernels (minigrad/kernels.h) against their reference twin,
 * on the attention shapes of the two benchmark configurations:
 *
 *   music:   B = 2,  H = 8, T = 2048, D = 64, causal
 *   textgen: B = 32, H = 4, T = 128,  D = 64, causal
 *
 * Two kinds of row per configuration:
 *
 *   train   forward and backward over the whole sequence, as one training step runs them;
 *   decode  forward only, for one query at the end of a causal cache (B = 1, Tq = 1, Tk = T,
 *           q_pos0 = T - 1): what each generated token costs per layer with a KV cache.
 *
 * The logit scale is 1/sqrt(D). For each row, on 1 thread and on all threads, the fused kernels
 * and the reference (which materialises the (B,H,Tq,Tk) probabilities with mg_sgemm) are warmed up
 * once untimed and then timed in alternation, call by call, swapping which goes first each round,
 * so that noise from the rest of the machine lands on both alike. Reported: the median
 * milliseconds of forward and of backward separately, GFLOP/s, and the speedup of fused over
 * reference at the same thread count. Where the fused kernels have bf16 products on this CPU
 * (mg_attn_bf16_fused), the train rows also time them ("fused bf16", mg_attn_desc.bf16) in the
 * same alternation, with their speedup over the reference and a line with their speedup over the
 * float32 fused kernels.
 *
 * FLOPs counted are the useful ones, the same for both implementations: 4*D per visible
 * (query, key) pair forward (Q K^T and P V, a multiply-add each), 8*D backward (dV, dP, dQ, dK; not
 * the recomputation of the logits that the fused backward does, nor the masked half of the score
 * matrix that the reference computes anyway). Causal attention has T(T+1)/2 visible pairs per head,
 * about half of T^2; a decode query sees all Tk keys.
 *
 *   bench_attention [--quick] [--reps N] [--config music|textgen] [--json FILE]
 *
 * --json writes one object per line per measurement: bench ("attention"), config, kind (train or
 * decode), impl ("minigrad fused", "reference" or "fused bf16"), isa, threads, the shape (B, H, Tq, Tk, D),
 * reps, fwd_ms, bwd_ms (null for decode), fwd_gflops, bwd_gflops (null for decode), gflops (train:
 * forward plus backward FLOPs over forward plus backward time; decode: the forward's), and on
 * fused rows speedup_fwd and speedup_bwd (reference ms / fused ms; bwd null for decode).
 *
 * Inputs are uniform in [-1, 1) from a fixed seed, made here: the program needs only the public
 * kernel API, not the test fixtures.
 */
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/rng.h"
#include "minigrad/testing.h" /* the reference twin and the switch (source tree only) */
#include "../common/bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    REPS_DEFAULT = 9,
    REPS_QUICK = 3,
    REPS_MAX = 1000,
    /* A decode call lasts microseconds: more of them make its median as steady as a train row's. */
    DECODE_REPS_PER_REP = 25,
};

typedef struct config {
    const char *name;
    int64_t B, H, T, D;
} config;

static const config configs[] = {
    {"music", 2, 8, 2048, 64},
    {"textgen", 32, 4, 128, 64},
};
enum { N_CONFIGS = sizeof configs / sizeof configs[0] };

/* ---- buffers --------------------------------------------------------------------------------- */

static void *alloc_or_die(size_t bytes) {
    /* at least one cache line, so that a zero-byte workspace is still a valid pointer */
    void *p = mg_aligned_alloc(bytes > 64 ? bytes : 64);
    if (!p) {
        fprintf(stderr, "bench_attention: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* n floats, uniform in [-1, 1) from r, or zero without r (outputs: zeroed here so that the warm-up
 * is not the first to touch their pages, and backward's += starts from finite values). */
static float *alloc_floats(int64_t n, mg_rng *r) {
    float *p = alloc_or_die((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = r ? mg_rng_range(r, -1.0f, 1.0f) : 0.0f;
    return p;
}

typedef struct inputs {
    float *q, *k, *v, *dO;
} inputs;

static inputs inputs_make(const mg_attn_desc *a, uint64_t seed) {
    mg_rng r = mg_rng_make(seed);
    const int64_t nq = a->B * a->H * a->Tq * a->D, nk = a->B * a->H * a->Tk * a->D;
    inputs in = {.q = alloc_floats(nq, &r), .k = alloc_floats(nk, &r), .v = alloc_floats(nk, &r)};
    in.dO = alloc_floats(nq, &r);
    return in;
}

static void inputs_free(inputs *in) {
    mg_aligned_free(in->q), mg_aligned_free(in->k), mg_aligned_free(in->v), mg_aligned_free(in->dO);
}

/* What one implementation writes. Workspace sizes depend on the thread count in effect, so these
 * are made after mg_set_num_threads. */
typedef struct impl_bufs {
    bool fused;
    mg_attn_desc d; /* the shape's desc; .bf16 set for the bf16 kernels */
    float *o, *lse, *p, *dq, *dk, *dv; /* lse: fused only; p: reference only; d*: with backward */
    void *ws;
    size_t fwd_ws, bwd_ws;
} impl_bufs;

static impl_bufs bufs_make(const mg_attn_desc *shape, bool fused, bool bf16, bool backward) {
    impl_bufs b = {.fused = fused, .d = *shape};
    b.d.bf16 = bf16;
    const mg_attn_desc *a = &b.d;
    const int64_t BH = a->B * a->H, nq = BH * a->Tq * a->D, nk = BH * a->Tk * a->D;
    b.o = alloc_floats(nq, NULL);
    if (fused) {
        b.lse = alloc_floats(BH * a->Tq, NULL);
        b.fwd_ws = mg_attn_forward_workspace(a);
        b.bwd_ws = backward ? mg_attn_backward_workspace(a) : 0;
    } else {
        b.p = alloc_floats(BH * a->Tq * a->Tk, NULL);
        b.bwd_ws = backward ? mg_attn_backward_ref_workspace(a) : 0;
    }
    if (backward) {
        b.dq = alloc_floats(nq, NULL);
        b.dk = alloc_floats(nk, NULL);
        b.dv = alloc_floats(nk, NULL);
    }
    b.ws = alloc_or_die(b.fwd_ws > b.bwd_ws ? b.fwd_ws : b.bwd_ws);
    return b;
}

static void bufs_free(impl_bufs *b) {
    float *f[] = {b->o, b->lse, b->p, b->dq, b->dk, b->dv};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) mg_aligned_free(f[i]);
    mg_aligned_free(b->ws);
}

/* ---- one call of each kind ------------------------------------------------------------------- */

static void run_forward(const inputs *in, impl_bufs *b, bool backward) {
    const mg_attn_desc *a = &b->d;
    if (b->fused) /* decoding keeps nothing for a backward, so it passes no lse */
        mg_attn_forward(a, in->q, in->k, in->v, b->o, backward ? b->lse : NULL, b->ws, b->fwd_ws);
    else
        mg_attn_forward_ref(a, in->q, in->k, in->v, b->o, b->p);
}

/* Accumulates into dq, dk, dv: repeated calls keep adding, which costs the same each time. */
static void run_backward(const inputs *in, impl_bufs *b) {
    const mg_attn_desc *a = &b->d;
    if (b->fused)
        mg_attn_backward(a, in->q, in->k, in->v, b->o, b->lse, in->dO, b->dq, b->dk, b->dv, b->ws,
                         b->bwd_ws);
    else
        mg_attn_backward_ref(a, in->q, in->k, in->v, b->p, in->dO, b->dq, b->dk, b->dv, b->ws,
                             b->bwd_ws);
}

/* Forward (and backward) once; the seconds of each go to *fwd_s and *bwd_s. */
static void run_timed(const inputs *in, impl_bufs *b, bool backward, double *fwd_s, double *bwd_s) {
    const double t0 = mg_time();
    run_forward(in, b, backward);
    const double t1 = mg_time();
    if (backward) run_backward(in, b);
    *fwd_s = t1 - t0;
    *bwd_s = mg_time() - t1;
}

/* ---- measurement ----------------------------------------------------------------------------- */

/* (query, key) pairs the mask leaves visible: query i sits at q_pos0 + i and, causal, sees keys
 * 0 .. q_pos0 + i. */
static double visible_pairs(const mg_attn_desc *a) {
    double per_head = 0.0;
    for (int64_t i = 0; i < a->Tq; i++) {
        int64_t n = a->causal ? a->q_pos0 + i + 1 : a->Tk;
        if (n > a->Tk) n = a->Tk;
        if (n > 0) per_head += (double)n;
    }
    return (double)(a->B * a->H) * per_head;
}

typedef struct timing {
    double fwd_ms, bwd_ms; /* medians; bwd_ms NAN without backward */
} timing;

/* Times the implementations at the current thread count, in turns: t[0] fused, t[1] reference,
 * and t[2] the fused kernels with bf16 products when n is 3. */
#define N_IMPLS 3
static void measure(const mg_attn_desc *a, const inputs *in, bool backward, int reps, int n,
                    timing t[N_IMPLS]) {
    impl_bufs b[N_IMPLS];
    for (int k = 0; k < n; k++) b[k] = bufs_make(a, k != 1, k == 2, backward);
    double *s = alloc_or_die(2 * N_IMPLS * (size_t)reps * sizeof(double)); /* fwd, bwd per impl */
    double *fwd[N_IMPLS], *bwd[N_IMPLS];
    for (int k = 0; k < N_IMPLS; k++) fwd[k] = s + 2 * k * reps, bwd[k] = fwd[k] + reps;
    double unused_f, unused_b;
    /* warm-up: pages in every buffer, and leaves the caches as a previous call would */
    for (int k = 0; k < n; k++) run_timed(in, &b[k], backward, &unused_f, &unused_b);
    for (int r = 0; r < reps; r++)
        for (int j = 0; j < n; j++) {
            const int k = (j + r) % n; /* each goes first in turn */
            run_timed(in, &b[k], backward, &fwd[k][r], &bwd[k][r]);
        }
    for (int k = 0; k < n; k++) {
        t[k].fwd_ms = 1e3 * bench_median(fwd[k], reps);
        t[k].bwd_ms = backward ? 1e3 * bench_median(bwd[k], reps) : NAN;
        bufs_free(&b[k]);
    }
    mg_aligned_free(s);
}

/* ---- output ---------------------------------------------------------------------------------- */

static const char *const impl_names[N_IMPLS] = {"minigrad fused", "reference", "fused bf16"};


typedef struct row {
    const char *config, *kind;
    const mg_attn_desc *a;
    int threads, reps;
    double fwd_flops, bwd_flops;
} row;

static void print_header(void) {
    printf("\n%-8s %-6s %-20s %3s %-14s %9s %9s %8s %8s %7s %7s\n", "config", "kind",
           "(B,H,Tq,Tk,D)", "thr", "impl", "fwd ms", "bwd ms", "fwd GF/s", "bwd GF/s", "fwd x",
           "bwd x");
}

/* One table line and one JSON line for implementation k; speedups over the reference on the fused
 * lines. */
static void report(const row *rw, int k, const timing t[N_IMPLS], FILE *json) {
    const mg_attn_desc *a = rw->a;
    const timing *m = &t[k];
    const bool bwd = !isnan(m->bwd_ms);
    const double fwd_gf = rw->fwd_flops / (m->fwd_ms * 1e-3) * 1e-9;
    const double bwd_gf = bwd ? rw->bwd_flops / (m->bwd_ms * 1e-3) * 1e-9 : NAN;
    const double gf =
        bwd ? (rw->fwd_flops + rw->bwd_flops) / ((m->fwd_ms + m->bwd_ms) * 1e-3) * 1e-9 : fwd_gf;
    const double sp_fwd = k != 1 ? t[1].fwd_ms / t[k].fwd_ms : NAN;
    const double sp_bwd = k != 1 && bwd ? t[1].bwd_ms / t[k].bwd_ms : NAN;

    char shape[64], c_bwd[16] = "-", c_bwd_gf[16] = "-", c_sf[16] = "-", c_sb[16] = "-";
    snprintf(shape, sizeof shape, "(%lld,%lld,%lld,%lld,%lld)", (long long)a->B, (long long)a->H,
             (long long)a->Tq, (long long)a->Tk, (long long)a->D);
    if (bwd) {
        snprintf(c_bwd, sizeof c_bwd, "%.4f", m->bwd_ms);
        snprintf(c_bwd_gf, sizeof c_bwd_gf, "%.1f", bwd_gf);
    }
    if (!isnan(sp_fwd)) snprintf(c_sf, sizeof c_sf, "%.2fx", sp_fwd);
    if (!isnan(sp_bwd)) snprintf(c_sb, sizeof c_sb, "%.2fx", sp_bwd);
    printf("%-8s %-6s %-20s %3d %-14s %9.4f %9s %8.1f %8s %7s %7s\n", rw->config, rw->kind, shape,
           rw->threads, impl_names[k], m->fwd_ms, c_bwd, fwd_gf, c_bwd_gf, c_sf, c_sb);
    fflush(stdout);

    if (!json) return;
    fprintf(json, "{\"bench\":\"attention\",\"config\":\"%s\",\"kind\":\"%s\",\"impl\":\"%s\"",
            rw->config, rw->kind, impl_names[k]);
    fprintf(json, ",\"isa\":\"%s\",\"threads\":%d,\"B\":%lld,\"H\":%lld,\"Tq\":%lld,\"Tk\":%lld",
            mg_isa_name(mg_isa_active()), rw->threads, (long long)a->B, (long long)a->H,
            (long long)a->Tq, (long long)a->Tk);
    fprintf(json, ",\"D\":%lld,\"causal\":%s,\"reps\":%d", (long long)a->D,
            a->causal ? "true" : "false", rw->reps);
    bench_json_num(json, "fwd_ms", m->fwd_ms, "%.4f");
    bench_json_num(json, "bwd_ms", m->bwd_ms, "%.4f");
    bench_json_num(json, "fwd_gflops", fwd_gf, "%.3f");
    bench_json_num(json, "bwd_gflops", bwd_gf, "%.3f");
    bench_json_num(json, "gflops", gf, "%.3f");
    if (k != 1) {
        bench_json_num(json, "speedup_fwd", sp_fwd, "%.3f");
        bench_json_num(json, "speedup_bwd", sp_bwd, "%.3f");
    }
    fputs("}\n", json);
}

/* Both thread counts, both implementations, for one shape. */
static void bench_shape(const char *cfg, const char *kind, const mg_attn_desc *a, bool backward,
                        int reps, const int *thread_counts, int n_counts, FILE *json) {
    const double pairs = visible_pairs(a);
    inputs in = inputs_make(a, 1234);
    for (int ti = 0; ti < n_counts; ti++) {
        const int threads = mg_set_num_threads(thread_counts[ti]);
        const row rw = {.config = cfg,
                        .kind = kind,
                        .a = a,
                        .threads = threads,
                        .reps = reps,
                        .fwd_flops = 4.0 * (double)a->D * pairs,
                        .bwd_flops = backward ? 8.0 * (double)a->D * pairs : 0.0};
        timing t[N_IMPLS];
        /* training shapes also with bf16 products, where this CPU has them */
        const int n = backward && mg_attn_bf16_fused() ? 3 : 2;
        measure(a, &in, backward, reps, n, t);
        for (int k = 0; k < n; k++) report(&rw, k, t, json);
        if (n == 3)
            printf("%-8s %-6s bf16 products over float32 fused: forward %.2fx, backward %.2fx\n",
                   rw.config, rw.kind, t[0].fwd_ms / t[2].fwd_ms, t[0].bwd_ms / t[2].bwd_ms);
    }
    inputs_free(&in);
}

/* ---- command line ---------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_attention [--quick] [--reps N] [--config music|textgen] [--json FILE]\n"
            "  --quick        %d timed repetitions instead of %d (what `meson test --benchmark` "
            "runs)\n"
            "  --reps N       N timed repetitions (1..%d) after one warm-up; decode rows time "
            "%d x N calls\n"
            "  --config NAME  one configuration only\n"
            "  --json FILE    one JSON object per line per measurement\n"
            "  --help         this text\n",
            REPS_QUICK, REPS_DEFAULT, REPS_MAX, DECODE_REPS_PER_REP);
}

static int usage_error(void) {
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    bench_stdout_begin();
    int reps = 0; /* 0: not given */
    bool quick = false;
    const char *json_path = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        const bool takes_value =
            !strcmp(opt, "--reps") || !strcmp(opt, "--config") || !strcmp(opt, "--json");
        if (takes_value && i + 1 >= argc) {
            fprintf(stderr, "bench_attention: option '%s' needs a value\n", opt);
            return usage_error();
        }
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(opt, "--quick")) {
            quick = true;
        } else if (!strcmp(opt, "--reps")) {
            const char *val = argv[++i];
            if (!bench_int_flag("bench_attention", "--reps", val, 1, REPS_MAX, &reps)) return usage_error();
        } else if (!strcmp(opt, "--config")) {
            only = argv[++i];
            bool known = false;
            for (int c = 0; c < N_CONFIGS; c++) known |= !strcmp(only, configs[c].name);
            if (!known) {
                fprintf(stderr,
                        "bench_attention: --config: unknown configuration '%s' (known: "
                        "music textgen)\n",
                        only);
                return usage_error();
            }
        } else if (!strcmp(opt, "--json")) {
            json_path = argv[++i];
        } else {
            fprintf(stderr, "bench_attention: unknown option '%s'\n", opt);
            return usage_error();
        }
    }
    if (reps == 0) reps = quick ? REPS_QUICK : REPS_DEFAULT; /* an explicit --reps wins */

    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        fprintf(stderr, "bench_attention: cannot write --json file '%s': %s\n", json_path,
                strerror(errno));
        return 1;
    }

    const int all = mg_set_num_threads(0);
    const int thread_counts[2] = {1, all};
    const int n_counts = all > 1 ? 2 : 1;
    char threads_text[32] = "thread 1";
    if (n_counts > 1) snprintf(threads_text, sizeof threads_text, "threads 1 and %d", all);
    char cpu[320];
    printf("cpu: %s\n", bench_cpu(cpu, sizeof cpu));
    printf("bench_attention: path %s, %s, median of %d timed repetitions (decode: %d calls) after "
           "one warm-up, fused and reference alternating\n",
           mg_isa_name(mg_isa_active()), threads_text, reps, DECODE_REPS_PER_REP * reps);
    printf("GF/s: useful FLOPs only, 4*D per visible (query, key) pair forward and 8*D backward; "
           "fwd x, bwd x: reference ms / fused ms at the same thread count\n");

    for (int c = 0; c < N_CONFIGS; c++) {
        const config *cf = &configs[c];
        if (only && strcmp(only, cf->name)) continue;
        print_header();
        const float scale = 1.0f / sqrtf((float)cf->D);
        const mg_attn_desc train = {.B = cf->B,
                                    .H = cf->H,
                                    .Tq = cf->T,
                                    .Tk = cf->T,
                                    .D = cf->D,
                                    .scale = scale,
                                    .causal = true,
                                    .q_pos0 = 0};
        bench_shape(cf->name, "train", &train, true, reps, thread_counts, n_counts, json);
        const mg_attn_desc decode = {.B = 1,
                                     .H = cf->H,
                                     .Tq = 1,
                                     .Tk = cf->T,
                                     .D = cf->D,
                                     .scale = scale,
                                     .causal = true,
                                     .q_pos0 = cf->T - 1};
        bench_shape(cf->name, "decode", &decode, false, DECODE_REPS_PER_REP * reps, thread_counts,
                    n_counts, json);
    }
    mg_set_num_threads(0);

    if (json && !bench_json_close("bench_attention", json, json_path)) return 1;
    return bench_exit_status("bench_attention", 0);
}
