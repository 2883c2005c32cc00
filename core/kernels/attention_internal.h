/* attention_internal.h: the contract between the fused attention drivers (attention.c) and their
 * per-ISA tile kernels (attention_tmpl.h, compiled once per SIMD path as attention_ISA.c): tile
 * sizes, the work description, the scratch layouts and small shared helpers. */
#ifndef MG_KERNELS_ATTENTION_INTERNAL_H
#define MG_KERNELS_ATTENTION_INTERNAL_H

#include "minigrad/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AT_BR 64          /* queries per tile */
#define AT_BC 64          /* keys per tile */
#define AT_FEW_QUERIES 2  /* at most this many queries in a tile: logits by dot products */

static inline int64_t at_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t at_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t at_round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* End (exclusive) of the keys any query of rows [i0, i0+m) can see. */
static inline int64_t at_kend(const mg_attn_desc *a, int64_t i0, int64_t m) {
    return a->causal ? at_max(0, at_min(a->Tk, a->q_pos0 + i0 + m)) : a->Tk;
}
/* How many of the nc keys starting at j0 the query at position qpos sees. */
static inline int64_t at_nvis(const mg_attn_desc *a, int64_t qpos, int64_t j0, int64_t nc) {
    return a->causal ? at_max(0, at_min(nc, qpos + 1 - j0)) : nc;
}

/* Parts of a tile product a causal mask zeroes, which attention_tmpl.h may skip. */
enum { AT_COLS_FROM = 1, AT_K_FROM = 2, AT_K_TO = 3 };

/* rows x D -> rows x dp, zero-padded (only when D is not a multiple of every vector width). */
static inline void at_pad_rows(const float *src, int64_t rows, int64_t D, int64_t dp, float *dst) {
    for (int64_t r = 0; r < rows; r++) {
        memcpy(dst + r * dp, src + r * D, (size_t)D * sizeof(float));
        memset(dst + r * dp + D, 0, (size_t)(dp - D) * sizeof(float));
    }
}

/* ---- work description and scratch layout (in floats, each piece 64-byte aligned) ------------- */

typedef struct at_fwd_layout {
    size_t qt, st, o, m, l, al, vp, tmp, pw, pa, kb, vv, total;
} at_fwd_layout;

/* The query side of one head, packed once per backward item: per query tile, its transposed q and
 * dO (D x AT_BR), its padded rows when needed, and lse and D_i padded to AT_BR. */
typedef struct at_qpack_layout {
    size_t qt, dot, qp, dop, lse, di, total;
} at_qpack_layout;

typedef struct at_bwd_layout {
    size_t st, dpt, tmp, dk, dv, kp, dq, pb, kb, vb, kv, pack, total;
} at_bwd_layout;

typedef struct at_job at_job;

typedef struct at_pair {
    int64_t bh, i0, m, j0, nc;
    const float *kj, *vj;         /* key tile rows (ld D) */
    const float *kp;              /* key rows as a product operand (padded when needed), ld ldk */
    int64_t ldk;
    const float *qt, *dot;        /* D x AT_BR */
    const float *qp, *dop;        /* query and dO rows as product operands, ld ldq */
    int64_t ldq;
    const float *lse, *di;        /* AT_BR each */
    float *st, *dpt, *tmp;        /* scratch */
    float *dq, *dk, *dv;          /* accumulators (ld dp), NULL when not wanted */
    float *db;                    /* dL/dlogits of this pair's rows (ld Tk), NULL when not wanted */
    uint32_t *pb;                 /* bf16 kernels: P^T and dS^T rows as words (AT_BC x AT_BR/2) */
    const uint32_t *kbt, *vbt, *kvt; /* bf16 kernels: the key tile's operands (see pack_kv_tile) */
} at_pair;

/* The product of the bf16 kernels on AMX tiles (attention_amx.c): C[0:m, 0:n] (= or += with acc)
 * A B, A m rows of kp pairs (words, row stride lda), B kp pairs of n words (row stride ldb), m, n
 * and kp multiples of 16; band and off as attention_mk.h's gemm_rs. */
typedef void (*mgk_attn_tile_product)(int64_t m, int64_t n, int64_t kp, const uint32_t *A,
                                      int64_t lda, const uint32_t *B, int64_t ldb, float *C,
                                      int64_t ldc, bool acc, int band, int64_t off);

/* A path's kernels (attention_tmpl.h). */
typedef struct mgk_attention_impl {
    /* Forward for query tile qt of head bh, ws: the thread's at_fwd_layout scratch. */
    void (*fwd_item)(const at_job *J, int64_t bh, int64_t qt, float *ws);
    /* One (query tile, key tile) pair of backward. */
    void (*bwd_pair)(const at_job *J, const at_pair *p);
    /* The query side of tile qt of head bh into pk (at_qpack_layout). */
    void (*pack_query_tile)(const at_job *J, int64_t bh, int64_t qt, float *pk);
    /* bf16 kernels only (NULL in the float32 ones): keys and values j0 .. j0+nc-1 of head bh as
     * bf16 product operands, each skipped when NULL: rows of dw = ceil(D/2) words (kb, vb:
     * AT_BC x dw) and in pairs of consecutive keys (kv, vv: AT_BC/2 x dp words, word (p, d) = the
     * keys 2p and 2p + 1 of column d); a word holds two bf16 values, the lower index in its low
     * half; zero past D and past nc. */
    void (*pack_kv_tile)(const at_job *J, int64_t bh, int64_t j0, int64_t nc, uint32_t *kb,
                         uint32_t *vb, uint32_t *kv, uint32_t *vv);
} mgk_attention_impl;

struct at_job {
    const mg_attn_desc *a;
    int64_t BH, nqt, nkt, dp; /* dp: row stride of padded rows and accumulators */
    bool pad;                 /* D is not a multiple of 16: product operands need padded copies */
    const float *q, *k, *v, *oin, *lse_in, *dO;
    float *o, *lse, *dq, *dk, *dv;
    at_fwd_layout fl;
    at_qpack_layout ql;
    at_bwd_layout bl;
    float *shared; /* two-pass backward: BH query packs */
    const mgk_attention_impl *impl;
    bool bf16;  /* the kernels with bf16 products (attention_avx512bf16.c or _amx.c) */
    /* bf16 forward: each thread takes whole heads and packs a head's keys and values once
     * (at_fwd_layout kb and vv hold the head), instead of tile by tile in every item. */
    bool head_pack;
    int64_t dw; /* ceil(D/2): words in a row of bf16 pairs */
    /* bf16 kernels: words per packed row of keys or values, and rows of the transposed query
     * words: dw, or with the AMX products dw rounded up to a tile's 16 pairs (zeros past dw) */
    int64_t kw;
    /* the AMX products (attention_avx512bf16_amx.c): the tile kernel, on the instructions or on
     * their model; NULL otherwise */
    mgk_attn_tile_product tiles;
    int64_t qtw; /* floats per query tile of the packed query side (ql.qt, ql.dot) */
};

static inline int64_t at_kv_stride(const mg_attn_desc *a) {
    return a->kv_stride ? a->kv_stride : a->Tk * a->D;
}

#endif
