/* minigrad/base.h: status codes, the recoverable error channel, logging, threads.
 *
 * Two tiers of errors (docs/style.md):
 *  - Bad input from outside (files, configs, plugins, data) is recoverable: the function returns an
 *    mg_status < 0 and mg_last_error() holds a message naming the file, offset, key or value.
 *  - Programming errors in model code (shape mismatch, missing backward) are reported on the
 *    mg_ctx (see ctx.h): the default handler prints and aborts.
 * The library never calls exit().
 */
#ifndef MINIGRAD_BASE_H
#define MINIGRAD_BASE_H

#include "minigrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MG_MAX_DIMS 4

typedef enum mg_status {
    MG_OK = 0,
    MG_ERR_IO = -1,          /* cannot open, read or write a file */
    MG_ERR_FORMAT = -2,      /* the file is there but its content is wrong (corrupt, truncated) */
    MG_ERR_NOMEM = -3,       /* an allocation failed */
    MG_ERR_INVALID = -4,     /* a bad argument, config key or value */
    MG_ERR_NOT_FOUND = -5,   /* unknown layer, plugin, tensor, key */
    MG_ERR_ABI = -6,         /* plugin built for another ABI */
    MG_ERR_NONFINITE = -7,   /* a loss or gradient is NaN or infinite */
    MG_ERR_INTERRUPTED = -8, /* stopped by a signal (Ctrl-C) */
} mg_status;

/* The message of the last recoverable error on this thread ("" when none). The string stays valid
 * until the next call that sets an error on the same thread. */
MG_API const char *mg_last_error(void);

/* Sets the thread's last error (printf-style) and returns `code`, so callers can write
 * `return mg_set_error(MG_ERR_FORMAT, "%s: offset %zu: ...", path, off);`. */
MG_API mg_status mg_set_error(mg_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with more context: "<prefix>: <old message>". Returns `code`. */
MG_API mg_status mg_wrap_error(mg_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

MG_API void mg_clear_error(void);
MG_API const char *mg_status_str(mg_status s);

/* ---- logging: stderr by default; a program can redirect it ---- */
typedef enum { MG_LOG_DEBUG, MG_LOG_INFO, MG_LOG_WARN, MG_LOG_ERROR } mg_log_level;
typedef void (*mg_log_fn)(mg_log_level level, const char *msg, void *user);
MG_API void mg_log_set(mg_log_fn fn, void *user); /* NULL restores the default */
MG_API void mg_log(mg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- threads ---- */
/* Number of threads kernels use (OpenMP). n <= 0 means "all available". Results are bit-identical
 * whatever the count. Returns the count now in effect (1 when built without OpenMP). */
MG_API int mg_set_num_threads(int n);
MG_API int mg_get_num_threads(void);
MG_API bool mg_have_openmp(void);

/* ---- aligned memory (64-byte) for slabs and buffers the library owns ---- */
MG_API void *mg_aligned_alloc(size_t bytes); /* NULL on failure; contents undefined */
MG_API void mg_aligned_free(void *p);

/* Wall clock in seconds (monotonic). */
MG_API double mg_time(void);

/* FNV-1a (64-bit) of a string: the hash behind the library's tables of names (parameters, config
 * keys, child layers). */
static inline uint64_t mg_str_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    return h;
}

#ifdef __cplusplus
}
#endif
#endif
