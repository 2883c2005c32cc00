/* Fused attention tile kernels on AVX2 + FMA (attention_tmpl.h over simd_avx2.h): 6 x 2 register
 * tile, 12 ymm accumulators. */
#include "simd_avx2.h"

#define AT_MR 6
#define AT_NV 2

#include "attention_tmpl.h"
