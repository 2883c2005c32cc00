/* Fused attention tile kernels with their products on AMX tiles (attention_bf16_tmpl.h with
 * AT_AMX, through attention_tmpl.h over simd_avx512.h): the softmax, the packing into bf16 and
 * the rest run here on AVX-512 and AVX512-BF16, built into the AVX512-BF16 library with its flags;
 * the products go through the tile kernel of attention_amx.c (the AMX library, or its twin on the
 * software model), which isa.c hands over. Without AVX512-BF16 the getter returns NULL. */
#include "simd_avx512.h"

#undef MGK_ISA_NAME
#define MGK_ISA_NAME avx512bf16_amx
#define AT_MR 6
#define AT_NV 4
#define AT_BF16 1
#define AT_AMX 1

#include "attention_tmpl.h"
