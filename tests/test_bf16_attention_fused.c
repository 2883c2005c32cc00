/* The fused attention kernels with bf16 products (mg_attn_desc.bf16, core/kernels/
 * attention_bf16_tmpl.h) against a scalar reference that follows them step by step, so the
 * comparison is exact (== : only a zero's sign may differ):
 *  - tiles of 64 queries by 64 keys, key tiles in increasing order, only those a causal mask lets
 *    some query of the tile see;
 *  - every product by mg_bgemm_ref on the AVX512-BF16 path (VDPBF16PS: per element, pairs of
 *    products in increasing order, DAZ inputs, FTZ sums), its operands rounded to bf16 to nearest
 *    even, a denormal float read as zero as VCVTNEPS2BF16 does;
 *  - forward: logits = scale * S, the bias callback, the bias rows, the mask; the online softmax
 *    with the kernel's exponential (below), its running max and float32 sum, O rescaled by
 *    exp(m_old - m_new) before each tile's P V; o = O * (1 / l), lse = m + logf(l);
 *  - backward: P = exp(logits - lse), D_i = rowsum(dO * O) (16 lanes of fused multiply-adds, the
 *    AVX-512 lane sum, then the tail), dS = P (dP - D_i) scale; dK and dV summed over query tiles
 *    in order in a per-key-tile accumulator, dQ over key tiles in order, each then added to the
 *    gradient.
 * The kernels' exponential (x = n ln2 + r, a degree-7 polynomial, times 2^n) is written here in
 * scalar code with the same operations, fmaf where the kernel fuses, and this file is compiled
 * without contraction so nothing else fuses. Odd shapes (D not a multiple of 16 or of 2, Tq and
 * Tk not multiples of 64 or of 2), several tiles, causal and not, offset queries, the bias
 * callback and bias rows with dL/dlogits; both backward splits; 1, 2 and 3 threads. The op
 * mg_attention takes these kernels in a bf16 context. On a CPU without AVX512-BF16 the kernels
 * are not used, and the cases say so by name.
 *
 * All of it twice: for the kernels with their products on VDPBF16PS (the avx512bf16 path), and
 * for those with their products on AMX tiles (the amx path), whose reference sums each product in
 * TDPBF16PS's groups of 16 pairs (mg_bgemm_ref's AMX arithmetic). The AMX kernels run here on the
 * software model of the tiles (mg_bf16_amx_emulation); on an AMX CPU attention_amx_matches_reference
 * runs them on the instructions, and elsewhere reports itself skipped by name. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/ops.h"
#include "minigrad/rng.h"
#include "minigrad/tensor.h"
#include "minigrad/testing.h"
#include "test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define TILE 64

typedef struct fcase {
    const char *name;
    int64_t B, H, Tq, Tk, D;
    bool causal;
    int64_t q_pos0;
    bool callback, bias_rows;
    float scale;
} fcase;

static const fcase cases[] = {
    {"full odd", 2, 3, 7, 13, 5, false, 0, false, false, 0},
    {"causal odd", 1, 2, 19, 19, 12, true, 0, false, false, 0},
    {"causal offset callback", 2, 1, 5, 23, 9, true, 18, true, false, 0.3f},
    {"bias rows", 3, 2, 11, 17, 7, false, 0, false, true, 0},
    {"two tiles causal", 1, 2, 150, 150, 33, true, 0, false, false, 0},
    {"tiles full", 2, 1, 65, 129, 64, false, 0, true, true, 0},
    {"long offset", 1, 1, 70, 131, 24, true, 61, false, true, 0},
    {"causal D 64", 1, 3, 128, 128, 64, true, 0, false, false, 0},
};

static void slope_bias(const void *user, int64_t head, int64_t qpos, int64_t kpos0, int64_t n,
                       float *logits) {
    (void)user;
    for (int64_t c = 0; c < n; c++)
        logits[c] += -0.125f * (float)(head + 1) * (float)(qpos - kpos0 - c);
}

/* ---- the reference ------------------------------------------------------------------------ */

/* A product as the kernels of the bf16 path compute it: mg_bgemm_ref's arithmetic (for AMX,
 * TDPBF16PS's groups of 16 pairs from the first, each two chains from +0 added onto C). The AMX
 * kernels run every product on tiles, where mg_bgemm on an AMX CPU would hand one of fewer than
 * 16 rows to AVX512-BF16 (and mg_bgemm_ref follows it): such a product is computed here on 16
 * rows, the extra ones zero, so the reference is the tiles' arithmetic on any machine. */
static void ref_prod(mg_bf16_path path, bool tb, int64_t M, int64_t N, int64_t K, const mg_bf16 *A,
                     int64_t lda, const mg_bf16 *B, int64_t ldb, bool acc, float *C, int64_t ldc) {
    if (path != MG_BF16_AMX || M >= 16) {
        mg_bgemm_ref(path, false, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
        return;
    }
    mg_bf16 *A16 = calloc((size_t)(16 * K), sizeof *A16);
    float *C16 = calloc((size_t)(16 * N), sizeof *C16);
    ck_assert(A16 && C16);
    for (int64_t r = 0; r < M; r++) {
        memcpy(A16 + r * K, A + r * lda, (size_t)K * sizeof *A16);
        memcpy(C16 + r * N, C + r * ldc, (size_t)N * sizeof *C16);
    }
    mg_bgemm_ref(path, false, tb, 16, N, K, A16, K, B, ldb, acc, C16, N);
    for (int64_t r = 0; r < M; r++) memcpy(C + r * ldc, C16 + r * N, (size_t)N * sizeof *C16);
    free(A16), free(C16);
}

static mg_bf16 bf(float x) { /* VCVTNEPS2BF16: denormals in read as zero, nearest even */
    return mg_f32_to_bf16_1(fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x);
}

static float kexp(float x0) { /* the kernels' exponential, lane by lane */
    const float x = fminf(88.5f, fmaxf(-120.0f, x0));
    const float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    return scalbnf(p, (int)n);
}

static float row_dot(const float *x, const float *y, int64_t D) { /* D_i as the kernel sums it */
    float acc[16] = {0};
    const int64_t Dv = D / 16 * 16;
    for (int64_t d = 0; d < Dv; d += 16)
        for (int l = 0; l < 16; l++) acc[l] = fmaf(x[d + l], y[d + l], acc[l]);
    float h[8], s4[4];
    for (int l = 0; l < 8; l++) h[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = h[l] + h[l + 4];
    float s = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    for (int64_t d = Dv; d < D; d++) s = fmaf(x[d], y[d], s);
    return s;
}

typedef struct fdata {
    float *q, *k, *v, *bias, *dO;
    int64_t nq, nk, nb;
} fdata;

typedef struct fres {
    float *o, *lse, *dq, *dk, *dv, *db;
} fres;

static void fres_free(fres *r) {
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv), free(r->db);
}

static float *zeros(int64_t n) {
    float *p = calloc((size_t)(n ? n : 1), sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static fres fres_new(const fcase *c, const fdata *x) {
    return (fres){zeros(x->nq), zeros(c->B * c->H * c->Tq), zeros(x->nq), zeros(x->nk), zeros(x->nk),
                  c->bias_rows ? zeros(x->nb) : NULL};
}

static float scale_of(const fcase *c) {
    return c->scale != 0.0f ? c->scale : 1.0f / sqrtf((float)c->D);
}

static int64_t kend_of(const fcase *c, int64_t i0, int64_t m) {
    if (!c->causal) return c->Tk;
    const int64_t e = c->q_pos0 + i0 + m;
    return e < 0 ? 0 : e < c->Tk ? e : c->Tk;
}

/* Logits of the tile (keys j0.. x queries i0..), S[ci * m + r]. */
static void ref_logits(mg_bf16_path path, const fcase *c, const fdata *x, int64_t bh, int64_t i0,
                       int64_t m, int64_t j0, int64_t nc, const mg_bf16 *qb, const mg_bf16 *kb,
                       float *S) {
    const int64_t D = c->D, Tq = c->Tq, Tk = c->Tk, h = bh % c->H;
    ref_prod(path, true, nc, m, D, kb + (bh * Tk + j0) * D, D, qb + (bh * Tq + i0) * D, D, false, S, m);
    const float scale = scale_of(c);
    for (int64_t e = 0; e < nc * m; e++) S[e] = S[e] * scale;
    for (int64_t r = 0; r < m; r++) {
        const int64_t qpos = c->q_pos0 + i0 + r;
        int64_t n = nc;
        if (c->causal) n = qpos + 1 - j0 < 0 ? 0 : qpos + 1 - j0 < nc ? qpos + 1 - j0 : nc;
        if (c->callback && n > 0) {
            float tmp[TILE];
            for (int64_t ci = 0; ci < n; ci++) tmp[ci] = S[ci * m + r];
            slope_bias(NULL, h, qpos, j0, n, tmp);
            for (int64_t ci = 0; ci < n; ci++) S[ci * m + r] = tmp[ci];
        }
    }
    if (c->bias_rows) {
        const float *b = x->bias + (bh / c->H) * c->H * Tq * Tk + h * Tq * Tk + i0 * Tk + j0;
        for (int64_t ci = 0; ci < nc; ci++)
            for (int64_t r = 0; r < m; r++) S[ci * m + r] = S[ci * m + r] + b[r * Tk + ci];
    }
    if (c->causal)
        for (int64_t ci = 0; ci < nc; ci++)
            for (int64_t r = 0; r < m && r < j0 + ci - (c->q_pos0 + i0); r++) S[ci * m + r] = -INFINITY;
}

/* The kernels of bf16 path `path` (MG_BF16_AVX512: VDPBF16PS, MG_BF16_AMX: the tiles). */
static void ref_run(mg_bf16_path path, const fcase *c, const fdata *x, fres *out) {
    const int64_t B = c->B, H = c->H, Tq = c->Tq, Tk = c->Tk, D = c->D, BH = B * H;
    mg_bf16 *qb = malloc((size_t)x->nq * 2), *kb = malloc((size_t)x->nk * 2),
            *vb = malloc((size_t)x->nk * 2), *gb = malloc((size_t)x->nq * 2);
    float *S = malloc(TILE * TILE * 4), *dP = malloc(TILE * TILE * 4), *O = malloc((size_t)(TILE * D) * 4),
          *dq = malloc((size_t)(Tq * D) * 4), *dk = malloc((size_t)(TILE * D) * 4),
          *dv = malloc((size_t)(TILE * D) * 4);
    mg_bf16 *pb = malloc(TILE * TILE * 2), *pt = malloc(TILE * TILE * 2);
    ck_assert(qb && kb && vb && gb && S && dP && O && dq && dk && dv && pb && pt);
    for (int64_t i = 0; i < x->nq; i++) qb[i] = bf(x->q[i]), gb[i] = bf(x->dO[i]);
    for (int64_t i = 0; i < x->nk; i++) kb[i] = bf(x->k[i]), vb[i] = bf(x->v[i]);
    for (int64_t bh = 0; bh < BH; bh++) {
        /* forward */
        for (int64_t i0 = 0; i0 < Tq; i0 += TILE) {
            const int64_t m = Tq - i0 < TILE ? Tq - i0 : TILE, kend = kend_of(c, i0, m);
            float mv[TILE], lv[TILE];
            for (int64_t r = 0; r < m; r++) mv[r] = -INFINITY, lv[r] = 0.0f;
            memset(O, 0, (size_t)(m * D) * 4);
            for (int64_t j0 = 0; j0 < kend; j0 += TILE) {
                const int64_t nc = kend - j0 < TILE ? kend - j0 : TILE;
                ref_logits(path, c, x, bh, i0, m, j0, nc, qb, kb, S);
                for (int64_t r = 0; r < m; r++) {
                    float mx = -INFINITY;
                    for (int64_t ci = 0; ci < nc; ci++) mx = fmaxf(mx, S[ci * m + r]);
                    const float mn = fmaxf(mv[r], mx), mu = mn == -INFINITY ? 0.0f : mn;
                    const float alpha = kexp(mv[r] - mu);
                    float sum = 0.0f;
                    for (int64_t ci = 0; ci < nc; ci++) {
                        const float p = kexp(S[ci * m + r] - mu);
                        sum = sum + p;
                        pb[r * nc + ci] = bf(p);
                    }
                    lv[r] = fmaf(lv[r], alpha, sum);
                    mv[r] = mn;
                    for (int64_t d = 0; d < D; d++) O[r * D + d] = O[r * D + d] * alpha;
                }
                ref_prod(path, false, m, D, nc, pb, nc, vb + (bh * Tk + j0) * D, D, true, O, D);
            }
            for (int64_t r = 0; r < m; r++) {
                const float l = lv[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
                for (int64_t d = 0; d < D; d++) out->o[(bh * Tq + i0 + r) * D + d] = O[r * D + d] * inv;
                out->lse[bh * Tq + i0 + r] = l > 0.0f ? mv[r] + logf(l) : -INFINITY;
            }
        }
        /* backward */
        memset(dq, 0, (size_t)(Tq * D) * 4);
        for (int64_t j0 = 0; j0 < kend_of(c, 0, Tq); j0 += TILE) {
            memset(dk, 0, (size_t)(TILE * D) * 4);
            memset(dv, 0, (size_t)(TILE * D) * 4);
            int64_t rows = 0;
            for (int64_t i0 = 0; i0 < Tq; i0 += TILE) {
                const int64_t m = Tq - i0 < TILE ? Tq - i0 : TILE, kend = kend_of(c, i0, m);
                if (j0 >= kend) continue;
                const int64_t nc = kend - j0 < TILE ? kend - j0 : TILE;
                rows = nc > rows ? nc : rows;
                ref_logits(path, c, x, bh, i0, m, j0, nc, qb, kb, S);
                for (int64_t r = 0; r < m; r++) {
                    const float l = out->lse[bh * Tq + i0 + r], L = l == -INFINITY ? INFINITY : l;
                    for (int64_t ci = 0; ci < nc; ci++) S[ci * m + r] = kexp(S[ci * m + r] - L);
                }
                for (int64_t e = 0; e < nc * m; e++) pt[e] = bf(S[e]); /* P^T, nc x m */
                ref_prod(path, false, nc, D, m, pt, m, gb + (bh * Tq + i0) * D, D, true, dv, D);
                ref_prod(path, true, nc, m, D, vb + (bh * Tk + j0) * D, D, gb + (bh * Tq + i0) * D, D,
                         false, dP, m);
                const float scale = scale_of(c);
                for (int64_t r = 0; r < m; r++) {
                    const float *go = x->dO + (bh * Tq + i0 + r) * D;
                    const float di = row_dot(go, out->o + (bh * Tq + i0 + r) * D, D);
                    for (int64_t ci = 0; ci < nc; ci++) {
                        const float g = S[ci * m + r] * (dP[ci * m + r] - di);
                        if (out->db) out->db[((bh * Tq) + i0 + r) * Tk + j0 + ci] += g;
                        S[ci * m + r] = g * scale;
                    }
                }
                for (int64_t e = 0; e < nc * m; e++) pt[e] = bf(S[e]); /* dS^T, nc x m */
                for (int64_t ci = 0; ci < nc; ci++)
                    for (int64_t r = 0; r < m; r++) pb[r * nc + ci] = pt[ci * m + r]; /* dS, m x nc */
                ref_prod(path, false, nc, D, m, pt, m, qb + (bh * Tq + i0) * D, D, true, dk, D);
                ref_prod(path, false, m, D, nc, pb, nc, kb + (bh * Tk + j0) * D, D, true, dq + i0 * D, D);
            }
            for (int64_t e = 0; e < rows * D; e++) {
                out->dk[(bh * Tk + j0) * D + e] += dk[e];
                out->dv[(bh * Tk + j0) * D + e] += dv[e];
            }
        }
        for (int64_t e = 0; e < Tq * D; e++) out->dq[bh * Tq * D + e] += dq[e];
    }
    free(qb), free(kb), free(vb), free(gb), free(S), free(dP), free(O), free(dq), free(dk), free(dv);
    free(pb), free(pt);
}

/* ---- the kernels -------------------------------------------------------------------------- */

static fdata data_new(const fcase *c, uint64_t seed) {
    fdata x = {.nq = c->B * c->H * c->Tq * c->D, .nk = c->B * c->H * c->Tk * c->D,
               .nb = c->B * c->H * c->Tq * c->Tk};
    float **ps[5] = {&x.q, &x.k, &x.v, &x.bias, &x.dO};
    const int64_t ns[5] = {x.nq, x.nk, x.nk, x.nb, x.nq};
    mg_rng r = mg_rng_make(seed);
    for (int i = 0; i < 5; i++) {
        *ps[i] = malloc((size_t)ns[i] * sizeof(float));
        ck_assert_ptr_nonnull(*ps[i]);
        for (int64_t j = 0; j < ns[i]; j++) (*ps[i])[j] = mg_rng_normal(&r) * (i == 3 ? 0.5f : 1.0f);
    }
    return x;
}

static void data_free(fdata *x) {
    free(x->q), free(x->k), free(x->v), free(x->bias), free(x->dO);
}

static mg_attn_desc desc_of(const fcase *c, const fdata *x, bool bf16, int split) {
    mg_attn_desc a = {.B = c->B, .H = c->H, .Tq = c->Tq, .Tk = c->Tk, .D = c->D, .scale = scale_of(c),
                      .causal = c->causal, .q_pos0 = c->q_pos0, .backward_split = split, .bf16 = bf16};
    if (c->callback) a.bias = slope_bias;
    if (c->bias_rows) {
        a.bias_data = x->bias;
        a.bias_hstride = c->Tq * c->Tk;
        a.bias_bstride = c->H * c->Tq * c->Tk;
    }
    return a;
}

static fres kernel_run(const fcase *c, const fdata *x, bool bf16, int split) {
    fres r = fres_new(c, x);
    mg_attn_desc a = desc_of(c, x, bf16, split);
    size_t bytes = mg_attn_forward_workspace(&a);
    void *ws = malloc(bytes);
    ck_assert_ptr_nonnull(ws);
    mg_attn_forward(&a, x->q, x->k, x->v, r.o, r.lse, ws, bytes);
    free(ws);
    a.dbias = r.db;
    bytes = mg_attn_backward_workspace(&a);
    ws = malloc(bytes);
    ck_assert_ptr_nonnull(ws);
    mg_attn_backward(&a, x->q, x->k, x->v, r.o, r.lse, x->dO, r.dq, r.dk, r.dv, ws, bytes);
    free(ws);
    return r;
}

static void expect_same(const char *who, const fcase *c, const char *what, const float *got,
                        const float *want, int64_t n) {
    if (!got && !want) return;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                      "%s, %s: %s[%lld] = %a, expected %a", who, c->name, what, (long long)i,
                      (double)got[i], (double)want[i]);
}

static void expect_fres(const char *who, const fcase *c, const fdata *x, const fres *a, const fres *b) {
    expect_same(who, c, "out", a->o, b->o, x->nq);
    expect_same(who, c, "lse", a->lse, b->lse, c->B * c->H * c->Tq);
    expect_same(who, c, "dq", a->dq, b->dq, x->nq);
    expect_same(who, c, "dk", a->dk, b->dk, x->nk);
    expect_same(who, c, "dv", a->dv, b->dv, x->nk);
    expect_same(who, c, "dbias", a->db, b->db, x->nb);
}

#define NCASES (sizeof cases / sizeof cases[0])

/* Every case, both backward splits, the kernels of the active bf16 path against the reference of
 * `path`. */
static void check_matches_reference(mg_bf16_path path, const char *who) {
    for (size_t i = 0; i < NCASES; i++) {
        fdata x = data_new(&cases[i], 500 + i);
        fres want = fres_new(&cases[i], &x);
        ref_run(path, &cases[i], &x, &want);
        for (int split = 1; split <= 2; split++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %s", who,
                     split == 1 ? "two-pass backward" : "per-head backward");
            fres got = kernel_run(&cases[i], &x, true, split);
            expect_fres(what, &cases[i], &x, &got, &want);
            fres_free(&got);
        }
        fres_free(&want);
        data_free(&x);
    }
}

/* 1, 2 and 3 threads give the same bits (either split, chosen by the thread count). */
static void check_thread_counts(const char *who) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < NCASES; i++) {
        fdata x = data_new(&cases[i], 700 + i);
        omp_set_num_threads(1);
        fres one = kernel_run(&cases[i], &x, true, 0);
        for (int t = 2; t <= 3; t++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %d threads", who, t);
            omp_set_num_threads(t);
            fres more = kernel_run(&cases[i], &x, true, 0);
            expect_fres(what, &cases[i], &x, &more, &one);
            fres_free(&more);
        }
        fres_free(&one);
        data_free(&x);
    }
    omp_set_num_threads(saved);
#else
    (void)who;
    ck_abort_msg("built without OpenMP: one thread only");
#endif
}

/* The kernels differ from float32 and stay close to it (outputs within 3% of the largest,
 * gradients within 5%). */
static void check_close_to_fp32(void) {
    const fcase *c = &cases[4];
    fdata x = data_new(c, 600);
    fres b = kernel_run(c, &x, true, 0), f = kernel_run(c, &x, false, 0);
    const float *bs[4] = {b.o, b.dq, b.dk, b.dv}, *fs[4] = {f.o, f.dq, f.dk, f.dv};
    const int64_t ns[4] = {x.nq, x.nq, x.nk, x.nk};
    const float bound[4] = {0.03f, 0.05f, 0.05f, 0.05f};
    for (int t = 0; t < 4; t++) {
        float big = 0.0f, worst = 0.0f;
        for (int64_t i = 0; i < ns[t]; i++) big = fmaxf(big, fabsf(fs[t][i]));
        for (int64_t i = 0; i < ns[t]; i++) worst = fmaxf(worst, fabsf(bs[t][i] - fs[t][i]));
        ck_assert_msg(worst > 0.0f && worst <= bound[t] * big, "tensor %d: bf16 vs fp32 worst %g of %g",
                      t, (double)worst, (double)big);
    }
    fres_free(&b), fres_free(&f);
    data_free(&x);
}

/* mg_attention in a bf16 context takes the kernels of the active bf16 path: its output and
 * gradients are theirs. */
static void check_op_takes_the_kernels(void) {
    const fcase *c = &cases[6];
    fdata x = data_new(c, 800);
    fres want = kernel_run(c, &x, true, 0);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_precision(ctx, MG_PRECISION_BF16);
    const int64_t sq[4] = {c->B, c->H, c->Tq, c->D}, sk[4] = {c->B, c->H, c->Tk, c->D},
                  sb[4] = {c->B, c->H, c->Tq, c->Tk};
    const float *src[4] = {x.q, x.k, x.v, x.bias};
    const int64_t ns[4] = {x.nq, x.nk, x.nk, x.nb};
    mg_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = mg_tensor_new(ctx, MG_F32, 4, i == 0 ? sq : i == 3 ? sb : sk);
        memcpy(t[i]->data, src[i], (size_t)ns[i] * sizeof(float));
        mg_tensor_set_requires_grad(t[i], true);
    }
    mg_attn_opts o = {.causal = c->causal, .q_pos0 = c->q_pos0, .bias_tensor = t[3]};
    mg_tensor *y = mg_attention(ctx, t[0], t[1], t[2], &o);
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, 4, sq);
    memcpy(R->data, x.dO, (size_t)x.nq * sizeof(float));
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    expect_same("mg_attention", c, "out", y->data, want.o, x.nq);
    expect_same("mg_attention", c, "dq", t[0]->grad, want.dq, x.nq);
    expect_same("mg_attention", c, "dk", t[1]->grad, want.dk, x.nk);
    expect_same("mg_attention", c, "dv", t[2]->grad, want.dv, x.nk);
    expect_same("mg_attention", c, "dbias", t[3]->grad, want.db, x.nb);
    mg_ctx_free(ctx);
    fres_free(&want);
    data_free(&x);
}

/* ---- VDPBF16PS (the AVX512-BF16 path) ---- */

START_TEST(attention_bf16_fused_matches_reference) {
    check_matches_reference(MG_BF16_AVX512, "avx512bf16");
}
END_TEST

START_TEST(attention_bf16_fused_differs_from_fp32_but_close) {
    check_close_to_fp32();
}
END_TEST

START_TEST(attention_bf16_fused_same_bits_for_any_thread_count) {
    check_thread_counts("avx512bf16");
}
END_TEST

START_TEST(attention_op_in_bf16_takes_the_fused_kernels) {
    check_op_takes_the_kernels();
}
END_TEST

/* With the bf16 path forced to the emulation, desc.bf16 runs the float32 kernels: same bits. */
START_TEST(attention_bf16_other_paths_run_fp32) {
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
    ck_assert(!mg_attn_bf16_fused());
    const fcase *c = &cases[5];
    fdata x = data_new(c, 900);
    fres b = kernel_run(c, &x, true, 0), f = kernel_run(c, &x, false, 0);
    expect_fres("emulated path", c, &x, &b, &f);
    fres_free(&b), fres_free(&f);
    data_free(&x);
}
END_TEST

/* ---- AMX tiles (TDPBF16PS), on the software model of the tiles ---- */

START_TEST(attention_amx_on_the_model_matches_reference) {
    check_matches_reference(MG_BF16_AMX, "amx on the model");
}
END_TEST

START_TEST(attention_amx_on_the_model_same_bits_for_any_thread_count) {
    check_thread_counts("amx on the model");
}
END_TEST

START_TEST(attention_amx_on_the_model_differs_from_fp32_but_close) {
    check_close_to_fp32();
}
END_TEST

START_TEST(attention_op_in_bf16_takes_the_amx_kernels_on_the_model) {
    check_op_takes_the_kernels();
}
END_TEST

/* The comparison has teeth: the two instructions' roundings differ in many elements here, so
 * kernels that summed as VDPBF16PS does (or in another order) would not pass the AMX reference;
 * and the AMX kernels are not the VDPBF16PS ones. */
START_TEST(attention_amx_reference_tells_the_instructions_apart) {
    const fcase *c = &cases[7];
    fdata x = data_new(c, 950);
    fres amx = fres_new(c, &x), vdp = fres_new(c, &x);
    ref_run(MG_BF16_AMX, c, &x, &amx);
    ref_run(MG_BF16_AVX512, c, &x, &vdp);
    fres got = kernel_run(c, &x, true, 0);
    const float *a[4] = {amx.o, amx.dq, amx.dk, amx.dv}, *v[4] = {vdp.o, vdp.dq, vdp.dk, vdp.dv},
                *g[4] = {got.o, got.dq, got.dk, got.dv};
    const int64_t ns[4] = {x.nq, x.nq, x.nk, x.nk};
    for (int t = 0; t < 4; t++) {
        int64_t differ = 0, kernel_differs = 0;
        for (int64_t i = 0; i < ns[t]; i++) {
            differ += a[t][i] != v[t][i];
            kernel_differs += g[t][i] != v[t][i];
        }
        ck_assert_msg(differ > ns[t] / 10 && kernel_differs == differ,
                      "tensor %d: the references differ in %lld of %lld elements, the kernels "
                      "from VDPBF16PS's reference in %lld", t, (long long)differ, (long long)ns[t],
                      (long long)kernel_differs);
    }
    fres_free(&amx), fres_free(&vdp), fres_free(&got);
    data_free(&x);
}
END_TEST

/* The attention's tile product and the AMX GEMM share one tile configuration per thread: GEMMs
 * and attention runs in turn (small ones, on the calling thread) give the reference's bits and
 * the first run's (the model stops the process on a tile used against its configuration, or with
 * none loaded). */
static void check_shares_the_tiles(void) {
    const fcase *c = &cases[1];
    fdata x = data_new(c, 960);
    const int64_t M = 40, N = 33, K = 70;
    mg_bf16 *A = tu_bf16_fill((size_t)(M * K), 961), *B = tu_bf16_fill((size_t)(K * N), 962);
    float *C = calloc((size_t)(M * N), sizeof *C), *R = calloc((size_t)(M * N), sizeof *R);
    ck_assert(C && R);
    mg_bgemm_ref(MG_BF16_AMX, false, false, M, N, K, A, K, B, N, false, R, N);
    fres first = {0};
    for (int round = 0; round < 2; round++) {
        mg_bgemm(false, false, M, N, K, A, K, B, N, false, C, N);
        for (int64_t e = 0; e < M * N; e++)
            ck_assert_msg(C[e] == R[e], "mg_bgemm, round %d: C[%lld] = %a, expected %a", round,
                          (long long)e, (double)C[e], (double)R[e]);
        fres got = kernel_run(c, &x, true, 0);
        if (round == 0) {
            first = got;
            continue;
        }
        expect_fres("after mg_bgemm", c, &x, &got, &first);
        fres_free(&got);
    }
    free(A), free(B), free(C), free(R);
    fres_free(&first);
    data_free(&x);
}

START_TEST(attention_amx_on_the_model_shares_the_tiles_with_bgemm) {
    check_shares_the_tiles();
}
END_TEST

/* The attention's tile products own no tile state between runs either: after the tiles were
 * released, or loaded with another library's shapes, the next run loads the configuration again
 * and gives the reference's bits (before, the model stopped the process). On one thread, the
 * calling one; then on 2, each thread of the team changed between the runs. */
START_TEST(attention_amx_on_the_model_survives_other_tile_users) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    const fcase *c = &cases[4];
    fdata x = data_new(c, 980);
    fres want = fres_new(c, &x);
    ref_run(MG_BF16_AMX, c, &x, &want);
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        for (int released = 1; released >= 0; released--) {
            char what[96];
            fres got = kernel_run(c, &x, true, 0);
            snprintf(what, sizeof what, "%d thread(s), first run", nt);
            expect_fres(what, c, &x, &got, &want);
            fres_free(&got);
            int disturbed = 0;
#pragma omp parallel num_threads(nt) reduction(+ : disturbed)
            disturbed += tu_amx_disturb_tiles(nt == 2 ? omp_get_thread_num() == released : released);
            ck_assert_msg(disturbed == nt, "%d of %d threads had their tiles changed", disturbed, nt);
            got = kernel_run(c, &x, true, 0);
            snprintf(what, sizeof what, "%d thread(s), after %s", nt,
                     nt == 2 ? "TILERELEASE and another LDTILECFG"
                     : released ? "TILERELEASE"
                                : "another LDTILECFG");
            expect_fres(what, c, &x, &got, &want);
            fres_free(&got);
        }
    }
    omp_set_num_threads(saved);
    fres_free(&want);
    data_free(&x);
#else
    ck_abort_msg("built without OpenMP: one thread only");
#endif
}
END_TEST

/* On an AMX CPU only: the kernels on the instructions against the same reference, 1, 2 and 3
 * threads, and beside the GEMM. */
START_TEST(attention_amx_matches_reference) {
    check_matches_reference(MG_BF16_AMX, "amx");
    check_thread_counts("amx");
    check_shares_the_tiles();
}
END_TEST

static void force_avx512bf16(void) {
    ck_assert(mg_bf16_path_force(MG_BF16_AVX512));
}

static void amx_model_on(void) {
    mg_bf16_amx_emulation(true);
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
}

static void force_amx(void) {
    ck_assert(mg_bf16_path_force(MG_BF16_AMX));
}

static void restore_path(void) {
    mg_bf16_amx_emulation(false);
    tu_restore_bf16_path();
}

/* Whether mg_attention's bf16 kernels run with path p active (AMX: on the model with `model`). */
static bool kernels_run_on(mg_bf16_path p, bool model) {
    mg_bf16_amx_emulation(model);
    const bool ok = mg_bf16_path_force(p) && mg_attn_bf16_fused();
    mg_bf16_amx_emulation(false); /* outside a test: no ck_assert */
    mg_bf16_path_force(mg_bf16_path_detected());
    return ok;
}

typedef struct named {
    const TTest *t;
    const char *name;
} named;

static void add_cases(TCase *tc, const named *t, size_t n, bool run, const char *why) {
    for (size_t i = 0; i < n; i++) {
        if (run)
            tcase_add_test(tc, t[i].t);
        else
            fprintf(stderr, "# %s skipped: %s\n", t[i].name, why);
    }
}

#define NAMED(t) {t, #t}

Suite *bf16_attention_fused_suite(void) {
    Suite *s = suite_create("bf16_attention_fused");
    const bool avx512bf16 = mg_bf16_path_available(MG_BF16_AVX512);
    const char *no_avx512bf16 = avx512bf16 ? "the build left the bf16 attention kernels out"
                                           : "no AVX512-BF16 on this CPU";

    TCase *vdp = tcase_create("avx512bf16");
    tcase_add_checked_fixture(vdp, force_avx512bf16, restore_path);
    const named vdp_cases[] = {
        NAMED(attention_bf16_fused_matches_reference),
        NAMED(attention_bf16_fused_differs_from_fp32_but_close),
        NAMED(attention_bf16_fused_same_bits_for_any_thread_count),
        NAMED(attention_op_in_bf16_takes_the_fused_kernels),
    };
    add_cases(vdp, vdp_cases, sizeof vdp_cases / sizeof *vdp_cases,
              avx512bf16 && kernels_run_on(MG_BF16_AVX512, false), no_avx512bf16);
    suite_add_tcase(s, vdp);

    TCase *other = tcase_create("other paths");
    tcase_add_checked_fixture(other, NULL, restore_path);
    tcase_add_test(other, attention_bf16_other_paths_run_fp32);
    suite_add_tcase(s, other);

    /* the AMX kernels' softmax and packing run on AVX512-BF16: without it they are not used */
    TCase *model = tcase_create("amx on the model");
    tcase_set_timeout(model, 240);
    tcase_add_checked_fixture(model, amx_model_on, restore_path);
    const named model_cases[] = {
        NAMED(attention_amx_on_the_model_matches_reference),
        NAMED(attention_amx_on_the_model_same_bits_for_any_thread_count),
        NAMED(attention_amx_on_the_model_differs_from_fp32_but_close),
        NAMED(attention_op_in_bf16_takes_the_amx_kernels_on_the_model),
        NAMED(attention_amx_reference_tells_the_instructions_apart),
        NAMED(attention_amx_on_the_model_shares_the_tiles_with_bgemm),
        NAMED(attention_amx_on_the_model_survives_other_tile_users),
    };
    add_cases(model, model_cases, sizeof model_cases / sizeof *model_cases,
              avx512bf16 && kernels_run_on(MG_BF16_AMX, true), no_avx512bf16);
    suite_add_tcase(s, model);

    TCase *silicon = tcase_create("amx");
    tcase_set_timeout(silicon, 240);
    tcase_add_checked_fixture(silicon, force_amx, restore_path);
    const named silicon_cases[] = {NAMED(attention_amx_matches_reference)};
    const bool amx = mg_bf16_path_available(MG_BF16_AMX);
    add_cases(silicon, silicon_cases, 1, amx && kernels_run_on(MG_BF16_AMX, false),
              !mg_bf16_path_compiled(MG_BF16_AMX) ? "the build left the AMX path out"
              : !amx                              ? "no AMX on this CPU"
                                                  : "no AVX512-BF16 beside AMX on this CPU");
    suite_add_tcase(s, silicon);
    return s;
}

MG_TEST_MAIN(bf16_attention_fused_suite)
