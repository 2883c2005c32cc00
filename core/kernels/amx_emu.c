/* The software model of the AMX tile instructions (amx_emu.h). Plain C, built for every CPU. The
 * arithmetic of TDPBF16PS, from the Operation section of the instruction in Intel's SDM: for each
 * row m of the destination and each of its columns n, two float32 sums start at +0; for each
 * pair k of the A row (in increasing k) the even product a[m][2k] b[k][2n] is added onto the
 * first and the odd product a[m][2k+1] b[k][2n+1] onto the second, each a fused multiply-add;
 * then the two sums are added together and that is added onto the destination element. Every
 * step rounds to nearest even, reads denormal inputs as zero (the bf16 values and the
 * destination) and flushes a denormal result to zero; MXCSR plays no part. */
#include "amx_emu.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILES 8
#define MAX_ROWS 16
#define MAX_COLSB 64

typedef struct amx_state {
    bool configured;
    uint8_t rows[TILES];
    uint16_t colsb[TILES];
    uint8_t data[TILES][MAX_ROWS][MAX_COLSB];
} amx_state;

static _Thread_local amx_state amx;

static _Noreturn void fault(const char *insn, int t, const char *what) {
    if (t >= 0)
        fprintf(stderr, "AMX emulation: %s on tmm%d: %s; the CPU raises an exception here\n", insn,
                t, what);
    else
        fprintf(stderr, "AMX emulation: %s: %s; the CPU raises an exception here\n", insn, what);
    abort();
}

/* The checks every tile operand gets (#UD): configured, one of tmm0-7, rows and columns set, whole
 * dwords per row. */
static void check_tile(const char *insn, int t) {
    if (!amx.configured) fault(insn, t, "no tile configuration loaded");
    if (t < 0 || t >= TILES) fault(insn, t, "no such tile in palette 1");
    if (amx.rows[t] == 0) fault(insn, t, "the configuration leaves this tile unused");
    if (amx.colsb[t] % 4) fault(insn, t, "bytes per row not a multiple of 4");
}

void mgk_amxemu_release(void) {
    memset(&amx, 0, sizeof amx);
}

void mgk_amxemu_loadconfig(const void *cfg) {
    uint8_t b[64];
    memcpy(b, cfg, sizeof b);
    if (b[0] == 0) { /* palette 0: the initial state */
        mgk_amxemu_release();
        return;
    }
    if (b[0] != 1) fault("LDTILECFG", -1, "palette other than 0 or 1");
    if (b[1] != 0) fault("LDTILECFG", -1, "start_row other than 0 (not modelled)");
    for (int i = 2; i < 16; i++)
        if (b[i]) fault("LDTILECFG", -1, "reserved bytes 2-15 not zero");
    amx_state s;
    memset(&s, 0, sizeof s);
    for (int t = 0; t < 16; t++) {
        const unsigned colsb = (unsigned)b[16 + 2 * t] | (unsigned)b[17 + 2 * t] << 8,
                       rows = b[48 + t];
        if (t >= TILES) {
            if (colsb || rows) fault("LDTILECFG", t, "palette 1 has tiles 0-7 only");
            continue;
        }
        if (colsb > MAX_COLSB) fault("LDTILECFG", t, "more than 64 bytes per row");
        if (rows > MAX_ROWS) fault("LDTILECFG", t, "more than 16 rows");
        if ((colsb == 0) != (rows == 0))
            fault("LDTILECFG", t, "rows or bytes per row zero, not both");
        s.colsb[t] = (uint16_t)colsb;
        s.rows[t] = (uint8_t)rows;
    }
    s.configured = true; /* the tile data start at zero */
    amx = s;
}

void mgk_amxemu_storeconfig(void *cfg) {
    uint8_t b[64]; /* the unconfigured state stores zeros throughout */
    memset(b, 0, sizeof b);
    if (amx.configured) {
        b[0] = 1; /* the only palette loadconfig takes; start_row stays 0, as loadconfig demands */
        for (int t = 0; t < TILES; t++) {
            b[16 + 2 * t] = (uint8_t)(amx.colsb[t] & 0xff);
            b[17 + 2 * t] = (uint8_t)(amx.colsb[t] >> 8);
            b[48 + t] = amx.rows[t];
        }
    }
    memcpy(cfg, b, sizeof b);
}

void mgk_amxemu_zero(int t) {
    check_tile("TILEZERO", t);
    memset(amx.data[t], 0, sizeof amx.data[t]);
}

void mgk_amxemu_loadd(int t, const void *base, size_t stride) {
    check_tile("TILELOADD", t);
    memset(amx.data[t], 0, sizeof amx.data[t]); /* bytes and rows past the shape read as zero */
    for (int r = 0; r < amx.rows[t]; r++)
        memcpy(amx.data[t][r], (const uint8_t *)base + (size_t)r * stride, amx.colsb[t]);
}

void mgk_amxemu_stored(int t, void *base, size_t stride) {
    check_tile("TILESTORED", t);
    for (int r = 0; r < amx.rows[t]; r++)
        memcpy((uint8_t *)base + (size_t)r * stride, amx.data[t][r], amx.colsb[t]);
}

static uint32_t dword(int t, int r, int i) {
    uint32_t w;
    memcpy(&w, &amx.data[t][r][4 * i], sizeof w);
    return w;
}

static float f32_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float daz(float x) { /* a zero exponent reads as zero of the same sign; FTZ alike */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) == 0 ? f32_bits(u & 0x80000000u) : x;
}

static float bf16_in(uint32_t half) { /* make_fp32 of the low 16 bits, DAZ */
    return daz(f32_bits((half & 0xffffu) << 16));
}

static atomic_bool drop_odd;

void mgk_amxemu_fault(bool on) {
    atomic_store(&drop_odd, on);
}

void mgk_amxemu_dpbf16ps(int c, int a, int b) {
    static const char insn[] = "TDPBF16PS";
    check_tile(insn, c);
    check_tile(insn, a);
    check_tile(insn, b);
    if (c == a || c == b || a == b) fault(insn, c, "the three tiles must be different");
    const int m = amx.rows[c], n = amx.colsb[c] / 4, k = amx.colsb[a] / 4;
    if (amx.colsb[b] != amx.colsb[c])
        fault(insn, b, "B's bytes per row differ from the destination's");
    if (amx.rows[a] != m) fault(insn, a, "A's rows differ from the destination's");
    if (amx.rows[b] != k) fault(insn, b, "B's rows differ from A's pairs per row");
    const bool faulty = atomic_load(&drop_odd);
    for (int r = 0; r < m; r++) { /* the rows past m and the bytes past n become zero */
        float even[MAX_COLSB / 4] = {0}, odd[MAX_COLSB / 4] = {0};
        for (int q = 0; q < k; q++) {
            const uint32_t aw = dword(a, r, q);
            for (int j = 0; j < n; j++) {
                const uint32_t bw = dword(b, q, j);
                even[j] = daz(fmaf(bf16_in(aw), bf16_in(bw), even[j]));
                if (!faulty) odd[j] = daz(fmaf(bf16_in(aw >> 16), bf16_in(bw >> 16), odd[j]));
            }
        }
        for (int j = 0; j < n; j++) {
            float d;
            memcpy(&d, &amx.data[c][r][4 * j], sizeof d);
            d = daz(daz(d) + daz(even[j] + odd[j]));
            memcpy(&amx.data[c][r][4 * j], &d, sizeof d);
        }
        memset(amx.data[c][r] + 4 * n, 0, (size_t)(MAX_COLSB - 4 * n));
    }
    memset((uint8_t *)amx.data[c] + m * MAX_COLSB, 0, (size_t)(MAX_ROWS - m) * MAX_COLSB);
}
