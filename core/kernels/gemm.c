/* Placeholder GEMM: correct, parallel over rows, deterministic. The packed, blocked version with
 * ISA dispatch replaces it. */
#include "minigrad/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

mg_isa mg_isa_detected(void) { return MG_ISA_GENERIC; }
mg_isa mg_isa_active(void) { return MG_ISA_GENERIC; }
bool mg_isa_force(mg_isa isa) { return isa == MG_ISA_GENERIC; }
const char *mg_isa_name(mg_isa isa) {
    return isa == MG_ISA_AVX512 ? "avx512" : isa == MG_ISA_AVX2 ? "avx2" : "generic";
}

static void gemm_rows(bool ta, bool tb, int64_t i0, int64_t i1, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc) {
    for (int64_t i = i0; i < i1; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
        for (int64_t k = 0; k < K; k++) {
            float a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
            if (!tb) {
                const float *b = B + k * ldb;
                for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
            } else {
                for (int64_t j = 0; j < N; j++) c[j] += a * B[j * ldb + k];
            }
        }
    }
}

void mg_sgemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    gemm_rows(ta, tb, 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void mg_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#ifdef _OPENMP
    if (!omp_in_parallel() && M * N * K > 32768) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < M; i++) gemm_rows(ta, tb, i, i + 1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    gemm_rows(ta, tb, 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void mg_sgemm_batched(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, int64_t sa, const float *B,
                      int64_t ldb, int64_t sb, float beta, float *C, int64_t ldc, int64_t sc) {
#ifdef _OPENMP
    if (!omp_in_parallel() && batch > 1) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < batch; i++)
            gemm_rows(ta, tb, 0, M, N, K, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
        return;
    }
#endif
    for (int64_t i = 0; i < batch; i++)
        mg_sgemm(ta, tb, M, N, K, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
}
