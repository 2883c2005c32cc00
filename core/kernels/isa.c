/* Run-time choice of the SIMD path, the one place that looks at the CPU: what the CPU offers
 * (cpuid through __builtin_cpu_supports, which also checks that the OS saves the wider registers)
 * intersected with what this build compiled (a path's getters return NULL when its units were
 * built without its instructions). The active path is the one piece of process-wide mutable state
 * in the kernels: tests and benchmarks flip it with mg_isa_force; each kernel call reads it once on
 * entry, through the mgk_*_active functions below. */
#include "isa.h"
#include "minigrad/testing.h" /* mg_isa_force: exported, not installed */

#include <stdatomic.h>
#include <stddef.h>

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

mg_isa mg_isa_active(void) {
    int a = atomic_load_explicit(&active_isa, memory_order_relaxed);
    if (a < 0) {
        a = (int)mg_isa_detected();
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
