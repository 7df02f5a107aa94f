// The CPU backend: the scalar reference implementation of every op of backend.h (the oracle that
// every SIMD and WGSL kernel is tested against), multi-threaded over output rows where that is
// free (each output element is still computed by one thread, so results do not depend on the
// thread count).
#pragma once

#include "backend/backend.h"

#include <memory>

namespace tern {

struct CpuOptions {
    int n_threads = 0;  // <= 0: all hardware threads
};

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions & options = {});

}  // namespace tern
