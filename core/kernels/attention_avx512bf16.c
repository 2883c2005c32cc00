/* Fused attention tile kernels with bf16 products on AVX512-BF16 (attention_bf16_tmpl.h, through
 * attention_tmpl.h over simd_avx512.h): 6 x 4 register tile, 24 zmm accumulators. Built with the
 * bf16 GEMM's AVX512-BF16 flags (meson.build); without them the getter returns NULL. */
#include "simd_avx512.h"

#undef MGK_ISA_NAME
#define MGK_ISA_NAME avx512bf16
#define AT_MR 6
#define AT_NV 4
#define AT_BF16 1

#include "attention_tmpl.h"
