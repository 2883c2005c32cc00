/* Portable GEMM kernels: 4 x 8 micro-tile over 4-float vectors written with the GCC/Clang vector
 * extension, so any target gets some SIMD (SSE2 on baseline x86-64) and the code needs no
 * intrinsics. a*b + c stays two roundings: -std=c11 keeps GCC from contracting it, and the path
 * must not depend on an FMA unit being present. */
#include "gemm_internal.h"

#include <string.h>

typedef float mgk_v __attribute__((vector_size(16)));
#define MGK_VLEN 4
#define MGK_MR 4
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 256
#define MGK_NC 512
#define MGK_SMALL_M 2
#define MGK_ISA MG_ISA_GENERIC
#define MGK_GETTER mg_gemm_generic_impl

static inline mgk_v v_zero(void) {
    return (mgk_v){0.0f, 0.0f, 0.0f, 0.0f};
}
static inline mgk_v v_load(const float *p) {
    mgk_v x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline void v_store(float *p, mgk_v x) {
    memcpy(p, &x, sizeof x);
}
static inline mgk_v v_set1(float x) {
    return (mgk_v){x, x, x, x};
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return a * b + c;
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return a + b;
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return a * b;
}
static inline mgk_v v_load_n(const float *p, int n) {
    mgk_v x = v_zero();
    memcpy(&x, p, (size_t)n * sizeof(float));
    return x;
}
static inline void v_store_n(float *p, mgk_v x, int n) {
    memcpy(p, &x, (size_t)n * sizeof(float));
}
static inline float v_sum(mgk_v x) {
    return (x[0] + x[1]) + (x[2] + x[3]);
}
static inline void v_transpose(mgk_v r[4]) {
    mgk_v t[4];
    for (int i = 0; i < 4; i++) t[i] = (mgk_v){r[0][i], r[1][i], r[2][i], r[3][i]};
    for (int i = 0; i < 4; i++) r[i] = t[i];
}

#include "gemm_tmpl.h"
