/* Portable GEMM kernels (gemm_tmpl.h over simd_generic.h, four-float vectors): 4 x 8 micro-tile.
 * a*b + c stays two roundings (see simd_generic.h). */
#include "simd_generic.h"

#define MGK_MR 4
#define MGK_NV 2
#define MGK_KC 256
#define MGK_MC 256
#define MGK_NC 512
#define MGK_SMALL_M 2
#define MGK_SMALL_KB 4

#include "gemm_tmpl.h"
