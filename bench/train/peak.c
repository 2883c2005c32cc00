/* The machine's FMA peak, measured the way bench/gemm does: every thread runs a loop of
 * independent fused multiply-adds on registers only (no memory traffic), so the result is what
 * the FMA pipes can do at the clock the cores hold under that load. Model FLOPs utilisation is
 * measured against this, not against a datasheet number. */
#include "bench_train.h"

#include "minigrad/base.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEAK_X86 1
#endif

/* Independent accumulator chains: more than FMA pipes x FMA latency on current cores, so the
 * loop is throughput-bound, and few enough to stay in the 32 zmm registers. */
#define CHAINS 20

#ifdef PEAK_X86
__attribute__((target("avx512f,fma"))) static double loop_avx512(long iters) {
    __m512 acc[CHAINS];
    const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps(1.0f + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 20
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
    }
    for (int i = 1; i < CHAINS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

/* 16 ymm registers: 12 chains plus the two constants. */
__attribute__((target("avx2,fma"))) static double loop_avx2(long iters) {
    __m256 acc[12];
    const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps(1.0f + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
    }
    for (int i = 1; i < 12; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[0]);
    double s = 0.0;
    for (int i = 0; i < 8; i++) s += lanes[i];
    return s;
}
#endif

static double loop_scalar(long iters) {
    float acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = 1.0f + (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < CHAINS; i++) acc[i] = acc[i] * 0.9999999f + 1e-7f;
    double s = 0.0;
    for (int i = 0; i < CHAINS; i++) s += acc[i];
    return s;
}

typedef struct kind {
    const char *name;
    double flops_per_iter; /* 2 per lane per chain */
    double (*loop)(long);
} kind;

static kind best_kind(void) {
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return (kind){"avx512 fma", 2.0 * 16 * CHAINS, loop_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (kind){"avx2 fma", 2.0 * 8 * 12, loop_avx2};
#endif
    return (kind){"scalar mul+add", 2.0 * CHAINS, loop_scalar};
}

const char *bt_peak_kind(void) { return best_kind().name; }

static volatile double sink;

/* Loop iterations per second on one thread, measured once. */
static double calibrate(const kind *k) {
    static double rate;
    if (rate > 0.0) return rate;
    for (long iters = 1L << 14;; iters *= 4) {
        const double t0 = mg_time();
        sink = k->loop(iters);
        const double t = mg_time() - t0;
        if (t > 0.02) return rate = (double)iters / t;
    }
}

double bt_measure_peak(int threads, int reps, double seconds) {
    const kind k = best_kind();
    const long iters = (long)(calibrate(&k) * seconds) + 1;
    double best = 0.0;
    for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
        const double t0 = mg_time();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
        sink = k.loop(iters);
        const int used = threads;
#else
        (void)threads;
        sink = k.loop(iters);
        const int used = 1;
#endif
        const double gflops = (double)used * (double)iters * k.flops_per_iter / (mg_time() - t0) / 1e9;
        best = gflops > best ? gflops : best;
    }
    return best;
}
