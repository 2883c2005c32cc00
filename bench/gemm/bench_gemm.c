/* bench_gemm: minigrad's sgemm against the machine's FMA peak and, when installed, OpenBLAS.
 *
 * For each workload (the Linear layers of the training benchmarks in their three forms: forward
 * Y = X W, weight gradient dW = X^T dY, input gradient dX = dY W^T; then batched attention shapes)
 * and for 1 thread and all threads, it times minigrad and OpenBLAS alternately, call by call, so
 * that noise from the rest of the machine hits both alike, and reports the median of the
 * repetitions as GFLOP/s, as a fraction of the measured peak, and as the minigrad/OpenBLAS ratio.
 *
 * OpenBLAS is optional: it is loaded with dlopen("libopenblas.so.0") at run time (Debian package
 * libopenblas0, or libopenblas-dev), never linked.
 *
 *   bench_gemm [--quick] [--json FILE] [--reps N] [--isa avx512|avx2|generic]
 *              [--openblas-core NAME|auto] [--no-openblas] [--clock wall|cpu]
 *              [--bf16 PATH|none] [--bf16-only]
 *
 * Then the same workloads in bf16 (mg_bgemm on operands converted beforehand, float32 results)
 * against minigrad's float32 sgemm, alternating likewise: GFLOP/s, the fraction of the measured
 * peak of the bf16 path in use (its own register loop: VDPBF16PS, or AMX tiles; for the emulation,
 * which runs on the vector kernels of the float32 path, that path's FMA loop), and the
 * bf16/float32 speed ratio. --bf16 forces a path (emulated, avx512bf16, amx) or skips the section.
 *
 * Alternating call by call is only fair if neither library's idle threads spin on the cores the
 * other is computing on: both spin for a while after a call by default, which halved OpenBLAS's
 * 2-thread speed here. So the bench runs with OMP_WAIT_POLICY=passive (re-executing itself once
 * to set it, since libgomp reads it at start-up; an explicit setting is kept) and
 * OPENBLAS_THREAD_TIMEOUT=4 (OpenBLAS's workers sleep at once). Waking them costs microseconds
 * against milliseconds per product.
 *
 * --small-m measures only products of few rows (decoding, small batches: M = 1 .. 256 against the
 * training benchmarks' first weights), float32 against every bf16 path the machine has, each as
 * a Linear layer runs it (the pre-packed weight where the path has a kernel for it, else
 * mg_bgemm), AMX with no hand-off to AVX512-BF16; it names the fastest bf16 path per M and, where
 * AMX and AVX512-BF16 are both there, the M from which AMX wins (the hand-off point).
 *
 * --clock cpu is for shared, busy machines, where wall-clock time mostly measures the other
 * processes: a run's time is then the process CPU time divided by the thread count, i.e. the time
 * the cores spent on it. It does not see load imbalance between threads. Wall clock is the
 * default and the honest number on a quiet machine.
 */
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/testing.h" /* mg_sgemm_ref, mg_isa_force (source tree only) */
#include "../common/bench_util.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#define BENCH_X86 1
#endif

/* ---- OpenBLAS through dlopen ---- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef struct openblas {
    void *handle;
    cblas_sgemm_fn sgemm;
    void (*set_num_threads)(int);
    char *(*get_config)(void);
    char *(*get_corename)(void);
} openblas;

static bool openblas_load(openblas *ob, const char *core) {
    memset(ob, 0, sizeof *ob);
    /* OpenBLAS picks its kernels when it is loaded. Version 0.3.21 (Debian 12) does not know CPUs
     * newer than itself (AMD Zen 5) and falls back to its AVX2 Haswell kernels, and environments
     * may pin OPENBLAS_CORETYPE; its AVX-512 SkylakeX kernels are the fair baseline on an AVX-512
     * machine. */
    if (core && strcmp(core, "auto") != 0) setenv("OPENBLAS_CORETYPE", core, 1);
    ob->handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!ob->handle) return false;
    ob->sgemm = (cblas_sgemm_fn)dlsym(ob->handle, "cblas_sgemm");
    *(void **)&ob->set_num_threads = dlsym(ob->handle, "openblas_set_num_threads");
    *(void **)&ob->get_config = dlsym(ob->handle, "openblas_get_config");
    *(void **)&ob->get_corename = dlsym(ob->handle, "openblas_get_corename");
    if (!ob->sgemm || !ob->set_num_threads) {
        dlclose(ob->handle);
        ob->handle = NULL;
        return false;
    }
    return true;
}

/* ---- FMA peak: bench_fma_best (bench/common/bench_util.h), one loop per thread ---- */

static volatile double peak_sink;

static bool use_cpu_clock;

/* Seconds on the chosen clock; with --clock cpu, process CPU seconds per thread in use. */
static double bench_clock(int threads) {
    if (!use_cpu_clock) return mg_time();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / threads;
}

/* GFLOP/s of `threads` threads each running the loop; median of three runs of ~0.15 s. */
static double measure_peak(const bench_fma *pk, int threads) {
    const long iters = (long)(bench_fma_rate(pk) * 0.15) + 1; /* ~0.15 s, calibrated on one thread */
    double r[3];
    for (int rep = 0; rep < 3; rep++) {
        double t0 = bench_clock(threads);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
        peak_sink = pk->loop(iters);
#else
        peak_sink = pk->loop(iters);
#endif
        const double t = bench_clock(threads) - t0;
        r[rep] = (double)threads * (double)iters * pk->flops_per_iter / t / 1e9;
    }
    return bench_median(r, 3);
}

/* ---- workloads ---- */

typedef struct workload {
    char shape[48]; /* the layer's matrices, (M x K) @ (K x N), or the attention product */
    char op[8];     /* NN, TN, NT */
    int64_t batch, m, n, k;
    bool ta, tb;
} workload;

static const int linear_shapes[][3] = {
    {4096, 256, 768},  {4096, 256, 1024}, {4096, 1024, 256},
    {4096, 512, 1536}, {4096, 512, 2048}, {4096, 2048, 512},
};

static int build_workloads(workload *w, bool quick) {
    int n = 0;
    const int nshapes = quick ? 2 : (int)(sizeof linear_shapes / sizeof linear_shapes[0]);
    for (int s = 0; s < nshapes; s++) {
        const int M = linear_shapes[s][0], K = linear_shapes[s][1], N = linear_shapes[s][2];
        char shape[48];
        snprintf(shape, sizeof shape, "%dx%d@%dx%d", M, K, K, N);
        /* forward Y = X W; weight gradient dW = X^T dY (K x N); input gradient dX = dY W^T */
        w[n++] = (workload){"", "NN", 1, M, N, K, false, false};
        w[n++] = (workload){"", "TN", 1, K, N, M, true, false};
        w[n++] = (workload){"", "NT", 1, M, K, N, false, true};
        for (int i = 3; i > 0; i--) snprintf(w[n - i].shape, sizeof w[n - i].shape, "%s", shape);
    }
    /* Attention, batch = B*heads: scores Q K^T, context P V, and a decode step (M = 1). */
    w[n++] = (workload){"attn 32x 512x64@64x512", "NT", 32, 512, 512, 64, false, true};
    w[n++] = (workload){"attn 32x 512x512@512x64", "NN", 32, 512, 64, 512, false, false};
    if (!quick) {
        w[n++] = (workload){"attn 8x 2048x64@64x2048", "NT", 8, 2048, 2048, 64, false, true};
        w[n++] = (workload){"decode 32x 1x64@64x2048", "NT", 32, 1, 2048, 64, false, true};
        w[n++] = (workload){"decode 32x 1x2048@2048x64", "NN", 32, 1, 64, 2048, false, false};
    }
    return n;
}

typedef struct buffers {
    float *a, *b, *c_mg, *c_ob;
    int64_t lda, ldb, ldc, sa, sb, sc;
} buffers;

static void run_minigrad(const workload *w, buffers *bf) {
    if (w->batch == 1)
        mg_sgemm(w->ta, w->tb, w->m, w->n, w->k, 1.0f, bf->a, bf->lda, bf->b, bf->ldb, 0.0f,
                 bf->c_mg, bf->ldc);
    else
        mg_sgemm_batched(w->batch, w->ta, w->tb, w->m, w->n, w->k, 1.0f, bf->a, bf->lda, bf->sa,
                         bf->b, bf->ldb, bf->sb, 0.0f, bf->c_mg, bf->ldc, bf->sc);
}

/* OpenBLAS 0.3.21 has no batched sgemm: a loop of calls is what a user of it would write. */
static void run_openblas(const openblas *ob, const workload *w, buffers *bf) {
    for (int64_t i = 0; i < w->batch; i++)
        ob->sgemm(CBLAS_ROW_MAJOR, w->ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
                  w->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)w->m, (int)w->n, (int)w->k, 1.0f,
                  bf->a + i * bf->sa, (int)bf->lda, bf->b + i * bf->sb, (int)bf->ldb, 0.0f,
                  bf->c_ob + i * bf->sc, (int)bf->ldc);
}


static void fill(float *p, size_t n, uint32_t seed) {
    uint32_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
}

/* Largest |difference| relative to the largest |value|: a wrong kernel must not look fast. */
static double rel_diff(const float *x, const float *y, size_t n) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)x[i] - (double)y[i]));
        m = fmax(m, fabs((double)y[i]));
    }
    return m > 0.0 ? d / m : d;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_gemm [--quick] [--json FILE] [--reps N] [--isa avx512|avx2|generic]\n"
            "                  [--openblas-core NAME|auto] [--no-openblas] [--clock wall|cpu]\n"
            "                  [--bf16 emulated|avx512bf16|amx|none] [--bf16-only] [--small-m]\n"
            "Measures minigrad's float32 sgemm on the Linear-layer shapes of bench_train's textgen and music\n"
            "models (forward NN, weight gradient TN, input gradient NT) and on batched attention shapes, at 1\n"
            "thread and all threads, against OpenBLAS (libopenblas.so.0, loaded at run time when installed),\n"
            "the two alternating call by call: median GFLOP/s, %% of the FMA peak measured at the start, and\n"
            "the minigrad / OpenBLAS ratio. Then the same shapes in bf16 (mg_bgemm) against float32 sgemm.\n"
            "  --quick          2 of the 6 Linear shapes and 2 of the 5 attention shapes, 3 calls each\n"
            "  --reps N         timed calls per product and thread count (default 11, --quick 3; 1..100000)\n"
            "  --json FILE      one JSON object per line per measurement\n"
            "  --isa NAME       minigrad on a SIMD path other than the detected one\n"
            "  --openblas-core NAME|auto  OPENBLAS_CORETYPE for OpenBLAS (default SkylakeX on AVX-512 CPUs;\n"
            "                   auto: OpenBLAS's own choice)\n"
            "  --no-openblas    minigrad only\n"
            "  --clock wall|cpu wall clock (default), or process CPU time / threads for a busy shared machine\n"
            "  --bf16 PATH|none the bf16 section on this path (default: the best the CPU has), or none to skip it\n"
            "  --bf16-only      only the bf16 section (no OpenBLAS)\n"
            "  --small-m        only products of 1 to 256 rows (decoding) against textgen's and music's first\n"
            "                   Linear weight, float32 against every bf16 path the machine has (not with --bf16)\n"
            "  --help           this text\n"
            "Runs with OMP_WAIT_POLICY=passive unless it is set (it restarts itself to set it). A default run\n"
            "takes about 5 minutes on 2 cores (bench/README.md); --quick a fraction of that.\n");
}

/* ---- bf16 ---- */

static void run_bf16(const workload *w, const mg_bf16 *a, const mg_bf16 *b, const buffers *bf) {
    for (int64_t i = 0; i < w->batch; i++)
        mg_bgemm(w->ta, w->tb, w->m, w->n, w->k, a + i * bf->sa, bf->lda, b + i * bf->sb, bf->ldb,
                 false, bf->c_ob + i * bf->sc, bf->ldc);
}

/* The bf16 section: every workload on the active bf16 path against float32 sgemm, alternating. */
static void bf16_section(const workload *w, int nw, buffers *bf, size_t max_a, size_t max_b,
                         const int *thread_counts, int nthr, int reps, FILE *json) {
    const mg_bf16_path path = mg_bf16_path_active();
    const bench_fma pk = bench_bf16_peak_loop((int)path, (int)mg_isa_active());
    double peak[2];
    for (int t = 0; t < nthr; t++) peak[t] = measure_peak(&pk, thread_counts[t]);
    printf("\nbf16: %s path; peak (%s register loop): %.1f GFLOP/s on 1 thread", mg_bf16_path_name(path),
           pk.name, peak[0]);
    if (nthr > 1) printf(", %.1f on %d threads", peak[1], thread_counts[1]);
    printf("%s\n", path == MG_BF16_EMULATED ? " (the active float32 path's FMA loop: the emulation has "
                                               "no bf16 unit, and flushes after each FMA)"
                                             : "");
    mg_bf16 *a = mg_aligned_alloc(max_a * sizeof(mg_bf16)), *b = mg_aligned_alloc(max_b * sizeof(mg_bf16));
    double *t16 = malloc((size_t)reps * sizeof(double)), *t32 = malloc((size_t)reps * sizeof(double));
    if (!a || !b || !t16 || !t32) {
        fprintf(stderr, "bench_gemm: out of memory for the bf16 operands\n");
        exit(1);
    }
    mg_f32_to_bf16((int64_t)max_a, bf->a, a);
    mg_f32_to_bf16((int64_t)max_b, bf->b, b);
    printf("%-28s %-3s %3s  %9s %6s  %9s  %6s\n", "shape", "op", "thr", "bf16", "%peak", "fp32",
           "bf16/fp32");
    for (int i = 0; i < nw; i++) {
        const workload *wl = &w[i];
        bf->lda = wl->ta ? wl->m : wl->k;
        bf->ldb = wl->tb ? wl->k : wl->n;
        bf->ldc = wl->n;
        bf->sa = wl->m * wl->k;
        bf->sb = wl->k * wl->n;
        bf->sc = wl->m * wl->n;
        const double flops = 2.0 * (double)wl->batch * (double)wl->m * (double)wl->n * (double)wl->k;
        for (int t = 0; t < nthr; t++) {
            const int th = thread_counts[t];
            mg_set_num_threads(th);
            run_bf16(wl, a, b, bf);
            run_minigrad(wl, bf);
            for (int r = 0; r < reps; r++)
                for (int s = 0; s < 2; s++) {
                    const bool b_turn = (s == 0) == (r % 2 == 0);
                    const double t0 = bench_clock(th);
                    if (b_turn)
                        run_bf16(wl, a, b, bf);
                    else
                        run_minigrad(wl, bf);
                    (b_turn ? t16 : t32)[r] = bench_clock(th) - t0;
                }
            const double g16 = flops / bench_median(t16, reps) / 1e9;
            const double g32 = flops / bench_median(t32, reps) / 1e9;
            printf("%-28s %-3s %3d  %9.1f %5.1f%%  %9.1f  %6.2f\n", wl->shape, wl->op, th, g16,
                   100.0 * g16 / peak[t], g32, g16 / g32);
            fflush(stdout);
            const double d = rel_diff(bf->c_ob, bf->c_mg, (size_t)(wl->batch * wl->m * wl->n));
            if (d > 0.05) printf("  warning: bf16 and float32 differ by %.2e (relative)\n", d);
            if (json)
                fprintf(json,
                        "{\"bench\":\"gemm\",\"shape\":\"%s\",\"op\":\"%s\",\"batch\":%lld,"
                        "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"threads\":%d,\"impl\":\"minigrad-bf16\","
                        "\"isa\":\"%s\",\"gflops\":%.2f,\"peak_gflops\":%.2f,"
                        "\"fraction_of_peak\":%.4f,\"fp32_gflops\":%.2f,\"ratio_vs_fp32\":%.4f,"
                        "\"median_s\":%.6f,\"reps\":%d,\"clock\":\"%s\"}\n",
                        wl->shape, wl->op, (long long)wl->batch, (long long)wl->m, (long long)wl->n,
                        (long long)wl->k, th, mg_bf16_path_name(path), g16, peak[t], g16 / peak[t],
                        g32, g16 / g32, flops / g16 / 1e9, reps, use_cpu_clock ? "cpu" : "wall");
        }
    }
    free(t16);
    free(t32);
    mg_aligned_free(a);
    mg_aligned_free(b);
}

/* ---- products of few rows ---- */

static const int small_ms[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 256};

/* What a bf16 Linear layer runs for M rows on the active path: the pre-packed weight where the
 * path has a kernel for it, else mg_bgemm. */
static void run_small_bf16(int64_t M, int64_t N, int64_t K, const mg_bf16 *a, const mg_bf16 *b,
                           const uint32_t *bp, float *c) {
    if (!mg_bgemm_packed(M, N, K, a, K, bp, false, c, N)) mg_bgemm(false, false, M, N, K, a, K, b, N, false, c, N);
}

static void small_m_section(const float *af, const float *bf32, float *c, const int *thread_counts,
                            int nthr, int reps, bool quick, FILE *json) {
    const int shapes[][2] = {{256, 768}, {512, 1536}}; /* K x N: textgen's and music's first Linear */
    const int nshapes = quick ? 1 : 2;
    const int nm = quick ? 4 : (int)(sizeof small_ms / sizeof small_ms[0]);
    static const int quick_ms[] = {1, 4, 16, 64};
    mg_bf16_path paths[3];
    int np = 0;
    for (int p = MG_BF16_EMULATED; p <= MG_BF16_AMX; p++)
        if (mg_bf16_path_available((mg_bf16_path)p)) paths[np++] = (mg_bf16_path)p;
    const mg_bf16_path was = mg_bf16_path_active();
    const int64_t max_m = quick ? 64 : 256, max_k = 512, max_n = 1536;
    mg_bf16 *a = mg_aligned_alloc((size_t)(max_m * max_k) * sizeof *a), *b = mg_aligned_alloc((size_t)(max_k * max_n) * sizeof *b);
    uint32_t *bp = mg_aligned_alloc(mg_bgemm_packed_words(max_k, max_n) * sizeof *bp);
    double *t = malloc((size_t)reps * (size_t)(np + 1) * sizeof *t);
    if (!a || !b || !bp || !t) {
        fprintf(stderr, "bench_gemm: out of memory for the small-M operands\n");
        exit(1);
    }
    mg_f32_to_bf16(max_m * max_k, af, a);
    printf("\nproducts of few rows: M x K @ K x N, float32 and each bf16 path as a Linear layer runs it, "
           "GFLOP/s%s\n", mg_bf16_path_available(MG_BF16_AMX) ? " (AMX here on every M: no hand-off to AVX512-BF16)" : "");
    printf("%-6s %-10s %3s  %9s", "M", "K x N", "thr", "fp32");
    for (int q = 0; q < np; q++) printf("  %10s", mg_bf16_path_name(paths[q]));
    printf("  fastest bf16\n");
    const int old_min = mg_bf16_amx_min_m(1);
    for (int sh = 0; sh < nshapes; sh++) {
        const int64_t K = shapes[sh][0], N = shapes[sh][1];
        mg_f32_to_bf16(K * N, bf32, b);
        mg_bgemm_pack_b(false, K, N, b, N, bp);
        for (int th_i = 0; th_i < nthr; th_i++) {
            const int th = thread_counts[th_i];
            mg_set_num_threads(th);
            int amx_from = 0; /* the smallest M from which AMX beat AVX512-BF16 at every M measured */
            for (int mi = 0; mi < nm; mi++) {
                const int64_t M = quick ? quick_ms[mi] : small_ms[mi];
                const double flops = 2.0 * (double)M * (double)N * (double)K;
                /* warm-up, then rounds in which every implementation runs once, in turn */
                for (int q = 0; q <= np; q++) {
                    if (q < np) mg_bf16_path_force(paths[q]), run_small_bf16(M, N, K, a, b, bp, c);
                    else mg_sgemm(false, false, M, N, K, 1.0f, af, K, bf32, N, 0.0f, c, N);
                }
                for (int r = 0; r < reps; r++)
                    for (int q = 0; q <= np; q++) {
                        const int which = (q + r) % (np + 1);
                        if (which < np) mg_bf16_path_force(paths[which]);
                        const int inner = M <= 16 ? 20 : 4; /* short calls are timed in batches */
                        const double t0 = bench_clock(th);
                        for (int i = 0; i < inner; i++) {
                            if (which < np) run_small_bf16(M, N, K, a, b, bp, c);
                            else mg_sgemm(false, false, M, N, K, 1.0f, af, K, bf32, N, 0.0f, c, N);
                        }
                        t[(size_t)which * (size_t)reps + (size_t)r] = (bench_clock(th) - t0) / inner;
                    }
                char kn[48];
                snprintf(kn, sizeof kn, "%lldx%lld", (long long)K, (long long)N);
                const double g32 = flops / bench_median(t + (size_t)np * (size_t)reps, reps) / 1e9;
                printf("%-6lld %-10s %3d  %9.1f", (long long)M, kn, th, g32);
                double best = 0.0, g_amx = 0.0, g_avx = 0.0;
                int best_q = 0;
                for (int q = 0; q < np; q++) {
                    const double g = flops / bench_median(t + (size_t)q * (size_t)reps, reps) / 1e9;
                    printf("  %10.1f", g);
                    if (g > best) best = g, best_q = q;
                    if (paths[q] == MG_BF16_AMX) g_amx = g;
                    if (paths[q] == MG_BF16_AVX512) g_avx = g;
                    if (json)
                        fprintf(json, "{\"bench\":\"gemm_small_m\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
                                      "\"threads\":%d,\"impl\":\"minigrad-bf16\",\"isa\":\"%s\",\"gflops\":%.3f,"
                                      "\"fp32_gflops\":%.3f,\"reps\":%d,\"clock\":\"%s\"}\n",
                                (long long)M, (long long)N, (long long)K, th, mg_bf16_path_name(paths[q]), g, g32,
                                reps, use_cpu_clock ? "cpu" : "wall");
                }
                printf("  %s\n", np ? mg_bf16_path_name(paths[best_q]) : "-");
                if (g_amx > 0.0 && g_avx > 0.0) amx_from = g_amx > g_avx ? (amx_from ? amx_from : (int)M) : 0;
                fflush(stdout);
            }
            if (mg_bf16_path_available(MG_BF16_AMX) && mg_bf16_path_available(MG_BF16_AVX512)) {
                if (amx_from)
                    printf("  %lldx%lld, %d thread%s: AMX beats AVX512-BF16 from M = %d on (this build hands "
                           "products of fewer than %d rows to AVX512-BF16)\n",
                           (long long)K, (long long)N, th, th > 1 ? "s" : "", amx_from, old_min);
                else
                    printf("  %lldx%lld, %d thread%s: AVX512-BF16 beats AMX at the largest M measured\n",
                           (long long)K, (long long)N, th, th > 1 ? "s" : "");
            }
        }
    }
    mg_bf16_amx_min_m(old_min);
    mg_bf16_path_force(was);
    free(t);
    mg_aligned_free(a);
    mg_aligned_free(b);
    mg_aligned_free(bp);
}

int main(int argc, char **argv) {
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
        /* no re-exec: measure anyway, and say why the 2-thread numbers may be low */
        fprintf(stderr, "bench_gemm: warning: could not restart with OMP_WAIT_POLICY=passive; idle "
                        "OpenMP threads may spin while OpenBLAS runs\n");
    }
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0); /* before dlopen: OpenBLAS workers sleep at once */
    bench_stdout_begin();
    bool quick = false, use_openblas = true, bf16_only = false, small_m = false;
    const char *json_path = NULL, *isa_name = NULL, *ob_core = NULL, *bf16_name = NULL;
    int reps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        if (!strcmp(a, "--quick"))
            quick = true;
        else if (!strcmp(a, "--no-openblas"))
            use_openblas = false;
        else if (!strcmp(a, "--json") && has_value)
            json_path = argv[++i];
        else if (!strcmp(a, "--reps") && has_value) {
            if (!bench_int_flag("bench_gemm", "--reps", argv[++i], 1, 100000, &reps)) return 2;
        }
        else if (!strcmp(a, "--isa") && has_value)
            isa_name = argv[++i];
        else if (!strcmp(a, "--bf16") && has_value)
            bf16_name = argv[++i];
        else if (!strcmp(a, "--bf16-only"))
            bf16_only = true;
        else if (!strcmp(a, "--small-m"))
            small_m = true;
        else if (!strcmp(a, "--openblas-core") && has_value)
            ob_core = argv[++i];
        else if (!strcmp(a, "--clock") && has_value && !strcmp(argv[i + 1], "cpu")) {
            use_cpu_clock = true;
            i++;
        } else if (!strcmp(a, "--clock") && has_value && !strcmp(argv[i + 1], "wall")) {
            use_cpu_clock = false;
            i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_gemm: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (reps <= 0) reps = quick ? 3 : 11;
    if (use_cpu_clock) {
        const char *wp = getenv("OMP_WAIT_POLICY");
        if (!wp || strcasecmp(wp, "passive") != 0)
            fprintf(stderr, "bench_gemm: warning: --clock cpu counts spinning threads; run with "
                            "OMP_WAIT_POLICY=passive\n");
    }

    if (isa_name) {
        mg_isa want = !strcmp(isa_name, "avx512")    ? MG_ISA_AVX512
                      : !strcmp(isa_name, "avx2")    ? MG_ISA_AVX2
                      : !strcmp(isa_name, "generic") ? MG_ISA_GENERIC
                                                     : (mg_isa)-1;
        if (!mg_isa_force(want)) {
            fprintf(stderr,
                    "bench_gemm: --isa %s: not a path this CPU and build support (best: %s)\n",
                    isa_name, mg_isa_name(mg_isa_detected()));
            return 2;
        }
    }
    const bool bf16 = !bf16_name || strcmp(bf16_name, "none") != 0;
    if (bf16_name && bf16) {
        int p = -1;
        for (int q = MG_BF16_EMULATED; q <= MG_BF16_AMX; q++)
            if (!strcmp(bf16_name, mg_bf16_path_name((mg_bf16_path)q))) p = q;
        if (p < 0 || !mg_bf16_path_force((mg_bf16_path)p)) {
            fprintf(stderr, "bench_gemm: --bf16 %s: not a bf16 path this CPU and build support "
                            "(best: %s)\n", bf16_name, mg_bf16_path_name(mg_bf16_path_detected()));
            return 2;
        }
    }
    if (bf16_only && !bf16) {
        fprintf(stderr, "bench_gemm: --bf16-only with --bf16 none measures nothing\n");
        return 2;
    }
    if (small_m && bf16_name) {
        fprintf(stderr, "bench_gemm: --small-m measures every bf16 path the machine has; leave out --bf16\n");
        return 2;
    }
    const char *no_ob = !use_openblas ? "--no-openblas" : small_m ? "--small-m" : bf16_only ? "--bf16-only" : NULL;
    if (bf16_only || small_m) use_openblas = false;
    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        fprintf(stderr, "bench_gemm: cannot write %s\n", json_path);
        return 1;
    }

    const int all = mg_set_num_threads(0);
    const int thread_counts[2] = {1, all};
    const int nthr = all > 1 ? 2 : 1;

    openblas ob = {0};
    bool have_ob = false;
    if (!use_openblas)
        printf("openblas: skipped (%s)\n", no_ob);
    else {
        const char *core = ob_core;
#ifdef BENCH_X86
        if (!core && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
            core = "SkylakeX";
#endif
        have_ob = openblas_load(&ob, core);
        if (!have_ob)
            printf("openblas: not found (dlopen libopenblas.so.0: %s); install libopenblas0 to "
                   "compare\n",
                   dlerror());
        else
            printf("openblas: %s, kernels %s%s\n", ob.get_config ? ob.get_config() : "?",
                   ob.get_corename ? ob.get_corename() : "?",
                   core && !ob_core ? " (bench_gemm sets OPENBLAS_CORETYPE=SkylakeX on AVX-512 "
                                      "CPUs, overriding the environment, so the baseline uses "
                                      "OpenBLAS's AVX-512 kernels; --openblas-core auto keeps "
                                      "the environment's or OpenBLAS's own choice)"
                                    : "");
    }

    const bench_fma pk = bench_fma_best();
    double peak[2];
    for (int t = 0; t < nthr; t++) peak[t] = measure_peak(&pk, thread_counts[t]);
    char cpu[320];
    printf("cpu: %s\n", bench_cpu(cpu, sizeof cpu));
    printf("minigrad: %s path, %d threads available\n", mg_isa_name(mg_isa_active()), all);
    printf("peak (%s register loop): %.1f GFLOP/s on 1 thread", pk.name, peak[0]);
    if (nthr > 1) printf(", %.1f on %d threads", peak[1], all);
    printf("\nmedian of %d repetitions, implementations alternating call by call, %s\n\n", reps,
           use_cpu_clock ? "CPU-time clock (process CPU seconds / threads)" : "wall clock");

    workload w[64];
    const int nw = build_workloads(w, quick);
    size_t max_a = 0, max_b = 0, max_c = 0;
    for (int i = 0; i < nw; i++) {
        const size_t a = (size_t)(w[i].batch * w[i].m * w[i].k);
        const size_t b = (size_t)(w[i].batch * w[i].k * w[i].n);
        const size_t c = (size_t)(w[i].batch * w[i].m * w[i].n);
        max_a = a > max_a ? a : max_a;
        max_b = b > max_b ? b : max_b;
        max_c = c > max_c ? c : max_c;
    }
    if (small_m) { /* small_m_section's largest operands */
        max_a = max_a > 256 * 512 ? max_a : 256 * 512;
        max_b = max_b > 512 * 1536 ? max_b : 512 * 1536;
        max_c = max_c > 256 * 1536 ? max_c : 256 * 1536;
    }
    buffers bf = {
        .a = mg_aligned_alloc(max_a * sizeof(float)),
        .b = mg_aligned_alloc(max_b * sizeof(float)),
        .c_mg = mg_aligned_alloc(max_c * sizeof(float)),
        .c_ob = mg_aligned_alloc(max_c * sizeof(float)),
    };
    if (!bf.a || !bf.b || !bf.c_mg || !bf.c_ob) {
        fprintf(stderr, "bench_gemm: out of memory for the matrices\n");
        return 1;
    }
    fill(bf.a, max_a, 1);
    fill(bf.b, max_b, 2);
    memset(bf.c_mg, 0, max_c * sizeof(float));
    memset(bf.c_ob, 0, max_c * sizeof(float));

    if (!bf16_only && !small_m)
        printf("%-28s %-3s %3s  %9s %6s  %9s %6s  %6s\n", "shape", "op", "thr", "minigrad", "%peak",
               "openblas", "%peak", "ratio");
    double *t_mg = malloc((size_t)reps * sizeof(double)),
           *t_ob = malloc((size_t)reps * sizeof(double));
    int low_ratio = 0;
    for (int i = 0; i < (bf16_only || small_m ? 0 : nw); i++) {
        const workload *wl = &w[i];
        bf.lda = wl->ta ? wl->m : wl->k;
        bf.ldb = wl->tb ? wl->k : wl->n;
        bf.ldc = wl->n;
        bf.sa = wl->m * wl->k;
        bf.sb = wl->k * wl->n;
        bf.sc = wl->m * wl->n;
        const double flops =
            2.0 * (double)wl->batch * (double)wl->m * (double)wl->n * (double)wl->k;
        for (int t = 0; t < nthr; t++) {
            const int th = thread_counts[t];
            mg_set_num_threads(th);
            if (have_ob) ob.set_num_threads(th);
            run_minigrad(wl, &bf); /* warm-up: workspace, page faults, thread start */
            if (have_ob) run_openblas(&ob, wl, &bf);
            for (int r = 0; r < reps; r++) {
                /* Alternate which goes first so that neither always follows the other's threads. */
                for (int s = 0; s < 2; s++) {
                    const bool mg_turn = (s == 0) == (r % 2 == 0);
                    if (!mg_turn && !have_ob) continue;
                    const double t0 = bench_clock(th);
                    if (mg_turn)
                        run_minigrad(wl, &bf);
                    else
                        run_openblas(&ob, wl, &bf);
                    (mg_turn ? t_mg : t_ob)[r] = bench_clock(th) - t0;
                }
            }
            const double g_mg = flops / bench_median(t_mg, reps) / 1e9;
            const double g_ob = have_ob ? flops / bench_median(t_ob, reps) / 1e9 : 0.0;
            const double ratio = have_ob ? g_mg / g_ob : 0.0;
            if (have_ob && ratio < 0.9) low_ratio++;
            printf("%-28s %-3s %3d  %9.1f %5.1f%%", wl->shape, wl->op, th, g_mg,
                   100.0 * g_mg / peak[t]);
            if (have_ob) printf("  %9.1f %5.1f%%  %6.2f", g_ob, 100.0 * g_ob / peak[t], ratio);
            printf("\n");
            fflush(stdout);
            if (have_ob) {
                const double d = rel_diff(bf.c_mg, bf.c_ob, (size_t)(wl->batch * wl->m * wl->n));
                if (d > 1e-4)
                    printf("  warning: minigrad and openblas differ by %.2e (relative)\n", d);
            }
            if (json) {
                for (int impl = 0; impl < (have_ob ? 2 : 1); impl++) {
                    const double g = impl ? g_ob : g_mg;
                    fprintf(json,
                            "{\"bench\":\"gemm\",\"shape\":\"%s\",\"op\":\"%s\",\"batch\":%lld,"
                            "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"threads\":%d,\"impl\":\"%s\","
                            "\"isa\":\"%s\",\"gflops\":%.2f,\"peak_gflops\":%.2f,"
                            "\"fraction_of_peak\":%.4f,\"median_s\":%.6f,\"reps\":%d,"
                            "\"clock\":\"%s\"",
                            wl->shape, wl->op, (long long)wl->batch, (long long)wl->m,
                            (long long)wl->n, (long long)wl->k, th, impl ? "openblas" : "minigrad",
                            impl ? (ob.get_corename ? ob.get_corename() : "?")
                                 : mg_isa_name(mg_isa_active()),
                            g, peak[t], g / peak[t], flops / g / 1e9, reps,
                            use_cpu_clock ? "cpu" : "wall");
                    if (have_ob && !impl) fprintf(json, ",\"ratio_vs_openblas\":%.4f", ratio);
                    fprintf(json, "}\n");
                }
            }
        }
    }
    if (have_ob) printf("\n%d of %d measurements below 90%% of OpenBLAS\n", low_ratio, nw * nthr);
    if (small_m) small_m_section(bf.a, bf.b, bf.c_ob, thread_counts, nthr, reps, quick, json);
    else if (bf16) bf16_section(w, nw, &bf, max_a, max_b, thread_counts, nthr, reps, json);
    free(t_mg);
    free(t_ob);
    mg_aligned_free(bf.a);
    mg_aligned_free(bf.b);
    mg_aligned_free(bf.c_mg);
    mg_aligned_free(bf.c_ob);
    if (json && !bench_json_close("bench_gemm", json, json_path)) return 1;
    return bench_exit_status("bench_gemm", 0);
}
