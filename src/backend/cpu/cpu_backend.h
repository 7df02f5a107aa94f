// The CPU backend. Two implementations behind one factory:
// - the scalar reference (cpu_backend.cpp): every op of backend.h in plain C++, the oracle that
//   every SIMD and WGSL kernel is tested against;
// - the fast backend (cpu_fast_backend.cpp): the kernels of cpu_kernels.h for the best instruction
//   set the CPU has (AVX-512 VNNI, AVX2, NEON with sdot), bit-identical to the reference.
// Both are multi-threaded over outputs (each output element is still computed by one thread, so
// results do not depend on the thread count).
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"

#include <memory>

namespace tern {

struct CpuOptions {
    int    n_threads = 0;                  // <= 0: the physical cores (default_thread_count)
    CpuIsa isa       = CpuIsa::automatic;  // automatic: TERN_CPU_ISA, else the best available
    // Fast backend: F16 heads of this many bytes or more get an int8 copy for greedy and top-k
    // decoding (half the bytes per token; cpu_fast_head.cpp). On small heads the exact rows it
    // recomputes cost more than the bytes save.
    size_t head_i8_min_bytes = size_t{64} << 20;
    // Fast backend, kernel sets that read base-3 tiles (AVX-512): ternary weights stored 5 per byte
    // (1.6 bits, a fifth fewer bytes per decoded token) instead of 2-bit codes, whose decode costs
    // more arithmetic. -1 (default): the set's choice, cpu::Kernels::base3 (2-bit: they won on the
    // H200 host's Xeon; cpu README, "Tiles"); 0: 2-bit; 1: base-3 (the tests run both).
    int base3 = -1;
};

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions & options = {});
// The scalar reference itself, whatever the CPU and TERN_CPU_ISA.
std::unique_ptr<Backend> make_cpu_reference_backend(int n_threads = 0);
// The fast backend on the kernel set options.isa (a fast set, available: cpu_isa_available).
std::unique_ptr<Backend> make_cpu_fast_backend(const CpuOptions & options);

}  // namespace tern
