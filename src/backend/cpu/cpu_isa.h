// Which kernel set the CPU backend runs: the scalar reference, or the fast kernels of one
// instruction set, chosen at run time from the CPU's features (one binary runs everywhere).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tern {

enum class CpuIsa {
    automatic,  // the best this CPU has (TERN_CPU_ISA overrides)
    ref,        // the scalar reference kernels (the oracle every fast kernel is tested against)
    avx2,       // x86-64 with AVX2, FMA, F16C
    avx512,     // x86-64 with AVX-512 F/BW/VL/DQ and VNNI
    neon,       // ARM64 with the dot-product extension (sdot)
};

std::string_view           cpu_isa_name(CpuIsa isa);  // "auto", "ref", "avx2", "avx512", "neon"
std::optional<CpuIsa>      cpu_isa_from_name(std::string_view name);
// Whether this build has the kernels and this CPU can run them (ref and automatic: always).
bool                       cpu_isa_available(CpuIsa isa);
// The best available fast set, or ref where there is none.
CpuIsa                     cpu_isa_best();
// automatic -> TERN_CPU_ISA if set (an Error naming the value if it is unknown or unavailable
// here), else cpu_isa_best(); any other value is checked and returned.
CpuIsa                     cpu_isa_resolve(CpuIsa requested);
// The CPU's relevant features, for messages ("avx2 fma f16c avx512f avx512bw avx512vnni").
std::string                cpu_feature_list();

}  // namespace tern
