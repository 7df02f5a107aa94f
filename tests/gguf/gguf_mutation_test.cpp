// Deterministic random-mutation corpus: ~20k seeded mutations of the valid seed files (bit flips,
// byte writes, inserted / deleted / duplicated ranges, truncation, and header/directory fields set
// to extreme values). Each result must be rejected with Error(invalid_model) or accepted with all
// invariants intact (gguf_exercise.h). The libFuzzer target explores the same entry point further
// when built with -DTERN_FUZZ=ON; this test keeps a fixed slice of that search in every CI run.
#include "gguf_exercise.h"
#include "gguf_seeds.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

namespace tern {
namespace {

// Positions of fixed-width fields worth hitting with extreme values, found by walking the file
// with the §1 grammar (stops quietly at anything it cannot follow).
struct Fields {
    std::vector<size_t> u64;
    std::vector<size_t> u32;
};

Fields find_fields(const std::vector<uint8_t> & b) {
    Fields f;
    size_t p   = 0;
    auto   u64 = [&](size_t at) { return test::peek<uint64_t>(b, at); };
    auto   u32 = [&](size_t at) { return test::peek<uint32_t>(b, at); };
    if (b.size() < 24) return f;
    f.u32.push_back(4);
    f.u64.push_back(8);
    f.u64.push_back(16);
    const uint64_t n_t = u64(8), n_kv = u64(16);
    p = 24;
    auto skip_value = [&](uint32_t type) -> bool {
        const size_t fixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        if (type == 8) {
            if (p + 8 > b.size()) return false;
            f.u64.push_back(p);
            const uint64_t len = u64(p);
            if (len > b.size() - p - 8) return false;
            p += 8 + len;
            return true;
        }
        if (type > 12 || type == 9 || p + fixed[type] > b.size()) return false;
        p += fixed[type];
        return true;
    };
    for (uint64_t i = 0; i < n_kv && i < 64; ++i) {
        if (p + 8 > b.size()) return f;
        f.u64.push_back(p);
        const uint64_t klen = u64(p);
        if (klen > b.size() - p - 12) return f;
        p += 8 + klen;
        f.u32.push_back(p);
        const uint32_t type = u32(p);
        p += 4;
        if (type == 9) {
            if (p + 12 > b.size()) return f;
            f.u32.push_back(p);
            f.u64.push_back(p + 4);
            const uint32_t elem = u32(p);
            const uint64_t cnt  = u64(p + 4);
            p += 12;
            for (uint64_t j = 0; j < cnt && j < 16; ++j) {
                if (!skip_value(elem)) return f;
            }
            if (cnt > 16) return f;
        } else if (!skip_value(type)) {
            return f;
        }
    }
    for (uint64_t i = 0; i < n_t && i < 64; ++i) {
        if (p + 8 > b.size()) return f;
        f.u64.push_back(p);
        const uint64_t nlen = u64(p);
        if (nlen > b.size() - p - 12) return f;
        p += 8 + nlen;
        f.u32.push_back(p);
        const uint32_t nd = u32(p);
        p += 4;
        if (nd > 4 || p + 8 * nd + 12 > b.size()) return f;
        for (uint32_t d = 0; d < nd; ++d) f.u64.push_back(p + 8 * d);
        p += 8 * nd;
        f.u32.push_back(p);
        f.u64.push_back(p + 4);
        p += 12;
    }
    return f;
}

std::vector<uint8_t> mutate(const std::vector<uint8_t> & seed, const Fields & fields, std::mt19937_64 & rng) {
    std::vector<uint8_t> b = seed;
    auto r = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    const uint64_t extremes64[] = {0, 1, 2, 3, 31, 32, 63, 64, 127, 128, b.size(), b.size() - 1, b.size() + 1,
                                   uint64_t{1} << 31, uint64_t{1} << 32, uint64_t{1} << 62, uint64_t{1} << 63,
                                   std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max() - 31};
    const uint32_t extremes32[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 34, 35, 36, 38, 39, 41, 42, 142, 143, 1000,
                                   0x80000000u, 0xffffffffu};
    const int n_ops = 1 + static_cast<int>(r(3));
    for (int op = 0; op < n_ops && !b.empty(); ++op) {
        switch (r(9)) {
            case 0: b[r(b.size())] ^= static_cast<uint8_t>(1u << r(8)); break;
            case 1: b[r(b.size())] = static_cast<uint8_t>(rng()); break;
            case 2: {
                const size_t at = r(b.size() + 1), n = 1 + r(16);
                std::vector<uint8_t> ins(n);
                for (auto & x : ins) x = static_cast<uint8_t>(rng());
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
                break;
            }
            case 3: {
                const size_t at = r(b.size()), n = std::min<size_t>(1 + r(16), b.size() - at);
                b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
                break;
            }
            case 4: b.resize(r(b.size())); break;
            case 5: case 6: {
                if (fields.u64.empty()) break;
                const size_t at = fields.u64[r(fields.u64.size())];
                if (at + 8 <= b.size()) test::poke<uint64_t>(b, at, extremes64[r(std::size(extremes64))]);
                break;
            }
            case 7: {
                if (fields.u32.empty()) break;
                const size_t at = fields.u32[r(fields.u32.size())];
                if (at + 4 <= b.size()) test::poke<uint32_t>(b, at, extremes32[r(std::size(extremes32))]);
                break;
            }
            case 8: {  // duplicate a range (e.g. a whole KV pair) somewhere else
                const size_t from = r(b.size()), n = std::min<size_t>(1 + r(64), b.size() - from), to = r(b.size());
                std::vector<uint8_t> chunk(b.begin() + static_cast<std::ptrdiff_t>(from),
                                           b.begin() + static_cast<std::ptrdiff_t>(from + n));
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(to), chunk.begin(), chunk.end());
                break;
            }
        }
    }
    return b;
}

TEST(GgufMutation, TwentyThousandSeededMutations) {
    const auto seeds = test::gguf_seed_files();
    for (const auto & [name, bytes] : seeds) {
        SCOPED_TRACE(name);
        ASSERT_TRUE(test::gguf_exercise(bytes)) << "seed rejected";
    }
    std::mt19937_64 rng(20240611);
    int             accepted = 0, total = 0;
    for (const auto & [name, bytes] : seeds) {
        const Fields fields = find_fields(bytes);
        for (int i = 0; i < 20000 / static_cast<int>(seeds.size()); ++i) {
            const auto m = mutate(bytes, fields, rng);
            accepted += test::gguf_exercise(m, (i & 1) == 0) ? 1 : 0;  // strict and lenient offsets
            ++total;
        }
    }
    // Sanity: the mutations are neither all fatal nor all harmless.
    EXPECT_GT(accepted, total / 50);
    EXPECT_LT(accepted, total / 2);
    std::printf("[          ] %d mutations, %d accepted\n", total, accepted);
}

}  // namespace
}  // namespace tern
