/* simd.h: private to core/kernels. The scheme that puts the SIMD kernels together, the names every
 * vocabulary header defines, and the few macros they share.
 *
 * Scheme. A kernel family (gemm, rowops, attention) is written once, as a template header
 * FAMILY_tmpl.h, over the vector vocabulary listed below. Each ISA has one vocabulary header,
 * simd_ISA.h (simd_avx512.h, simd_avx2.h, simd_generic.h), and each family has one translation unit
 * per ISA, FAMILY_ISA.c, which includes that vocabulary, sets the family's tuning for the ISA (tile
 * sizes, an optional hand-written piece) and includes the template. meson.build compiles every such
 * unit as its own static library with that ISA's flags only, so no unit can hold another ISA's
 * instructions (tests/test_isa_purity.sh checks the objects). A template keeps its functions static
 * and exports one getter, MGK_FN(mgk_FAMILY) (mgk_gemm_avx2, mgk_rowops_generic, ...), which
 * returns the family's table of function pointers, or NULL when the unit was compiled without the
 * ISA's instructions (a compiler without the flags, another architecture). isa.c is the one place
 * that looks at the CPU: it picks the ISA at run time and hands each family's driver its table.
 *
 * To add a kernel family: write FAMILY_internal.h (the table type), FAMILY_tmpl.h (the kernels over
 * the vocabulary, ending in the getter) and one FAMILY_ISA.c per ISA; add the family to
 * `kernel_families` in meson.build and to MGK_GETTERS in isa.h, and give it an active-table
 * function in isa.c for its driver.
 * To add an ISA: write simd_ISA.h defining every name below (only the first three where the
 * compiler was not given the instructions) and FAMILY_ISA.c for every family; add the ISA and its
 * flags to `kernel_isas` in meson.build (and to tests/test_isa_purity.sh's checks), a value to
 * mg_isa (minigrad/kernels.h), an entry to MGK_ISAS in isa.h, and its CPU check and rank to
 * cpu_has, mg_isa_detected and mg_isa_force in isa.c.
 *
 * The vocabulary (each name a static inline function, or a constant):
 *   MGK_ISA_NAME            the ISA's name as a token (avx512, avx2, generic), for MGK_FN
 *   MGK_ISA_ID              its mg_isa value
 *   MGK_HAVE_ISA            1 when the unit is compiled with the ISA's instructions; else 0 and
 *                           nothing below is defined
 *   mgk_v, MGK_W            the vector type and its width in floats
 *   v_zero() v_set1(f)
 *   v_load(p) v_store(p, x) unaligned
 *   v_load_n(p, n)          lanes [0, n) from p and the rest 0, for 0 <= n <= MGK_W; the memory
 *                           past p + n is never touched (masked loads do not fault)
 *   v_load_n_fill(p, n, f)  the same with the other lanes f
 *   v_store_n(p, x, n)      lanes [0, n) to p, nothing past p + n written
 *   v_keep_n(x, n)          lanes from n on set to 0
 *   v_add v_sub v_mul v_div v_sqrt v_abs
 *   v_fma(a, b, c)          a * b + c, one rounding on the x86 paths and two on the portable one
 *   v_fnma(a, b, c)         c - a * b, likewise
 *   v_max(a, b) v_min(a, b) lanewise, giving b where either lane is NaN (the x86 rule), so a NaN
 *                           in b stays visible
 *   v_gt_sel(x, t, a, b)    lanewise x > t ? a : b (b where x or t is NaN)
 *   v_eq_sel(x, t, a, b)    lanewise x == t ? a : b
 *   v_hsum(x) v_hmax(x)     sum and max of the lanes in an order fixed per ISA, the same on every
 *                           compiler
 *   v_round(x)              to the nearest integer, ties to even, for |x| < 2^22
 *   v_pow2(n)               2^n for integral n in [-126, 127], built in the exponent field
 *   v_transpose(r)          r[0 .. MGK_W) in place: lane j of r[i] becomes lane i of r[j]
 *   MGK_HAVE_SCALEF         1 where the ISA has v_scalef(x, n), x * 2^floor(n) in one instruction
 *                           (underflowing to subnormals and 0 as IEEE does), else 0 and no v_scalef
 * Exponentials are built from v_round, v_fnma, v_fma and v_pow2 or v_scalef in the templates: each
 * family keeps its own polynomial, since their results are part of what the tests pin down.
 */
#ifndef MG_KERNELS_SIMD_H
#define MG_KERNELS_SIMD_H

#include "minigrad/kernels.h" /* mg_isa */

#include <stdint.h>

#define MGK_CAT_(a, b) a##_##b
#define MGK_CAT(a, b) MGK_CAT_(a, b)
/* The one naming macro: name_avx512, name_avx2 or name_generic after the unit's vocabulary. */
#define MGK_FN(name) MGK_CAT(name, MGK_ISA_NAME)

#define MGK_ALWAYS_INLINE static inline __attribute__((always_inline))
#define MGK_UNROLL _Pragma("GCC unroll 32")

#endif
