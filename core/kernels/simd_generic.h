/* simd_generic.h: the SIMD vocabulary (simd.h lists it) in portable C, for CPUs without the x86
 * paths and as the baseline they are tested against. Units that include it are compiled with
 * -march=x86-64 -mtune=generic on x86 (meson.build), so forcing this path runs what an old CPU
 * would even in a -march=native build, and it holds no AVX instruction at all.
 *
 * Two widths, chosen by the unit before it includes this header:
 *   MGK_GENERIC_W 4 (the default): four floats in a GCC/Clang vector-extension type, which gives
 *     some SIMD on any target (SSE2 on x86-64, NEON on arm64) with no intrinsics;
 *   MGK_GENERIC_W 1: plain float, the scalar loops the portable row kernels are written as.
 * a * b + c stays two roundings (v_fma): -std=c11 keeps GCC from contracting it, and this path
 * must not depend on an FMA unit. Lanes without a C operator are written as loops over the lanes,
 * each lane the scalar expression, so an elementwise result does not depend on the width (a sum's
 * order does: it follows the lanes).
 *
 * To add an operation: define it here for both widths, in simd_avx512.h and in simd_avx2.h with the
 * same name, and list it in simd.h. To add a kernel family or an ISA: see simd.h. */
#ifndef MG_KERNELS_SIMD_GENERIC_H
#define MG_KERNELS_SIMD_GENERIC_H

#include "bf16_round.h"
#include "simd.h"

#include <math.h>
#include <string.h>

#define MGK_ISA_NAME generic
#define MGK_ISA_ID MG_ISA_GENERIC
#define MGK_HAVE_ISA 1
#define MGK_HAVE_SCALEF 0

#ifndef MGK_GENERIC_W
#define MGK_GENERIC_W 4
#endif
#if MGK_GENERIC_W == 1
typedef float mgk_v;
#define MGK_W 1
#define v_lane_(x, i) (x)
#elif MGK_GENERIC_W == 4
typedef float mgk_v __attribute__((vector_size(16)));
#define MGK_W 4
#define v_lane_(x, i) ((x)[i])
#else
#error "MGK_GENERIC_W must be 1 or 4"
#endif

static inline mgk_v v_set1(float f) {
#if MGK_W == 1
    return f;
#else
    return (mgk_v){f, f, f, f};
#endif
}
static inline mgk_v v_zero(void) {
    return v_set1(0.0f);
}
static inline mgk_v v_load(const float *p) {
    mgk_v x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline void v_store(float *p, mgk_v x) {
    memcpy(p, &x, sizeof x);
}
static inline mgk_v v_load_n_fill(const float *p, int64_t n, float f) {
    mgk_v x = v_set1(f);
    memcpy(&x, p, (size_t)n * sizeof(float));
    return x;
}
static inline mgk_v v_load_n(const float *p, int64_t n) {
    return v_load_n_fill(p, n, 0.0f);
}
static inline void v_store_n(float *p, mgk_v x, int64_t n) {
    memcpy(p, &x, (size_t)n * sizeof(float));
}
static inline mgk_v v_keep_n(mgk_v x, int64_t n) {
    for (int64_t i = n; i < MGK_W; i++) v_lane_(x, i) = 0.0f;
    return x;
}
static inline mgk_v v_add(mgk_v a, mgk_v b) {
    return a + b;
}
static inline mgk_v v_sub(mgk_v a, mgk_v b) {
    return a - b;
}
static inline mgk_v v_mul(mgk_v a, mgk_v b) {
    return a * b;
}
static inline mgk_v v_div(mgk_v a, mgk_v b) {
    return a / b;
}
static inline mgk_v v_sqrt(mgk_v a) {
    for (int i = 0; i < MGK_W; i++) v_lane_(a, i) = sqrtf(v_lane_(a, i));
    return a;
}
static inline mgk_v v_abs(mgk_v a) {
    for (int i = 0; i < MGK_W; i++) v_lane_(a, i) = fabsf(v_lane_(a, i));
    return a;
}
static inline mgk_v v_fma(mgk_v a, mgk_v b, mgk_v c) {
    return a * b + c;
}
static inline mgk_v v_fnma(mgk_v a, mgk_v b, mgk_v c) {
    return c - a * b;
}
static inline mgk_v v_max(mgk_v a, mgk_v b) {
    for (int i = 0; i < MGK_W; i++)
        v_lane_(a, i) = v_lane_(a, i) > v_lane_(b, i) ? v_lane_(a, i) : v_lane_(b, i);
    return a;
}
static inline mgk_v v_min(mgk_v a, mgk_v b) {
    for (int i = 0; i < MGK_W; i++)
        v_lane_(a, i) = v_lane_(a, i) < v_lane_(b, i) ? v_lane_(a, i) : v_lane_(b, i);
    return a;
}
static inline mgk_v v_gt_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    for (int i = 0; i < MGK_W; i++)
        v_lane_(a, i) = v_lane_(x, i) > v_lane_(t, i) ? v_lane_(a, i) : v_lane_(b, i);
    return a;
}
static inline mgk_v v_eq_sel(mgk_v x, mgk_v t, mgk_v a, mgk_v b) {
    for (int i = 0; i < MGK_W; i++)
        v_lane_(a, i) = v_lane_(x, i) == v_lane_(t, i) ? v_lane_(a, i) : v_lane_(b, i);
    return a;
}
/* (0 + 1) + (2 + 3) */
static inline float v_hsum(mgk_v x) {
#if MGK_W == 1
    return x;
#else
    return (x[0] + x[1]) + (x[2] + x[3]);
#endif
}
static inline float v_hmax(mgk_v x) {
#if MGK_W == 1
    return x;
#else
    const float a = x[0] > x[1] ? x[0] : x[1], b = x[2] > x[3] ? x[2] : x[3];
    return a > b ? a : b;
#endif
}
/* Adding and removing 1.5 * 2^23 rounds to an integer in the current (nearest) mode. */
static inline mgk_v v_round(mgk_v x) {
    return (x + v_set1(12582912.0f)) - v_set1(12582912.0f);
}
static inline mgk_v v_pow2(mgk_v n) {
    for (int i = 0; i < MGK_W; i++) {
        const float f = v_lane_(n, i);
        const int32_t bits = (int32_t)((uint32_t)((f == f ? (int32_t)f : 0) + 127) << 23);
        float p;
        memcpy(&p, &bits, sizeof p);
        v_lane_(n, i) = p;
    }
    return n;
}
/* The first n (<= MGK_W) lanes of x rounded to bf16 as mg_f32_to_bf16 rounds (to nearest, ties to
 * even; a NaN stays a NaN, made quiet), stored at p. */
static inline void v_store_bf16_n(mg_bf16 *p, mgk_v x, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = mgk_round_bf16(v_lane_(x, i));
}

static inline void v_transpose(mgk_v r[MGK_W]) {
#if MGK_W > 1
    mgk_v t[4];
    for (int i = 0; i < 4; i++) t[i] = (mgk_v){r[0][i], r[1][i], r[2][i], r[3][i]};
    for (int i = 0; i < 4; i++) r[i] = t[i];
#else
    (void)r;
#endif
}

#endif
