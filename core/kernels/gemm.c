/* GEMM driver: cache blocking, the split of the output among threads, per-thread workspace, and
 * the plain-loop reference. The active path's kernels (gemm_tmpl.h, compiled once per SIMD path as
 * gemm_ISA.c) supply packing and micro-kernels through mg_gemm_impl (gemm_internal.h).
 *
 * Loop nest per thread, over its own rectangle of C:
 *   for each mc rows:  for each kc slice of K:  pack A (mc x kc, ~L3)
 *                                               for each nc columns: pack B (kc x nc, L2)
 *                                                                    micro-kernels (A panel in L1)
 * Bit-identical results for any thread count: K is cut into slices that depend only on K and the
 * path, each element is owned by exactly one thread, and the micro-kernel's arithmetic for an
 * element does not depend on where tile or thread boundaries fall. Decoding's K-split
 * (small_ksplit) is the one sum across threads: its chunks depend on K only and their partial
 * products are added in chunk order, so it too gives the same bits for any thread count.
 */
#include "bias_rows.h"
#include "gemm_internal.h"
#include "isa.h"
#include "threads.h"
#include "workspace.h"
#include "minigrad/base.h"
#include "minigrad/rowops.h"
#include "minigrad/testing.h" /* mg_sgemm_ref and the switch: exported, not installed */

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- reference ---- */

static void ref_rect(bool ta, bool tb, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t K,
                     float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc) {
    for (int64_t i = i0; i < i1; i++) {
        float *c = C + i * ldc;
        for (int64_t j = j0; j < j1; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
        for (int64_t k = 0; k < K; k++) {
            const float a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
            for (int64_t j = j0; j < j1; j++) c[j] += a * (tb ? B[j * ldb + k] : B[k * ldb + j]);
        }
    }
}

void mg_sgemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    ref_rect(ta, tb, 0, M, 0, N, K < 0 ? 0 : K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- per-thread workspace (workspace.h) ---- */

static float *workspace(size_t floats) {
    return thread_workspace(floats * sizeof(float));
}

static int64_t round_up(int64_t x, int64_t to) {
    return (x + to - 1) / to * to;
}
static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The K slice length: the path's kc, evened out so no slice is a sliver. A function of K and the
 * path only, never of the thread count. */
static int64_t k_slice(const mg_gemm_impl *im, int64_t K) {
    const int64_t n = (K + im->kc - 1) / im->kc;
    return (K + n - 1) / n;
}

/* Out of memory for the packing buffers: still produce the right answer, slowly. */
static void no_workspace(bool ta, bool tb, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                         int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc, size_t floats) {
    mg_log(MG_LOG_WARN,
           "mg_sgemm: cannot allocate %zu bytes of packing workspace; using the "
           "reference loops",
           floats * sizeof(float));
    ref_rect(ta, tb, i0, i1, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* C[i0:i1, j0:j1] on the calling thread through the packed path. With bias (beta is then 1), the
 * first K slice's micro-kernels add the bias to their sums as they write C (the bits of C filled
 * with it first), rather than a pass of its own over C or a fill of each row panel. */
static void packed_rect(const mg_gemm_impl *im, bool ta, bool tb, int64_t i0, int64_t i1,
                        int64_t j0, int64_t j1, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, const float *bias, float beta, float *C,
                        int64_t ldc) {
    const int64_t kc = k_slice(im, K);
    const int64_t mc = min64(im->mc, round_up(i1 - i0, im->mr));
    const int64_t nc = min64(im->nc, round_up(j1 - j0, im->nr));
    const size_t a_floats = (size_t)(mc * kc), need = a_floats + (size_t)(nc * kc);
    float *abuf = workspace(need);
    if (!abuf) {
        if (bias) bias_rows(i1 - i0, j1 - j0, bias + j0, C + i0 * ldc + j0, ldc);
        no_workspace(ta, tb, i0, i1, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc, need);
        return;
    }
    float *bbuf = abuf + a_floats;
    for (int64_t i = i0; i < i1; i += mc) {
        const int64_t mb = min64(mc, i1 - i);
        for (int64_t p = 0; p < K; p += kc) {
            const int64_t kb = min64(kc, K - p);
            im->pack_a(ta, ta ? A + p * lda + i : A + i * lda + p, lda, mb, kb, alpha, abuf);
            for (int64_t j = j0; j < j1; j += nc) {
                const int64_t nb = min64(nc, j1 - j);
                im->pack_b(tb, tb ? B + j * ldb + p : B + p * ldb + j, ldb, kb, nb, bbuf);
                /* the first K slice adds the bias as it writes C: no fill of C beforehand */
                im->block(mb, nb, kb, abuf, bbuf, bias && p == 0 ? bias + j : NULL,
                          p == 0 ? beta : 1.0f, C + i * ldc + j, ldc);
            }
        }
    }
}

/* op(A) for a transposed A (K x M, leading dimension lda) as M contiguous rows of K in dst. */
static void a_rowmajor(const float *A, int64_t lda, int64_t M, int64_t K, float *dst) {
    for (int64_t k = 0; k < K; k++)
        for (int64_t i = 0; i < M; i++) dst[i * K + k] = A[k * lda + i];
}

/* C[0:M, j0:j1] for M <= im->small_m. op(A) is copied row-major first when transposed, so the
 * kernels see contiguous rows (M x K floats: small next to the K x N of B they stream). */
static void small_rect(const mg_gemm_impl *im, bool ta, bool tb, int64_t M, int64_t j0, int64_t j1,
                       int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                       int64_t ldb, float beta, float *C, int64_t ldc) {
    if (ta) {
        const size_t need = (size_t)(M * K);
        float *a = workspace(need);
        if (!a) {
            no_workspace(ta, tb, 0, M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc, need);
            return;
        }
        a_rowmajor(A, lda, M, K, a);
        A = a;
        lda = K;
    }
    im->small(false, tb, M, j1 - j0, K, alpha, A, lda, tb ? B + j0 * ldb : B + j0, ldb, beta,
              C + j0, ldc);
}

/* C = beta * C, the whole answer when K == 0 or alpha == 0 (BLAS: A and B are then not read). */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f)
            memset(c, 0, (size_t)N * sizeof(float));
        else if (beta != 1.0f)
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
}

/* ---- splitting the output among threads ---- */

/* Below this many flops per thread the fork/join costs more than the thread gains. */
#define MIN_FLOPS_PER_THREAD 4.0e6
/* With M <= small_m (decoding) the time goes to streaming B, 2 flops per 4 bytes, not to arithmetic:
 * a share of B that takes longer to read than a fork/join costs is worth a thread. */
#define MIN_SMALL_FLOPS_PER_THREAD 2.5e5

/* That holds while idle threads spin. With OMP_WAIT_POLICY=passive they sleep between parallel
 * regions, and waking one took 40-50 us here (a virtual machine): decoding, with 4 products a
 * layer, ran slower on 2 threads than on 1. Small products then get the general threshold. */
static double min_small_flops(void) {
    return threads_sleep() ? MIN_FLOPS_PER_THREAD : MIN_SMALL_FLOPS_PER_THREAD;
}
#define SMALL_COLS_ALIGN 64 /* column granularity of the small-M split */

typedef struct plan {
    int nt, tm, tn; /* threads = tm row groups x tn column groups */
    int64_t unit_m, unit_n;
    bool small;
} plan;

static int64_t part_begin(int64_t units, int parts, int idx) {
    return units * idx / parts;
}

static plan make_plan(const mg_gemm_impl *im, int max_threads, int64_t M, int64_t N, int64_t K) {
    plan pl = {1, 1, 1, im->mr, im->nr, M <= im->small_m};
    if (pl.small) pl.unit_n = SMALL_COLS_ALIGN;
    if (max_threads <= 1) return pl; /* and no look at the environment on every decoding product */
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    int nt = threads_for(max_threads, flops, pl.small ? min_small_flops() : MIN_FLOPS_PER_THREAD);
    const int64_t um = pl.small ? 1 : (M + pl.unit_m - 1) / pl.unit_m;
    const int64_t un = (N + pl.unit_n - 1) / pl.unit_n;
    if ((int64_t)nt > um * un) nt = (int)(um * un);
    if (nt <= 1) return pl;
    /* Choose tm x tn = nt minimising the largest per-thread share of compute plus packing. */
    double best = 0.0;
    for (int tm = nt; tm >= 1; tm--) {
        if (nt % tm) continue;
        const int tn = nt / tm;
        if (tm > um || tn > un) continue;
        const double rows = (double)min64(M, (um + tm - 1) / tm * pl.unit_m);
        const double cols = (double)min64(N, (un + tn - 1) / tn * pl.unit_n);
        const double a_packs = 1.0, b_packs = (double)((int64_t)rows + im->mc - 1) / im->mc;
        const double cost = rows * cols + 32.0 * (rows * a_packs + cols * b_packs);
        if (best == 0.0 || cost < best) {
            best = cost;
            pl.tm = tm;
            pl.tn = tn;
        }
    }
    pl.nt = pl.tm * pl.tn;
    return pl;
}

static void run_part(const mg_gemm_impl *im, const plan *pl, int tid, bool ta, bool tb, int64_t M,
                     int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                     int64_t ldb, const float *bias, float beta, float *C, int64_t ldc) {
    const int a = tid / pl->tn, b = tid % pl->tn;
    const int64_t um = pl->small ? 1 : (M + pl->unit_m - 1) / pl->unit_m;
    const int64_t un = (N + pl->unit_n - 1) / pl->unit_n;
    const int64_t i0 = min64(M, part_begin(um, pl->tm, a) * pl->unit_m);
    const int64_t i1 = min64(M, part_begin(um, pl->tm, a + 1) * pl->unit_m);
    const int64_t j0 = min64(N, part_begin(un, pl->tn, b) * pl->unit_n);
    const int64_t j1 = min64(N, part_begin(un, pl->tn, b + 1) * pl->unit_n);
    if (i0 >= i1 || j0 >= j1) return;
    if (pl->small)
        small_rect(im, ta, tb, M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        packed_rect(im, ta, tb, i0, i1, j0, j1, K, alpha, A, lda, B, ldb, bias, beta, C, ldc);
}

/* Decoding with op(B) = B (K x N, row-major): the time goes to streaming B from memory, and a
 * split of the columns among threads has every thread read a slice of every row. Instead K is cut
 * into fixed chunks of SMALL_KCHUNK rows; a chunk's partial product A[:, chunk] B[chunk, :] reads
 * one contiguous block of B, the chunks are shared out among the threads, and the partials are
 * added in chunk order. The chunks depend on K only, so the bits do not depend on the thread
 * count. Returns false (nothing done) when the partials' workspace cannot be had. */
#define SMALL_KCHUNK 256
/* Narrower B (attention's P V: N = head size) is contiguous row after row already, and has too
 * few columns to share: its register kernel over the whole K is faster than partial sums. */
#define SMALL_KSPLIT_MIN_N 256

/* Chunk c of small_ksplit: op(A)[:, chunk] op(B)[chunk, :] into its own part of the buffer. */
static void ksplit_chunk(const mg_gemm_impl *im, int64_t c, int64_t M, int64_t N, int64_t K,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float *part) {
    const int64_t p0 = c * SMALL_KCHUNK, kc = min64(SMALL_KCHUNK, K - p0);
    im->small(false, false, M, N, kc, 1.0f, A + p0, lda, B + p0 * ldb, ldb, 0.0f,
              part + (size_t)(c * M * N), N);
}

static bool small_ksplit(const mg_gemm_impl *im, int threads, bool ta, int64_t M, int64_t N,
                         int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc) {
    const int64_t nch = (K + SMALL_KCHUNK - 1) / SMALL_KCHUNK;
    const size_t part_floats = (size_t)(nch * M * N), need = part_floats + (ta ? (size_t)(M * K) : 0);
    float *part = workspace(need);
    if (!part) return false;
    if (ta) { /* op(A) row-major, so that each chunk's rows of A are contiguous */
        a_rowmajor(A, lda, M, K, part + part_floats);
        A = part + part_floats;
        lda = K;
    }
    int nt = threads > 1 ? threads_for(threads, 2.0 * (double)M * (double)N * (double)K,
                                       min_small_flops())
                         : 1;
    if (nt > nch) nt = (int)nch;
    MG_PAR_FOR_NT(nt, (static), c, nch, ksplit_chunk(im, c, M, N, K, A, lda, B, ldb, part));
    /* chunk 1, 2, ... added onto chunk 0 in order, then alpha and beta */
    const size_t mn = (size_t)(M * N);
    for (int64_t c = 1; c < nch; c++) mg_accumulate((int64_t)mn, part, part + (size_t)c * mn);
    for (int64_t i = 0; i < M; i++) {
        float *ci = C + i * ldc;
        const float *si = part + i * N;
        if (beta == 0.0f)
            for (int64_t j = 0; j < N; j++) ci[j] = alpha * si[j];
        else
            for (int64_t j = 0; j < N; j++) ci[j] = alpha * si[j] + beta * ci[j];
    }
    return true;
}

/* Tests route whole models through the plain loops to compare them with the fast path
 * (mg_sgemm_set_reference): every product, lone or batched, goes through gemm(). */
static atomic_bool use_reference;

static int max_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

/* With bias, C = bias + alpha op(A) op(B) (beta ignored): the packed path writes the bias tile by
 * tile (packed_rect); the others get C's rows filled first and add onto them. */
static void gemm_bias(const mg_gemm_impl *im, int threads, bool ta, bool tb, int64_t M, int64_t N,
                      int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                      const float *bias, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (bias) beta = 1.0f;
    if (atomic_load_explicit(&use_reference, memory_order_relaxed)) {
        if (bias) bias_rows(M, N, bias, C, ldc);
        mg_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (K <= 0 || alpha == 0.0f) {
        if (bias) bias_rows(M, N, bias, C, ldc);
        else scale_c(M, N, beta, C, ldc);
        return;
    }
    const plan pl = make_plan(im, threads, M, N, K);
    if (bias && pl.small) { /* few rows (M <= small_m): the fill is cheap next to streaming B */
        bias_rows(M, N, bias, C, ldc);
        bias = NULL;
    }
    if (M <= im->small_m && !tb && K > SMALL_KCHUNK && N >= SMALL_KSPLIT_MIN_N &&
        small_ksplit(im, threads, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
#ifdef _OPENMP
    if (pl.nt > 1) {
#pragma omp parallel num_threads(pl.nt)
        {
            /* The runtime may grant fewer threads than asked: the parts are then shared out. */
            const int got = omp_get_num_threads();
            for (int t = omp_get_thread_num(); t < pl.nt; t += got)
                run_part(im, &pl, t, ta, tb, M, N, K, alpha, A, lda, B, ldb, bias, beta, C, ldc);
        }
        return;
    }
#endif
    run_part(im, &pl, 0, ta, tb, M, N, K, alpha, A, lda, B, ldb, bias, beta, C, ldc);
}

static void gemm(const mg_gemm_impl *im, int threads, bool ta, bool tb, int64_t M, int64_t N,
                 int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                 float beta, float *C, int64_t ldc) {
    gemm_bias(im, threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, NULL, beta, C, ldc);
}

void mg_sgemm_set_reference(bool on) { atomic_store(&use_reference, on); }
bool mg_sgemm_get_reference(void) { return atomic_load(&use_reference); }

void mg_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
              int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    gemm(mgk_gemm_active(), max_threads(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
         ldc);
}

void mg_sgemm_bias(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc) {
    gemm_bias(mgk_gemm_active(), max_threads(), ta, tb, M, N, K, 1.0f, A, lda, B, ldb, bias, 0.0f, C,
              ldc);
}

void mg_sgemm_batched(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                      int64_t sb, float beta, float *C, int64_t ldc, int64_t sc) {
    if (batch <= 0 || M <= 0 || N <= 0) return;
    const mg_gemm_impl *im = mgk_gemm_active();
    /* One matrix per thread when the batch shares out evenly or is long enough that the last
     * round's imbalance is small, or when a matrix is too small to split among the threads;
     * otherwise each matrix in turn uses every thread. A shared C (stride 0) accumulates in batch
     * order, so those run one after another. The whole batch, like a lone GEMM, gets no more
     * threads than it has work for. */
    const double flops = 2.0 * (double)M * (double)N * (double)(K > 0 ? K : 1);
    const int nt = threads_for(max_threads(), flops * (double)batch, MIN_FLOPS_PER_THREAD);
    const bool per_matrix =
        nt > 1 && sc != 0 && batch > 1 &&
        (batch % nt == 0 || batch >= 4 * (int64_t)nt || flops < 2.0 * MIN_FLOPS_PER_THREAD * nt);
    if (!per_matrix) {
        for (int64_t b = 0; b < batch; b++)
            gemm(im, nt, ta, tb, M, N, K, alpha, A + b * sa, lda, B + b * sb, ldb, beta, C + b * sc,
                 ldc);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (int64_t b = 0; b < batch; b++)
        gemm(im, 1, ta, tb, M, N, K, alpha, A + b * sa, lda, B + b * sb, ldb, beta, C + b * sc,
             ldc);
}
