/* AVX2 + FMA GEMM kernels (gemm_tmpl.h over simd_avx2.h): 6 x 16 micro-tile (12 ymm accumulators
 * of the 16 registers). */
#include "simd_avx2.h"

#define MGK_MR 6
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 1536
#define MGK_NC 256
#define MGK_SMALL_M 2

#include "gemm_tmpl.h"
