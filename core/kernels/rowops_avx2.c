/* Row and elementwise kernels on AVX2 + FMA (rowops_tmpl.h over simd_avx2.h). */
#include "simd_avx2.h"

#include "rowops_tmpl.h"
