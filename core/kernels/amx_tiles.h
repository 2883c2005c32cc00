/* amx_tiles.h: the tile operations of the AMX units (bgemm_amx.c, attention_amx.c), each built
 * twice: with -mamx-tile -mamx-bf16 the TILE_* macros are the instructions and AMX_NAME(x) is
 * x_amx; with MGK_AMX_EMULATED they call the software model of amx_emu.h and AMX_NAME(x) is
 * x_amx_emulated. Without either, AMX_HAVE_TILES stays undefined and the units only report the
 * path as absent. Tile numbers must be literals (the intrinsics take immediates).
 *
 * Both units run on one tile configuration, palette 1 with tmm0-7 each 16 rows of 64 bytes,
 * loaded once per thread by AMX_NAME(mgk_amx_tiles_ready) (bgemm_amx.c): a kernel of either
 * calls it before its first tile instruction, so neither leaves the other a configuration it does
 * not expect. */
#ifndef MG_AMX_TILES_H
#define MG_AMX_TILES_H

#if defined(MGK_AMX_EMULATED)
#define AMX_NAME(x) x##_amx_emulated
#define AMX_HAVE_TILES 1
#include "amx_emu.h"
#define TILE_LOADCONFIG(cfg) mgk_amxemu_loadconfig(cfg)
#define TILE_ZERO(t) mgk_amxemu_zero(t)
#define TILE_LOADD(t, base, stride) mgk_amxemu_loadd(t, base, stride)
#define TILE_STORED(t, base, stride) mgk_amxemu_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) mgk_amxemu_dpbf16ps(c, a, b)
#elif defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define AMX_NAME(x) x##_amx
#define AMX_HAVE_TILES 1
#include <immintrin.h>
#define TILE_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOADD(t, base, stride) _tile_loadd(t, base, stride)
#define TILE_STORED(t, base, stride) _tile_stored(t, base, stride)
#define TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#endif

#ifdef AMX_HAVE_TILES
/* The shared configuration on the calling thread, loaded on its first call. */
void AMX_NAME(mgk_amx_tiles_ready)(void);
#endif

#endif
