/* examples/posenc/tasks.h: the bit-exact data side of the positional-encoding comparison
 * (docs/posenc-benchmark.md, "the spec" below, sections 1-3): the four tasks, their train/val
 * sets, the fixed permutation of `perm`, the minibatch index stream, plus longer evaluation sets
 * for length generalisation (the program's addition, section 8; defined below).
 *
 * Names carry the `posenc_` prefix: this is a library local to the example, not part of minigrad's
 * API, and the prefix says so. Randomness comes only from minigrad's mg_rng (SplitMix64 with the
 * spec's multiply-shift mapping), seeded as the spec says.
 *
 * Ownership: posenc_data_make / posenc_data_make_length fill a caller-owned posenc_data whose x and
 * y buffers the library allocates; the caller releases them with posenc_data_free (once; freeing a
 * zeroed or already freed struct is a no-op). Every other function writes into caller buffers and
 * keeps no pointer. There is no global state.
 *
 * Errors: functions returning mg_status return MG_OK or a negative code with mg_last_error() naming
 * the bad value (unknown task name, length, count, token). On error the outputs are left zeroed
 * (datasets) or unspecified (caller buffers).
 *
 * Targets at lengths other than 32 (used by posenc_target and posenc_data_make_length):
 *   rev   y[i] = x[L-1-i]: the definition does not mention 32, it carries over unchanged.
 *   sort  y = x sorted ascending (stable, duplicates kept): also length-free.
 *   lmax  y[i] = max of x over {i-1, i, i+1} within [0, L-1]: a local relative rule, unchanged.
 *   perm  refused (MG_ERR_INVALID) for L != 32. pi is one shuffle of 32 positions; any rule for
 *         48 or 64 positions (reshuffling, padding pi with the identity, ...) would be a new task
 *         that training on pi says nothing about, so there is no honest extension to offer.
 */
#ifndef POSENC_TASKS_H
#define POSENC_TASKS_H

#include "minigrad/base.h"
#include "minigrad/rng.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    POSENC_L = 32,         /* sequence length of the spec's train and val sets */
    POSENC_V = 16,         /* vocabulary = number of classes, tokens 0..15 */
    POSENC_N_TRAIN = 8192, /* default sizes */
    POSENC_N_VAL = 1024,
    POSENC_N_LENGTH = 1024,   /* default size of a length-generalisation set */
    POSENC_MAX_LENGTH = 4095, /* longest L for length sets (their seed layout) and posenc_target */
};

/* Task and split ids are the spec's (they enter the data seeds). */
typedef enum posenc_task {
    POSENC_REV = 0,
    POSENC_SORT = 1,
    POSENC_LMAX = 2,
    POSENC_PERM = 3,
    POSENC_N_TASKS
} posenc_task;

typedef enum posenc_split {
    POSENC_TRAIN = 0,
    POSENC_VAL = 1,
    /* Not a spec split: marks a set made by posenc_data_make_length (its own seeds, any length). */
    POSENC_LENGTH = 2,
} posenc_split;

/* "rev", "sort", "lmax", "perm"; "train", "val", "length". NULL for an id out of range. */
const char *posenc_task_name(posenc_task task);
const char *posenc_split_name(posenc_split split);

/* Exact, case-sensitive lookup. An unknown name gives MG_ERR_NOT_FOUND with a message that quotes
 * it and lists the valid names; *out is untouched then. posenc_split_from_name knows only the
 * spec's splits (train, val). */
mg_status posenc_task_from_name(const char *name, posenc_task *out);
mg_status posenc_split_from_name(const char *name, posenc_split *out);

/* ---- datasets ---- */

/* n sequences of length L over tokens 0..V-1, row-major: x[s*L + i], y[s*L + i]. */
typedef struct posenc_data {
    posenc_task task;
    posenc_split split;
    int n, L, V;
    int32_t *x; /* (n, L) inputs */
    int32_t *y; /* (n, L) targets, a function of x only */
} posenc_data;

/* The spec's data seed: 0x5EED0000 + 16*task + split (train and val only). */
uint64_t posenc_data_seed(posenc_task task, posenc_split split);

/* The spec's set for (task, split) at L = 32. n <= 0 takes the spec size (8192 train, 1024 val);
 * any other n gives the first n sequences of the same stream (so a smaller set is a prefix of the
 * full one, and a larger one extends it). *d is overwritten (free an old set first). */
mg_status posenc_data_make(posenc_data *d, posenc_task task, posenc_split split, int n);

/* Seed of a length-generalisation set: 0x1E6A0000 + 4096*task + L (1 <= L <= 4095). Disjoint from
 * every seed the spec uses (0x5EED00xx data, 0x7E2A0000 permutation, 0xBA7C0000+k batches,
 * 0x601DE0 weights), also as SplitMix64 streams: none starts within 2^40 steps of another (tested).
 */
uint64_t posenc_length_seed(posenc_task task, int L);

/* An evaluation set of n sequences of length L (n <= 0: 1024), drawn exactly like the spec's sets
 * (x[s][i] = mg_rng_below(&r, 16) in sequence then position order) from posenc_length_seed, with
 * the targets defined at the top of this file. split is POSENC_LENGTH. L = 32 is allowed and gives
 * a fresh set distinct from val. perm with L != 32 is MG_ERR_INVALID. */
mg_status posenc_data_make_length(posenc_data *d, posenc_task task, int L, int n);

void posenc_data_free(posenc_data *d);

/* ---- targets ---- */

/* The permutation pi of `perm` (Fisher-Yates driven by mg_rng seeded 0x7E2A0000). */
void posenc_perm(int32_t pi[POSENC_L]);

/* y (L) = the task's target for one sequence x (L) at any length 1 <= L <= 4095 (see the top of
 * this file). x and y must not overlap. Tokens outside 0..15 and perm with L != 32 are
 * MG_ERR_INVALID. */
mg_status posenc_target(posenc_task task, int L, const int32_t *x, int32_t *y);

/* ---- minibatches ---- */

/* Training seed k draws its indices from one generator seeded 0xBA7C0000 + k. */
uint64_t posenc_batch_seed(uint32_t k);

/* The index stream step by step: each posenc_batch_next writes the `batch` indices of the next step
 * (idx[b] = mg_rng_below(&rng, n_train) for b = 0..batch-1). Plain data: saving `rng` and `step`
 * in a checkpoint is enough to resume the exact stream. */
typedef struct posenc_batch_stream {
    mg_rng rng;
    uint32_t n_train;
    int batch;
    int64_t step; /* steps drawn so far */
} posenc_batch_stream;

mg_status posenc_batch_stream_init(posenc_batch_stream *s, uint32_t k, int n_train, int batch);
void posenc_batch_next(posenc_batch_stream *s, int32_t *idx);

/* The whole stream at once: idx (steps, batch), identical to `steps` calls of posenc_batch_next. */
mg_status posenc_batch_indices(uint32_t k, int n_train, int batch, int steps, int32_t *idx);

/* Copies rows idx[0..batch-1] of d into xb, yb (batch, d->L). An index outside 0..n-1 is
 * MG_ERR_INVALID naming it and its slot. */
mg_status posenc_batch_gather(const posenc_data *d, const int32_t *idx, int batch, int32_t *xb,
                              int32_t *yb);

/* ---- position-blind reference levels ----
 * Each writes a token accuracy in [0, 1] to *acc. The sets must be non-empty with tokens and
 * classes in 0..15 (MG_ERR_INVALID otherwise, naming the offending set or entry). */

/* Predict, at every position, the most frequent token of the input sequence (ties: the smallest).
 */
mg_status posenc_ref_mode(const posenc_data *d, double *acc);
/* Predict the position's own input token (y[i] = x[i]). */
mg_status posenc_ref_copy(const posenc_data *d, double *acc);
/* Predict, at position i, the class most frequent at i among fit's targets (ties: the smallest),
 * scored on d: content-blind but position-aware. fit and d must have the same L. */
mg_status posenc_ref_position_majority(const posenc_data *fit, const posenc_data *d, double *acc);
/* (1 + P[y[i] = y[L-1-i]]) / 2 with P measured over all positions of d: the spec's estimate
 * (section 4) of the accuracy cap of a reflection-equivariant network (alibi) on sort. */
mg_status posenc_ref_reflection_cap(const posenc_data *d, double *acc);

#ifdef __cplusplus
}
#endif
#endif
