// One layer's attention on a backend for the attention tests: a KV cache of `cache` type bytes
// ([n_head_kv x head_dim, pos0 + T]) and queries q ([n_head x head_dim, T + 1]: the queries are columns
// 1 .. T, at positions pos0 .. pos0 + T - 1), computed `per_call` tokens at a time; column 0 of the
// output must stay as written (a sentinel checks that the views reach only their columns).
#pragma once

#include "backend/backend.h"
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

}  // namespace tern::test
