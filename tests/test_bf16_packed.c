/* Products against a pre-packed bf16 B (mg_bgemm_pack_b, mg_bgemm_packed: the weights of bf16
 * KV-cache decoding). On each path with a packed kernel (AVX512-BF16 and the portable emulation), on
 * odd shapes (M 1 to 5 and a few larger, N and K odd, an odd K's last pair completed by a zero), B
 * stored either way, with and without accumulation: the same values as mg_bgemm_ref (exact ==: only
 * a zero's sign could differ) and the same bits as mg_bgemm on the same operands; 1, 2 and 3 threads
 * the same bits. Then the ops: mg_linear, mg_matmul and mg_matmul_nt on a bf16 context that keeps
 * its weights (so products of up to MG_BF16_PACKED_MAX_ROWS rows read them packed) give the same
 * outputs and gradients, bit for bit, as on one that converts them at every step. A path this
 * machine lacks is reported skipped by name. */
#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/ops.h"
#include "minigrad/params.h"
#include "minigrad/rng.h"
#include "minigrad/tensor.h"
#include "minigrad/testing.h"
#include "test_util.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static uint32_t *packed_of(bool tb, int64_t K, int64_t N, const mg_bf16 *B, int64_t ldb) {
    const size_t words = mg_bgemm_packed_words(K, N);
    ck_assert_uint_eq(words, (size_t)((N + 15) / 16 * 16) * (size_t)((K + 1) / 2));
    uint32_t *p = mg_aligned_alloc((words ? words : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    mg_bgemm_pack_b(tb, K, N, B, ldb, p);
    return p;
}

/* One shape on the active path: packed against the reference (==) and against mg_bgemm (bits). */
static void check_packed(mg_bf16_path path, bool tb, int64_t M, int64_t N, int64_t K, bool acc,
                         uint64_t seed) {
    const int64_t lda = K + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * lda), seed), *B = tu_bf16_fill((size_t)((tb ? N : K) * ldb), seed + 1);
    uint32_t *Bp = packed_of(tb, K, N, B, ldb);
    const size_t cn = (size_t)(M * ldc);
    float *C = malloc(cn * sizeof *C), *R = malloc(cn * sizeof *R), *G = malloc(cn * sizeof *G);
    ck_assert(C && R && G);
    mg_rng r = mg_rng_make(seed + 2);
    for (size_t i = 0; i < cn; i++) C[i] = R[i] = G[i] = acc ? mg_rng_range(&r, -1.0f, 1.0f) : NAN;
    if (acc && cn > 3) C[3] = R[3] = G[3] = 1e-39f; /* a denormal start reads as zero */
    ck_assert(mg_bgemm_packed(M, N, K, A, lda, Bp, acc, C, ldc));
    mg_bgemm_ref(path, false, tb, M, N, K, A, lda, B, ldb, acc, R, ldc);
    mg_bgemm(false, tb, M, N, K, A, lda, B, ldb, acc, G, ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            const float c = C[i * ldc + j], e = R[i * ldc + j];
            ck_assert_msg(c == e || (isnan(c) && isnan(e)),
                          "%s tb=%d M=%lld N=%lld K=%lld acc=%d: C[%lld,%lld] = %a, the reference %a",
                          mg_bf16_path_name(path), tb, (long long)M, (long long)N, (long long)K, acc,
                          (long long)i, (long long)j, c, e);
        }
    ck_assert_msg(memcmp(C, G, cn * sizeof *C) == 0, "%s tb=%d M=%lld N=%lld K=%lld acc=%d: not mg_bgemm's bits",
                  mg_bf16_path_name(path), tb, (long long)M, (long long)N, (long long)K, acc);
    free(A);
    free(B);
    mg_aligned_free(Bp);
    free(C);
    free(R);
    free(G);
}

static const int64_t ns[] = {1, 5, 17, 33, 127, 131};
static const int64_t ks[] = {1, 3, 7, 64, 129, 301};

static void packed_matches_reference(mg_bf16_path path) {
    ck_assert(mg_bf16_path_force(path));
    uint64_t seed = 500;
    for (int64_t M = 1; M <= 5; M++)
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
                for (int v = 0; v < 4; v++) {
                    if ((v + (int)a + (int)b + (int)M) % 2) continue; /* half the combinations */
                    check_packed(path, v & 1, M, ns[a], ks[b], v >> 1, seed += 3);
                }
    /* more rows: blocks of 4 rows and a remainder, the largest the ops send */
    check_packed(path, true, 9, 45, 77, true, 901);
    check_packed(path, false, 16, 130, 255, false, 902);
    check_packed(path, true, 31, 19, 65, false, 903);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

START_TEST(packed_emulated_matches_reference) {
    packed_matches_reference(MG_BF16_EMULATED);
}
END_TEST

START_TEST(packed_avx512bf16_matches_reference) {
    packed_matches_reference(MG_BF16_AVX512);
}
END_TEST

/* ---- the emulation's vector kernels against a pre-packed B ----
 * The emulated path's packed kernel of the active float32 path (AVX-512F, AVX2 + FMA) gives the
 * plain C's bits (the portable path's; a NaN matching any NaN): M 1 to 5 and a few larger, N
 * across the column groups and single panels, K odd and 1, B stored either way, with and without
 * accumulation, on model-scale values and on values whose products and sums underflow (flushed),
 * with signed zeros, denormals, huge values, infinities and NaN; 1 and 2 threads. */

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* mg_bgemm_packed on the emulated path with the float32 path isa active, from a copy of C0. */
static float *emu_packed_run(mg_isa isa, int64_t M, int64_t N, int64_t K, const mg_bf16 *A, int64_t lda,
                             const uint32_t *Bp, bool acc, const float *C0, int64_t ldc) {
    ck_assert(mg_isa_force(isa));
    float *C = malloc((size_t)(M * ldc) * sizeof *C);
    ck_assert_ptr_nonnull(C);
    memcpy(C, C0, (size_t)(M * ldc) * sizeof *C);
    ck_assert(mg_bgemm_packed(M, N, K, A, lda, Bp, acc, C, ldc));
    return C;
}

static void emu_packed_shape(mg_isa isa, bool tb, int64_t M, int64_t N, int64_t K, bool acc, bool tiny,
                             int threads, uint64_t seed) {
    const int64_t lda = K + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    const size_t na = (size_t)(M * lda), nb = (size_t)((tb ? N : K) * ldb);
    mg_bf16 *A = tiny ? tu_bf16_fill_tiny(na, seed) : tu_bf16_fill(na, seed);
    mg_bf16 *B = tiny ? tu_bf16_fill_tiny(nb, seed + 1) : tu_bf16_fill(nb, seed + 1);
    uint32_t *Bp = packed_of(tb, K, N, B, ldb);
    float *C0 = malloc((size_t)(M * ldc) * sizeof *C0);
    ck_assert_ptr_nonnull(C0);
    mg_rng r = mg_rng_make(seed + 2);
    for (int64_t i = 0; i < M * ldc; i++) {
        const float v = mg_rng_range(&r, -1.0f, 1.0f);
        C0[i] = i % 7 == 3 ? -0.0f : i % 11 == 5 ? v * 1e-39f : tiny ? v * 0x1p-120f : v;
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    float *P = emu_packed_run(MG_ISA_GENERIC, M, N, K, A, lda, Bp, acc, C0, ldc);
    float *V = emu_packed_run(isa, M, N, K, A, lda, Bp, acc, C0, ldc);
    for (int64_t i = 0; i < M * ldc; i++)
        if (f_bits(V[i]) != f_bits(P[i]) && !(isnan(V[i]) && isnan(P[i])))
            ck_abort_msg("packed, emulated on %s, %s values, tb=%d M=%lld N=%lld K=%lld acc=%d, %d threads: "
                         "C[%lld,%lld] = %a (0x%08x), the plain C %a (0x%08x)",
                         mg_isa_name(isa), tiny ? "tiny" : "model-scale", tb, (long long)M, (long long)N,
                         (long long)K, acc, threads, (long long)(i / ldc), (long long)(i % ldc), (double)V[i],
                         (unsigned)f_bits(V[i]), (double)P[i], (unsigned)f_bits(P[i]));
    free(A);
    free(B);
    mg_aligned_free(Bp);
    free(C0);
    free(P);
    free(V);
}

static void emu_packed_matches_plain_c(mg_isa isa) {
    static const int64_t ms[] = {1, 2, 3, 4, 5, 9, 17};
    static const int64_t emu_ns[] = {1, 5, 17, 33, 64, 127, 131, 200};
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
#ifdef _OPENMP
    const int before = omp_get_max_threads();
#endif
    uint64_t seed = 1500;
    for (size_t m = 0; m < sizeof ms / sizeof *ms; m++)
        for (size_t a = 0; a < sizeof emu_ns / sizeof *emu_ns; a++)
            for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
                for (int v = 0; v < 8; v++) {
                    if ((v + (int)a + (int)b + (int)m) % 2) continue; /* half the combinations */
                    emu_packed_shape(isa, v & 1, ms[m], emu_ns[a], ks[b], v >> 1 & 1, v >> 2, 1, seed += 3);
                }
    /* enough work for two threads (27 MFLOP at 40 rows: split even where idle threads sleep,
     * OMP_WAIT_POLICY=passive, as under meson test) */
#ifdef _OPENMP
    omp_set_num_threads(2);
    ck_assert_int_eq(mg_bgemm_packed_threads(40, 1001, 333), 2);
#endif
    for (int v = 0; v < 8; v++)
        for (int nt = 1; nt <= 2; nt++) emu_packed_shape(isa, v & 1, 40, 1001, 333, v >> 1 & 1, v >> 2, nt, seed += 3);
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
    ck_assert(mg_isa_force(mg_isa_detected()));
}

START_TEST(packed_emulated_avx512_matches_plain_c) {
    emu_packed_matches_plain_c(MG_ISA_AVX512);
}
END_TEST

START_TEST(packed_emulated_avx2_matches_plain_c) {
    emu_packed_matches_plain_c(MG_ISA_AVX2);
}
END_TEST

/* mg_bgemm_pack_b_f32 rounds as mg_f32_to_bf16 does (ties to even, NaN kept quiet, a denormal
 * that rounds up to the smallest normal) and lays out as mg_bgemm_pack_b: the same words. */
START_TEST(pack_from_float32_equals_pack_of_bf16) {
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800001u, 0x007fffffu,
                                       0x80000001u, 0x7f7fffffu, 0x00000000u, 0x80000000u, 0x7f800000u};
    for (int tb = 0; tb < 2; tb++)
        for (int64_t K = 1; K <= 9; K += 4)
            for (int64_t N = 1; N <= 35; N += 17) {
                const int64_t ldb = (tb ? K : N) + 2, rows = tb ? N : K;
                float *F = malloc((size_t)(rows * ldb) * sizeof *F);
                mg_bf16 *B = malloc((size_t)(rows * ldb) * sizeof *B);
                ck_assert(F && B);
                mg_rng r = mg_rng_make((uint64_t)(K * 100 + N * 3 + tb));
                for (int64_t i = 0; i < rows * ldb; i++) {
                    if (i % 7 == 3) {
                        const uint32_t u = special[(i / 7) % (int64_t)(sizeof special / sizeof *special)];
                        memcpy(F + i, &u, sizeof u);
                    } else
                        F[i] = mg_rng_range(&r, -3.0f, 3.0f);
                }
                mg_f32_to_bf16(rows * ldb, F, B);
                const size_t words = mg_bgemm_packed_words(K, N);
                uint32_t *p1 = malloc(words * sizeof *p1), *p2 = malloc(words * sizeof *p2);
                ck_assert(p1 && p2);
                mg_bgemm_pack_b(tb, K, N, B, ldb, p1);
                mg_bgemm_pack_b_f32(tb, K, N, F, ldb, p2);
                ck_assert_msg(memcmp(p1, p2, words * sizeof *p1) == 0, "tb=%d K=%lld N=%lld", tb, (long long)K,
                              (long long)N);
                free(F), free(B), free(p1), free(p2);
            }
}
END_TEST

/* The packed words by their definition: panel q holds columns 16q .. 16q + 15, pair p of column c
 * is op(B)(2p, c) in the low half and op(B)(2p + 1, c) in the high half, zero past K and past N.
 * Shapes longer than the pieces packing reads at a time (N 1043 with B as stored, K 2051
 * transposed), from bf16 and from float32, on 1 and 2 threads. */
START_TEST(pack_layout_by_definition) {
    static const int64_t shapes[][3] = {{0, 7, 1043}, {0, 2, 1024}, {1, 2051, 21}, {1, 1024, 17}}; /* tb K N */
#ifdef _OPENMP
    const int before = omp_get_max_threads();
#endif
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const bool tb = shapes[s][0];
        const int64_t K = shapes[s][1], N = shapes[s][2], ldb = (tb ? K : N) + 3, rows = tb ? N : K;
        float *F = malloc((size_t)(rows * ldb) * sizeof *F);
        mg_bf16 *B = malloc((size_t)(rows * ldb) * sizeof *B);
        ck_assert(F && B);
        mg_rng r = mg_rng_make((uint64_t)(70 + s));
        for (int64_t i = 0; i < rows * ldb; i++) F[i] = mg_rng_range(&r, -2.0f, 2.0f);
        mg_f32_to_bf16(rows * ldb, F, B);
        const int64_t kp = (K + 1) / 2, np = (N + 15) / 16;
        const size_t words = mg_bgemm_packed_words(K, N);
        uint32_t *p = malloc(words * sizeof *p);
        ck_assert_ptr_nonnull(p);
        for (int from_f32 = 0; from_f32 < 2; from_f32++)
            for (int nt = 1; nt <= 2; nt++) {
#ifdef _OPENMP
                omp_set_num_threads(nt);
#endif
                memset(p, 0xab, words * sizeof *p);
                if (from_f32) mg_bgemm_pack_b_f32(tb, K, N, F, ldb, p);
                else mg_bgemm_pack_b(tb, K, N, B, ldb, p);
                for (int64_t q = 0; q < np; q++)
                    for (int64_t pr = 0; pr < kp; pr++)
                        for (int64_t c = 0; c < 16; c++) {
                            const int64_t j = 16 * q + c;
                            uint32_t want = 0;
                            for (int h = 0; h < 2; h++) {
                                const int64_t k = 2 * pr + h;
                                if (j < N && k < K) want |= (uint32_t)B[tb ? j * ldb + k : k * ldb + j] << (16 * h);
                            }
                            const uint32_t got = p[(q * kp + pr) * 16 + c];
                            ck_assert_msg(got == want, "tb=%d K=%lld N=%lld from %s, %d thread(s): panel %lld pair %lld "
                                          "column %lld holds %#x, not %#x", tb, (long long)K, (long long)N,
                                          from_f32 ? "float32" : "bf16", nt, (long long)q, (long long)pr,
                                          (long long)c, got, want);
                        }
            }
        free(F), free(B), free(p);
    }
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
}
END_TEST

/* Edges: M or N zero leave C alone, K zero writes zeros (or leaves C when accumulating). */
START_TEST(packed_degenerate_shapes) {
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
    float C[6] = {1, 2, 3, 4, 5, 6};
    const mg_bf16 a[2] = {0x3f80, 0x3f80};
    ck_assert_uint_eq(mg_bgemm_packed_words(0, 5), 0);
    ck_assert_uint_eq(mg_bgemm_packed_words(3, 0), 0);
    ck_assert(mg_bgemm_packed(0, 3, 2, a, 2, NULL, false, C, 3));
    ck_assert(mg_bgemm_packed(2, 0, 2, a, 2, NULL, false, C, 3));
    ck_assert_float_eq(C[0], 1.0f);
    ck_assert(mg_bgemm_packed(2, 3, 0, a, 2, NULL, true, C, 3));
    ck_assert_float_eq(C[5], 6.0f);
    ck_assert(mg_bgemm_packed(2, 3, 0, a, 2, NULL, false, C, 3));
    for (int i = 0; i < 6; i++) ck_assert_float_eq(C[i], 0.0f);
}
END_TEST

/* The columns are split among threads; every sum keeps its order: 1, 2 and 3 threads the same bits,
 * on each path with a packed kernel. */
START_TEST(packed_same_bits_for_any_thread_count) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
    /* 40 and 64 rows: 27 and 43 MFLOP, split into 2 and 3 parts even with OMP_WAIT_POLICY=passive */
    const int64_t M = 64, N = 1001, K = 333;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 31), *B = tu_bf16_fill((size_t)(N * K), 32);
    uint32_t *Bp = packed_of(true, K, N, B, K);
    float *C1 = malloc((size_t)(M * N) * sizeof *C1), *C2 = malloc((size_t)(M * N) * sizeof *C2);
    ck_assert(C1 && C2);
    int tested = 0;
    for (int p = MG_BF16_EMULATED; p <= MG_BF16_AVX512; p++) {
        if (!mg_bf16_path_force((mg_bf16_path)p)) continue;
        for (int64_t m = 40; m <= M; m += 24) {
            omp_set_num_threads(1);
            ck_assert(mg_bgemm_packed(m, N, K, A, K, Bp, false, C1, N));
            for (int nt = 2; nt <= 3; nt++) {
                omp_set_num_threads(nt);
                ck_assert_int_ge(mg_bgemm_packed_threads(m, N, K), 2); /* split for real */
                ck_assert(mg_bgemm_packed(m, N, K, A, K, Bp, false, C2, N));
                ck_assert_msg(memcmp(C1, C2, (size_t)(m * N) * sizeof *C1) == 0, "%s M=%lld: %d threads differ",
                              mg_bf16_path_name((mg_bf16_path)p), (long long)m, nt);
            }
        }
        tested++;
    }
    omp_set_num_threads(before);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
    ck_assert_int_ge(tested, 1);
    free(A);
    free(B);
    mg_aligned_free(Bp);
    free(C1);
    free(C2);
#endif
}
END_TEST

/* AMX's own products (16 rows or more) have no packed kernel: mg_bgemm_packed declines them. */
START_TEST(packed_declined_on_amx_rows) {
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
    ck_assert(!mg_bgemm_packed_available(16));
    float C[16] = {0};
    const mg_bf16 a[16] = {0};
    const uint32_t b[16] = {0};
    ck_assert(!mg_bgemm_packed(16, 1, 1, a, 1, b, false, C, 1));
    ck_assert_int_eq(mg_bgemm_packed_available(1), mg_bf16_path_available(MG_BF16_AVX512));
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}
END_TEST

/* ---- the ops on kept weights ---- */

typedef struct op_run {
    float *y, *z, *u;     /* mg_linear (with bias), mg_matmul_nt, mg_matmul outputs */
    float *gx, *gw, *ge, *gv; /* gradients of x, the linear weight, the nt and the nn weights */
} op_run;

static float *copy_of(const float *p, int64_t n) {
    float *d = malloc((size_t)n * sizeof *d);
    ck_assert_ptr_nonnull(d);
    memcpy(d, p, (size_t)n * sizeof *d);
    return d;
}

/* x (M,K) through the three products with weights w (K,N) + bias, e (V,K) transposed, v (K,N2);
 * with grad, backward of the sum of all three outputs. */
static op_run run_ops(mg_params *ps, bool keep, bool grad, int64_t M, const float *xd, int steps) {
    mg_tensor *w = mg_params_find(ps, "w"), *bias = mg_params_find(ps, "b"), *e = mg_params_find(ps, "e"),
              *v = mg_params_find(ps, "v");
    const int64_t K = w->shape[0];
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    mg_ctx_keep_bf16_weights(ctx, keep);
    mg_ctx_set_grad_enabled(ctx, grad);
    op_run o = {0};
    for (int s = 0; s < steps; s++) { /* later steps read the kept copies */
        mg_ctx_reset(ctx);
        mg_params_zero_grad(ps);
        mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){M, K}, (void *)xd);
        if (grad) mg_tensor_set_requires_grad(x, true);
        mg_tensor *y = mg_linear(ctx, x, w, bias), *z = mg_matmul_nt(ctx, x, e), *u = mg_matmul(ctx, x, v);
        if (grad) mg_backward(ctx, mg_add(ctx, mg_add(ctx, mg_sum(ctx, y), mg_sum(ctx, z)), mg_sum(ctx, u)));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        if (s < steps - 1) continue;
        o.y = copy_of(y->data, y->numel), o.z = copy_of(z->data, z->numel), o.u = copy_of(u->data, u->numel);
        if (grad) {
            o.gx = copy_of(x->grad, x->numel), o.gw = copy_of(w->grad, w->numel);
            o.ge = copy_of(e->grad, e->numel), o.gv = copy_of(v->grad, v->numel);
        }
    }
    mg_ctx_free(ctx);
    return o;
}

static void op_run_free(op_run *o) {
    free(o->y), free(o->z), free(o->u), free(o->gx), free(o->gw), free(o->ge), free(o->gv);
}

static void same_bits(const float *a, const float *b, int64_t n, const char *what, int64_t M, bool grad) {
    if (!a && !b) return;
    ck_assert(a && b);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(a + i, b + i, sizeof *a) == 0, "%s M=%lld grad=%d [%lld]: kept %a, converted %a", what,
                      (long long)M, grad, (long long)i, (double)a[i], (double)b[i]);
}

static void ops_on_kept_weights(mg_bf16_path path) {
    ck_assert(mg_bf16_path_force(path));
    const int64_t K = 37, N = 45, V = 19, N2 = 33;
    mg_params *ps = mg_params_new();
    ck_assert_ptr_nonnull(mg_params_add(ps, "w", 2, (int64_t[]){K, N}, mg_init_normal(0.0f, 0.5f), 0));
    ck_assert_ptr_nonnull(mg_params_add(ps, "b", 1, (int64_t[]){N}, mg_init_normal(0.0f, 0.5f), 0));
    ck_assert_ptr_nonnull(mg_params_add(ps, "e", 2, (int64_t[]){V, K}, mg_init_normal(0.0f, 0.5f), 0));
    ck_assert_ptr_nonnull(mg_params_add(ps, "v", 2, (int64_t[]){K, N2}, mg_init_normal(0.0f, 0.5f), 0));
    mg_rng rng = mg_rng_make(77);
    ck_assert_int_eq(mg_params_alloc(ps, &rng), MG_OK);
    static const int64_t ms[] = {1, 2, 3, 5, 16, 17};
    float *xd = malloc((size_t)(17 * K) * sizeof *xd);
    ck_assert_ptr_nonnull(xd);
    for (int64_t i = 0; i < 17 * K; i++) xd[i] = mg_rng_range(&rng, -1.0f, 1.0f);
    for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
        for (int grad = 0; grad < 2; grad++) {
            const int64_t M = ms[a];
            op_run k = run_ops(ps, true, grad, M, xd, 2), c = run_ops(ps, false, grad, M, xd, 1);
            same_bits(k.y, c.y, M * N, "mg_linear", M, grad);
            same_bits(k.z, c.z, M * V, "mg_matmul_nt", M, grad);
            same_bits(k.u, c.u, M * N2, "mg_matmul", M, grad);
            same_bits(k.gx, c.gx, M * K, "dx", M, grad);
            same_bits(k.gw, c.gw, K * N, "dW (linear)", M, grad);
            same_bits(k.ge, c.ge, V * K, "dE (matmul_nt)", M, grad);
            same_bits(k.gv, c.gv, K * N2, "dV (matmul)", M, grad);
            op_run_free(&k);
            op_run_free(&c);
        }
    free(xd);
    mg_params_free(ps);
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

START_TEST(ops_on_kept_weights_emulated) {
    ops_on_kept_weights(MG_BF16_EMULATED);
}
END_TEST

START_TEST(ops_on_kept_weights_avx512bf16) {
    ops_on_kept_weights(MG_BF16_AVX512);
}
END_TEST

Suite *bf16_packed_suite(void) {
    Suite *s = suite_create("bf16_packed");
    TCase *tc = tcase_create("bf16_packed");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, NULL, tu_restore_bf16_path);
    tcase_add_checked_fixture(tc, NULL, tu_restore_detected_isa);
    tcase_add_test(tc, packed_emulated_matches_reference);
    tu_add_bf16_path_case(tc, MG_BF16_AVX512, packed_avx512bf16_matches_reference,
                          "packed_avx512bf16_matches_reference", "no AVX512-BF16 on this CPU");
    tu_add_isa_case(tc, MG_ISA_AVX512, packed_emulated_avx512_matches_plain_c,
                    "packed_emulated_avx512_matches_plain_c");
    tu_add_isa_case(tc, MG_ISA_AVX2, packed_emulated_avx2_matches_plain_c,
                    "packed_emulated_avx2_matches_plain_c");
    tcase_add_test(tc, pack_from_float32_equals_pack_of_bf16);
    tcase_add_test(tc, pack_layout_by_definition);
    tcase_add_test(tc, packed_degenerate_shapes);
    tcase_add_test(tc, packed_same_bits_for_any_thread_count);
    tu_add_bf16_path_case(tc, MG_BF16_AMX, packed_declined_on_amx_rows, "packed_declined_on_amx_rows",
                          mg_bf16_path_compiled(MG_BF16_AMX) ? "no AMX on this CPU" : "the build left the AMX path out");
    tcase_add_test(tc, ops_on_kept_weights_emulated);
    tu_add_bf16_path_case(tc, MG_BF16_AVX512, ops_on_kept_weights_avx512bf16, "ops_on_kept_weights_avx512bf16",
                          "no AVX512-BF16 on this CPU");
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(bf16_packed_suite)
