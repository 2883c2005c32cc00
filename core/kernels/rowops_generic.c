/* Row and elementwise kernels in portable C (rowops_tmpl.h over simd_generic.h at width 1: the
 * plain loops, one float at a time). */
#define MGK_GENERIC_W 1
#include "simd_generic.h"

#include "rowops_tmpl.h"
