// Test fixtures shared by the backend op tests (backend_ops_test.cpp) and the batched greedy head's
// test (webgpu_head_batch_test.cpp): a seeded normal generator, and LM head cases built to trip the
// fast heads (near ties, exact ties, identical rows, winners hidden by f32 sums or by an int8 copy).
#pragma once

#include "backend/backend.h"
#include "quant/block_formats.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace tern::test {

struct Rand {
    std::mt19937 gen;
    explicit Rand(uint32_t seed) : gen(seed) {}
    float  normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(gen); }
    int8_t ternary() { return static_cast<int8_t>(static_cast<int>(gen() % 3) - 1); }
};

// An LM head case for the greedy and top-k heads: table [nv][k], x and norm weights. kind: 0
// random, 1 near ties, 2 exact tie (row 5 the clear winner, copied into rows 600..609), 3 all rows
// equal, 4 the exact winner (row 7) hidden by f32 sums, 5 the exact winner (row 12) hidden by the
// int8 copy.
struct HeadCase {
    int64_t              k, nv;
    std::vector<float>   x;
    std::vector<uint8_t> table_f16, norm_f32;  // the weights' bytes
    WeightSource table() const { return {"e", DType::f16, {k, nv, 1, 1}, table_f16}; }
    WeightSource norm() const { return {"n", DType::f32, {k, 1, 1, 1}, norm_f32}; }
};

// A head case loaded on a backend: its weights, x (written), h, the logits and n_ids ids.
struct HeadTensors {
    std::unique_ptr<Weight> table, norm;
    OwnedTensor             x, h, logits, ids;
};

inline HeadTensors load_head_case(Backend & b, const HeadCase & hc, int64_t n_ids) {
    HeadTensors t{b.load_embedding(hc.table()),
                  b.load_norm(hc.norm()),
                  alloc_tensor(b, DType::f32, {hc.k, 1, 1, 1}, "x"),
                  alloc_tensor(b, DType::f32, {hc.k, 1, 1, 1}, "h"),
                  alloc_tensor(b, DType::f32, {hc.nv, 1, 1, 1}, "logits"),
                  alloc_tensor(b, DType::i32, {n_ids, 1, 1, 1}, "ids")};
    b.write(t.x.tensor, hc.x.data(), hc.x.size() * 4);
    return t;
}

inline HeadCase make_head_case(int kind, int64_t k, int64_t nv, Rand & r) {
    std::vector<float> table(static_cast<size_t>(k * nv)), x(static_cast<size_t>(k)), nw(static_cast<size_t>(k));
    for (auto & v : table) v = r.normal(0.05f);
    for (auto & v : x) v = r.normal(1.5f);
    for (auto & v : nw) v = 1.0f + r.normal(0.1f);
    if (kind == 1 || kind == 2) {  // row 5 the clear winner, copied into rows 600..609, some nudged
        for (int64_t c = 0; c < k; ++c) table[static_cast<size_t>(5 * k + c)] = x[c] * nw[c] > 0 ? 0.08f : -0.08f;
        for (int64_t row = 600; row < 610; ++row) {
            std::copy(table.begin() + 5 * k, table.begin() + 6 * k, table.begin() + row * k);
            if (kind == 1 && row % 2 == 0) table[static_cast<size_t>(row * k + row % k)] *= 1.001f;
        }
    }
    if (kind == 3) {
        for (int64_t row = 1; row < nv; ++row) std::copy(table.begin(), table.begin() + k, table.begin() + row * k);
    }
    if (kind == 4) {
        // h0 = f16(120 / rms) ~ 19.2 (f32 ulp there: 2^-19), h1, h2, h8, h16 ~ 0.00133, the rest
        // 0. Row 3: e0 = 1, e1 = 1.07e-3: + ~0.75 ulp, the exact logit rounds to h0 + 1 ulp.
        // Row 7: e0 = 1 and e1 = e2 = e8 = e16 = 6.15e-4: 4 x ~0.43 ulp = 1.72 ulp, rounds to
        // h0 + 2 ulp: row 7 is the exact maximum. The GPU's f32 sums add each 0.43 ulp to a
        // partial sum holding h0 (same lane and chain, then lanes 2 and 1 in the tree), so each
        // is rounded away: in f32 row 3 looks larger, and only the bound keeps row 7 a candidate.
        std::fill(table.begin(), table.end(), 0.0f);
        std::fill(x.begin(), x.end(), 0.0f);
        std::fill(nw.begin(), nw.end(), 1.0f);
        x[0] = 120.0f;
        for (int64_t c : {1, 2, 8, 16}) x[static_cast<size_t>(c)] = 0.01f;
        table[static_cast<size_t>(3 * k)]     = 1.0f;
        table[static_cast<size_t>(3 * k + 1)] = 1.07e-3f;
        table[static_cast<size_t>(7 * k)]     = 1.0f;
        for (int64_t c : {1, 2, 8, 16}) table[static_cast<size_t>(7 * k + c)] = 6.15e-4f;
    }
    if (kind == 5) {
        // Row 12: every e = a sign(h), a = 2^-5 + 4 * 2^-15: the int8 copy holds it exactly (all
        // codes +-127). Row 11: e0 = 2^-4 sign(h0), the rest 2^-5 sign(h): its codes are 127 and
        // round(63.5) = 64, so the copy reads the bulk 0.8% too large (2^-4 64 / 127 each) and
        // ranks row 11 above row 12, while exactly row 12 is larger by (a - 2^-5) sum|h| -
        // 2^-5 |h0| > 0 (h0 is made small). The rest of the table stays far below both.
        x[0]           = 0.01f;
        const float a  = 0.03125f + 4.0f / 32768.0f;
        auto        sg = [&](int64_t c) { return x[static_cast<size_t>(c)] * nw[static_cast<size_t>(c)] < 0 ? -1.0f : 1.0f; };
        for (int64_t c = 0; c < k; ++c) {
            table[static_cast<size_t>(12 * k + c)] = a * sg(c);
            table[static_cast<size_t>(11 * k + c)] = (c == 0 ? 0.0625f : 0.03125f) * sg(c);
        }
    }
    HeadCase c{k, nv, x, std::vector<uint8_t>(table.size() * 2), std::vector<uint8_t>(nw.size() * 4)};
    quantize_row(DType::f16, table.data(), c.table_f16.data(), static_cast<int64_t>(table.size()));
    std::memcpy(c.norm_f32.data(), nw.data(), c.norm_f32.size());
    return c;
}

}  // namespace tern::test
