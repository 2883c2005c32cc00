/* Data parallelism behind the trainer (internal to libminigrad-train).
 *
 * dp.c implements it with MPI; dp_none.c, built when MPI is not, is one rank and never
 * communicates. The trainer only ever calls these functions, so a build without MPI behaves as a
 * single process always did.
 *
 * Every collective is called by every rank in the same order. The gradient sum is deterministic:
 * each bucket of the slab is split into one slice per rank (boundaries on DP_ALIGN floats); rank r
 * receives slice r of every rank (all-to-all), adds them in rank order 0, 1, ..., N-1, and the
 * sums are gathered back (allgather). The result is the same bit for bit on every rank and from
 * run to run, whatever algorithms the MPI library picks.
 */
#ifndef TRAIN_DP_H
#define TRAIN_DP_H

#include "minigrad/base.h"

#include <stdbool.h>
#include <stdint.h>

/* Slice boundaries fall on multiples of this many floats: the chunks in which mg_clip_grad_norm
 * sums squares, so a norm summed from per-slice chunk sums equals the norm of the whole slab. */
#define DP_ALIGN 4096
#define DP_MSG 768 /* a failing rank's message as the other ranks receive it */

typedef struct dp_layout {
    int64_t n;        /* floats of the slab */
    int64_t bucket;   /* floats per bucket (the last may be shorter) */
    int nbuckets;
    int nranks;
} dp_layout;

/* This process's rank and the number of ranks: MPI is started on the first call when the process
 * was launched by mpirun/mpiexec (an MPI program started on its own is one rank). */
mg_status dp_init(int *rank, int *nranks);
/* Whether another thread may call the collectives while this one does not (MPI gave at least
 * MPI_THREAD_SERIALIZED). */
bool dp_threads_ok(void);
/* The MPI library's name and version, or "none". */
const char *dp_library(void);

/* Seconds spent inside collectives since the last call, and resets the count: *main (may be NULL)
 * those of the calling thread's collectives, the return value those of dp_bucket_* (the
 * communication thread's). */
double dp_take_wait(double *main);

/* Every rank sends n doubles; out receives nranks * n, rank r's at out[r * n]. */
mg_status dp_allgather_f64(const double *in, double *out, int n);
/* x[i] becomes the largest of every rank's x[i], i < n. */
mg_status dp_max_i64(int64_t *x, int n);
/* Rank root receives every rank's slices into full (a slab); mine: this rank's slices, one after
 * the other in bucket order. full is only used on root. */
mg_status dp_gather(const dp_layout *L, const float *mine, float *full, int root);
/* bytes of buf from root to every rank. */
mg_status dp_bcast(void *buf, int64_t bytes, int root);

/* The layout of a slab of n floats over nranks ranks in buckets of at most bucket floats. */
dp_layout dp_layout_make(int64_t n, int nranks, int64_t bucket);
/* The slice [*lo, *hi) of bucket b that rank r owns (absolute offsets into the slab). */
void dp_slice(const dp_layout *L, int b, int r, int64_t *lo, int64_t *hi);
/* Floats of the slab rank r owns in all (the sum of its slices). */
int64_t dp_owned(const dp_layout *L, int r);

/* Sums x (the slab, n floats) across ranks in rank order, in place, on every rank. */
mg_status dp_sum(const dp_layout *L, float *x);
/* Reduce-scatter: afterwards this rank's slices of x hold the rank-ordered sums (the rest of x is
 * left as it was). */
mg_status dp_reduce_scatter(const dp_layout *L, float *x);
/* One bucket of dp_sum (zero1 false) or of dp_reduce_scatter (true), for a thread that sends
 * buckets as backward finishes them. */
mg_status dp_bucket(const dp_layout *L, int b, float *x, bool zero1);
/* Allgather: every rank's slices of x, from their owners, to every rank. */
mg_status dp_allgather(const dp_layout *L, float *x);

/* Ends the job from a rank that cannot go on with the others (they may be inside a collective):
 * prints msg on stderr and aborts every rank with status 1. */
void dp_abort(const char *msg);

#endif
