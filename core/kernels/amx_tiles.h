/* amx_tiles.h: the tile operations of the AMX units (bgemm_amx.c, attention_amx.c), each built
 * twice: with -mamx-tile -mamx-bf16 the TILE_* macros are the instructions and AMX_NAME(x) is
 * x_amx; with MGK_AMX_EMULATED they call the software model of amx_emu.h and AMX_NAME(x) is
 * x_amx_emulated. Without either, AMX_HAVE_TILES stays undefined and the units only report the
 * path as absent. Tile numbers must be literals (the intrinsics take immediates).
 *
 * Both units run on one tile configuration, palette 1 with tmm0-7 each 16 rows of 64 bytes, made
 * current by AMX_NAME(mgk_amx_tiles_ready) (bgemm_amx.c), which a kernel of either calls at the
 * start of each of its calls, before its first tile instruction. It reads the thread's
 * configuration back (STTILECFG) and loads this one (LDTILECFG) only where it differs, so whatever
 * ran on the thread in between (the other unit, another library's LDTILECFG, a TILERELEASE) leaves
 * no configuration the kernel does not expect. */
#ifndef MG_AMX_TILES_H
#define MG_AMX_TILES_H

#if defined(MGK_AMX_EMULATED)
#define AMX_NAME(x) x##_amx_emulated
#define AMX_HAVE_TILES 1
#include "amx_emu.h"
#define TILE_LOADCONFIG(cfg) mgk_amxemu_loadconfig(cfg)
#define TILE_STORECONFIG(cfg) mgk_amxemu_storeconfig(cfg)
#define TILE_ZERO(t) mgk_amxemu_zero(t)
#define TILE_LOADD(t, base, stride) mgk_amxemu_loadd(t, base, stride)
#define TILE_STORED(t, base, stride) mgk_amxemu_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) mgk_amxemu_dpbf16ps(c, a, b)
#elif defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define AMX_NAME(x) x##_amx
#define AMX_HAVE_TILES 1
#include <immintrin.h>
#define TILE_LOADCONFIG(cfg) _tile_loadconfig(cfg)
/* STTILECFG, spelled out rather than _tile_storeconfig: GCC's intrinsic (to 12 at least) declares
 * only the first 8 of the 64 bytes as written, so a comparison of the rest could read what the
 * compiler takes for uninitialised memory. This operand covers all 64. */
#define TILE_STORECONFIG(cfg) \
    __asm__ volatile("sttilecfg %0" : "=m"(*(struct { unsigned char b[64]; } *)(cfg)))
#define TILE_ZERO(t) _tile_zero(t)
/* TILELOADD, spelled out with a memory clobber: GCC's _tile_loadd (to 12 at least) declares no
 * memory read, so stores just before it (the stack tile that block() in bgemm_amx.c fills for an
 * edge of C, the attention's packed operands) could legally be moved after it or dropped.
 * _tile_stored already has the clobber. */
#define TILE_LOADD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) : "memory")
#define TILE_STORED(t, base, stride) _tile_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#endif

#ifdef AMX_HAVE_TILES
/* The shared configuration current on the calling thread: loaded unless it already is. */
void AMX_NAME(mgk_amx_tiles_ready)(void);
#endif

#endif
