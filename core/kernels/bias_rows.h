/* bias_rows.h: private to core/kernels. The bias fill of the GEMM drivers (gemm.c, bgemm.c): rows
 * of C set to the same n values, a row panel at a time just before its products read them. */
#ifndef MG_KERNELS_BIAS_ROWS_H
#define MG_KERNELS_BIAS_ROWS_H

#include <stdint.h>
#include <string.h>

/* C[0:rows, 0:n] (row stride ldc) = bias[0:n] in every row. */
static inline void bias_rows(int64_t rows, int64_t n, const float *bias, float *C, int64_t ldc) {
    for (int64_t r = 0; r < rows; r++) memcpy(C + r * ldc, bias, (size_t)n * sizeof(float));
}

#endif
