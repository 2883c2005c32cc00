/* Run-time choice of the SIMD path, the one place that looks at the CPU: what the CPU offers
 * (cpuid through __builtin_cpu_supports, which also checks that the OS saves the wider registers)
 * intersected with what this build compiled (a path's getters return NULL when its units were
 * built without its instructions). The active path is the one piece of process-wide mutable state
 * in the kernels: tests and benchmarks flip it with mg_isa_force; each kernel call reads it once on
 * entry, through the mgk_*_active functions below. */
#include "isa.h"
#include "amx_emu.h" /* mgk_bgemm_amx_emulated */
#include "minigrad/testing.h" /* mg_isa_force: exported, not installed */

#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The active path when it is first chosen: the one an environment variable (MINIGRAD_ISA,
 * MINIGRAD_BF16_PATH) names, as the index lo .. hi whose name(i) is its value, where that path is
 * usable (ok); else the detected one. Detection runs only then, so that naming a path keeps the
 * others out of the process (AMX's start-up check included). A value that names no path, or a path
 * that is not usable here, is said once as a warning. */
static int env_or_detected(const char *var, int lo, int hi, const char *(*name)(int), bool (*ok)(int),
                           int (*detect)(void), atomic_flag *warned) {
    const char *v = getenv(var);
    if (!v || !*v) return detect();
    for (int i = lo; i <= hi; i++) {
        if (strcmp(v, name(i)) != 0) continue;
        if (ok(i)) return i;
        const int d = detect();
        if (!atomic_flag_test_and_set(warned))
            mg_log(MG_LOG_WARN, "%s=%s: that path is not available here; using %s", var, v, name(d));
        return d;
    }
    const int d = detect();
    if (!atomic_flag_test_and_set(warned)) {
        char known[96] = "";
        for (int i = lo; i <= hi; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i > lo ? ", " : "", name(i));
        mg_log(MG_LOG_WARN, "%s=%s: not a path (%s); using %s", var, v, known, name(d));
    }
    return d;
}

static bool cpu_has(mg_isa isa) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    switch (isa) {
    case MG_ISA_AVX512:
        return __builtin_cpu_supports("avx512f");
    case MG_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case MG_ISA_GENERIC:
        return true;
    }
    return false;
#else
    return isa == MG_ISA_GENERIC;
#endif
}

/* Every family of the path compiled: they share the path's units and flags, so all or none. */
static bool compiled(mg_isa isa) {
    switch (isa) {
#define COMPILED(name, id)                                                                         \
    case id:                                                                                       \
        return mgk_gemm_##name() && mgk_rowops_##name() && mgk_attention_##name();
        MGK_ISAS(COMPILED)
#undef COMPILED
    }
    return false;
}

static bool usable(mg_isa isa) {
    return compiled(isa) && cpu_has(isa);
}

mg_isa mg_isa_detected(void) {
    if (usable(MG_ISA_AVX512)) return MG_ISA_AVX512;
    if (usable(MG_ISA_AVX2)) return MG_ISA_AVX2;
    return MG_ISA_GENERIC;
}

static atomic_int active_isa = -1; /* -1: not chosen yet */

static const char *isa_name(int i) {
    return mg_isa_name((mg_isa)i);
}

static bool isa_ok(int i) {
    return usable((mg_isa)i);
}

static int isa_detect(void) {
    return (int)mg_isa_detected();
}

mg_isa mg_isa_active(void) {
    int a = atomic_load_explicit(&active_isa, memory_order_relaxed);
    if (a < 0) {
        static atomic_flag warned = ATOMIC_FLAG_INIT;
        a = env_or_detected("MINIGRAD_ISA", MG_ISA_GENERIC, MG_ISA_AVX512, isa_name, isa_ok, isa_detect, &warned);
        atomic_store_explicit(&active_isa, a, memory_order_relaxed);
    }
    return (mg_isa)a;
}

bool mg_isa_force(mg_isa isa) {
    if ((int)isa < (int)MG_ISA_GENERIC || (int)isa > (int)MG_ISA_AVX512 || !usable(isa))
        return false;
    atomic_store_explicit(&active_isa, (int)isa, memory_order_relaxed);
    return true;
}

const char *mg_isa_name(mg_isa isa) {
    switch (isa) {
#define NAME(name, id)                                                                             \
    case id:                                                                                       \
        return #name;
        MGK_ISAS(NAME)
#undef NAME
    }
    return "unknown";
}

/* The active path's table of each family. The portable path is always compiled, and a path is
 * only made active when usable, so these never return NULL. */
#define GEMM_CASE(name, id)                                                                        \
    case id:                                                                                       \
        return mgk_gemm_##name();
#define ROWOPS_CASE(name, id)                                                                      \
    case id:                                                                                       \
        return mgk_rowops_##name();
#define ATTENTION_CASE(name, id)                                                                   \
    case id:                                                                                       \
        return mgk_attention_##name();

const mg_gemm_impl *mgk_gemm_active(void) {
    switch (mg_isa_active()) { MGK_ISAS(GEMM_CASE) }
    return mgk_gemm_generic();
}

const mgk_rowops_impl *mgk_rowops_active(void) {
    switch (mg_isa_active()) { MGK_ISAS(ROWOPS_CASE) }
    return mgk_rowops_generic();
}

const mgk_attention_impl *mgk_attention_active(void) {
    switch (mg_isa_active()) { MGK_ISAS(ATTENTION_CASE) }
    return mgk_attention_generic();
}

/* ---- bf16 paths ----
 * Chosen apart from the float32 path: AMX where CPUID reports AMX-TILE and AMX-BF16, the OS
 * enables the tile state in XCR0 and Linux grants it to this process (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XTILEDATA, asked once); else AVX512-BF16 where __builtin_cpu_supports
 * says so; else the emulation. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define MGK_ARCH_REQ_XCOMP_PERM 0x1023
#define MGK_XFEATURE_XTILEDATA 18
#endif

static bool amx_granted(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 22))) return false; /* AMX-TILE, AMX-BF16 */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false; /* XTILECFG and XTILEDATA enabled */
#if defined(__linux__) && defined(__x86_64__)
    return syscall(SYS_arch_prctl, MGK_ARCH_REQ_XCOMP_PERM, MGK_XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static bool bf16_cpu_has(mg_bf16_path p) {
    __builtin_cpu_init();
    switch (p) {
    case MG_BF16_AMX: {
        static atomic_int granted = -1; /* asked of the kernel once per process */
        int g = atomic_load(&granted);
        if (g < 0) {
            g = amx_granted();
            atomic_store(&granted, g);
        }
        return g;
    }
    case MG_BF16_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512bf16");
    case MG_BF16_EMULATED:
        return true;
    }
    return false;
}
#else
static bool bf16_cpu_has(mg_bf16_path p) {
    return p == MG_BF16_EMULATED;
}
#endif

/* mg_bf16_amx_emulation: the AMX path runs bgemm_amx.c's emulated build on any CPU. */
static atomic_bool amx_emulated;

/* The emulated path runs on the vector kernels of the active float32 path (so that forcing that
 * path, as the tests and bench_gemm --isa do, also picks the emulation's kernels), and on the plain
 * C on the portable one; all of them give the same bits. */
static const mgk_bgemm_impl *emulated_impl(void) {
    const mgk_bgemm_impl *im = NULL;
    switch (mg_isa_active()) {
    case MG_ISA_AVX512:
        im = mgk_bgemm_emulated_avx512();
        break;
    case MG_ISA_AVX2:
        im = mgk_bgemm_emulated_avx2();
        break;
    case MG_ISA_GENERIC:
        break;
    }
    return im ? im : mgk_bgemm_emulated();
}

static const mgk_bgemm_impl *bgemm_impl(mg_bf16_path p) {
    switch (p) {
    case MG_BF16_AMX:
        return atomic_load(&amx_emulated) ? mgk_bgemm_amx_emulated() : mgk_bgemm_amx();
    case MG_BF16_AVX512:
        return mgk_bgemm_avx512bf16();
    case MG_BF16_EMULATED:
        return emulated_impl();
    }
    return NULL;
}

/* The path's kernels as this build compiled them, whatever the switch. */
static const mgk_bgemm_impl *compiled_impl(mg_bf16_path p) {
    return p == MG_BF16_AMX ? mgk_bgemm_amx() : bgemm_impl(p);
}

/* The AMX start-up check (amx_check.c): on the instructions (emu false) once per process, the
 * first time the path is considered; on the model (emu true, tests only) again after every switch
 * of the emulation or of its fault. A failure is said once, as a warning, and the path is not
 * used. */
static atomic_int amx_checked[2] = {-1, -1};

static bool amx_verified(bool emu) {
    int ok = atomic_load(&amx_checked[emu]);
    if (ok >= 0) return ok;
    char why[200] = "";
    ok = mgk_amx_check(emu ? mgk_bgemm_amx_emulated() : mgk_bgemm_amx(), MGK_AMX_CHECK_ALL_FORMS,
                       emu ? mgk_attn_tiles_amx_emulated() : mgk_attn_tiles_amx(), why, sizeof why);
    int unset = -1; /* two threads may check at once: one of them speaks */
    if (atomic_compare_exchange_strong(&amx_checked[emu], &unset, ok) && !ok)
        mg_log(MG_LOG_WARN, "bf16: the AMX tile unit got a product wrong in minigrad's start-up check (%s); "
               "bf16 products run without AMX", why);
    return ok;
}

static bool bf16_usable(mg_bf16_path p) {
    if (p == MG_BF16_AMX && atomic_load(&amx_emulated)) return amx_verified(true);
    return bgemm_impl(p) && bf16_cpu_has(p) && (p != MG_BF16_AMX || amx_verified(false));
}

mg_bf16_path mg_bf16_path_detected(void) { /* the CPU's, never the emulation */
    if (mgk_bgemm_amx() && bf16_cpu_has(MG_BF16_AMX) && amx_verified(false)) return MG_BF16_AMX;
    if (bf16_usable(MG_BF16_AVX512)) return MG_BF16_AVX512;
    return MG_BF16_EMULATED;
}

static atomic_int active_bf16 = -1;

static const char *bf16_name(int i) {
    return mg_bf16_path_name((mg_bf16_path)i);
}

static bool bf16_ok(int i) {
    return bf16_usable((mg_bf16_path)i);
}

static int bf16_detect(void) {
    return (int)mg_bf16_path_detected();
}

mg_bf16_path mg_bf16_path_active(void) {
    int a = atomic_load_explicit(&active_bf16, memory_order_relaxed);
    if (a < 0) {
        static atomic_flag warned = ATOMIC_FLAG_INIT;
        a = env_or_detected("MINIGRAD_BF16_PATH", MG_BF16_EMULATED, MG_BF16_AMX, bf16_name, bf16_ok, bf16_detect,
                            &warned);
        atomic_store_explicit(&active_bf16, a, memory_order_relaxed);
    }
    return (mg_bf16_path)a;
}

void mg_bf16_amx_emulation(bool on) {
    atomic_store(&amx_emulated, on);
    atomic_store(&amx_checked[1], -1);
    int a = (int)MG_BF16_AMX; /* an active AMX path is chosen afresh */
    atomic_compare_exchange_strong(&active_bf16, &a, -1);
}

bool mg_bf16_amx_on_cpu(void) {
    return mgk_bgemm_amx() && mgk_attn_tiles_amx() && bf16_cpu_has(MG_BF16_AMX);
}

bool mg_bf16_amx_check(bool on_model, unsigned gemm_forms, bool attention, char *why, size_t why_len) {
    char none[1];
    if (!why || why_len == 0) why = none, why_len = sizeof none;
    why[0] = 0;
    if (!on_model && !mg_bf16_amx_on_cpu()) {
        snprintf(why, why_len, "no AMX on this CPU, or not in this build");
        return false;
    }
    const mgk_bgemm_impl *g = on_model ? mgk_bgemm_amx_emulated() : mgk_bgemm_amx();
    const mgk_attn_tile_product t = on_model ? mgk_attn_tiles_amx_emulated() : mgk_attn_tiles_amx();
    return mgk_amx_check(gemm_forms ? g : NULL, gemm_forms & MGK_AMX_CHECK_ALL_FORMS, attention ? t : NULL, why,
                         why_len);
}

void mg_bf16_amx_emulation_fault(bool on) {
    mgk_amxemu_fault(on);
    atomic_store(&amx_checked[1], -1);
    int a = (int)MG_BF16_AMX;
    atomic_compare_exchange_strong(&active_bf16, &a, -1);
}

void mg_bf16_amx_emulation_load_tiles(const void *cfg) {
    if (cfg) mgk_amxemu_loadconfig(cfg);
    else mgk_amxemu_release();
}

void mg_bf16_amx_emulation_store_tiles(void *cfg) {
    mgk_amxemu_storeconfig(cfg);
}

bool mg_bf16_path_force(mg_bf16_path p) {
    if ((int)p < (int)MG_BF16_EMULATED || (int)p > (int)MG_BF16_AMX || !bf16_usable(p)) return false;
    atomic_store_explicit(&active_bf16, (int)p, memory_order_relaxed);
    return true;
}

bool mg_bf16_path_available(mg_bf16_path p) {
    return (int)p >= (int)MG_BF16_EMULATED && (int)p <= (int)MG_BF16_AMX && bf16_usable(p);
}

bool mg_bf16_path_compiled(mg_bf16_path p) {
    return (int)p >= (int)MG_BF16_EMULATED && (int)p <= (int)MG_BF16_AMX && compiled_impl(p);
}

const char *mg_bf16_path_name(mg_bf16_path p) {
    switch (p) {
    case MG_BF16_EMULATED:
        return "emulated";
    case MG_BF16_AVX512:
        return "avx512bf16";
    case MG_BF16_AMX:
        return "amx";
    }
    return "unknown";
}

const mgk_attention_impl *mgk_attention_bf16(mgk_attn_tile_product *tiles) {
    if (tiles) *tiles = NULL;
    switch (mg_bf16_path_active()) {
    case MG_BF16_AVX512:
        return mgk_attention_avx512bf16();
    case MG_BF16_AMX: {
        /* the products on the tiles; the rest (softmax, packing) on AVX512-BF16, which every AMX
         * CPU so far also has: without it attention stays float32 */
        const mgk_attn_tile_product t =
            atomic_load(&amx_emulated) ? mgk_attn_tiles_amx_emulated() : mgk_attn_tiles_amx();
        const mgk_attention_impl *im = mgk_attention_avx512bf16_amx();
        if (!t || !im || !bf16_cpu_has(MG_BF16_AVX512)) return NULL;
        if (tiles) *tiles = t;
        return im;
    }
    case MG_BF16_EMULATED:
        break;
    }
    return NULL;
}

bool mgk_attention_bf16_usable(void) {
    return mgk_attention_bf16(NULL) != NULL;
}

static atomic_int amx_min_m = MGK_AMX_MIN_M;

int mg_bf16_amx_min_m(int m) {
    return m > 0 ? atomic_exchange(&amx_min_m, m) : atomic_load(&amx_min_m);
}

mg_bf16_path mgk_bgemm_path_for(mg_bf16_path p, int64_t M) {
    if (p == MG_BF16_AMX && M < atomic_load_explicit(&amx_min_m, memory_order_relaxed) && !atomic_load(&amx_emulated) &&
        bf16_usable(MG_BF16_AVX512))
        return MG_BF16_AVX512;
    return p;
}

const mgk_bgemm_impl *mgk_bgemm_for(int64_t M) {
    const mgk_bgemm_impl *im = bgemm_impl(mgk_bgemm_path_for(mg_bf16_path_active(), M));
    return im ? im : emulated_impl();
}
