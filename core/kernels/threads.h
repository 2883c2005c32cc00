/* threads.h: private to core/kernels. How many threads a piece of work is worth. */
#ifndef MG_KERNELS_THREADS_H
#define MG_KERNELS_THREADS_H

#include <stdbool.h>
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

#endif
