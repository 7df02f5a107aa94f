// One token's exact logits from an F16 head on WebGPU in every form WebGpuTuning::head_exact_form
// selects (lm_head_f16_decode.wgsl; lm_head_f16_teams.wgsl, Sum2 chains where h is f16, with several
// segment lengths and workgroup counts)
// against the CPU reference (cpu::dot_f32, summed in double): the same bits, and the argmax the
// teams' partials give. Awkward shapes: rows of 1, 33 (one lane with two words), 320 (two segments
// of five words per lane) and 512 words (a last segment of one word), vocabularies that are not a
// multiple of a team row, with and without the fused norm, h rounded to f16 or not, a tie at the
// maximum (the lower row wins), a zero row and rows of large values.
#include "backend/cpu/cpu_backend.h"
#include "quant/block_formats.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

struct Shape {
    int64_t k, n_vocab;
};

std::vector<float> read_floats(Backend & b, const Tensor & t, size_t n) {
    std::vector<float> v(n);
    b.read(t, v.data(), n * 4);
    return v;
}

struct HeadRun {
    std::vector<float> logits;
    int32_t            id = -1;
};

// output_head (norm fused, NORM = 1) or lm_head on h itself (NORM = 0), then argmax, in one step.
HeadRun run_head(Backend & b, const Shape & s, const std::vector<uint8_t> & table, const std::vector<float> & x,
                 const std::vector<float> & nw, bool fused_norm, bool round) {
    std::vector<uint8_t> nw_bytes(nw.size() * 4);
    std::memcpy(nw_bytes.data(), nw.data(), nw_bytes.size());
    auto we = b.load_embedding({"e", DType::f16, {s.k, s.n_vocab, 1, 1}, table});
    auto wn = b.load_norm({"n", DType::f32, {s.k, 1, 1, 1}, nw_bytes});
    auto xt = alloc_tensor(b, DType::f32, {s.k, 1, 1, 1}, "x");
    auto ht = alloc_tensor(b, DType::f32, {s.k, 1, 1, 1}, "h");
    auto lg = alloc_tensor(b, DType::f32, {s.n_vocab, 1, 1, 1}, "logits");
    auto am = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "id");
    b.write(xt.tensor, x.data(), x.size() * 4);
    b.begin_step();
    if (fused_norm) {
        b.output_head({lg.tensor, {}, 0}, *we, {xt.tensor, wn.get(), 1e-5f, {}, ht.tensor}, round);
    } else {
        b.lm_head(lg.tensor, *we, xt.tensor, round);
    }
    b.argmax(am.tensor, lg.tensor);
    b.end_step();
    HeadRun r;
    r.logits = read_floats(b, lg.tensor, static_cast<size_t>(s.n_vocab));
    b.read(am.tensor, &r.id, 4);
    return r;
}

TEST(WebGpuExactHead, EveryFormGivesTheCpusBitsAndArgmax) {
    TERN_REQUIRE_WEBGPU();
    std::vector<std::shared_ptr<Backend>> forms;
    const char * tunes[] = {"head_exact_form=0", "head_exact_form=1,head_exact_ahead=0,head_exact_seg=10",
                            // segments of 3 words (a row of 320 words: 4 segments, the last of one word);
                            // one segment per row or more; few workgroups (many team rows each)
                            "head_exact_form=1,head_exact_ahead=0,head_exact_seg=3",
                            "head_exact_form=1,head_exact_ahead=0,head_exact_seg=10,head_exact_groups=7",
                            // short segments over many workgroups, whole rows over few
                            "head_exact_form=1,head_exact_ahead=0,head_exact_seg=3,head_exact_groups=61",
                            "head_exact_form=1,head_exact_ahead=0,head_exact_seg=7,head_exact_groups=5",
                            // the next segment loaded while one is summed: whole rows, 3-word and 5-word segments
                            "head_exact_form=1,head_exact_ahead=1",
                            "head_exact_form=1,head_exact_ahead=1,head_exact_seg=3,head_exact_groups=61",
                            "head_exact_form=1,head_exact_ahead=1,head_exact_seg=5,head_exact_groups=7"};
    for (const char * f : tunes) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = f;
        forms.push_back(make_webgpu_backend(o));
    }
    auto                            cpu = make_cpu_backend({1});
    std::mt19937                    rng(5252);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const Shape s : {Shape{8, 13}, Shape{264, 1001}, Shape{2560, 203}, Shape{4096, 77}}) {
        std::vector<float> x(static_cast<size_t>(s.k)), nw(static_cast<size_t>(s.k));
        for (auto & v : x) v = nd(rng);
        for (auto & v : nw) v = 1.0f + 0.2f * nd(rng);
        std::vector<float> e(static_cast<size_t>(s.k * s.n_vocab));
        for (auto & v : e) v = 0.05f * nd(rng);
        auto row = [&](int64_t r) { return e.begin() + r * s.k; };
        // Row 1: every product positive (the maximum); its copy at the last row ties it.
        for (int64_t i = 0; i < s.k; ++i) row(1)[i] = (x[i] * nw[i] >= 0.0f ? 60000.0f : -60000.0f);
        std::copy(row(1), row(1) + s.k, row(s.n_vocab - 1));
        if (s.n_vocab > 3) std::fill(row(2), row(2) + s.k, 0.0f);  // a zero row
        if (s.n_vocab > 4) {
            for (int64_t i = 0; i < s.k; ++i) row(3)[i] = 3000.0f * nd(rng);  // large products, cancellation
        }
        std::vector<uint8_t> table(e.size() * 2);
        quantize_row(DType::f16, e.data(), table.data(), static_cast<int64_t>(e.size()));
        for (const bool fused : {true, false}) {
            for (const bool round : {true, false}) {
                SCOPED_TRACE("k " + std::to_string(s.k) + ", n_vocab " + std::to_string(s.n_vocab) +
                             (fused ? ", norm fused" : ", h given") + (round ? ", h rounded to f16" : ", f32 h"));
                const HeadRun want = run_head(*cpu, s, table, x, nw, fused, round);
                EXPECT_EQ(want.id, 1);
                for (size_t f = 0; f < forms.size(); ++f) {
                    SCOPED_TRACE(tunes[f]);
                    const HeadRun got = run_head(*forms[f], s, table, x, nw, fused, round);
                    ASSERT_EQ(got.logits.size(), want.logits.size());
                    int mismatches = 0;
                    for (size_t i = 0; i < got.logits.size(); ++i) {
                        if (std::memcmp(&got.logits[i], &want.logits[i], 4) != 0 && ++mismatches <= 3) {
                            ADD_FAILURE() << "row " << i << ": " << got.logits[i] << " vs the CPU's " << want.logits[i];
                        }
                    }
                    EXPECT_EQ(mismatches, 0);
                    EXPECT_EQ(got.id, want.id);
                }
            }
        }
    }
}

}  // namespace
}  // namespace tern
