/* Status messages, logging, threads, aligned memory. */
#include "minigrad/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Thread-local so that two threads loading two files cannot garble each other's message. */
static _Thread_local char last_error[1024];

const char *mg_last_error(void) { return last_error; }
void mg_clear_error(void) { last_error[0] = 0; }

mg_status mg_set_error(mg_status code, const char *fmt, ...) {
    /* Format into a temporary first: an argument may be mg_last_error() itself. */
    char buf[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(last_error, buf, sizeof buf);
    return code;
}

mg_status mg_wrap_error(mg_status code, const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* Explicit lengths: the joined message is cut at the buffer's end, never overflows it. */
    size_t lp = strlen(prefix), lo = strlen(old), cap = sizeof last_error - 1;
    if (lp > cap) lp = cap;
    memcpy(last_error, prefix, lp);
    size_t n = lp;
    if (n + 2 <= cap) memcpy(last_error + n, ": ", 2), n += 2;
    if (lo > cap - n) lo = cap - n;
    memcpy(last_error + n, old, lo);
    last_error[n + lo] = 0;
    return code;
}

const char *mg_status_str(mg_status s) {
    switch (s) {
    case MG_OK: return "ok";
    case MG_ERR_IO: return "I/O error";
    case MG_ERR_FORMAT: return "bad file format";
    case MG_ERR_NOMEM: return "out of memory";
    case MG_ERR_INVALID: return "invalid argument";
    case MG_ERR_NOT_FOUND: return "not found";
    case MG_ERR_ABI: return "ABI mismatch";
    case MG_ERR_NONFINITE: return "non-finite value";
    case MG_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

/* ---- logging ---- */
static void log_default(mg_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *tag[] = {"debug: ", "", "warning: ", "error: "};
    if (level == MG_LOG_DEBUG && !getenv("MINIGRAD_DEBUG")) return;
    fprintf(stderr, "%s%s\n", tag[level], msg);
}
static mg_log_fn log_fn = log_default;
static void *log_user;

void mg_log_set(mg_log_fn fn, void *user) {
    log_fn = fn ? fn : log_default;
    log_user = user;
}

void mg_log(mg_log_level level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(level, buf, log_user);
}

/* ---- threads ---- */
bool mg_have_openmp(void) {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
}

int mg_set_num_threads(int n) {
#ifdef _OPENMP
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    return n;
#else
    (void)n;
    return 1;
#endif
}

int mg_get_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ---- memory ---- */
void *mg_aligned_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (bytes > SIZE_MAX - 63) return NULL; /* rounding up would wrap around to a small size */
    if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63) != 0) return NULL;
    return p;
}

void mg_aligned_free(void *p) { free(p); }

double mg_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
