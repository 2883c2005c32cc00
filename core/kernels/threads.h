/* threads.h: private to core/kernels. How many threads a piece of work is worth. */
#ifndef MG_KERNELS_THREADS_H
#define MG_KERNELS_THREADS_H

/* Of max_threads, as many as have at least per_thread flops each (at least one): below that a
 * thread's share costs less than waking it. */
static inline int threads_for(int max_threads, double flops, double per_thread) {
    const double fit = flops / per_thread;
    return fit < 1.0 ? 1 : fit < (double)max_threads ? (int)fit : max_threads;
}

#endif
