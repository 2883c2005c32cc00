/* minigrad/kernels.h: low-level compute kernels (GEMM and friends) with run-time ISA dispatch.
 *
 * Ops call these; tests and benchmarks call them directly (each fast kernel keeps a plain
 * reference twin, `*_ref`, that tests compare against). All matrices are row-major float32 with
 * leading dimensions in elements. Parallel kernels split work over output rows/tiles only, so the
 * result is bit-identical whatever the number of threads. Called from inside an OpenMP parallel
 * region they run on the calling thread alone.
 */
#ifndef MINIGRAD_KERNELS_H
#define MINIGRAD_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mg_isa { MG_ISA_GENERIC = 0, MG_ISA_AVX2 = 1, MG_ISA_AVX512 = 2 } mg_isa;

mg_isa mg_isa_detected(void); /* best path this CPU (and this build) supports */
mg_isa mg_isa_active(void);   /* path in use now */
/* Forces a path (tests, benchmarks). Returns false, changing nothing, if the CPU lacks it. */
bool mg_isa_force(mg_isa isa);
const char *mg_isa_name(mg_isa isa);

/* C = alpha * op(A) @ op(B) + beta * C.
 * op(A) is M x K: A itself (lda >= K) or, when trans_a, the transpose of A stored K x M (lda >= M).
 * op(B) is K x N: B itself (ldb >= N) or, when trans_b, the transpose of B stored N x K (ldb >= K).
 * beta == 0 means C is write-only (it may hold garbage or NaN on entry). */
void mg_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);
void mg_sgemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc);

/* `batch` independent GEMMs; matrix i starts at A + i*stride_a, B + i*stride_b, C + i*stride_c.
 * A stride of 0 shares one matrix across the batch. */
void mg_sgemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, int64_t stride_a, const float *B,
                      int64_t ldb, int64_t stride_b, float beta, float *C, int64_t ldc,
                      int64_t stride_c);

#ifdef __cplusplus
}
#endif
#endif
