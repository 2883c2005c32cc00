/* workspace.h: private to core/kernels. A per-thread scratch buffer for the packing drivers.
 *
 * Grown on demand and kept for the thread's lifetime, so steady-state training makes no allocation
 * here. OpenMP reuses its worker threads; when it retires one (the team shrinks), the key's
 * destructor frees that thread's buffer. The state is static: each file that includes this header
 * has a buffer of its own, so one driver never frees the buffer another is using. */
#ifndef MG_KERNELS_WORKSPACE_H
#define MG_KERNELS_WORKSPACE_H

#include "minigrad/base.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

static _Thread_local void *ws_buf;
static _Thread_local size_t ws_bytes;
static pthread_key_t ws_key;
static pthread_once_t ws_key_once = PTHREAD_ONCE_INIT;
static bool ws_key_ok;

static inline void ws_key_make(void) {
    ws_key_ok = pthread_key_create(&ws_key, mg_aligned_free) == 0;
}

/* At least `bytes` of aligned scratch for this thread (its contents are not kept across a growth);
 * NULL when out of memory. */
static inline void *thread_workspace(size_t bytes) {
    if (bytes > ws_bytes) {
        pthread_once(&ws_key_once, ws_key_make);
        mg_aligned_free(ws_buf);
        ws_buf = mg_aligned_alloc(bytes);
        ws_bytes = ws_buf ? bytes : 0;
        if (ws_key_ok) pthread_setspecific(ws_key, ws_buf);
    }
    return ws_buf;
}

#endif
