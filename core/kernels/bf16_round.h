/* bf16_round.h: private to core/kernels. float32 -> bf16 as mg_f32_to_bf16 rounds, one value: to
 * nearest, ties to even (a carry runs into the exponent, so the largest floats become infinity); a
 * NaN stays a NaN, made quiet. bgemm.c's conversions and the portable path's vectors (simd_generic.h)
 * use it; the AVX paths do the same on their integer lanes. */
#ifndef MG_KERNELS_BF16_ROUND_H
#define MG_KERNELS_BF16_ROUND_H

#include "minigrad/kernels.h" /* mg_bf16 */

#include <stdint.h>
#include <string.h>

static inline mg_bf16 mgk_round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (mg_bf16)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r);
}

#endif
