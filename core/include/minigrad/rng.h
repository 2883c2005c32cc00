/* minigrad/rng.h: the one random generator, passed explicitly to whatever needs randomness.
 *
 * SplitMix64 (Vigna's public-domain design): 64 bits of state, portable, bit-exact everywhere, and
 * trivially saved in a checkpoint (the state is one integer). There is no hidden global generator.
 */
#ifndef MINIGRAD_RNG_H
#define MINIGRAD_RNG_H

#include "minigrad/export.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mg_rng {
    uint64_t s;
} mg_rng;

static inline mg_rng mg_rng_make(uint64_t seed) { return (mg_rng){seed}; }

static inline uint64_t mg_rng_next(mg_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Integer in [0, n), n < 2^32: multiply-shift on the high 32 bits (no rejection; the bias is below
 * 2^-32 * n and the mapping is the one docs/posenc-benchmark.md section 1 pins bit-exactly). */
static inline uint32_t mg_rng_below(mg_rng *r, uint32_t n) {
    return (uint32_t)(((mg_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double mg_rng_double(mg_rng *r) { return (double)(mg_rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform float in [0, 1) with 24 random bits. */
static inline float mg_rng_uniform(mg_rng *r) { return (float)(mg_rng_next(r) >> 40) * 0x1.0p-24f; }

/* Uniform float in [lo, hi). lo + (hi-lo)*u can round up to hi itself for u just below 1, so
 * that one value is mapped to the float below hi. */
static inline float mg_rng_range(mg_rng *r, float lo, float hi) {
    float v = lo + (hi - lo) * mg_rng_uniform(r);
    return v < hi ? v : nextafterf(hi, lo);
}

/* Standard normal (Box-Muller, one value per call so the state stays a single integer). */
MG_API float mg_rng_normal(mg_rng *r);

/* Index i in [0, n) drawn with probability probs[i] / sum(probs). probs need not be normalised;
 * entries <= 0 are never drawn. Returns n-1's last positive entry if rounding runs past the end. */
MG_API int mg_rng_categorical(mg_rng *r, const float *probs, int n);

#ifdef __cplusplus
}
#endif
#endif
