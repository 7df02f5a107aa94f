// Backend::sample on the WebGPU backend (shaders/sample.wgsl, after sample_scan.wgsl for top-p and
// min-p without top-k) against the CPU reference chain (sampler_stages.h sample_chain, f64) on random
// logits with awkward vocabulary sizes (up to 70,001: one to three rows per scan invocation), ties
// (one trial of many), -inf and NaN rows, for every form of the chain (top-k, top-p with and without
// top-k, min-p alone, temperature alone) and random uniforms.
//
// The contract: the device's id is the reference's wherever the reference's choice is stable, i.e.
// the same for u, top_p and min_p each scaled by (1 - 1e-4) and (1 + 1e-4) (the device adds in f32,
// in another order, with the GPU's exp). Cases that are not stable are counted: a few
// in a hundred at most. k_sample_on_host is allowed only where the chain's candidates outgrow the device's list
// (top-k off and min-p keeping more than 1,024 rows, or the top-p cut past the 1,024 largest).
#include "backend/cpu/cpu_backend.h"
#include "sampler/sampler_stages.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

class WebGpuSample : public ::testing::Test {
protected:
    void SetUp() override { TERN_REQUIRE_WEBGPU(); }
    Backend & gpu() { return *test::shared_webgpu().backend; }

    int32_t device_id(const std::vector<float> & logits, const SamplingChain & chain, float u) {
        return device_id_on(gpu(), logits, chain, u);
    }
    static int32_t device_id_on(Backend & b, const std::vector<float> & logits, const SamplingChain & chain, float u) {
        const int64_t nv = static_cast<int64_t>(logits.size());
        auto          lg = alloc_tensor(b, DType::f32, {nv, 1, 1, 1}, "logits");
        auto          ut = alloc_tensor(b, DType::f32, {1, 1, 1, 1}, "u");
        auto          id = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "id");
        b.write(lg.tensor, logits.data(), logits.size() * 4);
        b.write(ut.tensor, &u, 4);
        b.sample(id.tensor, lg.tensor, chain, ut.tensor);
        int32_t out = -7;
        b.read(id.tensor, &out, 4);
        return out;
    }
};

// The reference's id, or -2 when a relative 1e-4 change of u, top_p or min_p changes it.
int32_t stable_reference(const std::vector<float> & l, const SamplingChain & c, float u) {
    const int32_t want = sample_chain(l, c, u);
    for (float f : {1.0f - 1e-4f, 1.0f + 1e-4f}) {
        SamplingChain cp = c, cm = c;
        cp.top_p         = std::min(1.0f, c.top_p * f);
        if (c.top_p >= 1.0f) cp.top_p = 1.0f;
        cm.min_p = std::min(1.0f, c.min_p * f);
        if (sample_chain(l, c, std::min(u * f, 0.99999994f)) != want || sample_chain(l, cp, u) != want ||
            sample_chain(l, cm, u) != want) {
            return -2;
        }
    }
    return want;
}

struct Case {
    const char *  name;
    SamplingChain chain;
};

// One device draw against the reference's stable id `want` (stable_reference): a hand-back to the
// host only where `may_hand_back`, an id inside the vocabulary, and the same id unless the reference
// is unstable there (counted in n_unstable).
void expect_reference_id(int32_t got, int32_t want, int64_t nv, bool may_hand_back, int & n_unstable) {
    if (got == k_sample_on_host) {
        EXPECT_TRUE(may_hand_back) << "handed back";
        return;
    }
    ASSERT_GE(got, 0);
    ASSERT_LT(got, nv);
    if (want == -2) {
        ++n_unstable;
        return;
    }
    EXPECT_EQ(got, want);
}


TEST_F(WebGpuSample, ChoosesTheReferencesIdForEveryFormOfTheChain) {
    const Case cases[] = {
        {"default (top-k 40, top-p 0.95, min-p 0.05, temp 0.8)", {0.8f, 40, 0.95f, 0.05f}},
        {"top-k 1", {1.0f, 1, 1.0f, 0.0f}},
        {"top-k 5 alone, temp 1.5", {1.5f, 5, 1.0f, 0.0f}},
        {"top-k 200, top-p 0.5", {0.7f, 200, 0.5f, 0.0f}},
        {"top-k 0, top-p 0.9, min-p 0.05", {0.8f, 0, 0.9f, 0.05f}},
        {"top-k 0, top-p 0.9", {1.0f, 0, 0.9f, 0.0f}},
        {"top-k 0, top-p 0.5, min-p 0.2, temp 1.3", {1.3f, 0, 0.5f, 0.2f}},
        {"top-k 0, top-p 0.99, min-p 0.01, temp 0.7", {0.7f, 0, 0.99f, 0.01f}},
        {"min-p 0.1 alone (id order)", {1.0f, 0, 1.0f, 0.1f}},
        {"temperature alone (id order)", {0.6f, 0, 1.0f, 0.0f}},
    };
    std::mt19937                          rng(52);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    int                                   n_cases = 0, n_unstable = 0;
    for (const int64_t nv : {1, 7, 300, 4099, 33000, 70001}) {
        for (int trial = 0; trial < 8; ++trial) {
            // Logits: N(0, s) with s from flat to peaked, a few ties (trial 6: many), a long tail (trial 7),
            // -inf and NaN rows.
            const float                     s = trial < 2 ? 0.5f : (trial < 4 ? 3.0f : 8.0f);
            std::normal_distribution<float> nd(0.0f, s);
            std::vector<float>              l(static_cast<size_t>(nv));
            for (auto & v : l) v = nd(rng);
            if (trial == 6) {
                for (auto & v : l) v = std::round(v * 4.0f) / 4.0f;  // many ties (quarter steps)
            }
            if (trial == 7) {  // a few rows on top of a long tail whose mass top-p reaches (mass 2^-11 each)
                for (size_t i = 0; i < l.size(); ++i) l[i] = i % 1000 == 0 ? 0.3f * nd(rng) / s : -7.6f - 1e-5f * static_cast<float>(i % 4099);
            }
            if (nv > 10) {
                l[3] = l[5];                                          // a tie
                l[1] = -std::numeric_limits<float>::infinity();        // a row some head left out
                if (trial == 5) l[2] = std::numeric_limits<float>::quiet_NaN();
            }
            for (const Case & c : cases) {
                const float u = trial == 0 ? 0.0f : uni(rng);
                SCOPED_TRACE(std::string(c.name) + ", n_vocab " + std::to_string(nv) + ", trial " + std::to_string(trial));
                const int32_t want = stable_reference(l, c.chain, u);
                const int32_t got  = device_id(l, c.chain, u);
                ++n_cases;
                ASSERT_NO_FATAL_FAILURE(
                    expect_reference_id(got, want, nv, c.chain.top_k == 0 && c.chain.top_p < 1.0f && nv > 1024, n_unstable));
            }
        }
    }
    EXPECT_LE(n_unstable * 20, n_cases) << n_unstable << " of " << n_cases << " cases were within 1e-4 of flipping";
}

// The scan (top-k off, top-p on) at vocabulary sizes around its workgroups' and slices' edges, with
// sample_scan's workgroups as the default sizes them (two per compute unit, at least 256 rows each, at
// most 1,024: the slice sums sample.wgsl stages in workgroup memory) and as sized for 3 and 4,000
// compute units (6 slices; 1,024 slices of ~264 rows at 270,001): the reference's id wherever it is stable.
TEST_F(WebGpuSample, ScanPicksTheReferencesIdAtAwkwardSizes) {
    const SamplingChain chains[] = {{0.8f, 0, 0.9f, 0.05f}, {1.0f, 0, 0.9f, 0.0f}, {1.3f, 0, 0.5f, 0.2f},
                                    {0.7f, 0, 0.99f, 0.01f}};
    const char *        tunes[]  = {"", "compute_units=3", "compute_units=4000"};
    std::vector<std::unique_ptr<Backend>> backends;
    for (const char * t : tunes) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = t;
        backends.push_back(make_webgpu_backend(o));
    }
    std::mt19937                          rng(1052);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    int                                   n_cases = 0, n_unstable = 0;
    for (const int64_t nv : {2, 255, 257, 1023, 1025, 65537, 70001, 270001}) {
        for (int trial = 0; trial < (nv > 100000 ? 1 : 3); ++trial) {
            std::normal_distribution<float> nd(0.0f, trial == 0 ? 4.0f : 0.5f);
            std::vector<float>              l(static_cast<size_t>(nv));
            for (auto & v : l) v = nd(rng);
            if (trial == 2 && nv > 10) l[static_cast<size_t>(nv - 1)] = -std::numeric_limits<float>::infinity();
            for (const SamplingChain & c : chains) {
                const float u = uni(rng);
                SCOPED_TRACE("n_vocab " + std::to_string(nv) + ", trial " + std::to_string(trial) + ", top-p " +
                             std::to_string(c.top_p) + ", min-p " + std::to_string(c.min_p));
                const int32_t want = stable_reference(l, c, u);
                for (size_t t = 0; t < backends.size(); ++t) {
                    SCOPED_TRACE(std::string("tune '") + tunes[t] + "'");
                    const int32_t got = device_id_on(*backends[t], l, c, u);
                    ++n_cases;
                    ASSERT_NO_FATAL_FAILURE(expect_reference_id(got, want, nv, nv > 1024, n_unstable));
                }
            }
        }
    }
    EXPECT_LE(n_unstable * 20, n_cases) << n_unstable << " of " << n_cases << " cases were within 1e-4 of flipping";
}

// Every row -inf (or NaN): nothing has mass, and the reference gives id 0 in every form.
TEST_F(WebGpuSample, NoMassGivesIdZero) {
    std::vector<float> l(50, -std::numeric_limits<float>::infinity());
    l[7] = std::numeric_limits<float>::quiet_NaN();
    for (const SamplingChain c : {SamplingChain{0.8f, 40, 0.95f, 0.05f}, SamplingChain{1.0f, 0, 1.0f, 0.0f},
                                  SamplingChain{1.0f, 0, 0.9f, 0.0f}}) {
        EXPECT_EQ(sample_chain(l, c, 0.5f), 0);
        EXPECT_EQ(device_id(l, c, 0.5f), 0);
    }
}

// The CPU backend's sample is the reference itself.
TEST(CpuSample, IsTheReferenceChain) {
    auto                            cpu = make_cpu_backend({1});
    std::mt19937                    rng(3);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float>              l(1000);
    for (auto & v : l) v = nd(rng);
    auto lg = alloc_tensor(*cpu, DType::f32, {1000, 1, 1, 1}, "logits");
    auto ut = alloc_tensor(*cpu, DType::f32, {1, 1, 1, 1}, "u");
    auto id = alloc_tensor(*cpu, DType::i32, {1, 1, 1, 1}, "id");
    cpu->write(lg.tensor, l.data(), l.size() * 4);
    for (float u : {0.0f, 0.3f, 0.999f}) {
        const SamplingChain c{0.9f, 0, 0.8f, 0.0f};
        cpu->write(ut.tensor, &u, 4);
        cpu->sample(id.tensor, lg.tensor, c, ut.tensor);
        int32_t got = -1;
        cpu->read(id.tensor, &got, 4);
        EXPECT_EQ(got, sample_chain(l, c, u));
    }
}

}  // namespace
}  // namespace tern
