/* Row and elementwise kernels on AVX-512 (rowops_tmpl.h over simd_avx512.h). */
#include "simd_avx512.h"

#include "rowops_tmpl.h"
