// `tern bench --parallel B,...`: aggregate decode tokens/s of B streams decoded together by the
// BatchEngine (bench_batched.cpp says what is timed).
#pragma once

#include "core/dtype.h"
#include "model/bitnet_model.h"

#include <cstdint>
#include <vector>

namespace tern::cli {

struct BatchedBenchArgs {
    std::vector<int64_t> streams;  // B values
    std::vector<int64_t> tg;       // tokens each stream generates per timed run
    std::vector<int64_t> depth;    // context each stream holds before the timed steps
    int                  reps       = 5;
    DType                cache_type = DType::f16;
};

struct BatchedResult {
    int64_t             streams = 0, n_gen = 0, depth = 0;
    std::vector<double> tps;      // aggregate tokens/s of each timed run
    std::vector<double> step_ms;  // milliseconds per step (each stream's ms/token) of each timed run
};

std::vector<BatchedResult> bench_batched(const BitnetModel & model, const BatchedBenchArgs & args);

}  // namespace tern::cli
