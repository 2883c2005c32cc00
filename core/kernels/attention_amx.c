/* The products of the fused attention on Intel AMX tiles (TDPBF16PS): the one product kernel that
 * attention_bf16_tmpl.h, instantiated with AT_AMX (attention_avx512bf16_amx.c), calls for all six
 * of its products. The softmax, the packing and everything else in float32 stay in that unit; this
 * one holds tile instructions and scalar addressing only, in the AMX library (no AVX-512, which
 * tests/test_isa_purity.sh checks). Built a second time with MGK_AMX_EMULATED on the software
 * model of the tiles (amx_emu.c), as bgemm_amx.c is, for the tests.
 *
 * Operands are the attention kernels' bf16 words, a word holding two values of K (the lower index
 * in the low half). A is m rows of K pairs, row-major: an A tile (16 rows x 16 pairs) is 16 rows
 * of 64 bytes, lda words apart. B is K pairs of n columns, the two rows of a pair interleaved per
 * column (the layout VDPBF16PS reads too): a B tile (16 pairs x 16 columns) is 16 rows of 64
 * bytes, ldb words apart. C is float32, row-major. So TILELOADD reads the packed operands in
 * place with their row strides; the caller pads them to whole tiles with zeros (see AT_AMX in
 * attention_bf16_tmpl.h).
 *
 * Blocking as in bgemm_amx.c: tmm0-3 hold up to 2 x 2 C tiles (32 x 32 of C), tmm4-5 A and
 * tmm6-7 B, on the shared tile configuration (amx_tiles.h), made current at the start of every
 * product.
 * isa.c hands this kernel out only where the amx bf16 path is active, which it makes so only after
 * Linux has granted the process the tile data (arch_prctl), as for the GEMM: one request serves
 * both. Each C element gets the K groups of 16 pairs in increasing order from pair 0, one
 * TDPBF16PS each, starting from C (acc) or from +0, whatever the tile or thread: the results are
 * the reference's (tests/test_bf16_attention_fused.c) bit for bit. */
#include "amx_tiles.h"
#include "attention_internal.h"

#ifdef AMX_HAVE_TILES

static inline int64_t floor_half(int64_t x) { /* floor(x / 2) for any sign */
    return x >= 0 ? x / 2 : -((1 - x) / 2);
}

static inline int64_t clamp(int64_t x, int64_t lo, int64_t hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* R x N C tiles (R, N 1 or 2) at C, over the pairs k0 .. k1 (multiples of 16) of A's rows at A
 * and B's columns at B. */
static inline void block(int R, int N, int64_t k0, int64_t k1, const uint32_t *A, int64_t lda,
                         const uint32_t *B, int64_t ldb, float *C, int64_t ldc, bool acc) {
    const size_t sa = (size_t)lda * 4, sb = (size_t)ldb * 4, sc = (size_t)ldc * 4;
    float *c1 = C + 16, *c2 = C + 16 * ldc, *c3 = C + 16 * ldc + 16;
    if (acc) {
        TILE_LOADD(0, C, sc);
        if (N > 1) TILE_LOADD(1, c1, sc);
        if (R > 1) TILE_LOADD(2, c2, sc);
        if (R > 1 && N > 1) TILE_LOADD(3, c3, sc);
    } else {
        TILE_ZERO(0);
        if (N > 1) TILE_ZERO(1);
        if (R > 1) TILE_ZERO(2);
        if (R > 1 && N > 1) TILE_ZERO(3);
    }
    for (int64_t p = k0; p < k1; p += 16) {
        TILE_LOADD(4, A + p, sa);
        if (R > 1) TILE_LOADD(5, A + 16 * lda + p, sa);
        TILE_LOADD(6, B + p * ldb, sb);
        if (N > 1) TILE_LOADD(7, B + p * ldb + 16, sb);
        TILE_DPBF16PS(0, 4, 6);
        if (N > 1) TILE_DPBF16PS(1, 4, 7);
        if (R > 1) TILE_DPBF16PS(2, 5, 6);
        if (R > 1 && N > 1) TILE_DPBF16PS(3, 5, 7);
    }
    TILE_STORED(0, C, sc);
    if (N > 1) TILE_STORED(1, c1, sc);
    if (R > 1) TILE_STORED(2, c2, sc);
    if (R > 1 && N > 1) TILE_STORED(3, c3, sc);
}

static void zero_rows(float *C, int64_t ldc, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) memset(C + r * ldc, 0, (size_t)cols * sizeof(float));
}

/* C[0:m, 0:n] (= or += with acc) A[0:m, 0:kp pairs] B[0:kp pairs, 0:n]; m, n and kp multiples of
 * 16. band and off as attention_mk.h's gemm_rs gives them (off and the K bands count values of
 * K, two a pair), applied to whole blocks: AT_COLS_FROM writes zeros for a block whose every
 * column lies below its first row + off; AT_K_FROM and AT_K_TO keep a block of rows to the K
 * groups of 16 pairs that hold the terms its rows can have nonzero, rounded outwards to the
 * groups (a group left out holds only zero products, so it would add +0). */
static void AMX_NAME(product)(int64_t m, int64_t n, int64_t kp, const uint32_t *A, int64_t lda,
                              const uint32_t *B, int64_t ldb, float *C, int64_t ldc, bool acc,
                              int band, int64_t off) {
    AMX_NAME(mgk_amx_tiles_ready)();
    for (int64_t i = 0; i < m; i += 32) {
        const int R = m - i >= 32 ? 2 : 1;
        int64_t k0 = 0, k1 = kp;
        if (band == AT_K_FROM) k0 = clamp(floor_half(i + off), 0, kp) / 16 * 16;
        if (band == AT_K_TO) k1 = (clamp(floor_half(i + 16 * R + off + 1), 0, kp) + 15) / 16 * 16;
        for (int64_t j = 0; j < n; j += 32) {
            const int N = n - j >= 32 ? 2 : 1;
            float *c = C + i * ldc + j;
            if ((band == AT_COLS_FROM && j + 16 * N <= i + off) || k0 >= k1) {
                if (!acc) zero_rows(c, ldc, 16 * R, 16 * N);
                continue;
            }
            const uint32_t *a = A + i * lda, *b = B + j;
            if (R == 2 && N == 2) block(2, 2, k0, k1, a, lda, b, ldb, c, ldc, acc);
            else if (R == 2) block(2, 1, k0, k1, a, lda, b, ldb, c, ldc, acc);
            else if (N == 2) block(1, 2, k0, k1, a, lda, b, ldb, c, ldc, acc);
            else block(1, 1, k0, k1, a, lda, b, ldb, c, ldc, acc);
        }
    }
}

mgk_attn_tile_product AMX_NAME(mgk_attn_tiles)(void) {
    return AMX_NAME(product);
}
#else
mgk_attn_tile_product mgk_attn_tiles_amx(void) {
    return NULL;
}
#endif
