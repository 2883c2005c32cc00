/* isa.h: private to core/kernels. The SIMD paths, every kernel family's per-ISA getter (each
 * defined by the family's template in FAMILY_ISA.c, see simd.h), and the tables of the path in use,
 * which isa.c chooses at run time and the drivers (gemm.c, rowops.c, attention.c) call through. */
#ifndef MG_KERNELS_ISA_H
#define MG_KERNELS_ISA_H

#include "attention_internal.h"
#include "bgemm_internal.h"
#include "gemm_internal.h"
#include "rowops_internal.h"

/* X(name, mg_isa value) for every path, the portable one first. */
#define MGK_ISAS(X) X(generic, MG_ISA_GENERIC) X(avx2, MG_ISA_AVX2) X(avx512, MG_ISA_AVX512)

/* Each family's table for one path; NULL where its unit was compiled without the path's
 * instructions. */
#define MGK_GETTERS(isa, id)                                                                       \
    const mg_gemm_impl *mgk_gemm_##isa(void);                                                      \
    const mgk_rowops_impl *mgk_rowops_##isa(void);                                                 \
    const mgk_attention_impl *mgk_attention_##isa(void);
MGK_ISAS(MGK_GETTERS)
#undef MGK_GETTERS

/* The tables of the active path (mg_isa_active), read once per kernel call. */
const mg_gemm_impl *mgk_gemm_active(void);
const mgk_rowops_impl *mgk_rowops_active(void);
const mgk_attention_impl *mgk_attention_active(void);
/* The fused attention kernels with bf16 products: on VDPBF16PS (attention_avx512bf16.c), and with
 * the products on AMX tiles (attention_avx512bf16_amx.c, the rest on AVX512-BF16), NULL where the
 * build lacks AVX512-BF16; the AMX tile product on the instructions (NULL where the build lacks
 * AMX) or on their model (attention_amx.c). */
const mgk_attention_impl *mgk_attention_avx512bf16(void);
const mgk_attention_impl *mgk_attention_avx512bf16_amx(void);
mgk_attn_tile_product mgk_attn_tiles_amx(void);
mgk_attn_tile_product mgk_attn_tiles_amx_emulated(void);
/* The kernels mg_attn_desc.bf16 takes now, NULL where attention stays float32: VDPBF16PS's where
 * the active bf16 path is AVX512-BF16, the AMX ones (with *tiles, when given, set to the tile
 * product: the model's under mg_bf16_amx_emulation) where it is AMX and the CPU also has
 * AVX512-BF16; on the emulated path none. */
const mgk_attention_impl *mgk_attention_bf16(mgk_attn_tile_product *tiles);
bool mgk_attention_bf16_usable(void);

/* The AMX path's start-up check (amx_check.c): small products on the given GEMM kernels and
 * attention tile product (either may be NULL: not checked) against the reference loops; of the
 * GEMM, the transposition forms in gemm_forms (bit 0: A B, 1: A^T B, 2: A B^T, 3: A^T B^T;
 * MGK_AMX_CHECK_ALL_FORMS: all). true when every element is right; else false, with what was wrong
 * in why. Thread-safe (one check at a time). */
#define MGK_AMX_CHECK_ALL_FORMS 15u
bool mgk_amx_check(const mgk_bgemm_impl *gemm, unsigned gemm_forms, mgk_attn_tile_product tiles,
                   char *why, size_t why_len);

/* The bf16 GEMM path for a product of M rows: the active bf16 path (mg_bf16_path_active), except
 * that AMX hands products of fewer than mg_bf16_amx_min_m() rows (MGK_AMX_MIN_M unless set; a tile
 * has 16) to AVX512-BF16 when the CPU has it. */
#define MGK_AMX_MIN_M 16
const mgk_bgemm_impl *mgk_bgemm_for(int64_t M);
/* The path that runs a product of M rows while path p is active (p, or AVX512-BF16 as above):
 * mgk_bgemm_for's choice, which mg_bgemm_ref follows. */
mg_bf16_path mgk_bgemm_path_for(mg_bf16_path p, int64_t M);

#endif
