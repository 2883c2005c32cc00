/* bf16 GEMM driver: conversions, cache blocking, the split of the output among threads, per-thread
 * workspace, and the reference that emulates the instructions' rounding. The path's kernels
 * (bgemm_emulated.c, bgemm_avx512bf16.c, bgemm_amx.c; isa.c chooses) pack panels and run the
 * micro-kernels (bgemm_internal.h).
 *
 * Loop nest per thread, over its own rectangle of C, as in the float32 driver (gemm.c):
 *   for each mc rows: for each K slice: pack A (mc x kc); for each nc columns: pack B, micro-kernels
 * Bit-identical for any thread count: the K slices depend on K and the path only, each element of C
 * is owned by one thread, and its float32 chain over the pairs runs in increasing order, a slice
 * after the first continuing from the value left in C.
 *
 * mg_bgemm_packed (at the end) runs products of few rows against a B packed once (bgemm_internal.h):
 * no packing per call, the columns split among threads, each element the same chain as in mg_bgemm.
 */
#include "bf16_round.h"
#include "bgemm_internal.h"
#include "bias_rows.h"
#include "isa.h"
#include "threads.h"
#include "workspace.h"
#include "minigrad/base.h"
#include "minigrad/testing.h" /* mg_bgemm_ref: exported, not installed */

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- conversions ---- */

mg_bf16 mg_f32_to_bf16_1(float x) {
    return mgk_round_bf16(x);
}

float mg_bf16_to_f32_1(mg_bf16 x) {
    const uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Below this many values the conversions stay out of OpenMP altogether: even a region whose if()
 * is false costs a call into the runtime, and a decoding step converts a few hundred values at a
 * time. */
#define CONVERT_PARALLEL_MIN (1 << 16)

/* On the active float32 path's vectors (rowops: the same rounding, lane by lane), in pieces of
 * CONVERT_PIECE values shared among the threads. */
#define CONVERT_PIECE 16384

void mg_f32_to_bf16(int64_t n, const float *src, mg_bf16 *dst) {
    const mgk_rowops_impl *im = mgk_rowops_active();
    if (n <= CONVERT_PARALLEL_MIN) {
        if (n > 0) im->to_bf16(n, src, dst);
        return;
    }
    const int64_t pieces = (n + CONVERT_PIECE - 1) / CONVERT_PIECE;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < pieces; p++) {
        const int64_t i = p * CONVERT_PIECE;
        im->to_bf16(n - i < CONVERT_PIECE ? n - i : CONVERT_PIECE, src + i, dst + i);
    }
}

void mg_bf16_to_f32(int64_t n, const mg_bf16 *src, float *dst) {
    if (n <= CONVERT_PARALLEL_MIN) {
        for (int64_t i = 0; i < n; i++) dst[i] = mg_bf16_to_f32_1(src[i]);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = mg_bf16_to_f32_1(src[i]);
}

/* ---- reference ---- */

/* The instructions' arithmetic on plain floats: bf16 inputs with a zero exponent read as zero
 * (DAZ), each product added with fmaf (one rounding, to nearest even), every sum flushed to zero
 * when denormal (FTZ). Pairs beyond K are zeros, as the kernels pad them.
 *  - VDPBF16PS (avx512bf16, emulated): one chain per element, per pair the odd product (k = 2p + 1)
 *    first, then the even one.
 *  - TDPBF16PS (amx), as the Operation section of Intel's SDM gives it: each instruction covers 16
 *    pairs (one A tile row); per element it sums the even products and the odd products in two
 *    chains of their own, each from +0, adds the two, and adds that onto the element. The groups
 *    of 16 pairs start at p = 0 (a K slice is a multiple of 32 values). */
static float ref_daz(float x) {
    return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

static float ref_in(const mg_bf16 *X, int64_t ld, bool t, int64_t r, int64_t k, int64_t K) {
    return k < K ? ref_daz(mg_bf16_to_f32_1(t ? X[k * ld + r] : X[r * ld + k])) : 0.0f;
}

static void ref_loops(mg_bf16_path path, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                      float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = accumulate ? ref_daz(C[i * ldc + j]) : 0.0f;
            if (path == MG_BF16_AMX)
                for (int64_t p0 = 0; 2 * p0 < K; p0 += 16) {
                    float even = 0.0f, odd = 0.0f;
                    for (int64_t k = 2 * p0; k < 2 * p0 + 32; k += 2) {
                        const float ae = ref_in(A, lda, ta, i, k, K),
                                    be = ref_in(B, ldb, !tb, j, k, K);
                        const float ao = ref_in(A, lda, ta, i, k + 1, K),
                                    bo = ref_in(B, ldb, !tb, j, k + 1, K);
                        even = ref_daz(fmaf(ae, be, even));
                        odd = ref_daz(fmaf(ao, bo, odd));
                    }
                    s = ref_daz(s + ref_daz(even + odd));
                }
            else
                for (int64_t k = 0; k < K; k += 2) {
                    s = ref_daz(
                        fmaf(ref_in(A, lda, ta, i, k + 1, K), ref_in(B, ldb, !tb, j, k + 1, K), s));
                    s = ref_daz(fmaf(ref_in(A, lda, ta, i, k, K), ref_in(B, ldb, !tb, j, k, K), s));
                }
            C[i * ldc + j] = s;
        }
}

/* As mg_bgemm computes it with the path active, which for AMX hands small products to
 * AVX512-BF16 (mgk_bgemm_path_for). */
void mg_bgemm_ref(mg_bf16_path path, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                  const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                  float *C, int64_t ldc) {
    ref_loops(mgk_bgemm_path_for(path, M), ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

/* ---- per-thread workspace (workspace.h) ---- */

static uint32_t *workspace(size_t words) {
    return thread_workspace(words * sizeof(uint32_t));
}

static int64_t round_up(int64_t x, int64_t to) {
    return (x + to - 1) / to * to;
}
static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The K slice: the path's kc evened out over the slices and rounded up to its alignment, so only
 * the last slice has padding. A function of K and the path only. */
static int64_t k_slice(const mgk_bgemm_impl *im, int64_t K) {
    const int64_t n = (K + im->kc - 1) / im->kc;
    return round_up((K + n - 1) / n, im->kalign);
}

static int64_t pairs(const mgk_bgemm_impl *im, int64_t kc) {
    return round_up(kc, im->kalign) / 2;
}

/* One packed block, C[0:mb, 0:nb] (= or +=) A-block @ B-block, kb values deep; with bias (first K
 * slice only), C's rows first hold bias[0:nb], written a row panel at a time just before the panel's
 * products read it, while it is in cache (instead of a pass of its own over all of C). */
static void run_block(const mgk_bgemm_impl *im, bool a_in_place, int64_t mb, int64_t nb, int64_t kb,
                      const mg_bf16 *ap, int64_t lda, const uint32_t *abuf, const uint32_t *bbuf,
                      const float *bias, bool acc, float *C, int64_t ldc) {
    const int64_t kp = pairs(im, kb);
    if (a_in_place) { /* the bias, if any, is where the micro-kernels' sums start */
        im->block_rm(mb, nb, kb, ap, lda, bbuf, bias, bias ? false : acc, C, ldc);
        return;
    }
    if (!bias) {
        im->block(mb, nb, kp, abuf, bbuf, acc, C, ldc);
        return;
    }
    for (int64_t r0 = 0; r0 < mb; r0 += im->mr) {
        const int64_t rows = min64(im->mr, mb - r0);
        bias_rows(rows, nb, bias, C + r0 * ldc, ldc);
        im->block(rows, nb, kp, abuf + r0 * kp, bbuf, true, C + r0 * ldc, ldc);
    }
}

static void packed_rect(const mgk_bgemm_impl *im, bool ta, bool tb, int64_t i0, int64_t i1,
                        int64_t j0, int64_t j1, int64_t K, const mg_bf16 *A, int64_t lda,
                        const mg_bf16 *B, int64_t ldb, const float *bias, bool accumulate, float *C,
                        int64_t ldc) {
    const int64_t kc = k_slice(im, K), kp = pairs(im, kc);
    const int64_t mc = min64(round_up(im->mc, im->mr), round_up(i1 - i0, im->mr));
    const int64_t nc = min64(round_up(im->nc, im->nr), round_up(j1 - j0, im->nr));
    const size_t a_words = (size_t)(mc * kp), need = a_words + (size_t)(nc * kp);
    uint32_t *abuf = workspace(need);
    if (!abuf) {
        mg_log(MG_LOG_WARN, "mg_bgemm: cannot allocate %zu bytes of packing workspace; using the "
               "reference loops", need * sizeof(uint32_t));
        for (int64_t i = i0; i < i1; i++) {
            if (bias) bias_rows(1, j1 - j0, bias + j0, C + i * ldc + j0, ldc);
            ref_loops(im->path, ta, tb, 1, j1 - j0, K, ta ? A + i : A + i * lda, lda,
                      tb ? B + j0 * ldb : B + j0, ldb, accumulate || bias, C + i * ldc + j0, ldc);
        }
        return;
    }
    uint32_t *bbuf = abuf + a_words;
    const bool a_in_place = !ta && im->block_rm; /* A's pairs already lie along its rows */
    for (int64_t i = i0; i < i1; i += mc) {
        const int64_t mb = min64(mc, i1 - i);
        for (int64_t p = 0; p < K; p += kc) {
            const int64_t kb = min64(kc, K - p);
            const mg_bf16 *ap = ta ? A + p * lda + i : A + i * lda + p;
            if (!a_in_place) im->pack_a(ta, ap, lda, mb, kb, abuf);
            for (int64_t j = j0; j < j1; j += nc) {
                const int64_t nb = min64(nc, j1 - j);
                const bool acc = accumulate || p > 0;
                im->pack_b(tb, tb ? B + j * ldb + p : B + p * ldb + j, ldb, kb, nb, bbuf);
                run_block(im, a_in_place, mb, nb, kb, ap, lda, abuf, bbuf, bias && p == 0 ? bias + j : NULL,
                          acc, C + i * ldc + j, ldc);
            }
        }
    }
}

void mgk_bgemm_run_impl(const mgk_bgemm_impl *im, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                        const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                        float *C, int64_t ldc) {
    if (M > 0 && N > 0 && K > 0) packed_rect(im, ta, tb, 0, M, 0, N, K, A, lda, B, ldb, NULL, accumulate, C, ldc);
}

void mgk_bgemm_ref_loops(mg_bf16_path path, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         const mg_bf16 *A, int64_t lda, const mg_bf16 *B, int64_t ldb, bool accumulate,
                         float *C, int64_t ldc) {
    ref_loops(path, ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

/* ---- splitting the output among threads ---- */

#define MIN_FLOPS_PER_THREAD 4.0e6

typedef struct plan {
    int nt, tm, tn;
} plan;

static plan make_plan(const mgk_bgemm_impl *im, int max_threads, int64_t M, int64_t N, int64_t K) {
    plan pl = {1, 1, 1};
    int nt = threads_for(max_threads, 2.0 * (double)M * (double)N * (double)K, MIN_FLOPS_PER_THREAD);
    const int64_t um = (M + im->mr - 1) / im->mr, un = (N + im->nr - 1) / im->nr;
    if ((int64_t)nt > um * un) nt = (int)(um * un);
    if (nt <= 1) return pl;
    double best = 0.0;
    for (int tm = nt; tm >= 1; tm--) {
        if (nt % tm) continue;
        const int tn = nt / tm;
        if (tm > um || tn > un) continue;
        const double rows = (double)min64(M, (um + tm - 1) / tm * im->mr);
        const double cols = (double)min64(N, (un + tn - 1) / tn * im->nr);
        const double cost = rows * cols + 32.0 * (rows + cols * (double)((int64_t)rows / im->mc + 1));
        if (best == 0.0 || cost < best) {
            best = cost;
            pl.tm = tm;
            pl.tn = tn;
        }
    }
    pl.nt = pl.tm * pl.tn;
    return pl;
}

static void run_part(const mgk_bgemm_impl *im, const plan *pl, int tid, bool ta, bool tb,
                     int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                     const mg_bf16 *B, int64_t ldb, const float *bias, bool accumulate, float *C,
                     int64_t ldc) {
    const int a = tid / pl->tn, b = tid % pl->tn;
    const int64_t um = (M + im->mr - 1) / im->mr, un = (N + im->nr - 1) / im->nr;
    const int64_t i0 = min64(M, um * a / pl->tm * im->mr), i1 = min64(M, um * (a + 1) / pl->tm * im->mr);
    const int64_t j0 = min64(N, un * b / pl->tn * im->nr), j1 = min64(N, un * (b + 1) / pl->tn * im->nr);
    if (i0 < i1 && j0 < j1)
        packed_rect(im, ta, tb, i0, i1, j0, j1, K, A, lda, B, ldb, bias, accumulate, C, ldc);
}

static int max_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

static void run_bgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                      const mg_bf16 *B, int64_t ldb, const float *bias, bool accumulate, float *C,
                      int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (bias) bias_rows(M, N, bias, C, ldc);
        else if (!accumulate)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    const mgk_bgemm_impl *im = mgk_bgemm_for(M);
    const plan pl = make_plan(im, max_threads(), M, N, K);
#ifdef _OPENMP
    if (pl.nt > 1) {
#pragma omp parallel num_threads(pl.nt)
        {
            const int got = omp_get_num_threads();
            for (int t = omp_get_thread_num(); t < pl.nt; t += got)
                run_part(im, &pl, t, ta, tb, M, N, K, A, lda, B, ldb, bias, accumulate, C, ldc);
        }
        return;
    }
#endif
    run_part(im, &pl, 0, ta, tb, M, N, K, A, lda, B, ldb, bias, accumulate, C, ldc);
}

void mg_bgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
              const mg_bf16 *B, int64_t ldb, bool accumulate, float *C, int64_t ldc) {
    run_bgemm(ta, tb, M, N, K, A, lda, B, ldb, NULL, accumulate, C, ldc);
}

void mg_bgemm_bias(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                   const mg_bf16 *B, int64_t ldb, const float *bias, float *C, int64_t ldc) {
    run_bgemm(ta, tb, M, N, K, A, lda, B, ldb, bias, false, C, ldc);
}

/* ---- pre-packed B ---- */

enum { PANEL = MGK_BGEMM_PANEL };

size_t mg_bgemm_packed_words(int64_t K, int64_t N) {
    if (K <= 0 || N <= 0) return 0;
    return (size_t)((N + PANEL - 1) / PANEL * PANEL) * (size_t)((K + 1) / 2);
}

static inline uint32_t pair_word(mg_bf16 lo, mg_bf16 hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* B's element i in bf16: B holds bf16, or float32 rounded here as mg_f32_to_bf16 does. */
static inline mg_bf16 b_elem(const void *B, bool f32, int64_t i) {
    return f32 ? mgk_round_bf16(((const float *)B)[i]) : ((const mg_bf16 *)B)[i];
}

/* Panel q of the packed B (bgemm_internal.h), from bf16 or float32 B; inlined with f32 constant. */
static inline __attribute__((always_inline)) void pack_panel(bool tb, int64_t K, int64_t N, const void *B,
                                                             bool f32, int64_t ldb, uint32_t *dst, int64_t q) {
    const int64_t kp = (K + 1) / 2, full = K / 2;
    uint32_t *d = dst + q * PANEL * kp;
    const int64_t j = q * PANEL, nn = min64(PANEL, N - j);
    if (nn < PANEL) memset(d, 0, (size_t)(PANEL * kp) * sizeof *d);
    if (!tb) { /* op(B)(k, c) = B[k*ldb + c]: two rows interleaved */
        for (int64_t p = 0; p < full; p++) {
            const int64_t s0 = 2 * p * ldb + j, s1 = s0 + ldb;
            for (int64_t c = 0; c < nn; c++)
                d[p * PANEL + c] = pair_word(b_elem(B, f32, s0 + c), b_elem(B, f32, s1 + c));
        }
        if (K & 1)
            for (int64_t c = 0; c < nn; c++) d[full * PANEL + c] = pair_word(b_elem(B, f32, (K - 1) * ldb + j + c), 0);
    } else { /* op(B)(k, c) = B[c*ldb + k]: a pair is two neighbours in row c */
        for (int64_t c = 0; c < nn; c++) {
            const int64_t s = (j + c) * ldb;
            for (int64_t p = 0; p < full; p++)
                d[p * PANEL + c] = pair_word(b_elem(B, f32, s + 2 * p), b_elem(B, f32, s + 2 * p + 1));
            if (K & 1) d[full * PANEL + c] = pair_word(b_elem(B, f32, s + K - 1), 0);
        }
    }
}

void mg_bgemm_pack_b(bool tb, int64_t K, int64_t N, const mg_bf16 *B, int64_t ldb, uint32_t *dst) {
    if (K <= 0 || N <= 0) return;
    const int64_t np = (N + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(static) if (K * N > CONVERT_PARALLEL_MIN)
    for (int64_t q = 0; q < np; q++) pack_panel(tb, K, N, B, false, ldb, dst, q);
}

void mg_bgemm_pack_b_f32(bool tb, int64_t K, int64_t N, const float *B, int64_t ldb, uint32_t *dst) {
    if (K <= 0 || N <= 0) return;
    const int64_t np = (N + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(static) if (K * N > CONVERT_PARALLEL_MIN)
    for (int64_t q = 0; q < np; q++) pack_panel(tb, K, N, B, true, ldb, dst, q);
}

bool mg_bgemm_packed_available(int64_t M) {
    return mgk_bgemm_for(M > 0 ? M : 1)->packed != NULL;
}

/* Threads for a product against a pre-packed B (a few rows: decoding, small batches). With M this
 * small the time goes to reading B, and in decoding B comes from L3 or memory: every Linear layer's
 * weight is read once per token, and a model's weights do not fit in L2. A second thread pays from
 * about 1 MFLOP: 1 MB of B at M = 1, half a MB each (the float32 few-row products' threshold in
 * gemm.c comes to the same bytes of B per thread). Measured on the 2-core Zen 5 VM, AVX512-BF16, idle threads
 * spinning, bench_train's generation worker: music decoding (K x N 512 x 1536, 512 x 2048,
 * 2048 x 512 at M = 1) took 355-533 ms for 256 tokens on 2 threads with a threshold of 3 MFLOP
 * (1 thread for all of them) and 225-230 ms with this one; textgen's (256 x 1024 and smaller, one
 * thread either way at M = 1) 15.1-15.3 ms and 14.6 ms for 112 tokens. bench_gemm --small-m reuses
 * one B from L2, which flatters one thread: there 256 x 768 at M = 4 runs 1.6x slower on 2 threads.
 * With OMP_WAIT_POLICY=passive the threads sleep between parallel regions and waking one costs
 * 40-50 us there: a second thread was 7x slower at M = 2, still 27% slower at 12.6 MFLOP
 * (256 x 768, M = 32), and about even at 25 MFLOP (6% faster at 256 x 768, M = 64; the same speed
 * at 512 x 1536, M = 16). */
#define PACKED_MIN_FLOPS_PER_THREAD 5.0e5
#define PACKED_MIN_FLOPS_PER_THREAD_PASSIVE 1.2e7

static double packed_min_flops(void) {
    return threads_sleep() ? PACKED_MIN_FLOPS_PER_THREAD_PASSIVE : PACKED_MIN_FLOPS_PER_THREAD;
}

int mg_bgemm_packed_threads(int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return 1;
    const int64_t np = (N + PANEL - 1) / PANEL, most = max_threads();
    if (most <= 1) return 1; /* and no look at the environment on every decoding product */
    const int nt = threads_for(most, 2.0 * (double)M * (double)N * (double)K, packed_min_flops());
    return (int64_t)nt > np ? (int)np : nt;
}

bool mg_bgemm_packed(int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                     const uint32_t *Bp, bool accumulate, float *C, int64_t ldc) {
    const mgk_bgemm_impl *im = mgk_bgemm_for(M > 0 ? M : 1);
    if (!im->packed) return false;
    if (M <= 0 || N <= 0) return true;
    if (K <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return true;
    }
    const int64_t np = (N + PANEL - 1) / PANEL, kp = (K + 1) / 2;
    const int nt = mg_bgemm_packed_threads(M, N, K);
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            const int got = omp_get_num_threads();
            for (int t = omp_get_thread_num(); t < nt; t += got) {
                const int64_t q0 = np * t / nt, q1 = np * (t + 1) / nt;
                const int64_t j0 = q0 * PANEL, j1 = min64(N, q1 * PANEL);
                if (j0 < j1) im->packed(M, j1 - j0, K, A, lda, Bp + q0 * PANEL * kp, accumulate, C + j0, ldc);
            }
        }
        return true;
    }
#endif
    im->packed(M, N, K, A, lda, Bp, accumulate, C, ldc);
    return true;
}
