/* bf16 GEMM on Intel AMX: TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 16-pair x 16-column
 * tile of B (the VNNI pair layout) into a 16 x 16 float32 tile (per element, the even and the odd
 * products of the 16 pairs in two fused multiply-add chains from zero, then their sum added on;
 * denormals flushed, round to nearest even). 2 x 2 blocking: the eight tile registers hold four C
 * tiles (32 x 32 of C), two A tiles and two B tiles, so every tile load feeds two products. Built
 * with -mamx-tile -mamx-bf16 (meson.build); without them the getter returns NULL. isa.c enters
 * this path only after CPUID reports AMX-BF16 and Linux has granted the process the tile data
 * state (arch_prctl ARCH_REQ_XCOMP_PERM); each block makes the tile configuration current on its
 * thread, loading it only where another is in place (mgk_amx_tiles_ready below).
 *
 * The same source builds a second time with MGK_AMX_EMULATED (mgk_bgemm_amx_emulated): the TILE_*
 * macros (amx_tiles.h) then call the software model of amx_emu.h instead of the instructions, so
 * that the kernel's logic runs, and is tested, on any CPU. The tile configuration, shared with the
 * attention's tile products (attention_amx.c), is defined here. */
#include "minigrad/kernels.h"

#define BG_MR 32
#define BG_NR 32
#define BG_KALIGN 32
#define BG_A_TILED 1

#include "amx_tiles.h"

#ifdef AMX_HAVE_TILES
#define BG_NAME(x) AMX_NAME(x)
#include "bgemm_pack.h"

/* Tile registers: 0-3 C (rows i0/i0+16 x columns j0/j0+16), 4-5 A, 6-7 B; each 16 rows x 64 bytes. */
typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

_Static_assert(sizeof(tile_config) == 64, "LDTILECFG reads 64 bytes");

/* In memory as a whole: GCC's _tile_loadconfig declares only its first 8 bytes as read, so the
 * rest must not be stores the compiler could drop. */
static _Alignas(64) const tile_config tiles_wanted = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* No per-thread memory of an earlier load: anything else on the thread may have changed the tiles
 * since (another library's LDTILECFG, a TILERELEASE back to the unconfigured state, which
 * STTILECFG reads as 64 zero bytes), and a tile instruction against it faults. So the thread's
 * configuration is read back on every call, and LDTILECFG, which also zeroes all tile data, runs
 * only where it differs. This runs once per block() or product() call, not per tile: one
 * STTILECFG and a 64-byte comparison ahead of a call's many tile products (not measured, no AMX
 * machine at hand). */
void AMX_NAME(mgk_amx_tiles_ready)(void) {
    _Alignas(64) tile_config now;
    TILE_STORECONFIG(&now);
    if (memcmp(&now, &tiles_wanted, sizeof now) != 0) TILE_LOADCONFIG(&tiles_wanted);
}

/* One 32 x 32 block of C at c (ldc floats apart), the whole tile: the caller passes a stack tile
 * where the block sticks out of C. */
static inline void micro_amx(int64_t kp, const uint32_t *a, const uint32_t *b, bool acc, float *c,
                             int64_t ldc) {
    const size_t sc = (size_t)ldc * sizeof(float);
    if (acc) {
        TILE_LOADD(0, c, sc);
        TILE_LOADD(1, c + 16, sc);
        TILE_LOADD(2, c + 16 * ldc, sc);
        TILE_LOADD(3, c + 16 * ldc + 16, sc);
    } else {
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
    }
    for (int64_t p = 0; p < kp; p += 16) {
        /* A: 32 rows x 16 pairs, two 16-row tiles of 64-byte rows; B: 16 pairs x 32 columns, two
         * 16-column tiles in 128-byte rows. */
        TILE_LOADD(4, a + p * BG_MR, 64);
        TILE_LOADD(5, a + p * BG_MR + 16 * 16, 64);
        TILE_LOADD(6, b + p * BG_NR, BG_NR * 4);
        TILE_LOADD(7, b + p * BG_NR + 16, BG_NR * 4);
        TILE_DPBF16PS(0, 4, 6);
        TILE_DPBF16PS(1, 4, 7);
        TILE_DPBF16PS(2, 5, 6);
        TILE_DPBF16PS(3, 5, 7);
    }
    TILE_STORED(0, c, sc);
    TILE_STORED(1, c + 16, sc);
    TILE_STORED(2, c + 16 * ldc, sc);
    TILE_STORED(3, c + 16 * ldc + 16, sc);
}

static void BG_NAME(block)(int64_t m, int64_t n, int64_t kp, const uint32_t *pa, const uint32_t *pb,
                           bool acc, float *C, int64_t ldc) {
    AMX_NAME(mgk_amx_tiles_ready)();
    _Alignas(64) float tile[BG_MR][BG_NR];
    for (int64_t i = 0; i < m; i += BG_MR) {
        const int mm = m - i < BG_MR ? (int)(m - i) : BG_MR;
        for (int64_t j = 0; j < n; j += BG_NR) {
            const int nn = n - j < BG_NR ? (int)(n - j) : BG_NR;
            float *c = C + i * ldc + j;
            if (mm == BG_MR && nn == BG_NR) {
                micro_amx(kp, pa + i * kp, pb + j * kp, acc, c, ldc);
                continue;
            }
            for (int r = 0; r < BG_MR; r++)
                for (int q = 0; q < BG_NR; q++) tile[r][q] = acc && r < mm && q < nn ? c[r * ldc + q] : 0.0f;
            micro_amx(kp, pa + i * kp, pb + j * kp, true, &tile[0][0], BG_NR);
            for (int r = 0; r < mm; r++) memcpy(c + r * ldc, tile[r], (size_t)nn * sizeof(float));
        }
    }
}

const mgk_bgemm_impl *BG_NAME(mgk_bgemm)(void) {
    static const mgk_bgemm_impl impl = {
        .path = MG_BF16_AMX,
        .mr = BG_MR,
        .nr = BG_NR,
        .kalign = BG_KALIGN,
        .kc = 1024,
        .mc = 1024,
        .nc = 512,
        .a_tiled = BG_A_TILED,
        .pack_a = BG_NAME(pack_a),
        .pack_b = BG_NAME(pack_b),
        .block = BG_NAME(block),
    };
    return &impl;
}
#else
const mgk_bgemm_impl *mgk_bgemm_amx(void) { return NULL; }
#endif
