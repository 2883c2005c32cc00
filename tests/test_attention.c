/* Fused attention (core/kernels/attention.c) against its reference twin, which materialises the
 * probabilities: forward output and all three gradients on odd shapes, every SIMD path this CPU
 * has, both backward work splits, any thread count (bit for bit), incremental decoding, -inf
 * biases, the op glue and its memory use.
 *
 * Tolerance: outputs and gradients are compared relative to the largest magnitude of the reference
 * array: max |fused - ref| <= TOL * max |ref|. The two differ in summation order (tiles, online
 * rescaling, D_i = rowsum(dO * O) instead of rowsum(dP * P)) and in exp (a polynomial against
 * libm's expf), each worth a few float ulps per term. */
#include "test_util.h"
#include "minigrad/minigrad.h"
#include "minigrad/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Case tables leave trailing fields (tbias) to their zero defaults on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define TOL_OUT 5e-5
#define TOL_GRAD 1e-4

/* ---- bias callbacks ------------------------------------------------------------------------- */

enum { NO_BIAS = 0, ALIBI = 1, HOLES = 2 };
/* Bias rows: none, one Tq x Tk block per (batch, head), or one per head shared by the batch. */
enum { TB_NONE = 0, TB_FULL = 1, TB_PER_HEAD = 2 };
enum { HOLE_ROW = 5 }; /* the query position whose every key HOLES hides */

typedef struct alibi_user {
    int64_t H;
    bool symmetric; /* -m|i-j| (non-causal) instead of -m(i-j) */
} alibi_user;

static void alibi(const void *user, int64_t h, int64_t qpos, int64_t k0, int64_t n, float *logits) {
    const alibi_user *u = user;
    const float m = exp2f(-8.0f * (float)(h + 1) / (float)u->H);
    for (int64_t j = 0; j < n; j++) {
        int64_t dist = qpos - (k0 + j);
        if (u->symmetric && dist < 0) dist = -dist;
        logits[j] -= m * (float)dist;
    }
}

/* -inf on every key at position 1 mod 3 except the query's own, and on every key of HOLE_ROW.
 * Key 0 stays finite for every other row (every query sees it, causal or not). */
static void holes(const void *user, int64_t h, int64_t qpos, int64_t k0, int64_t n, float *logits) {
    (void)user, (void)h;
    for (int64_t j = 0; j < n; j++) {
        const int64_t kpos = k0 + j;
        if (qpos == HOLE_ROW || (kpos % 3 == 1 && kpos != qpos)) logits[j] += -INFINITY;
    }
}

/* ---- cases ---------------------------------------------------------------------------------- */

typedef struct acase {
    const char *name;
    int64_t B, H, Tq, Tk, D;
    bool causal;
    int64_t q_pos0;
    int bias;
    float scale; /* 0: 1/sqrt(D) */
    int tbias;   /* bias rows (mg_attn_desc.bias_data) and dL/dlogits: TB_NONE, TB_FULL, TB_PER_HEAD */
} acase;

static const acase cases[] = {
    {"T=1 D=1 causal", 1, 1, 1, 1, 1, true, 0, NO_BIAS, 0},
    {"T=2 D=3 full", 2, 1, 2, 2, 3, false, 0, NO_BIAS, 0},
    {"T=17 D=16 causal alibi", 2, 3, 17, 17, 16, true, 0, ALIBI, 0},
    {"T=63 D=64 full", 1, 2, 63, 63, 64, false, 0, NO_BIAS, 0},
    {"T=65 D=64 causal alibi", 1, 2, 65, 65, 64, true, 0, ALIBI, 0},
    {"T=130 D=16 causal scale 0.3", 1, 1, 130, 130, 16, true, 0, NO_BIAS, 0.3f},
    {"T=130 D=3 full alibi", 2, 1, 130, 130, 3, false, 0, ALIBI, 0},
    {"Tq=5 Tk=70 q_pos0=65 causal", 1, 2, 5, 70, 16, true, 65, NO_BIAS, 0},
    {"Tq=1 Tk=130 q_pos0=129 causal alibi (decode)", 1, 3, 1, 130, 64, true, 129, ALIBI, 0},
    {"Tq=2 Tk=100 q_pos0=40 causal", 2, 1, 2, 100, 64, true, 40, NO_BIAS, 0},
    {"Tq=3 Tk=17 q_pos0=7 full alibi", 1, 2, 3, 17, 5, false, 7, ALIBI, 0},
    {"Tq=130 Tk=65 full", 1, 1, 130, 65, 64, false, 0, NO_BIAS, 0},
    {"Tq=70 Tk=200 q_pos0=100 causal D=100", 1, 1, 70, 200, 100, true, 100, NO_BIAS, 1.5f},
    {"T=128 D=64 B*H=8 causal scale 1", 2, SANITIZED ? 1 : 4, 128, 128, 64, true, 0, NO_BIAS, 1.0f},
    {"T=65 D=16 causal -inf holes", 1, 2, 65, 65, 16, true, 0, HOLES, 0},
    {"Tq=17 Tk=33 D=8 full -inf holes", 1, 1, 17, 33, 8, false, 0, HOLES, 0},
    {"T=17 D=16 causal bias rows", 2, 3, 17, 17, 16, true, 0, NO_BIAS, 0, TB_FULL},
    {"T=130 D=3 full bias rows per head", 2, 2, 130, 130, 3, false, 0, NO_BIAS, 0, TB_PER_HEAD},
    {"T=65 D=64 causal alibi + bias rows", 1, 2, 65, 65, 64, true, 0, ALIBI, 0, TB_FULL},
    {"Tq=70 Tk=200 q_pos0=100 causal bias rows", 1, 2, 70, 200, 24, true, 100, NO_BIAS, 0, TB_PER_HEAD},
    {"Tq=2 Tk=100 q_pos0=40 causal bias rows", 2, 1, 2, 100, 64, true, 40, NO_BIAS, 0, TB_FULL},
    /* a few queries (decoding): keys over several tiles and part groups, a row with no key */
    {"Tq=2 Tk=151 q_pos0=149 causal alibi D=24", 1, 3, 2, 151, 24, true, 149, ALIBI, 0},
    {"Tq=1 Tk=6 q_pos0=5 causal -inf holes (no key)", 1, 2, 1, 6, 16, true, 5, HOLES, 0},
    {"Tq=2 Tk=70 q_pos0=4 full -inf holes D=20", 2, 1, 2, 70, 20, false, 4, HOLES, 0},
    {"Tq=1 Tk=77 full bias rows per head D=7", 2, 2, 1, 77, 7, false, 0, NO_BIAS, 0.5f, TB_PER_HEAD},
    {"Tq=2 Tk=65 q_pos0=63 causal (last tile: one row only)", 1, 2, 2, 65, 64, true, 63, ALIBI, 0},
    {"Tq=1 Tk=100 q_pos0=99 causal D=32", 2, 2, 1, 100, 32, true, 99, NO_BIAS, 0},
    {"Tq=2 Tk=129 q_pos0=127 causal D=128", 1, 2, 2, 129, 128, true, 127, NO_BIAS, 0, TB_FULL},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

typedef struct inputs {
    mg_attn_desc a;
    alibi_user au;
    float *q, *k, *v, *dO, *g0; /* g0: initial gradient contents (backward accumulates) */
    float *bias;                /* bias rows (tbias), NULL without */
} inputs;

typedef struct result {
    float *o, *lse, *dq, *dk, *dv;
    float *db; /* dL/dlogits (B,H,Tq,Tk) when the case has bias rows, else NULL */
} result;

/* Allocation failure is not what these tests are about. */
static void *need(void *p) {
    if (!p) {
        fprintf(stderr, "test_attention: out of memory\n");
        abort();
    }
    return p;
}

static void *xmalloc(size_t bytes) { return need(malloc(bytes ? bytes : 1)); }

static float *randn(mg_rng *r, int64_t n, float s) {
    float *x = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = s * mg_rng_normal(r);
    return x;
}

static void make_inputs(const acase *c, uint64_t seed, inputs *in) {
    memset(in, 0, sizeof *in);
    mg_rng r = mg_rng_make(seed);
    in->a = (mg_attn_desc){.B = c->B, .H = c->H, .Tq = c->Tq, .Tk = c->Tk, .D = c->D,
                           .causal = c->causal, .q_pos0 = c->q_pos0};
    in->a.scale = c->scale != 0.0f ? c->scale : 1.0f / sqrtf((float)c->D);
    in->au = (alibi_user){c->H, !c->causal};
    if (c->bias == ALIBI) in->a.bias = alibi, in->a.bias_user = &in->au;
    if (c->bias == HOLES) in->a.bias = holes;
    const int64_t BH = c->B * c->H, nq = BH * c->Tq * c->D, nk = BH * c->Tk * c->D;
    in->q = randn(&r, nq, 1.0f);
    in->k = randn(&r, nk, 1.0f);
    in->v = randn(&r, nk, 1.0f);
    in->dO = randn(&r, nq, 1.0f);
    in->g0 = randn(&r, nq > nk ? nq : nk, 0.5f);
    if (c->tbias) {
        const int64_t TT = c->Tq * c->Tk;
        in->bias = randn(&r, (c->tbias == TB_FULL ? BH : c->H) * TT, 1.0f);
        in->a.bias_data = in->bias;
        in->a.bias_hstride = TT;
        in->a.bias_bstride = c->tbias == TB_FULL ? c->H * TT : 0;
    }
}

static void free_inputs(inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->dO), free(in->g0), free(in->bias);
}

static void alloc_result(const inputs *in, result *res) {
    const mg_attn_desc *a = &in->a;
    const int64_t BH = a->B * a->H, nq = BH * a->Tq * a->D, nk = BH * a->Tk * a->D;
    res->o = xmalloc((size_t)nq * sizeof(float));
    res->lse = xmalloc((size_t)(BH * a->Tq) * sizeof(float));
    res->dq = xmalloc((size_t)nq * sizeof(float));
    res->dk = xmalloc((size_t)nk * sizeof(float));
    res->dv = xmalloc((size_t)nk * sizeof(float));
    memcpy(res->dq, in->g0, (size_t)nq * sizeof(float));
    memcpy(res->dk, in->g0, (size_t)nk * sizeof(float));
    memcpy(res->dv, in->g0, (size_t)nk * sizeof(float));
    res->db = NULL;
    if (in->bias) { /* starts from g0's values too: backward accumulates */
        const int64_t nb = BH * a->Tq * a->Tk;
        res->db = xmalloc((size_t)nb * sizeof(float));
        for (int64_t i = 0; i < nb; i++) res->db[i] = in->g0[i % (nq > nk ? nq : nk)];
    }
}

static void free_result(result *r) { free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv), free(r->db); }

/* Where run_fused's workspace starts: this many bytes past a 64-byte boundary (the kernels take
 * any address), in a block that ends where the larger of the two sizes asked for does, so that
 * AddressSanitizer sees a kernel that reaches past it. */
static size_t ws_shift = 0;

static void run_fused(const inputs *in, result *res) {
    alloc_result(in, res);
    mg_attn_desc d = in->a;
    d.dbias = res->db;
    const mg_attn_desc *a = &d;
    size_t fb = mg_attn_forward_workspace(a), bb = mg_attn_backward_workspace(a);
    void *p = NULL;
    if (posix_memalign(&p, 64, (fb > bb ? fb : bb) + ws_shift) != 0) p = NULL;
    char *block = need(p), *ws = block + ws_shift;
    mg_attn_forward(a, in->q, in->k, in->v, res->o, res->lse, ws, fb);
    mg_attn_backward(a, in->q, in->k, in->v, res->o, res->lse, in->dO, res->dq, res->dk, res->dv, ws,
                     bb);
    free(block);
}

static void run_ref(const inputs *in, result *res) {
    alloc_result(in, res);
    mg_attn_desc d = in->a;
    d.dbias = res->db;
    const mg_attn_desc *a = &d;
    float *p = xmalloc((size_t)(a->B * a->H * a->Tq * a->Tk) * sizeof(float));
    size_t bb = mg_attn_backward_ref_workspace(a);
    void *ws = need(mg_aligned_alloc(bb + 64));
    mg_attn_forward_ref(a, in->q, in->k, in->v, res->o, p);
    mg_attn_backward_ref(a, in->q, in->k, in->v, p, in->dO, res->dq, res->dk, res->dv, ws, bb + 64);
    free(p);
    mg_aligned_free(ws);
}

/* max |x - ref| / max |ref|; fails on any non-finite value in x. */
static double rel_err(const char *what, const char *name, const float *x, const float *ref, int64_t n) {
    double worst = 0.0, big = 0.0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(x[i]), "%s: %s[%lld] = %g", name, what, (long long)i, (double)x[i]);
        worst = fmax(worst, fabs((double)x[i] - (double)ref[i]));
        big = fmax(big, fabs((double)ref[i]));
    }
    return big > 0.0 ? worst / big : worst;
}

static void expect_close(const char *isa, const acase *c, const char *what, const float *x,
                         const float *ref, int64_t n, double tol) {
    const double e = rel_err(what, c->name, x, ref, n);
    ck_assert_msg(e <= tol, "%s [%s]: %s differs from the reference by %.3g of its largest value (limit %.1g)",
                  c->name, isa, what, e, tol);
}

static void compare(const char *isa, const acase *c, const inputs *in, const result *f, const result *r) {
    const int64_t BH = c->B * c->H, nq = BH * c->Tq * c->D, nk = BH * c->Tk * c->D;
    expect_close(isa, c, "output", f->o, r->o, nq, TOL_OUT);
    expect_close(isa, c, "dq", f->dq, r->dq, nq, TOL_GRAD);
    expect_close(isa, c, "dk", f->dk, r->dk, nk, TOL_GRAD);
    expect_close(isa, c, "dv", f->dv, r->dv, nk, TOL_GRAD);
    if (c->tbias) expect_close(isa, c, "dbias", f->db, r->db, BH * c->Tq * c->Tk, TOL_GRAD);
    (void)in;
}

static const mg_isa all_isas[] = {MG_ISA_GENERIC, MG_ISA_AVX2, MG_ISA_AVX512};

/* ---- fused against reference ------------------------------------------------------------------ */

START_TEST(fused_matches_reference) {
    const acase *c = &cases[_i];
    inputs in;
    make_inputs(c, 100 + (uint64_t)_i, &in);
    int ran = 0;
    for (size_t s = 0; s < sizeof all_isas / sizeof all_isas[0]; s++) {
        if (!mg_isa_force(all_isas[s])) continue; /* this CPU or build lacks the path */
        result f, r;
        run_fused(&in, &f);
        run_ref(&in, &r);
        compare(mg_isa_name(all_isas[s]), c, &in, &f, &r);
        free_result(&f), free_result(&r);
        ran++;
    }
    ck_assert_int_ge(ran, 1);
    free_inputs(&in);
}
END_TEST

static bool same_bits(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

static void expect_identical(const char *how, const acase *c, const result *x, const result *y) {
    const int64_t BH = c->B * c->H, nq = BH * c->Tq * c->D, nk = BH * c->Tk * c->D;
    ck_assert_msg(same_bits(x->o, y->o, nq), "%s: %s: output bits differ", c->name, how);
    ck_assert_msg(same_bits(x->lse, y->lse, BH * c->Tq), "%s: %s: lse bits differ", c->name, how);
    ck_assert_msg(same_bits(x->dq, y->dq, nq), "%s: %s: dq bits differ", c->name, how);
    ck_assert_msg(same_bits(x->dk, y->dk, nk), "%s: %s: dk bits differ", c->name, how);
    ck_assert_msg(same_bits(x->dv, y->dv, nk), "%s: %s: dv bits differ", c->name, how);
    if (c->tbias) ck_assert_msg(same_bits(x->db, y->db, BH * c->Tq * c->Tk), "%s: %s: dbias bits differ", c->name, how);
}

/* The two backward work splits are the same arithmetic in the same order, on every path. */
START_TEST(backward_splits_agree_bit_for_bit) {
    const acase *c = &cases[_i];
    inputs in;
    make_inputs(c, 200 + (uint64_t)_i, &in);
    for (size_t s = 0; s < sizeof all_isas / sizeof all_isas[0]; s++) {
        if (!mg_isa_force(all_isas[s])) continue;
        result x, y;
        in.a.backward_split = 1;
        run_fused(&in, &x);
        in.a.backward_split = 2;
        run_fused(&in, &y);
        expect_identical(mg_isa_name(all_isas[s]), c, &x, &y);
        free_result(&x), free_result(&y);
    }
    free_inputs(&in);
}
END_TEST

/* grads_fresh: dq, dk and dv full of NaN come out with the bits of zeroed ones added to, on every
 * path, in both backward splits, float32 and bf16 products, the reference too, including keys no
 * query sees (written as zeros) and rows no key is visible to. */
START_TEST(fresh_gradients_are_written_not_added) {
    const acase *c = &cases[_i];
    inputs in;
    make_inputs(c, 900 + (uint64_t)_i, &in);
    const int64_t BH = c->B * c->H, nq = BH * c->Tq * c->D, nk = BH * c->Tk * c->D, ng = nq > nk ? nq : nk;
    for (size_t s = 0; s < sizeof all_isas / sizeof all_isas[0]; s++) {
        if (!mg_isa_force(all_isas[s])) continue;
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (int split = 0; split <= 2; split++) { /* 0: the reference */
                in.a.bf16 = bf16, in.a.backward_split = split;
                result x, y;
                for (int64_t i = 0; i < ng; i++) in.g0[i] = 0.0f;
                in.a.grads_fresh = false;
                split ? run_fused(&in, &x) : run_ref(&in, &x);
                for (int64_t i = 0; i < ng; i++) in.g0[i] = NAN;
                in.a.grads_fresh = true;
                split ? run_fused(&in, &y) : run_ref(&in, &y);
                char how[96];
                snprintf(how, sizeof how, "%s, %s, split %d: written vs zeroed and added", mg_isa_name(all_isas[s]),
                         bf16 ? "bf16" : "float32", split);
                /* (dbias starts from g0 in both runs: not what is compared here) */
                ck_assert_msg(same_bits(x.dq, y.dq, nq), "%s: %s: dq bits differ", c->name, how);
                ck_assert_msg(same_bits(x.dk, y.dk, nk), "%s: %s: dk bits differ", c->name, how);
                ck_assert_msg(same_bits(x.dv, y.dv, nk), "%s: %s: dv bits differ", c->name, how);
                free_result(&x), free_result(&y);
            }
    }
    /* only some gradients asked for: dq alone, dk and dv alone */
    for (int which = 0; which < 2; which++)
        for (int split = 1; split <= 2; split++) {
            in.a.bf16 = false, in.a.backward_split = split;
            result x, y;
            float *xg[2][3], *yg[2][3];
            for (int r = 0; r < 2; r++) {
                result *res = r ? &y : &x;
                for (int64_t i = 0; i < ng; i++) in.g0[i] = r ? NAN : 0.0f;
                alloc_result(&in, res);
                in.a.grads_fresh = r;
                const size_t fb = mg_attn_forward_workspace(&in.a), bb = mg_attn_backward_workspace(&in.a);
                void *ws = need(mg_aligned_alloc(fb > bb ? fb : bb));
                mg_attn_forward(&in.a, in.q, in.k, in.v, res->o, res->lse, ws, fb);
                float **gg = r ? yg[which] : xg[which];
                gg[0] = which == 0 ? res->dq : NULL, gg[1] = which ? res->dk : NULL, gg[2] = which ? res->dv : NULL;
                mg_attn_backward(&in.a, in.q, in.k, in.v, res->o, res->lse, in.dO, gg[0], gg[1], gg[2], ws, bb);
                mg_aligned_free(ws);
            }
            const char *how = which ? "dk and dv alone" : "dq alone";
            if (!which) ck_assert_msg(same_bits(x.dq, y.dq, nq), "%s: %s, split %d: dq bits differ", c->name, how, split);
            else {
                ck_assert_msg(same_bits(x.dk, y.dk, nk), "%s: %s, split %d: dk bits differ", c->name, how, split);
                ck_assert_msg(same_bits(x.dv, y.dv, nk), "%s: %s, split %d: dv bits differ", c->name, how, split);
            }
            free_result(&x), free_result(&y);
        }
    in.a.grads_fresh = false;
    free_inputs(&in);
}
END_TEST

START_TEST(thread_count_does_not_change_bits) {
    const acase *c = &cases[_i];
    inputs in;
    make_inputs(c, 300 + (uint64_t)_i, &in);
    result one, more;
    mg_set_num_threads(1);
    run_fused(&in, &one);
    for (int nt = 2; nt <= 3; nt++) { /* 3: B*H not a multiple, another split of the work */
        mg_set_num_threads(nt);
        run_fused(&in, &more);
        expect_identical(nt == 2 ? "1 vs 2 threads" : "1 vs 3 threads", c, &one, &more);
        free_result(&more);
    }
    mg_set_num_threads(0);
    free_result(&one);
    free_inputs(&in);
}
END_TEST

/* A workspace that does not start on a cache line (malloc's 16 bytes, an odd address) gives the
 * same bits, float32 and bf16 products, every path: the kernels start their scratch at its first
 * 64-byte boundary, within the size they asked for. */
START_TEST(workspace_at_any_address_gives_the_same_bits) {
    const acase *c = &cases[_i];
    inputs in;
    make_inputs(c, 400 + (uint64_t)_i, &in);
    for (size_t s = 0; s < sizeof all_isas / sizeof all_isas[0]; s++) {
        if (!mg_isa_force(all_isas[s])) continue;
        for (int bf16 = 0; bf16 < 2; bf16++) {
            in.a.bf16 = bf16;
            result x, y;
            ws_shift = 0;
            run_fused(&in, &x);
            static const size_t shifts[] = {1, 16, 36, 63};
            for (size_t t = 0; t < sizeof shifts / sizeof shifts[0]; t++) {
                ws_shift = shifts[t];
                run_fused(&in, &y);
                char how[96];
                snprintf(how, sizeof how, "%s, %s, workspace %zu bytes past a line",
                         mg_isa_name(all_isas[s]), bf16 ? "bf16" : "float32", shifts[t]);
                expect_identical(how, c, &x, &y);
                free_result(&y);
            }
            ws_shift = 0;
            free_result(&x);
        }
    }
    in.a.bf16 = false;
    free_inputs(&in);
}
END_TEST

/* ---- masked rows ------------------------------------------------------------------------------ */

/* Causal masking alone never empties a row: query i sees keys 0..q_pos0+i, and q_pos0 >= 0. A bias
 * can: HOLES hides every key of HOLE_ROW. That row's output is 0 and its lse -inf, it passes no
 * gradient, and the -inf elsewhere produce no NaN (checked for every case in rel_err). */
START_TEST(row_with_every_key_hidden_is_zero) {
    /* the whole sequence (tiles), and one or two queries at the hidden row (the few-query path) */
    const acase list[] = {
        {"holes", 1, 2, 9, 9, 16, true, 0, HOLES, 0},
        {"holes, one query", 1, 2, 1, HOLE_ROW + 1, 16, true, HOLE_ROW, HOLES, 0},
        {"holes, two queries", 1, 2, 2, HOLE_ROW + 2, 20, true, HOLE_ROW - 1, HOLES, 0},
    };
    for (size_t li = 0; li < sizeof list / sizeof list[0]; li++) {
        const acase *c = &list[li];
        const int64_t Tq = c->Tq, D = c->D, hole = HOLE_ROW - c->q_pos0;
        inputs in;
        make_inputs(c, 7, &in);
        for (size_t si = 0; si < sizeof all_isas / sizeof all_isas[0]; si++) {
            if (!mg_isa_force(all_isas[si])) continue;
            result f;
            run_fused(&in, &f);
            for (int64_t bh = 0; bh < 2; bh++) {
                ck_assert_msg(f.lse[bh * Tq + hole] == -INFINITY, "%s [%s]: lse %g", c->name,
                              mg_isa_name(all_isas[si]), (double)f.lse[bh * Tq + hole]);
                for (int64_t d = 0; d < D; d++) {
                    const int64_t at = (bh * Tq + hole) * D + d;
                    ck_assert_float_eq(f.o[at], 0.0f);
                    ck_assert_float_eq(f.dq[at], in.g0[at]); /* untouched: no gradient through the row */
                }
                for (int64_t i = 0; i < Tq; i++)
                    if (i != hole) ck_assert(isfinite(f.lse[bh * Tq + i]));
            }
            free_result(&f);
        }
        free_inputs(&in);
    }
}
END_TEST

/* Degenerate shapes do not crash: no queries, or no keys at all (non-causal), where every row is
 * empty and the output is zero as in the reference. */
START_TEST(empty_shapes) {
    const acase list[] = {
        {"no queries", 1, 2, 0, 5, 8, false, 0, NO_BIAS, 0},
        {"no keys", 1, 2, 3, 0, 8, false, 0, ALIBI, 0},
        {"no queries causal", 2, 1, 0, 0, 4, true, 0, NO_BIAS, 0},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        const acase *c = &list[i];
        inputs in;
        make_inputs(c, 3, &in);
        result f, r;
        run_fused(&in, &f);
        run_ref(&in, &r);
        const int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
        for (int64_t j = 0; j < nq; j++) ck_assert(f.o[j] == 0.0f && r.o[j] == 0.0f);
        for (int64_t j = 0; j < c->B * c->H * c->Tq; j++) ck_assert(f.lse[j] == -INFINITY);
        ck_assert(same_bits(f.dq, in.g0, nq) && same_bits(r.dq, in.g0, nq));
        ck_assert(same_bits(f.dk, in.g0, nk) && same_bits(f.dv, in.g0, nk));
        free_result(&f), free_result(&r);
        free_inputs(&in);
    }
}
END_TEST

/* ---- incremental decoding ---------------------------------------------------------------------- */

/* One query at a time against the keys so far (a KV cache) gives the rows of full causal attention. */
START_TEST(decoding_one_query_at_a_time_matches_full) {
    const int64_t H = 2, T = SANITIZED ? 70 : 150, D = 64;
    const acase full = {"full", 1, H, T, T, D, true, 0, ALIBI, 0};
    inputs in;
    make_inputs(&full, 11, &in);
    result f;
    run_fused(&in, &f);
    float *q1 = xmalloc((size_t)(H * D) * sizeof(float)), *kk = xmalloc((size_t)(H * T * D) * sizeof(float));
    float *vv = xmalloc((size_t)(H * T * D) * sizeof(float)), *o1 = xmalloc((size_t)(H * D) * sizeof(float));
    for (int64_t t = 0; t < T; t++) {
        mg_attn_desc a = in.a;
        a.Tq = 1, a.Tk = t + 1, a.q_pos0 = t;
        for (int64_t h = 0; h < H; h++) {
            memcpy(q1 + h * D, in.q + (h * T + t) * D, (size_t)D * sizeof(float));
            memcpy(kk + h * (t + 1) * D, in.k + h * T * D, (size_t)((t + 1) * D) * sizeof(float));
            memcpy(vv + h * (t + 1) * D, in.v + h * T * D, (size_t)((t + 1) * D) * sizeof(float));
        }
        size_t wb = mg_attn_forward_workspace(&a);
        void *ws = mg_aligned_alloc(wb);
        mg_attn_forward(&a, q1, kk, vv, o1, NULL, ws, wb);
        mg_aligned_free(ws);
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++) {
                const float want = f.o[(h * T + t) * D + d];
                ck_assert_msg(fabsf(o1[h * D + d] - want) <= 1e-5f * (1.0f + fabsf(want)),
                              "step %lld head %lld dim %lld: %g vs %g", (long long)t, (long long)h,
                              (long long)d, (double)o1[h * D + d], (double)want);
            }
    }
    free(q1), free(kk), free(vv), free(o1);
    free_result(&f);
    free_inputs(&in);
}
END_TEST

/* ---- through the op -------------------------------------------------------------------------- */

typedef struct op_run {
    float *out, *gq, *gk, *gv;
} op_run;

/* mg_attention forward + backward of sum(out * R) with the given implementation. */
static void op_once(const acase *c, uint64_t seed, mg_attn_impl impl, const bool want[3], int passes,
                    op_run *res) {
    mg_attn_set_impl(impl);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(seed);
    alibi_user au = {c->H, !c->causal};
    mg_tensor *x[3];
    const int64_t sq[4] = {c->B, c->H, c->Tq, c->D}, sk[4] = {c->B, c->H, c->Tk, c->D};
    for (int i = 0; i < 3; i++) {
        x[i] = mg_tensor_new(ctx, MG_F32, 4, i ? sk : sq);
        for (int64_t j = 0; j < x[i]->numel; j++) x[i]->data[j] = mg_rng_normal(&r);
        mg_tensor_set_requires_grad(x[i], want[i]);
    }
    mg_attn_opts o = {.causal = c->causal, .scale = c->scale, .q_pos0 = c->q_pos0};
    if (c->bias == ALIBI) o.bias = alibi, o.bias_user = &au;
    mg_tensor *y = mg_attention(ctx, x[0], x[1], x[2], &o);
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, 4, sq);
    for (int64_t j = 0; j < R->numel; j++) R->data[j] = mg_rng_normal(&r);
    mg_tensor *loss = mg_sum(ctx, mg_mul(ctx, y, R));
    for (int p = 0; p < passes; p++) mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    res->out = xmalloc((size_t)y->numel * sizeof(float));
    memcpy(res->out, y->data, (size_t)y->numel * sizeof(float));
    float **g[3] = {&res->gq, &res->gk, &res->gv};
    for (int i = 0; i < 3; i++) {
        *g[i] = NULL;
        if (!want[i]) {
            ck_assert_ptr_null(x[i]->grad);
            continue;
        }
        ck_assert_ptr_nonnull(x[i]->grad);
        *g[i] = xmalloc((size_t)x[i]->numel * sizeof(float));
        memcpy(*g[i], x[i]->grad, (size_t)x[i]->numel * sizeof(float));
    }
    mg_ctx_free(ctx);
    mg_attn_set_impl(MG_ATTN_FUSED);
}

static void op_free(op_run *r) { free(r->out), free(r->gq), free(r->gk), free(r->gv); }

START_TEST(op_uses_fused_and_matches_reference_switch) {
    const acase list[] = {
        {"op causal alibi", 2, 2, 67, 67, 16, true, 0, ALIBI, 0},
        {"op offset queries", 1, 3, 9, 40, 8, true, 31, NO_BIAS, 0.5f},
        {"op full", 1, 1, 33, 70, 64, false, 0, NO_BIAS, 0},
    };
    const bool subsets[3][3] = {{true, true, true}, {false, true, false}, {true, false, true}};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        for (int s = 0; s < 3; s++) {
            const acase *c = &list[i];
            op_run f, r;
            op_once(c, 40 + i, MG_ATTN_FUSED, subsets[s], 1, &f);
            op_once(c, 40 + i, MG_ATTN_REFERENCE, subsets[s], 1, &r);
            const int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
            expect_close("op", c, "output", f.out, r.out, nq, TOL_OUT);
            if (f.gq) expect_close("op", c, "dq", f.gq, r.gq, nq, TOL_GRAD);
            if (f.gk) expect_close("op", c, "dk", f.gk, r.gk, nk, TOL_GRAD);
            if (f.gv) expect_close("op", c, "dv", f.gv, r.gv, nk, TOL_GRAD);
            op_free(&f), op_free(&r);
        }
}
END_TEST

/* One tensor as q, k and v: the three gradients land in one buffer. Fused and reference agree, and
 * the fused result does not depend on the thread count (each row's dk, dv, dq contributions are
 * added by one thread, in the same order in both work splits). */
static void self_attention_grad(mg_attn_impl impl, int threads, int split_heads, float *out, float *grad) {
    mg_attn_set_impl(impl);
    mg_set_num_threads(threads);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(77);
    const int64_t shape[4] = {1, split_heads, 70, 16};
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 4, shape);
    for (int64_t j = 0; j < x->numel; j++) x->data[j] = mg_rng_normal(&r);
    mg_tensor_set_requires_grad(x, true);
    mg_tensor *y = mg_attention(ctx, x, x, x, &(mg_attn_opts){.causal = true});
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, 4, shape);
    for (int64_t j = 0; j < R->numel; j++) R->data[j] = mg_rng_normal(&r);
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    memcpy(out, y->data, (size_t)y->numel * sizeof(float));
    memcpy(grad, x->grad, (size_t)x->numel * sizeof(float));
    mg_ctx_free(ctx);
    mg_set_num_threads(0);
    mg_attn_set_impl(MG_ATTN_FUSED);
}

START_TEST(one_tensor_as_q_k_and_v) {
    const acase c = {"q = k = v", 1, 3, 70, 70, 16, true, 0, NO_BIAS, 0};
    const int64_t n = 3 * 70 * 16;
    float *fo = xmalloc((size_t)n * 4), *fg = xmalloc((size_t)n * 4), *ro = xmalloc((size_t)n * 4);
    float *rg = xmalloc((size_t)n * 4), *to = xmalloc((size_t)n * 4), *tg = xmalloc((size_t)n * 4);
    self_attention_grad(MG_ATTN_FUSED, 1, 3, fo, fg);
    self_attention_grad(MG_ATTN_REFERENCE, 1, 3, ro, rg);
    expect_close("op", &c, "output", fo, ro, n, TOL_OUT);
    expect_close("op", &c, "gradient", fg, rg, n, TOL_GRAD);
    self_attention_grad(MG_ATTN_FUSED, 2, 3, to, tg); /* 3 heads on 2 threads: the two-pass split */
    ck_assert(same_bits(fo, to, n) && same_bits(fg, tg, n));
    free(fo), free(fg), free(ro), free(rg), free(to), free(tg);
}
END_TEST

/* Backward keeps what forward saved intact: a second pass over the tape adds the same again. */
START_TEST(second_backward_adds_the_same_again) {
    const acase c = {"twice", 1, 2, 70, 70, 16, true, 0, ALIBI, 0};
    const bool all[3] = {true, true, true};
    op_run once, twice;
    op_once(&c, 9, MG_ATTN_FUSED, all, 1, &once);
    op_once(&c, 9, MG_ATTN_FUSED, all, 2, &twice);
    const int64_t n = 2 * 70 * 16;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_float_eq_tol(twice.gq[i], 2.0f * once.gq[i], 1e-6f * (1.0f + fabsf(once.gq[i])));
        ck_assert_float_eq_tol(twice.gk[i], 2.0f * once.gk[i], 1e-6f * (1.0f + fabsf(once.gk[i])));
        ck_assert_float_eq_tol(twice.gv[i], 2.0f * once.gv[i], 1e-6f * (1.0f + fabsf(once.gv[i])));
    }
    op_free(&once), op_free(&twice);
}
END_TEST

/* ---- memory -------------------------------------------------------------------------------- */

/* Arena bytes one attention forward + backward adds beyond its output and the input gradients. */
static size_t attention_arena_bytes(int64_t B, int64_t H, int64_t T, int64_t D, mg_attn_impl impl) {
    mg_attn_set_impl(impl);
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(1);
    const int64_t shape[4] = {B, H, T, D};
    mg_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = mg_tensor_new(ctx, MG_F32, 4, shape);
        for (int64_t j = 0; j < x[i]->numel; j++) x[i]->data[j] = mg_rng_normal(&r);
        mg_tensor_set_requires_grad(x[i], true);
    }
    mg_tensor *R = mg_tensor_new(ctx, MG_F32, 4, shape);
    for (int64_t j = 0; j < R->numel; j++) R->data[j] = mg_rng_normal(&r);
    for (int i = 0; i < 3; i++) mg_grad(ctx, x[i]); /* gradient buffers: not attention's doing */
    const size_t tensor = (size_t)(B * H * T * D) * 4;
    const size_t before = mg_ctx_used_bytes(ctx);
    mg_tensor *y = mg_attention(ctx, x[0], x[1], x[2], &(mg_attn_opts){.causal = true});
    const size_t mid = mg_ctx_used_bytes(ctx);
    mg_tensor *prod = mg_mul(ctx, y, R);
    mg_tensor *loss = mg_sum(ctx, prod);
    mg_grad(ctx, prod), mg_grad(ctx, y); /* upstream of attention: also not its doing */
    const size_t pre_bwd = mg_ctx_used_bytes(ctx);
    mg_backward(ctx, loss);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    /* mul's and sum's backward allocate nothing big; everything else added in backward is ours */
    const size_t used = (mid - before - tensor) + (mg_ctx_used_bytes(ctx) - pre_bwd);
    (void)loss;
    mg_ctx_free(ctx);
    mg_attn_set_impl(MG_ATTN_FUSED);
    return used;
}

START_TEST(arena_use_is_linear_in_T) {
    const int64_t B = 1, H = 2, D = 16, T = 1024;
    mg_set_num_threads(2);
    const size_t fused = attention_arena_bytes(B, H, T, D, MG_ATTN_FUSED);
    const size_t half = attention_arena_bytes(B, H, T / 2, D, MG_ATTN_FUSED);
    const size_t ref = attention_arena_bytes(B, H, T, D, MG_ATTN_REFERENCE);
    mg_set_num_threads(0);
    const size_t square = (size_t)(T * T) * 4; /* one T x T float matrix */
    printf("# arena bytes per head, T=%lld D=%lld: fused %zu (T/2: %zu), reference %zu; T*T*4 = %zu\n",
           (long long)T, (long long)D, fused / (size_t)(B * H), half / (size_t)(B * H),
           ref / (size_t)(B * H), square);
    /* The measurement sees a materialised matrix when there is one ... */
    ck_assert_uint_ge(ref / (size_t)(B * H), square);
    /* ... and the fused kernels hold far less: lse, D_i and per-thread scratch of O(T * D). */
    ck_assert_uint_le(fused / (size_t)(B * H), square / 8);
    /* Linear, not quadratic: doubling T at most a bit more than doubles it. */
    ck_assert_uint_le(fused, half * 5 / 2);
}
END_TEST

/* Without gradients nothing is recorded and no log-sum-exp is kept; the output is the same. */
START_TEST(no_grad_forward_is_the_same) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(3);
    const int64_t shape[4] = {1, 2, 100, 16};
    mg_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = mg_tensor_new(ctx, MG_F32, 4, shape);
        for (int64_t j = 0; j < x[i]->numel; j++) x[i]->data[j] = mg_rng_normal(&r);
        mg_tensor_set_requires_grad(x[i], true);
    }
    const mg_attn_opts o = {.causal = true};
    mg_tensor *y = mg_attention(ctx, x[0], x[1], x[2], &o);
    const int64_t tape = mg_ctx_tape_len(ctx);
    mg_ctx_set_grad_enabled(ctx, false);
    size_t before = mg_ctx_used_bytes(ctx);
    mg_tensor *z = mg_attention(ctx, x[0], x[1], x[2], &o);
    size_t no_grad = mg_ctx_used_bytes(ctx) - before;
    mg_ctx_set_grad_enabled(ctx, true);
    before = mg_ctx_used_bytes(ctx);
    mg_attention(ctx, x[0], x[1], x[2], &o);
    size_t with_grad = mg_ctx_used_bytes(ctx) - before;
    ck_assert_int_eq(mg_ctx_tape_len(ctx), tape + 1); /* only the grad-enabled call recorded */
    ck_assert_uint_ge(with_grad, no_grad + 2 * 100 * 4); /* the lse */
    ck_assert(same_bits(y->data, z->data, y->numel));
    mg_ctx_free(ctx);
}
END_TEST

/* A KV cache read in place (kv_len) gives the same bits as the same keys packed, for the fused
 * kernel and the reference, with a bias that depends on the head and on both positions. */
START_TEST(kv_cache_read_in_place_matches_packed) {
    const int64_t B = 2, H = 3, cap = 150, D = 24, Tq = 2;
    alibi_user au = {H, false};
    const mg_attn_impl impls[2] = {MG_ATTN_FUSED, MG_ATTN_REFERENCE};
    for (int ii = 0; ii < 2; ii++) {
        mg_attn_set_impl(impls[ii]);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_ctx_set_grad_enabled(ctx, false);
        mg_rng r = mg_rng_make(21);
        mg_tensor *kc = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, H, cap, D});
        mg_tensor *vc = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, H, cap, D});
        for (int64_t j = 0; j < kc->numel; j++) kc->data[j] = mg_rng_normal(&r), vc->data[j] = mg_rng_normal(&r);
        mg_tensor *q = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, H, Tq, D});
        for (int64_t j = 0; j < q->numel; j++) q->data[j] = mg_rng_normal(&r);
        const int64_t lens[] = {2, 63, 64, 65, 149, 150};
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            mg_tensor *kp = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, H, n, D});
            mg_tensor *vp = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){B, H, n, D});
            for (int64_t bh = 0; bh < B * H; bh++) {
                memcpy(kp->data + bh * n * D, kc->data + bh * cap * D, (size_t)(n * D) * sizeof(float));
                memcpy(vp->data + bh * n * D, vc->data + bh * cap * D, (size_t)(n * D) * sizeof(float));
            }
            mg_attn_opts o = {.causal = true, .q_pos0 = n - Tq, .bias = alibi, .bias_user = &au};
            mg_tensor *want = mg_attention(ctx, q, kp, vp, &o);
            o.kv_len = n;
            mg_tensor *got = mg_attention(ctx, q, kc, vc, &o);
            ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
            ck_assert_msg(same_bits(want->data, got->data, want->numel), "%s: kv_len %lld differs from packed",
                          impls[ii] == MG_ATTN_FUSED ? "fused" : "reference", (long long)n);
        }
        mg_ctx_free(ctx);
    }
    mg_attn_set_impl(MG_ATTN_FUSED);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------------------- */

START_TEST(negative_q_pos0_is_an_error) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *q = mg_zeros(ctx, 4, (int64_t[]){1, 1, 2, 4});
    mg_tensor *y = mg_attention(ctx, q, q, q, &(mg_attn_opts){.q_pos0 = -3});
    ck_assert_int_eq(c.calls, 1);
    tu_assert_has("error message", c.msg, "mg_attention: q_pos0 -3 is negative");
    ck_assert_ptr_nonnull(y);
    mg_ctx_free(ctx);
}
END_TEST

static void on_log(mg_log_level level, const char *msg, void *user) {
    tu_trap *c = user;
    if (level == MG_LOG_ERROR) c->calls++, snprintf(c->msg, sizeof c->msg, "%s", msg);
}

/* A workspace too small for even one thread is reported, and the outputs are left alone. */
START_TEST(short_workspace_is_reported_not_overrun) {
    const acase cs = {"ws", 1, 1, 70, 70, 16, true, 0, NO_BIAS, 0};
    inputs in;
    make_inputs(&cs, 5, &in);
    tu_trap c = {0};
    mg_log_set(on_log, &c);
    float *o = calloc(70 * 16, sizeof(float)), *dq = calloc(70 * 16, sizeof(float));
    float lse[70] = {0}, ws[64];
    mg_attn_forward(&in.a, in.q, in.k, in.v, o, lse, ws, sizeof ws);
    ck_assert_int_eq(c.calls, 1);
    tu_assert_has("error message", c.msg, "mg_attn_forward: workspace of 256 bytes is too small");
    mg_attn_backward(&in.a, in.q, in.k, in.v, o, lse, in.dO, dq, NULL, NULL, ws, sizeof ws);
    ck_assert_int_eq(c.calls, 2);
    tu_assert_has("error message", c.msg, "mg_attn_backward: workspace of 256 bytes is too small");
    mg_attn_backward_ref(&in.a, in.q, in.k, in.v, o, in.dO, dq, NULL, NULL, ws, sizeof ws);
    ck_assert_int_eq(c.calls, 3);
    tu_assert_has("error message", c.msg, "mg_attn_backward_ref: workspace of 256 bytes is too small");
    for (int i = 0; i < 70 * 16; i++) ck_assert(o[i] == 0.0f && dq[i] == 0.0f);
    /* gradient buffers just made (here full of NaN) are left holding zeros, not their contents */
    for (int i = 0; i < 70 * 16; i++) dq[i] = NAN;
    in.a.grads_fresh = true;
    mg_attn_backward(&in.a, in.q, in.k, in.v, o, lse, in.dO, dq, NULL, NULL, ws, sizeof ws);
    ck_assert_int_eq(c.calls, 4);
    for (int i = 0; i < 70 * 16; i++) ck_assert(dq[i] == 0.0f);
    in.a.grads_fresh = false;
    mg_log_set(NULL, NULL);
    free(o), free(dq);
    free_inputs(&in);
}
END_TEST

START_TEST(kv_len_errors_are_clear) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *q = mg_zeros(ctx, 4, (int64_t[]){1, 1, 1, 4});
    mg_tensor *kc = mg_zeros(ctx, 4, (int64_t[]){1, 1, 8, 4});
    mg_tensor *y = mg_attention(ctx, q, kc, kc, &(mg_attn_opts){.kv_len = 9});
    ck_assert_int_eq(c.calls, 1);
    tu_assert_has("error message", c.msg, "mg_attention: kv_len 9 is outside the cache k(1,1,8,4) (1..8 rows)");
    ck_assert_ptr_nonnull(y);
    mg_ctx_clear_error(ctx);
    mg_tensor_set_requires_grad(q, true);
    y = mg_attention(ctx, q, kc, kc, &(mg_attn_opts){.kv_len = 4});
    ck_assert_int_eq(c.calls, 2);
    tu_assert_has("error message", c.msg, "mg_attention: kv_len reads a KV cache in place, for inference");
    ck_assert_ptr_nonnull(y);
    mg_ctx_free(ctx);
    /* the kernel refuses a strided backward instead of reading past the cache */
    tu_trap l = {0};
    mg_log_set(on_log, &l);
    mg_attn_desc a = {.B = 1, .H = 1, .Tq = 1, .Tk = 2, .D = 4, .scale = 0.5f, .kv_stride = 32};
    float buf[64] = {0}, dq[4] = {0};
    mg_attn_backward(&a, buf, buf, buf, buf, buf, buf, dq, NULL, NULL, buf, sizeof buf);
    ck_assert_int_eq(l.calls, 1);
    tu_assert_has("error message", l.msg, "mg_attn_backward: keys and values must be packed (kv_stride 32 given)");
    mg_attn_backward_ref(&a, buf, buf, buf, buf, buf, dq, NULL, NULL, buf, sizeof buf);
    ck_assert_int_eq(l.calls, 2);
    tu_assert_has("error message", l.msg, "mg_attn_backward_ref: keys and values must be packed");
    for (int i = 0; i < 4; i++) ck_assert(dq[i] == 0.0f);
    mg_log_set(NULL, NULL);
}
END_TEST

/* ---- the op's bias tensor ------------------------------------------------------------------- */

static mg_tensor *leaf(mg_ctx *ctx, mg_rng *r, int ndim, const int64_t *shape, bool grad) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_normal(r);
    mg_tensor_set_requires_grad(t, grad);
    return t;
}

/* The bias tensor's element for (b, h, i, j), reading its broadcast dims as size 1. */
static double bias_at(const mg_tensor *t, int64_t b, int64_t h, int64_t i, int64_t j) {
    const int nd = t->ndim;
    const int64_t Tq = t->shape[nd - 2], Tk = t->shape[nd - 1];
    const int64_t bh = nd >= 3 ? t->shape[nd - 3] : 1, bb = nd == 4 ? t->shape[0] : 1;
    return t->data[(((bb == 1 ? 0 : b) * bh + (bh == 1 ? 0 : h)) * Tq + i) * Tk + j];
}

typedef struct tb_case {
    const char *name;
    int64_t B, H, Tq, Tk, D, q_pos0;
    bool causal;
    int bndim;
    int64_t bshape[4];
} tb_case;

static const tb_case tb_cases[] = {
    {"(B,H,Tq,Tk) causal", 2, 3, 7, 7, 5, 0, true, 4, {2, 3, 7, 7}},
    {"(H,Tq,Tk) full", 2, 3, 5, 9, 8, 0, false, 3, {3, 5, 9}},
    {"(1,1,Tq,Tk) causal offset", 2, 2, 3, 70, 16, 67, true, 4, {1, 1, 3, 70}},
    {"(B,1,Tq,Tk) full", 3, 2, 66, 66, 4, 0, false, 4, {3, 1, 66, 66}},
    {"(Tq,Tk) one query", 1, 4, 1, 3, 3, 0, false, 2, {1, 3}},
};

/* Forward against a float64 computation of softmax(scale q.k + bias, masked) v. */
START_TEST(bias_tensor_forward_matches_float64) {
    const tb_case *c = &tb_cases[_i];
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(40 + (uint64_t)_i);
    mg_tensor *q = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, false);
    mg_tensor *k = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, false);
    mg_tensor *v = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, false);
    mg_tensor *bias = leaf(ctx, &r, c->bndim, c->bshape, false);
    const mg_attn_opts o = {.causal = c->causal, .q_pos0 = c->q_pos0, .bias_tensor = bias};
    mg_tensor *y = mg_attention(ctx, q, k, v, &o);
    ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
    const double scale = 1.0 / sqrt((double)c->D);
    double *s = xmalloc((size_t)c->Tk * sizeof(double)), worst = 0.0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Tq; i++) {
                const int64_t bh = b * c->H + h;
                const int64_t vis = c->causal ? c->q_pos0 + i + 1 : c->Tk;
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < vis; j++) {
                    double d = 0.0;
                    for (int64_t e = 0; e < c->D; e++)
                        d += (double)q->data[(bh * c->Tq + i) * c->D + e] * k->data[(bh * c->Tk + j) * c->D + e];
                    s[j] = scale * d + bias_at(bias, b, h, i, j);
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j < vis; j++) sum += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < c->D; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < vis; j++) acc += s[j] / sum * v->data[(bh * c->Tk + j) * c->D + e];
                    worst = fmax(worst, fabs(acc - y->data[(bh * c->Tq + i) * c->D + e]));
                }
            }
    ck_assert_msg(worst <= 1e-5, "%s: output differs from float64 by %.3g", c->name, worst);
    free(s);
    mg_ctx_free(ctx);
}
END_TEST

/* A broadcast bias gets the sum of the full-shape bias's gradient over its broadcast dims, and
 * every gradient is bit-identical on 1 and 2 threads. */
START_TEST(bias_tensor_gradient_broadcast_and_threads) {
    const tb_case *c = &tb_cases[_i];
    float *grads[2][4] = {{0}};
    int64_t n[4] = {0};
    for (int run = 0; run < 2; run++) {
        mg_set_num_threads(run + 1);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_rng r = mg_rng_make(50 + (uint64_t)_i);
        mg_tensor *x[4] = {
            leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, true),
            leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, true),
            leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, true),
            leaf(ctx, &r, c->bndim, c->bshape, true),
        };
        mg_tensor *R = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, false);
        /* the same bias expanded to (B,H,Tq,Tk), as a second leaf */
        mg_tensor *full = mg_tensor_new(ctx, MG_F32, 4, (int64_t[]){c->B, c->H, c->Tq, c->Tk});
        for (int64_t b = 0, e = 0; b < c->B; b++)
            for (int64_t h = 0; h < c->H; h++)
                for (int64_t i = 0; i < c->Tq; i++)
                    for (int64_t j = 0; j < c->Tk; j++) full->data[e++] = (float)bias_at(x[3], b, h, i, j);
        mg_tensor_set_requires_grad(full, true);
        mg_attn_opts o = {.causal = c->causal, .q_pos0 = c->q_pos0, .bias_tensor = x[3]};
        mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, mg_attention(ctx, x[0], x[1], x[2], &o), R)));
        o.bias_tensor = full;
        mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, mg_attention(ctx, x[0], x[1], x[2], &o), R)));
        ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
        /* sum the full gradient over the broadcast dims in double and compare */
        const int nd = c->bndim;
        const int64_t bh = nd >= 3 ? c->bshape[nd - 3] : 1, bb = nd == 4 ? c->bshape[0] : 1;
        double worst = 0.0, big = 0.0;
        for (int64_t e = 0; e < x[3]->numel; e++) {
            const int64_t j = e % c->Tk, i = e / c->Tk % c->Tq, hh = e / (c->Tq * c->Tk) % bh,
                          b0 = e / (bh * c->Tq * c->Tk);
            double want = 0.0;
            for (int64_t b = 0; b < c->B; b++)
                for (int64_t h = 0; h < c->H; h++)
                    if ((bb == 1 || b == b0) && (bh == 1 || h == hh))
                        want += full->grad[((b * c->H + h) * c->Tq + i) * c->Tk + j];
            worst = fmax(worst, fabs(want - x[3]->grad[e]));
            big = fmax(big, fabs(want));
        }
        ck_assert_msg(big > 0.0 && worst <= 1e-5 * big, "%s: broadcast bias gradient off by %.3g (largest %.3g)",
                      c->name, worst, big);
        for (int t = 0; t < 4; t++) {
            n[t] = x[t]->numel;
            grads[run][t] = xmalloc((size_t)n[t] * sizeof(float));
            memcpy(grads[run][t], x[t]->grad, (size_t)n[t] * sizeof(float));
        }
        mg_ctx_free(ctx);
    }
    mg_set_num_threads(0);
    static const char *names[4] = {"dq", "dk", "dv", "dbias"};
    for (int t = 0; t < 4; t++) {
        ck_assert_msg(same_bits(grads[0][t], grads[1][t], n[t]), "%s: %s bits differ, 1 vs 2 threads", c->name, names[t]);
        free(grads[0][t]), free(grads[1][t]);
    }
}
END_TEST

/* Only the bias wants a gradient (q, k, v constants): the kernels still run, and give the same
 * bits as when everything wants one, on 1 and 3 threads (3 threads take the two-pass backward
 * split where B*H is 4). */
START_TEST(bias_gradient_alone) {
    const tb_case *c = &tb_cases[_i];
    float *want = NULL;
    for (int alone = 0; alone < 2; alone++)
        for (int nt = 1; nt <= 3; nt += 2) {
            mg_set_num_threads(nt);
            mg_ctx *ctx = mg_ctx_new(0);
            mg_rng r = mg_rng_make(70 + (uint64_t)_i);
            mg_tensor *q = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, !alone);
            mg_tensor *k = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, !alone);
            mg_tensor *v = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tk, c->D}, !alone);
            mg_tensor *b = leaf(ctx, &r, c->bndim, c->bshape, true);
            mg_tensor *R = leaf(ctx, &r, 4, (int64_t[]){c->B, c->H, c->Tq, c->D}, false);
            mg_attn_opts o = {.causal = c->causal, .q_pos0 = c->q_pos0, .bias_tensor = b};
            mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, mg_attention(ctx, q, k, v, &o), R)));
            ck_assert_msg(mg_ctx_ok(ctx), "%s: %s", c->name, mg_ctx_error(ctx));
            ck_assert(alone ? !q->grad && !k->grad && !v->grad : q->grad && k->grad && v->grad);
            if (!want) {
                want = xmalloc((size_t)b->numel * sizeof(float));
                memcpy(want, b->grad, (size_t)b->numel * sizeof(float));
            } else {
                ck_assert_msg(same_bits(want, b->grad, b->numel), "%s: bias gradient bits differ (%s, %d threads)",
                              c->name, alone ? "bias alone" : "all inputs", nt);
            }
            mg_ctx_free(ctx);
        }
    mg_set_num_threads(0);
    free(want);
}
END_TEST

/* A zero bias tensor changes nothing: same output and q/k/v gradients, bit for bit, as no bias. */
START_TEST(zero_bias_tensor_is_no_bias) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_rng r = mg_rng_make(61);
    const int64_t qs[4] = {2, 2, 70, 16};
    mg_tensor *q = leaf(ctx, &r, 4, qs, true), *k = leaf(ctx, &r, 4, qs, true), *v = leaf(ctx, &r, 4, qs, true);
    mg_tensor *R = leaf(ctx, &r, 4, qs, false);
    mg_tensor *zero = mg_zeros(ctx, 3, (int64_t[]){2, 70, 70});
    mg_tensor_set_requires_grad(zero, true);
    mg_tensor *y0 = mg_attention(ctx, q, k, v, &(mg_attn_opts){.causal = true});
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y0, R)));
    mg_tensor *c[3];
    for (int i = 0; i < 3; i++) {
        const mg_tensor *src = i == 0 ? q : i == 1 ? k : v;
        c[i] = mg_tensor_new(ctx, MG_F32, 4, qs);
        memcpy(c[i]->data, src->data, (size_t)src->numel * sizeof(float));
        mg_tensor_set_requires_grad(c[i], true);
    }
    mg_tensor *y1 = mg_attention(ctx, c[0], c[1], c[2], &(mg_attn_opts){.causal = true, .bias_tensor = zero});
    mg_backward(ctx, mg_sum(ctx, mg_mul(ctx, y1, R)));
    ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
    ck_assert(same_bits(y0->data, y1->data, y0->numel));
    ck_assert(same_bits(q->grad, c[0]->grad, q->numel));
    ck_assert(same_bits(k->grad, c[1]->grad, q->numel));
    ck_assert(same_bits(v->grad, c[2]->grad, q->numel));
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(bias_tensor_errors_are_clear) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *q = mg_zeros(ctx, 4, (int64_t[]){2, 3, 4, 8}), *k = mg_zeros(ctx, 4, (int64_t[]){2, 3, 5, 8});
    static const struct {
        int nd;
        int64_t shape[4];
        const char *msg;
    } bad[] = {
        {2, {5, 4}, "mg_attention: bias_tensor(5,4) does not broadcast to the logits (B,H,Tq,Tk) = (2,3,4,5)"},
        {3, {2, 4, 5}, "mg_attention: bias_tensor(2,4,5) does not broadcast"},
        {4, {3, 3, 4, 5}, "mg_attention: bias_tensor(3,3,4,5) does not broadcast"},
        {1, {5}, "mg_attention: bias_tensor(5) does not broadcast"},
        {4, {2, 3, 4, 6}, "need (Tq,Tk), (H or 1,Tq,Tk) or (B or 1,H or 1,Tq,Tk)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mg_tensor *b = mg_zeros(ctx, bad[i].nd, bad[i].shape);
        mg_tensor *y = mg_attention(ctx, q, k, k, &(mg_attn_opts){.bias_tensor = b});
        ck_assert_int_eq(c.calls, (int)i + 1);
        tu_assert_has("error message", c.msg, bad[i].msg);
        ck_assert_ptr_nonnull(y);
        mg_ctx_clear_error(ctx);
    }
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){4, 5});
    mg_attention(ctx, q, k, k, &(mg_attn_opts){.bias_tensor = ids});
    tu_assert_has("error message", c.msg, "mg_attention: bias_tensor(4,5) must be float32");
    mg_ctx_clear_error(ctx);
    /* with a KV cache the bias covers the kv_len keys read */
    mg_tensor *q1 = mg_zeros(ctx, 4, (int64_t[]){1, 1, 1, 4}), *kc = mg_zeros(ctx, 4, (int64_t[]){1, 1, 8, 4});
    mg_attention(ctx, q1, kc, kc, &(mg_attn_opts){.kv_len = 3, .bias_tensor = mg_zeros(ctx, 2, (int64_t[]){1, 8})});
    tu_assert_has("error message", c.msg, "bias_tensor(1,8) does not broadcast to the logits (B,H,Tq,Tk) = (1,1,1,3)");
    mg_ctx_clear_error(ctx);
    const int calls = c.calls;
    mg_attention(ctx, q1, kc, kc, &(mg_attn_opts){.kv_len = 3, .bias_tensor = mg_zeros(ctx, 2, (int64_t[]){1, 3})});
    ck_assert_int_eq(c.calls, calls);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(impl_switch_round_trips) {
    ck_assert_int_eq(mg_attn_get_impl(), MG_ATTN_FUSED);
    mg_attn_set_impl(MG_ATTN_REFERENCE);
    ck_assert_int_eq(mg_attn_get_impl(), MG_ATTN_REFERENCE);
    mg_attn_set_impl((mg_attn_impl)42); /* anything unknown means the default */
    ck_assert_int_eq(mg_attn_get_impl(), MG_ATTN_FUSED);
}
END_TEST

static Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("against_reference");
    tcase_add_checked_fixture(tc, NULL, tu_restore_detected_isa); /* the tests force each SIMD path */
    tcase_add_loop_test(tc, fused_matches_reference, 0, N_CASES);
    tcase_add_loop_test(tc, workspace_at_any_address_gives_the_same_bits, 0, N_CASES);
    tcase_add_test(tc, row_with_every_key_hidden_is_zero);
    tcase_add_test(tc, empty_shapes);
    tcase_add_test(tc, decoding_one_query_at_a_time_matches_full);
    suite_add_tcase(s, tc);
    tc = tcase_create("determinism");
    tcase_add_checked_fixture(tc, NULL, tu_restore_detected_isa);
    tcase_add_loop_test(tc, backward_splits_agree_bit_for_bit, 0, N_CASES);
    tcase_add_loop_test(tc, thread_count_does_not_change_bits, 0, N_CASES);
    tcase_add_loop_test(tc, fresh_gradients_are_written_not_added, 0, N_CASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("op");
    tcase_add_test(tc, op_uses_fused_and_matches_reference_switch);
    tcase_add_test(tc, second_backward_adds_the_same_again);
    tcase_add_test(tc, one_tensor_as_q_k_and_v);
    tcase_add_test(tc, arena_use_is_linear_in_T);
    tcase_add_test(tc, no_grad_forward_is_the_same);
    tcase_add_test(tc, kv_cache_read_in_place_matches_packed);
    tcase_add_loop_test(tc, bias_tensor_forward_matches_float64, 0, sizeof tb_cases / sizeof tb_cases[0]);
    tcase_add_loop_test(tc, bias_tensor_gradient_broadcast_and_threads, 0, sizeof tb_cases / sizeof tb_cases[0]);
    tcase_add_test(tc, zero_bias_tensor_is_no_bias);
    tcase_add_loop_test(tc, bias_gradient_alone, 0, sizeof tb_cases / sizeof tb_cases[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, negative_q_pos0_is_an_error);
    tcase_add_test(tc, short_workspace_is_reported_not_overrun);
    tcase_add_test(tc, kv_len_errors_are_clear);
    tcase_add_test(tc, bias_tensor_errors_are_clear);
    tcase_add_test(tc, impl_switch_round_trips);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(attention_suite)
