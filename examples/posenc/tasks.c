/* The posenc tasks, their data and minibatch streams (docs/posenc-benchmark.md sections 1-3).
 * Everything here must stay bit-exact with the benchmark: the order of generator draws is part of
 * the contract. */
#include "tasks.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *const task_names[POSENC_N_TASKS] = {"rev", "sort", "lmax", "perm"};
static const char *const split_names[] = {"train", "val", "length"};
#define N_SPEC_SPLITS 2 /* train, val: the only splits a name or posenc_data_make accepts */

const char *posenc_task_name(posenc_task task) {
    return (unsigned)task < POSENC_N_TASKS ? task_names[task] : NULL;
}

const char *posenc_split_name(posenc_split split) {
    return (unsigned)split < sizeof split_names / sizeof *split_names ? split_names[split] : NULL;
}

mg_status posenc_task_from_name(const char *name, posenc_task *out) {
    for (int t = 0; name && t < POSENC_N_TASKS; t++) {
        if (strcmp(name, task_names[t]) == 0) {
            *out = (posenc_task)t;
            return MG_OK;
        }
    }
    return mg_set_error(MG_ERR_NOT_FOUND,
                        "unknown task \"%s\" (valid: rev, sort, lmax, perm)",
                        name ? name : "(null)");
}

mg_status posenc_split_from_name(const char *name, posenc_split *out) {
    for (int s = 0; name && s < N_SPEC_SPLITS; s++) {
        if (strcmp(name, split_names[s]) == 0) {
            *out = (posenc_split)s;
            return MG_OK;
        }
    }
    return mg_set_error(MG_ERR_NOT_FOUND, "posenc: unknown split \"%s\" (valid: train, val)",
                        name ? name : "(null)");
}

static mg_status check_task(const char *fn, posenc_task task) {
    if ((unsigned)task < POSENC_N_TASKS) return MG_OK;
    return mg_set_error(MG_ERR_INVALID,
                        "%s: task id %d out of range (valid: 0 rev, 1 sort, 2 lmax, 3 perm)", fn,
                        (int)task);
}

/* ---- targets ---- */

void posenc_perm(int32_t pi[POSENC_L]) {
    mg_rng r = mg_rng_make(0x7E2A0000);
    for (int i = 0; i < POSENC_L; i++) pi[i] = i;
    for (int i = POSENC_L - 1; i >= 1; i--) {
        uint32_t j = mg_rng_below(&r, (uint32_t)i + 1);
        int32_t t = pi[i];
        pi[i] = pi[j];
        pi[j] = t;
    }
}

/* Arguments already checked except the tokens. pi is used only by perm (then L == 32). */
static mg_status target_impl(posenc_task task, int L, const int32_t *x, int32_t *y,
                             const int32_t *pi) {
    for (int i = 0; i < L; i++) {
        if ((uint32_t)x[i] >= POSENC_V)
            return mg_set_error(MG_ERR_INVALID,
                                "posenc_target: token x[%d] = %d out of range 0..%d", i, (int)x[i],
                                POSENC_V - 1);
    }
    switch (task) {
    case POSENC_REV:
        for (int i = 0; i < L; i++) y[i] = x[L - 1 - i];
        break;
    case POSENC_SORT: {
        /* Counting sort: on integer keys its output is exactly the stable ascending sort. */
        int count[POSENC_V] = {0};
        for (int i = 0; i < L; i++) count[x[i]]++;
        for (int v = 0, i = 0; v < POSENC_V; v++)
            for (int c = 0; c < count[v]; c++) y[i++] = v;
        break;
    }
    case POSENC_LMAX:
        for (int i = 0; i < L; i++) {
            int32_t m = x[i];
            if (i > 0 && x[i - 1] > m) m = x[i - 1];
            if (i < L - 1 && x[i + 1] > m) m = x[i + 1];
            y[i] = m;
        }
        break;
    case POSENC_PERM:
        for (int i = 0; i < L; i++) y[i] = x[pi[i]];
        break;
    default:
        break; /* unreachable: the callers check the task */
    }
    return MG_OK;
}

static mg_status check_length(const char *fn, posenc_task task, int L) {
    if (L < 1 || L > POSENC_MAX_LENGTH)
        return mg_set_error(MG_ERR_INVALID, "%s: sequence length %d out of range 1..%d", fn, L,
                            POSENC_MAX_LENGTH);
    if (task == POSENC_PERM && L != POSENC_L)
        return mg_set_error(MG_ERR_INVALID,
                            "%s: task perm is defined only for L = %d (got L = %d): its fixed "
                            "permutation has no extension to other lengths",
                            fn, POSENC_L, L);
    return MG_OK;
}

mg_status posenc_target(posenc_task task, int L, const int32_t *x, int32_t *y) {
    mg_status st = check_task("posenc_target", task);
    if (st == MG_OK) st = check_length("posenc_target", task, L);
    if (st != MG_OK) return st;
    int32_t pi[POSENC_L];
    if (task == POSENC_PERM) posenc_perm(pi);
    return target_impl(task, L, x, y, pi);
}

/* ---- datasets ---- */

uint64_t posenc_data_seed(posenc_task task, posenc_split split) {
    return 0x5EED0000ULL + 16u * (uint64_t)task + (uint64_t)split;
}

uint64_t posenc_length_seed(posenc_task task, int L) {
    return 0x1E6A0000ULL + 4096u * (uint64_t)task + (uint64_t)L;
}

/* Draws n sequences of length L from `seed` (sequence-major, then position) and their targets. */
static mg_status make_set(posenc_data *d, const char *fn, posenc_task task, posenc_split split,
                          int L, int n, uint64_t seed) {
    if ((int64_t)n * L > INT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "%s: %d sequences of length %d exceed %d positions", fn,
                            n, L, INT32_MAX);
    size_t count = (size_t)n * (size_t)L;
    int32_t *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return mg_set_error(MG_ERR_NOMEM, "%s: cannot allocate %d x %d tokens", fn, n, L);
    }
    int32_t pi[POSENC_L];
    if (task == POSENC_PERM) posenc_perm(pi);
    mg_rng r = mg_rng_make(seed);
    for (size_t k = 0; k < count; k++) x[k] = (int32_t)mg_rng_below(&r, POSENC_V);
    for (int s = 0; s < n; s++) {
        mg_status st = target_impl(task, L, x + (size_t)s * L, y + (size_t)s * L, pi);
        if (st != MG_OK) { /* cannot happen: generated tokens are in range */
            free(x);
            free(y);
            return st;
        }
    }
    *d = (posenc_data){.task = task, .split = split, .n = n, .L = L, .V = POSENC_V, .x = x, .y = y};
    return MG_OK;
}

mg_status posenc_data_make(posenc_data *d, posenc_task task, posenc_split split, int n) {
    *d = (posenc_data){0};
    mg_status st = check_task("posenc_data_make", task);
    if (st != MG_OK) return st;
    if ((unsigned)split >= N_SPEC_SPLITS)
        return mg_set_error(
            MG_ERR_INVALID,
            "posenc_data_make: split id %d is not a spec split (valid: 0 train, 1 val)",
            (int)split);
    if (n <= 0) n = split == POSENC_TRAIN ? POSENC_N_TRAIN : POSENC_N_VAL;
    return make_set(d, "posenc_data_make", task, split, POSENC_L, n, posenc_data_seed(task, split));
}

mg_status posenc_data_make_length(posenc_data *d, posenc_task task, int L, int n) {
    *d = (posenc_data){0};
    mg_status st = check_task("posenc_data_make_length", task);
    if (st == MG_OK) st = check_length("posenc_data_make_length", task, L);
    if (st != MG_OK) return st;
    if (n <= 0) n = POSENC_N_LENGTH;
    return make_set(d, "posenc_data_make_length", task, POSENC_LENGTH, L, n,
                    posenc_length_seed(task, L));
}

void posenc_data_free(posenc_data *d) {
    if (!d) return;
    free(d->x);
    free(d->y);
    *d = (posenc_data){0};
}

/* ---- minibatches ---- */

uint64_t posenc_batch_seed(uint32_t k) {
    return 0xBA7C0000ULL + k;
}

static mg_status check_batch_args(const char *fn, int n_train, int batch) {
    if (n_train < 1)
        return mg_set_error(MG_ERR_INVALID, "%s: n_train = %d, need at least 1 sequence", fn,
                            n_train);
    if (batch < 1)
        return mg_set_error(MG_ERR_INVALID, "%s: batch = %d, need at least 1", fn, batch);
    return MG_OK;
}

mg_status posenc_batch_stream_init(posenc_batch_stream *s, uint32_t k, int n_train, int batch) {
    mg_status st = check_batch_args("posenc_batch_stream_init", n_train, batch);
    if (st != MG_OK) return st;
    *s = (posenc_batch_stream){
        .rng = mg_rng_make(posenc_batch_seed(k)), .n_train = (uint32_t)n_train, .batch = batch};
    return MG_OK;
}

void posenc_batch_next(posenc_batch_stream *s, int32_t *idx) {
    for (int b = 0; b < s->batch; b++) idx[b] = (int32_t)mg_rng_below(&s->rng, s->n_train);
    s->step++;
}

mg_status posenc_batch_indices(uint32_t k, int n_train, int batch, int steps, int32_t *idx) {
    if (steps < 0)
        return mg_set_error(MG_ERR_INVALID, "posenc_batch_indices: steps = %d is negative", steps);
    posenc_batch_stream s;
    mg_status st = posenc_batch_stream_init(&s, k, n_train, batch);
    if (st != MG_OK) return mg_wrap_error(st, "posenc_batch_indices");
    for (int t = 0; t < steps; t++) posenc_batch_next(&s, idx + (size_t)t * batch);
    return MG_OK;
}

mg_status posenc_batch_gather(const posenc_data *d, const int32_t *idx, int batch, int32_t *xb,
                              int32_t *yb) {
    for (int b = 0; b < batch; b++) {
        if (idx[b] < 0 || idx[b] >= d->n)
            return mg_set_error(
                MG_ERR_INVALID,
                "posenc_batch_gather: index %d in slot %d out of range 0..%d (%s/%s)", (int)idx[b],
                b, d->n - 1, posenc_task_name(d->task), posenc_split_name(d->split));
    }
    size_t row = (size_t)d->L * sizeof *xb;
    for (int b = 0; b < batch; b++) {
        memcpy(xb + (size_t)b * d->L, d->x + (size_t)idx[b] * d->L, row);
        memcpy(yb + (size_t)b * d->L, d->y + (size_t)idx[b] * d->L, row);
    }
    return MG_OK;
}

/* ---- reference levels ---- */

/* The reference levels index count tables by token, so a hand-built set is checked in full. */
static mg_status check_set(const char *fn, const posenc_data *d) {
    if (!d || !d->x || !d->y || d->n < 1 || d->L < 1)
        return mg_set_error(MG_ERR_INVALID,
                            "%s: empty data set (make it with posenc_data_make first)", fn);
    size_t count = (size_t)d->n * (size_t)d->L;
    for (size_t k = 0; k < count; k++) {
        if ((uint32_t)d->x[k] >= POSENC_V || (uint32_t)d->y[k] >= POSENC_V)
            return mg_set_error(
                MG_ERR_INVALID,
                "%s: sequence %zu position %zu: x = %d, y = %d, tokens must be 0..%d", fn,
                k / (size_t)d->L, k % (size_t)d->L, (int)d->x[k], (int)d->y[k], POSENC_V - 1);
    }
    return MG_OK;
}

static int argmax_first(const int *count, int n) {
    int best = 0;
    for (int v = 1; v < n; v++)
        if (count[v] > count[best]) best = v;
    return best;
}

mg_status posenc_ref_mode(const posenc_data *d, double *acc) {
    mg_status st = check_set("posenc_ref_mode", d);
    if (st != MG_OK) return st;
    int64_t hit = 0;
    for (int s = 0; s < d->n; s++) {
        const int32_t *x = d->x + (size_t)s * d->L, *y = d->y + (size_t)s * d->L;
        int count[POSENC_V] = {0};
        for (int i = 0; i < d->L; i++) count[x[i]]++;
        int mode = argmax_first(count, POSENC_V);
        for (int i = 0; i < d->L; i++) hit += y[i] == mode;
    }
    *acc = (double)hit / ((double)d->n * d->L);
    return MG_OK;
}

mg_status posenc_ref_copy(const posenc_data *d, double *acc) {
    mg_status st = check_set("posenc_ref_copy", d);
    if (st != MG_OK) return st;
    int64_t hit = 0, count = (int64_t)d->n * d->L;
    for (int64_t k = 0; k < count; k++) hit += d->x[k] == d->y[k];
    *acc = (double)hit / (double)count;
    return MG_OK;
}

mg_status posenc_ref_position_majority(const posenc_data *fit, const posenc_data *d, double *acc) {
    mg_status st = check_set("posenc_ref_position_majority", fit);
    if (st == MG_OK) st = check_set("posenc_ref_position_majority", d);
    if (st != MG_OK) return st;
    if (fit->L != d->L)
        return mg_set_error(MG_ERR_INVALID,
                            "posenc_ref_position_majority: fit set has L = %d, scored set L = %d",
                            fit->L, d->L);
    int64_t hit = 0;
    for (int i = 0; i < d->L; i++) {
        int count[POSENC_V] = {0};
        for (int s = 0; s < fit->n; s++) count[fit->y[(size_t)s * fit->L + i]]++;
        int major = argmax_first(count, POSENC_V);
        for (int s = 0; s < d->n; s++) hit += d->y[(size_t)s * d->L + i] == major;
    }
    *acc = (double)hit / ((double)d->n * d->L);
    return MG_OK;
}

mg_status posenc_ref_reflection_cap(const posenc_data *d, double *acc) {
    mg_status st = check_set("posenc_ref_reflection_cap", d);
    if (st != MG_OK) return st;
    int64_t same = 0;
    for (int s = 0; s < d->n; s++) {
        const int32_t *y = d->y + (size_t)s * d->L;
        for (int i = 0; i < d->L; i++) same += y[i] == y[d->L - 1 - i];
    }
    *acc = 0.5 * (1.0 + (double)same / ((double)d->n * d->L));
    return MG_OK;
}
