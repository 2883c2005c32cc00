/* What the benchmark programs share: the median of a set of timings, a JSON number field, the
 * checked end of the JSON file and of standard output, and the register-only FMA loop whose rate
 * is "the machine's peak" for GFLOP/s fractions and model FLOPs utilisation. Header-only: each
 * benchmark is one program of its own. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include "minigrad/file.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The CPU as lscpu names it ("model name" in /proc/cpuinfo) and the units that decide which kernels
 * run, e.g. "AMD EPYC (avx512f, avx512_bf16, no amx)": every figure says which CPU it came from.
 * "unknown CPU" where /proc/cpuinfo cannot be read. Returns buf. */
static inline const char *bench_cpu(char *buf, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192], model[256] = "";
    bool avx512 = false, avx2 = false, bf16 = false, amx = false, have_flags = false;
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        v += v[1] == ' ' ? 2 : 1;
        if (!model[0] && !strncmp(line, "model name", 10)) {
            snprintf(model, sizeof model, "%s", v);
            model[strcspn(model, "\n")] = 0;
        } else if (!have_flags && !strncmp(line, "flags", 5)) {
            have_flags = true;
            char fl[sizeof line + 2]; /* " flag flag ... ": every flag between spaces */
            snprintf(fl, sizeof fl, " %.*s ", (int)strcspn(v, "\n"), v);
            avx512 = strstr(fl, " avx512f ") != NULL, avx2 = strstr(fl, " avx2 ") != NULL;
            bf16 = strstr(fl, " avx512_bf16 ") != NULL, amx = strstr(fl, " amx_tile ") && strstr(fl, " amx_bf16 ");
        }
        if (model[0] && have_flags) break;
    }
    if (f) fclose(f);
    if (!model[0]) {
        snprintf(buf, n, "unknown CPU");
        return buf;
    }
    if (!have_flags) snprintf(buf, n, "%s", model);
    else
        snprintf(buf, n, "%s (%s%s, %s)", model, avx512 ? "avx512f" : avx2 ? "avx2" : "no avx2",
                 bf16 ? ", avx512_bf16" : "", amx ? "amx_tile, amx_bf16" : "no amx");
    return buf;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_FMA_X86 1
#endif

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The benchmarks' parser for numeric flags: a whole number in lo..hi, or an error naming the flag
 * and its range (worded like the example programs' parser). */
static inline bool bench_int_flag(const char *prog, const char *flag, const char *v, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (end == v || *end || (errno && errno != ERANGE)) {
        fprintf(stderr, "%s: %s expects an integer in %ld..%ld, got '%s'\n", prog, flag, lo, hi, v);
        return false;
    }
    if (errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "%s: %s: %s is out of range %ld..%ld\n", prog, flag, v, lo, hi);
        return false;
    }
    *out = (int)x;
    return true;
}

/* Sorts v (so v[0] is then the smallest) and returns its median; NAN when n <= 0. */
static inline double bench_median(double *v, int n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* `,"key":value` for a JSON object being written, or `,"key":null` for a value not measured (not
 * finite). */
static inline void bench_json_num(FILE *f, const char *key, double v, const char *fmt) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* Closes the --json file (NULL: none), checking every write into it: false after a message on
 * stderr naming the file and the reason (a full disk). */
static inline bool bench_json_close(const char *prog, FILE *f, const char *path) {
    if (mg_file_close_checked(f, path) == MG_OK) return true;
    fprintf(stderr, "%s: %s\n", prog, mg_last_error());
    return false;
}

/* First thing in main: standard output keeps the reason of a failed write (minigrad/file.h). */
static inline void bench_stdout_begin(void) {
    if (mg_stdout_track_errors() != MG_OK) mg_clear_error(); /* the plain stdout is still checked */
}

/* The status for main to return: rc, or (when rc is 0) 1 after a message on stderr when anything
 * written to standard output (the tables) was lost. */
static inline int bench_exit_status(const char *prog, int rc) {
    if (mg_stdout_check() == MG_OK) return rc;
    fprintf(stderr, "%s: %s\n", prog, mg_last_error());
    return rc ? rc : 1;
}

/* ---- FMA peak: independent accumulator chains on registers only (no memory traffic), more of
 * them than FMA pipes x FMA latency on current cores, so the loop is throughput-bound ---- */

#define BENCH_FMA_CHAINS 20 /* and the two constants: within the 32 zmm registers */

#ifdef BENCH_FMA_X86
__attribute__((target("avx512f,fma"))) static double bench_fma_loop_avx512(long iters) {
    __m512 acc[BENCH_FMA_CHAINS];
    const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = _mm512_set1_ps(1.0f + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 20
        for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
    }
    for (int i = 1; i < BENCH_FMA_CHAINS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

/* 16 ymm registers: 12 chains plus the two constants. */
__attribute__((target("avx2,fma"))) static double bench_fma_loop_avx2(long iters) {
    __m256 acc[12];
    const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps(1.0f + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
    }
    for (int i = 1; i < 12; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[0]);
    double s = 0.0;
    for (int i = 0; i < 8; i++) s += lanes[i];
    return s;
}
#endif

static double bench_fma_loop_scalar(long iters) {
    float acc[BENCH_FMA_CHAINS];
    for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = 1.0f + (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = acc[i] * 0.9999999f + 1e-7f;
    double s = 0.0;
    for (int i = 0; i < BENCH_FMA_CHAINS; i++) s += acc[i];
    return s;
}

typedef struct bench_fma {
    const char *name;
    double flops_per_iter; /* 2 per lane per chain */
    double (*loop)(long iters);
} bench_fma;

/* The loop of the float32 SIMD path `isa` (an mg_isa value: 2 AVX-512, 1 AVX2, 0 portable), the
 * scalar one where this CPU or compiler lacks it. */
static inline bench_fma bench_fma_for_isa(int isa) {
#ifdef BENCH_FMA_X86
    __builtin_cpu_init();
    if (isa == 2 && __builtin_cpu_supports("avx512f"))
        return (bench_fma){"avx512 fma", 2.0 * 16 * BENCH_FMA_CHAINS, bench_fma_loop_avx512};
    if (isa >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (bench_fma){"avx2 fma", 2.0 * 8 * 12, bench_fma_loop_avx2};
#endif
    (void)isa;
    return (bench_fma){"scalar mul+add", 2.0 * BENCH_FMA_CHAINS, bench_fma_loop_scalar};
}

/* The widest loop this CPU runs. */
static inline bench_fma bench_fma_best(void) {
#ifdef BENCH_FMA_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return (bench_fma){"avx512 fma", 2.0 * 16 * BENCH_FMA_CHAINS, bench_fma_loop_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (bench_fma){"avx2 fma", 2.0 * 8 * 12, bench_fma_loop_avx2};
#endif
    return (bench_fma){"scalar mul+add", 2.0 * BENCH_FMA_CHAINS, bench_fma_loop_scalar};
}

/* ---- bf16 peak: the same register loop for the bf16 path in use (mg_bf16_path_active) ----
 * AVX512-BF16: 20 chains of VDPBF16PS (64 flops each: 16 lanes x 2 products x multiply-add).
 * AMX: four independent 16 x 16 C tiles each fed TDPBF16PS from two A and two B tiles
 * (16384 flops each), the tile configuration loaded by the loop on its own thread. The emulation
 * has no peak of its own: it reports the loop of the float32 path it runs on. */
#ifdef BENCH_FMA_X86
__attribute__((target("avx512f,avx512bf16"))) static double bench_bf16_loop_avx512(long iters) {
    __m512 acc[BENCH_FMA_CHAINS];
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = _mm512_set1_ps(1.0f + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 20
        for (int i = 0; i < BENCH_FMA_CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    for (int i = 1; i < BENCH_FMA_CHAINS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("amx-tile,amx-bf16"))) static double bench_bf16_loop_amx(long iters) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    static _Alignas(64) const uint16_t ones[16 * 32] = {0};
    _Alignas(64) float out[16 * 16];
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}
#endif

/* The loop of the bf16 path `path` (an mg_bf16_path value); for the emulation (no bf16 unit), the
 * FMA loop of the float32 path `isa` whose vector kernels it runs on (an mg_isa value). */
static inline bench_fma bench_bf16_peak_loop(int path, int isa) {
#ifdef BENCH_FMA_X86
    if (path == 2) return (bench_fma){"amx tdpbf16ps", 4.0 * 16 * 16 * 32 * 2, bench_bf16_loop_amx};
    if (path == 1)
        return (bench_fma){"avx512 vdpbf16ps", 2.0 * 32 * BENCH_FMA_CHAINS, bench_bf16_loop_avx512};
#endif
    (void)path;
    return bench_fma_for_isa(isa);
}

static volatile double bench_fma_sink;

/* k's loop iterations per second on one thread: the first pass of 4^i * 16384 iterations that
 * lasts over 20 ms, timed by the monotonic clock. */
static inline double bench_fma_rate(const bench_fma *k) {
    for (long iters = 1L << 14;; iters *= 4) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        bench_fma_sink = k->loop(iters);
        clock_gettime(CLOCK_MONOTONIC, &b);
        const double t = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        if (t > 0.02) return (double)iters / t;
    }
}

#endif
