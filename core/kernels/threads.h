/* threads.h: private to core (the kernels, and the ops through ops/internal.h). How many threads a
 * piece of work is worth, and loops that enter OpenMP only when more than one thread runs them. */
#ifndef MG_KERNELS_THREADS_H
#define MG_KERNELS_THREADS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

/* Of max_threads, as many as have at least per_thread flops each (at least one): below that a
 * thread's share costs less than waking it. */
static inline int threads_for(int max_threads, double flops, double per_thread) {
    const double fit = flops / per_thread;
    return fit < 1.0 ? 1 : fit < (double)max_threads ? (int)fit : max_threads;
}

/* Whether idle OpenMP threads sleep between parallel regions (OMP_WAIT_POLICY=passive), so that
 * waking one costs tens of microseconds. Looked up on every call (a short scan, next to a product of
 * a MFLOP or more) rather than once, so that a test can take both branches in one process. libgomp
 * itself reads the variable once at start-up: a program that changes it later only changes this
 * choice. Other ways of making threads sleep (GOMP_SPINCOUNT=0, LLVM's KMP_BLOCKTIME) are not
 * looked at. */
static inline bool threads_sleep(void) {
    const char *w = getenv("OMP_WAIT_POLICY");
    return w && strcasecmp(w, "passive") == 0;
}

/* for (int64_t i = 0; i < n; i++) { body } on nt threads with the given OpenMP schedule, a
 * parenthesised clause argument such as (static) or (dynamic, 1); with nt <= 1 on the calling
 * thread, without entering the OpenMP runtime. A region whose if() clause is false, or that gets
 * one thread, still calls into libgomp and starts a team of one, which costs microseconds against
 * the few rows of a decoding step. The body may use `continue`. */
#define MG_PRAGMA_(x) _Pragma(#x)
#define MG_PAR_FOR_NT(nt, sched, i, n, ...)                                                        \
    do {                                                                                           \
        const int mg_par_nt_ = (nt);                                                               \
        const int64_t mg_par_n_ = (n);                                                             \
        if (mg_par_nt_ > 1) {                                                                      \
            MG_PRAGMA_(omp parallel for schedule sched num_threads(mg_par_nt_))                    \
            for (int64_t i = 0; i < mg_par_n_; i++) {                                              \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        } else                                                                                     \
            for (int64_t i = 0; i < mg_par_n_; i++) {                                              \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
    } while (0)

/* The same on all of OpenMP's threads (static schedule) when `par` holds, else on the calling
 * thread: the ops' loops over elements or rows, `par` their size threshold. */
#define MG_PAR_FOR(par, i, n, ...)                                                                 \
    do {                                                                                           \
        const int64_t mg_par_n_ = (n);                                                             \
        if (par) {                                                                                 \
            _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < mg_par_n_; i++) { \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        } else                                                                                     \
            for (int64_t i = 0; i < mg_par_n_; i++) {                                              \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
    } while (0)

#endif
