/* Fused attention tile kernels on AVX-512 (attention_tmpl.h over simd_avx512.h): 6 x 4 register
 * tile, 24 zmm accumulators. */
#include "simd_avx512.h"

#define AT_MR 6
#define AT_NV 4

#include "attention_tmpl.h"
