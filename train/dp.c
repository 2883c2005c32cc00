/* Data parallelism with MPI (dp.h). */
#include "dp.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = 0, g_size = 1;
static bool g_ready, g_started_here, g_threads = true;
static double g_wait, g_busy; /* seconds in collectives: the caller's, dp_bucket's */
static float *g_recv; /* all-to-all receive buffer: nranks slices of the largest bucket */
static size_t g_recv_cap;
static int *g_counts; /* 4 x nranks: send counts and offsets, receive counts and offsets */

/* The rank the launcher gave this process, from its environment; -1 when not launched by one.
 * Open MPI's mpirun sets OMPI_COMM_WORLD_*, MPICH's hydra and Slurm PMI_*, PMIx launchers PMIX_RANK. */
static int launched_rank(void) {
    const char *keys[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = getenv(keys[i]);
        if (v && *v) return atoi(v);
    }
    return -1;
}

/* Ranks other than 0 of a launched job print nothing on stdout (the progress line and the
 * programs' reports are rank 0's); their errors still reach stderr. MINIGRAD_MPI_STDOUT=all in the
 * environment keeps every rank's stdout. Runs when the library is loaded, before main. */
__attribute__((constructor)) static void quiet_other_ranks(void) {
    const char *keep = getenv("MINIGRAD_MPI_STDOUT");
    if (launched_rank() > 0 && !(keep && strcmp(keep, "all") == 0)) {
        fflush(stdout);
        if (!freopen("/dev/null", "w", stdout)) return;
    }
}

static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    free(g_recv);
    free(g_counts);
    g_recv = NULL, g_counts = NULL;
}

mg_status dp_init(int *rank, int *nranks) {
    if (!g_ready) {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited && launched_rank() >= 0) {
            int provided;
            if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
                return mg_set_error(MG_ERR_IO, "train: MPI_Init_thread failed");
            inited = 1;
            g_started_here = true;
            g_threads = provided >= MPI_THREAD_SERIALIZED;
            atexit(finalize_at_exit);
        }
        if (inited && !g_started_here) {
            int level = MPI_THREAD_SINGLE;
            MPI_Query_thread(&level);
            g_threads = level >= MPI_THREAD_SERIALIZED;
        }
        if (inited) {
            MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
            MPI_Comm_size(MPI_COMM_WORLD, &g_size);
        }
        if (!(g_counts = malloc(4 * (size_t)g_size * sizeof *g_counts)))
            return mg_set_error(MG_ERR_NOMEM, "train: out of memory");
        g_ready = true;
    }
    *rank = g_rank, *nranks = g_size;
    return MG_OK;
}

bool dp_threads_ok(void) { return g_threads; }

const char *dp_library(void) {
    static char name[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!name[0]) {
        MPI_Get_library_version(name, &len);
        name[strcspn(name, ",\n")] = 0;
    }
    return name;
}

double dp_take_wait(double *main) {
    double b = g_busy;
    if (main) *main = g_wait;
    g_wait = g_busy = 0;
    return b;
}

mg_status dp_allgather_f64(const double *in, double *out, int n) {
    if (g_size == 1) {
        memcpy(out, in, (size_t)n * sizeof *in);
        return MG_OK;
    }
    double t = MPI_Wtime();
    MPI_Allgather(in, n, MPI_DOUBLE, out, n, MPI_DOUBLE, MPI_COMM_WORLD);
    g_wait += MPI_Wtime() - t;
    return MG_OK;
}

mg_status dp_max_i64(int64_t *x, int n) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    g_wait += MPI_Wtime() - t;
    return MG_OK;
}

mg_status dp_bcast(void *buf, int64_t bytes, int root) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    for (int64_t off = 0; off < bytes; off += 1 << 30) {
        int64_t k = bytes - off < (1 << 30) ? bytes - off : (1 << 30);
        MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
    }
    g_wait += MPI_Wtime() - t;
    return MG_OK;
}

/* One bucket: this rank's slice of every rank's x, summed in rank order into x. */
static mg_status bucket_reduce_scatter(const dp_layout *L, int b, float *x) {
    int n = L->nranks;
    int *counts = g_counts, *displs = counts + n, *rcounts = displs + n, *rdispls = rcounts + n;
    int64_t b0 = (int64_t)b * L->bucket, lo, hi, mlo, mhi;
    dp_slice(L, b, g_rank, &mlo, &mhi);
    int mine = (int)(mhi - mlo);
    for (int r = 0; r < n; r++) {
        dp_slice(L, b, r, &lo, &hi);
        counts[r] = (int)(hi - lo), displs[r] = (int)(lo - b0);
        rcounts[r] = mine, rdispls[r] = r * mine;
    }
    size_t need = (size_t)n * (size_t)(mine > 0 ? mine : 1);
    if (need > g_recv_cap) {
        float *p = realloc(g_recv, need * sizeof *p);
        if (!p) return mg_set_error(MG_ERR_NOMEM, "train: out of memory for a gradient bucket (%zu floats)", need);
        g_recv = p, g_recv_cap = need;
    }
    MPI_Alltoallv(x + b0, counts, displs, MPI_FLOAT, g_recv, rcounts, rdispls, MPI_FLOAT, MPI_COMM_WORLD);
    float *out = x + mlo;
    for (int i = 0; i < mine; i++) {
        float s = g_recv[i];
        for (int r = 1; r < n; r++) s += g_recv[(size_t)r * mine + i];
        out[i] = s;
    }
    return MG_OK;
}

static void bucket_allgather(const dp_layout *L, int b, float *x) {
    int n = L->nranks;
    int *counts = g_counts, *displs = counts + n;
    int64_t b0 = (int64_t)b * L->bucket, lo, hi;
    for (int r = 0; r < n; r++) {
        dp_slice(L, b, r, &lo, &hi);
        counts[r] = (int)(hi - lo), displs[r] = (int)(lo - b0);
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x + b0, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
}

mg_status dp_reduce_scatter(const dp_layout *L, float *x) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    mg_status st = MG_OK;
    for (int b = 0; b < L->nbuckets && st == MG_OK; b++) st = bucket_reduce_scatter(L, b, x);
    g_wait += MPI_Wtime() - t;
    return st;
}

mg_status dp_allgather(const dp_layout *L, float *x) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    for (int b = 0; b < L->nbuckets; b++) bucket_allgather(L, b, x);
    g_wait += MPI_Wtime() - t;
    return MG_OK;
}

mg_status dp_gather(const dp_layout *L, const float *mine, float *full, int root) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    int n = L->nranks, *counts = g_counts, *displs = counts + n;
    int64_t st = 0;
    for (int b = 0; b < L->nbuckets; b++) {
        int64_t b0 = (int64_t)b * L->bucket, lo, hi;
        for (int r = 0; r < n; r++) {
            dp_slice(L, b, r, &lo, &hi);
            counts[r] = (int)(hi - lo), displs[r] = (int)(lo - b0);
        }
        MPI_Gatherv(mine + st, counts[g_rank], MPI_FLOAT, g_rank == root ? full + b0 : NULL, counts, displs,
                    MPI_FLOAT, root, MPI_COMM_WORLD);
        st += counts[g_rank];
    }
    g_wait += MPI_Wtime() - t;
    return MG_OK;
}

mg_status dp_sum(const dp_layout *L, float *x) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    mg_status st = MG_OK;
    /* bucket by bucket: the allgather of one follows its reduce-scatter */
    for (int b = 0; b < L->nbuckets && st == MG_OK; b++)
        if ((st = bucket_reduce_scatter(L, b, x)) == MG_OK) bucket_allgather(L, b, x);
    g_wait += MPI_Wtime() - t;
    return st;
}

mg_status dp_bucket(const dp_layout *L, int b, float *x, bool zero1) {
    if (g_size == 1) return MG_OK;
    double t = MPI_Wtime();
    mg_status st = bucket_reduce_scatter(L, b, x);
    if (st == MG_OK && !zero1) bucket_allgather(L, b, x);
    g_busy += MPI_Wtime() - t;
    return st;
}

void dp_abort(const char *msg) {
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
