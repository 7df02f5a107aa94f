// One layer's attention on a backend for the attention tests: a KV cache of `cache` type bytes
// ([n_head_kv x head_dim, pos0 + T]) and queries q ([n_head x head_dim, T + 1]: the queries are columns
// 1 .. T, at positions pos0 .. pos0 + T - 1), computed `per_call` tokens at a time; column 0 of the
// output must stay as written (a sentinel checks that the views reach only their columns).
#pragma once

#include "backend/backend.h"
#include "core/dtype.h"
#include "quant/block_formats.h"
#include "block_order_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tern::test {

struct AttentionRun {
    int64_t n_head, n_head_kv, head_dim, pos0, T;
    DType   cache;
};

inline std::vector<float> run_attention(Backend & b, const AttentionRun & r, const std::vector<uint8_t> & k,
                                        const std::vector<uint8_t> & v, const std::vector<float> & q, int64_t per_call) {
    const int64_t        n_q = r.n_head * r.head_dim, n_kv = r.n_head_kv * r.head_dim, n_ctx = r.pos0 + r.T;
    const AttentionShape shape{r.n_head, r.n_head_kv, r.head_dim, r.head_dim, 10000.0f,
                               1.0f / std::sqrt(static_cast<float>(r.head_dim))};
    auto kt = alloc_tensor(b, r.cache, {n_kv, n_ctx, 1, 1}, "k");
    auto vt = alloc_tensor(b, r.cache, {n_kv, n_ctx, 1, 1}, "v");
    auto qt = alloc_tensor(b, DType::f32, {n_q, r.T + 1, 1, 1}, "q");
    auto ot = alloc_tensor(b, DType::f32, {n_q, r.T + 1, 1, 1}, "out");
    b.write(kt.tensor, k.data(), k.size());
    b.write(vt.tensor, v.data(), v.size());
    b.write(qt.tensor, q.data(), q.size() * 4);
    const std::vector<float> sentinel(static_cast<size_t>(n_q), -7.0f);
    b.write(ot.tensor.columns(0, 1), sentinel.data(), sentinel.size() * 4);
    for (int64_t t0 = 0; t0 < r.T; t0 += per_call) {
        const int64_t n = std::min(per_call, r.T - t0);
        b.attention(ot.tensor.columns(1 + t0, n), qt.tensor.columns(1 + t0, n), {kt.tensor, vt.tensor}, shape,
                    r.pos0 + t0);
    }
    std::vector<float> out(static_cast<size_t>(n_q * (r.T + 1)));
    b.read(ot.tensor, out.data(), out.size() * 4);
    for (int64_t i = 0; i < n_q; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], -7.0f) << "column 0 is outside the view";
    return {out.begin() + n_q, out.end()};
}

// Random inputs for run_attention, from one seed: K then V ~ N(0, 1) as `cache` bytes ([n_kv, n_ctx]),
// then q ~ N(0, 2) ([n_q, T + 1]; scores spread over a few units: peaked and flat rows). k_values /
// v_values: K and V as the cache holds them (rounded to f16 for an f16 cache), for written-out oracles.
struct AttentionInputs {
    DType                cache;
    std::vector<uint8_t> k, v;
    std::vector<float>   q;
    std::vector<float>   k_values, v_values;
};

inline AttentionInputs random_attention_inputs(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_ctx,
                                               int64_t T, DType cache, uint32_t seed) {
    std::mt19937  rng(seed);
    auto          normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
    const int64_t n_kv = n_head_kv * head_dim, n = n_kv * n_ctx;
    std::vector<float> k(static_cast<size_t>(n)), v(k.size());
    for (auto & x : k) x = normal(1.0f);
    for (auto & x : v) x = normal(1.0f);
    AttentionInputs in{cache, std::vector<uint8_t>(dtype_tensor_bytes(cache, n_kv, n)), {}, {}, k, v};
    in.v.resize(in.k.size());
    quantize_row(cache, k.data(), in.k.data(), n);
    quantize_row(cache, v.data(), in.v.data(), n);
    dequantize_row(cache, in.k.data(), in.k_values.data(), n);
    dequantize_row(cache, in.v.data(), in.v_values.data(), n);
    in.q.resize(static_cast<size_t>(n_head * head_dim * (T + 1)));
    for (auto & x : in.q) x = normal(2.0f);
    return in;
}

// A shape of the attention tests without its cache type: n_head query heads over n_head_kv KV heads
// of head_dim, T query tokens at positions pos0 .. pos0 + T - 1. make_inputs, run_case and
// attention_rows are random_attention_inputs, run_attention and the oracle (cpu::attention_row of
// each token and head: block_order_oracle.h) for it.
struct AttentionCase {
    int64_t n_head, n_head_kv, head_dim, pos0, T;
};

inline AttentionInputs make_inputs(const AttentionCase & c, DType cache, uint32_t seed) {
    return random_attention_inputs(c.n_head, c.n_head_kv, c.head_dim, c.pos0 + c.T, c.T, cache, seed);
}

inline std::vector<float> run_case(Backend & b, const AttentionCase & c, const AttentionInputs & in, int64_t per_call) {
    return run_attention(b, {c.n_head, c.n_head_kv, c.head_dim, c.pos0, c.T, in.cache}, in.k, in.v, in.q, per_call);
}

// From in.k and in.v (the cache bytes, which a test may have changed since make_inputs), not k_values.
inline std::vector<float> attention_rows(const AttentionCase & c, const AttentionInputs & in) {
    return attention_columns(in.k, in.v, in.cache, in.q.data() + c.n_head * c.head_dim, c.n_head, c.n_head_kv,
                             c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.pos0, c.T);
}

}  // namespace tern::test
