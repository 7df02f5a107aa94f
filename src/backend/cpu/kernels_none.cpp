// Kernel sets this build does not have (their files are compiled only for their architecture).
#include "backend/cpu/cpu_kernels.h"

namespace tern::cpu {
#if !defined(TERN_HAVE_AVX2_KERNELS)
const Kernels * kernels_avx2() { return nullptr; }
const Kernels * kernels_avx2_plain() { return nullptr; }
const Kernels * kernels_avx2_vnni() { return nullptr; }
#endif
#if !defined(TERN_HAVE_AVX512_KERNELS)
const Kernels * kernels_avx512() { return nullptr; }
const Kernels * kernels_avx512_multiply() { return nullptr; }
const Kernels * kernels_avx512_vbmi() { return nullptr; }
#endif
#if !defined(TERN_HAVE_NEON_KERNELS)
const Kernels * kernels_neon() { return nullptr; }
#endif
}  // namespace tern::cpu
