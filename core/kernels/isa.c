/* Run-time choice of the SIMD path: what the CPU offers (cpuid through __builtin_cpu_supports,
 * which also checks that the OS saves the wider registers) intersected with what this build
 * compiled. The active path is the one piece of process-wide mutable state in the kernels: tests
 * and benchmarks flip it with mg_isa_force; each kernel call reads it once on entry. */
#include "gemm_internal.h"
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

static const mg_gemm_impl *impl_of(mg_isa isa) {
    switch (isa) {
    case MG_ISA_AVX512:
        return mg_gemm_avx512_impl();
    case MG_ISA_AVX2:
        return mg_gemm_avx2_impl();
    case MG_ISA_GENERIC:
        return mg_gemm_generic_impl();
    }
    return NULL;
}

static bool usable(mg_isa isa) {
    return impl_of(isa) != NULL && cpu_has(isa);
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
    case MG_ISA_AVX512:
        return "avx512";
    case MG_ISA_AVX2:
        return "avx2";
    case MG_ISA_GENERIC:
        return "generic";
    }
    return "unknown";
}

const mg_gemm_impl *mg_gemm_impl_active(void) {
    return impl_of(mg_isa_active());
}
