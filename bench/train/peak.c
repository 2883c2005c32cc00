/* The machine's FMA peak, with bench/gemm's loop: every thread runs a loop of
 * independent fused multiply-adds on registers only (no memory traffic), so the result is what
 * the FMA pipes can do at the clock the cores hold under that load. Model FLOPs utilisation is
 * measured against this, not against a datasheet number. */
#include "bench_train.h"

#include "minigrad/base.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include "../common/bench_util.h"

const char *bt_peak_kind(void) { return bench_fma_best().name; }

static volatile double sink;

/* Loop iterations per second on one thread, measured once. */
static double calibrate(const bench_fma *k) {
    static double rate;
    if (rate <= 0.0) rate = bench_fma_rate(k);
    return rate;
}

double bt_measure_peak(int threads, int reps, double seconds) {
    const bench_fma k = bench_fma_best();
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
