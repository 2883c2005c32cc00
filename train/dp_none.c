/* Data parallelism without MPI (dp.h): one rank; nothing is ever sent. */
#include "dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Started by mpirun/mpiexec with several processes, this build (no MPI) would train once per
 * process, all writing the same files: refused. */
mg_status dp_init(int *rank, int *nranks) {
    *rank = 0, *nranks = 1;
    const char *keys[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = getenv(keys[i]);
        if (v && atoi(v) > 1)
            return mg_set_error(MG_ERR_INVALID, "train: started by mpirun as one of %d processes, but this minigrad "
                                "was built without MPI (-Dmpi; Debian libopenmpi-dev): each process would train "
                                "alone on the same files. Run it without mpirun, or rebuild with MPI", atoi(v));
    }
    return MG_OK;
}
bool dp_threads_ok(void) { return true; }
const char *dp_library(void) { return "none"; }
double dp_take_wait(double *main) {
    if (main) *main = 0;
    return 0;
}
mg_status dp_bucket(const dp_layout *L, int b, float *x, bool zero1) {
    (void)L, (void)b, (void)x, (void)zero1;
    return MG_OK;
}
mg_status dp_allgather_f64(const double *in, double *out, int n) {
    memcpy(out, in, (size_t)n * sizeof *in);
    return MG_OK;
}
mg_status dp_max_i64(int64_t *x, int n) {
    (void)x, (void)n;
    return MG_OK;
}
mg_status dp_bcast(void *buf, int64_t bytes, int root) {
    (void)buf, (void)bytes, (void)root;
    return MG_OK;
}
mg_status dp_gather(const dp_layout *L, const float *mine, float *full, int root) {
    (void)L, (void)mine, (void)full, (void)root;
    return MG_OK;
}
mg_status dp_sum(const dp_layout *L, float *x) {
    (void)L, (void)x;
    return MG_OK;
}
mg_status dp_reduce_scatter(const dp_layout *L, float *x) {
    (void)L, (void)x;
    return MG_OK;
}
mg_status dp_allgather(const dp_layout *L, float *x) {
    (void)L, (void)x;
    return MG_OK;
}
void dp_abort(const char *msg) {
    fprintf(stderr, "%s\n", msg);
    exit(1);
}
