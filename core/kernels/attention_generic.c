/* Fused attention tile kernels in portable C (attention_tmpl.h over simd_generic.h, four-float
 * vectors): 4 x 2 register tile. */
#include "simd_generic.h"

#define AT_MR 4
#define AT_NV 2

#include "attention_tmpl.h"
