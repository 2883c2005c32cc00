/* amx_emu.h: a software model of the AMX tile instructions that bgemm_amx.c uses, for a second
 * build of that same unit (-DMGK_AMX_EMULATED, static library mgk_bgemm_amx_emu) in which its tile
 * macros call these functions instead of the intrinsics. It lets every machine run the AMX
 * kernel's logic (packing, tile addressing, blocking, edge tiles, the configuration) and compare
 * it bit for bit with mg_bgemm_ref; the instructions themselves run only on an AMX CPU. Tests
 * switch it on with mg_bf16_amx_emulation (minigrad/testing.h); it is no path a user can pick.
 *
 * State, per thread as on the CPU: the palette-1 configuration (rows and bytes per row of tiles
 * 0-7) and eight tile registers of 16 rows x 64 bytes. Each function follows the Operation section
 * of the instruction in Intel's SDM; where the CPU raises #UD or #GP (an unconfigured tile, shapes
 * that do not fit, reserved configuration bytes set, TDPBF16PS on a repeated tile), the model
 * prints what is wrong and aborts, as the CPU's SIGILL or SIGSEGV would end the process. */
#ifndef MG_AMX_EMU_H
#define MG_AMX_EMU_H

#include "bgemm_internal.h"

#include <stddef.h>

/* LDTILECFG: the 64-byte configuration at cfg (palette 0 releases the tiles). */
void mgk_amxemu_loadconfig(const void *cfg);
/* STTILECFG: the current configuration into the 64 bytes at cfg (palette 1, start_row 0, bytes per
 * row and rows of tiles 0-7, the rest zero), or 64 zero bytes while the tiles are unconfigured. */
void mgk_amxemu_storeconfig(void *cfg);
/* TILERELEASE: the tiles back to their initial state, unconfigured. */
void mgk_amxemu_release(void);
/* While on (tests only, every thread), TDPBF16PS leaves out the odd products: a tile unit that
 * gets products wrong, for the AMX start-up check's tests. */
void mgk_amxemu_fault(bool on);
/* TILEZERO tmm[t]. */
void mgk_amxemu_zero(int t);
/* TILELOADD tmm[t], rows of the tile's bytes per row from base, stride bytes apart. */
void mgk_amxemu_loadd(int t, const void *base, size_t stride);
/* TILESTORED: the reverse. */
void mgk_amxemu_stored(int t, void *base, size_t stride);
/* TDPBF16PS tmm[c], tmm[a], tmm[b]. */
void mgk_amxemu_dpbf16ps(int c, int a, int b);

/* The AMX path's table built on the model (bgemm_amx.c with MGK_AMX_EMULATED). */
const mgk_bgemm_impl *mgk_bgemm_amx_emulated(void);

#endif
