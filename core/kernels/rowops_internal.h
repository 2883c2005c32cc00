/* rowops_internal.h: the contract between the row-kernel drivers (rowops.c) and their per-ISA
 * kernels (rowops_tmpl.h, compiled once per path as rowops_ISA.c).
 *
 * A kernel handles whole rows (or an element range) with the same vector code for the tail
 * (masked), so an element's result does not depend on where a thread's range starts: that and sums
 * in an order fixed by the row length are what make results thread-count invariant. */
#ifndef MG_KERNELS_ROWOPS_INTERNAL_H
#define MG_KERNELS_ROWOPS_INTERNAL_H

#include "minigrad/rowops.h"

#include <stdbool.h>
#include <stdint.h>

#define RO_GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define RO_GELU_C 0.044715f

typedef struct mgk_rowops_impl {
    /* rows [r0, r1) */
    void (*ln_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                   const float *b, float eps, float *y, float *mean, float *rstd);
    /* rows [r0, r1): dx += ..., and when pw is given pw += dy * xhat, pb += dy */
    void (*ln_bwd)(int64_t r0, int64_t r1, int64_t C, const float *x, const float *w,
                   const float *mean, const float *rstd, const float *dy, float *dx, float *pw,
                   float *pb);
    void (*gelu_fwd)(int kind, int64_t n, const float *x, float *y);
    /* dx += dy * gelu'(x); with fresh, dx holds nothing yet: dx = 0 + dy * gelu'(x) */
    void (*gelu_bwd)(int kind, int64_t n, const float *x, const float *dy, float *dx, bool fresh);
    void (*add2)(int64_t n, const float *a, const float *b, float *c);
    /* y = x + (h + b); b NULL: x + h */
    void (*add3)(int64_t n, const float *x, const float *h, const float *b, float *y);
    void (*acc)(int64_t n, float *dst, const float *src);
    /* dst = 0 + src: acc's bits on a zeroed dst, without reading dst */
    void (*acc_fresh)(int64_t n, float *dst, const float *src);
    /* acc, and src rounded to bf16 into b (as mg_f32_to_bf16) */
    void (*acc_bf16)(int64_t n, float *dst, const float *src, mg_bf16 *b);
    /* dst = src rounded to bf16 (mg_f32_to_bf16's bits, on this path's vectors) */
    void (*to_bf16)(int64_t n, const float *src, mg_bf16 *dst);
    void (*softmax_fwd)(int64_t r0, int64_t r1, int64_t C, const float *x, float *y);
    void (*softmax_bwd)(int64_t r0, int64_t r1, int64_t C, const float *y, const float *dy,
                        float *dx);
    void (*xent_fwd)(int64_t r0, int64_t r1, int64_t V, const float *x, const int32_t *t,
                     int32_t ignore, float *mx, float *ls, double *loss);
    void (*xent_bwd)(int64_t r0, int64_t r1, int64_t V, const float *x, const int32_t *t,
                     int32_t ignore, const float *mx, const float *ls, float g, float *dx);
    void (*adamw)(int64_t n, float *w, const float *g, float *m, float *v, const mg_adamw_hyper *h);
    void (*sgd)(int64_t n, float *w, const float *g, float *buf, float lr, float mu, float wd,
                bool first);
} mgk_rowops_impl;

#endif
