// The fast CPU backend against the scalar reference on whole synthetic models: every position's
// logits (prompts in batches and token-by-token decoding, both cache types), greedy decoding (the
// int8 head copy forced on), the top-k head and seeded top-k sampling through the decode stream,
// bit for bit, for each instruction set this machine runs, each ternary file type and each head type.
#include "backend/cpu/cpu_backend.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "synth/synth.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace tern {
namespace {

std::string synth(const std::string & tag, DType linear, DType embd) {
    const auto   dir = test::temp_dir("fast-model-" + tag);
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (dir / "m.gguf").string();
    o.seed        = 11;
    o.linear_type = linear;
    o.embd_type   = embd;
    o.progress    = false;
    write_synthetic_model(o);
    return o.output_path;
}

struct Outputs {
    std::vector<float>   logits;  // every position, prompt in batches of 5 then 6 decode steps
    std::vector<int32_t> greedy;  // 20 greedy ids after the prompt
    std::vector<float>   top_k;   // output_head's top-k logits after the prompt (k = 3)
    std::vector<int32_t> sampled; // 12 seeded top-k samples (the stream hands the backend top_k)
};

Outputs run(const std::string & path, std::unique_ptr<Backend> be, DType cache) {
    const GgufFile file  = GgufFile::open(path);
    auto           model = BitnetModel::load(file, *be);
    const int64_t  nv    = model->config().n_vocab;
    SessionOptions so;
    so.n_ctx   = 64;
    so.n_batch = 5;
    so.type_k = so.type_v = cache;
    Outputs              o;
    std::vector<int32_t> ids;
    for (int i = 0; i < 14; ++i) ids.push_back((i * 53 + 7) % static_cast<int32_t>(nv));
    {
        Session s(*model, so);
        o.logits.resize(ids.size() * static_cast<size_t>(nv));
        s.eval(std::span<const int32_t>(ids.data(), 8), std::span<float>(o.logits.data(), 8 * nv));
        for (size_t i = 8; i < ids.size(); ++i) {
            s.eval(std::span<const int32_t>(ids.data() + i, 1), std::span<float>(o.logits.data() + i * nv, nv));
        }
        s.decode_greedy(ids.back(), 20, [&](int32_t id) {
            o.greedy.push_back(id);
            return true;
        });
    }
    {
        // The top-k head directly on the model's buffers, after a prompt.
        Session s(*model, so);
        s.eval(std::span<const int32_t>(ids.data(), 9));
        ForwardBuffers buf = model->make_buffers(1, 1);
        OwnedTensor    tok = alloc_tensor(*be, DType::i32, {1, 1, 1, 1}, "tok");
        be->write(tok.tensor, &ids[9], 4);
        DecodeStep step;
        step.pos         = 9;
        step.token       = tok.tensor;
        step.head.logits = buf.logits.tensor;
        step.head.top_k  = 3;
        be->begin_step();
        model->record_step(buf, s.kv_cache(), step, cache == DType::f16);
        be->end_step();
        o.top_k.resize(static_cast<size_t>(nv));
        be->read(buf.logits.tensor, o.top_k.data(), o.top_k.size() * 4);
    }
    {
        Session s(*model, so);
        s.eval(std::span<const int32_t>(ids.data(), 9));
        SamplerParams sp;
        sp.top_k = 3;
        sp.seed  = 5;
        Sampler sampler(sp, static_cast<int32_t>(nv));
        EXPECT_TRUE(sampler.starts_with_top_k());
        s.decode_sampled(sampler, [&](int32_t id) {
            o.sampled.push_back(id);
            return o.sampled.size() < 12;
        });
    }
    return o;
}

class CpuFastModel : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuFastModel, MatchesTheReferenceBitForBit) {
    const CpuIsa isa = GetParam();
    if (!cpu_isa_available(isa)) GTEST_SKIP() << "no " << cpu_isa_name(isa) << " kernels here (" << cpu_feature_list() << ")";
    struct Case {
        DType linear, embd;
    };
    std::vector<Case> cases{{DType::i2_s, DType::f16}, {DType::tq2_0, DType::q6_k}, {DType::tq1_0, DType::q8_0},
                            {DType::i2_s, DType::q4_0}, {DType::tq2_0, DType::f32}};
    std::vector<DType> caches{DType::f16, DType::f32};
    if (std::getenv("TERN_TEST_EMULATED") != nullptr) {  // under qemu (scripts/test_arm64.sh): the shipped layout only
        cases.resize(1);
        caches.resize(1);
    }
    for (const Case c : cases) {
        const std::string path = synth(std::string(dtype_name(c.linear)) + "-" + std::string(dtype_name(c.embd)), c.linear, c.embd);
        for (DType cache : caches) {
            SCOPED_TRACE(std::string(dtype_name(c.linear)) + " / " + std::string(dtype_name(c.embd)) + " head / " +
                         std::string(dtype_name(cache)) + " cache");
            const Outputs ref  = run(path, make_cpu_reference_backend(2), cache);
            const Outputs fast = run(path, make_cpu_fast_backend({2, isa, 0}), cache);
            ASSERT_EQ(ref.logits.size(), fast.logits.size());
            for (size_t i = 0; i < ref.logits.size(); ++i) {
                ASSERT_EQ(std::memcmp(&ref.logits[i], &fast.logits[i], 4), 0) << "logit " << i << ": " << ref.logits[i]
                                                                               << " vs " << fast.logits[i];
            }
            EXPECT_EQ(ref.greedy, fast.greedy);
            EXPECT_EQ(ref.sampled, fast.sampled);
            // Top-k: rows may be -inf on the fast side; the others are the reference's bits.
            int64_t finite = 0;
            for (size_t i = 0; i < ref.top_k.size(); ++i) {
                if (fast.top_k[i] == -std::numeric_limits<float>::infinity()) continue;
                ++finite;
                ASSERT_EQ(std::memcmp(&ref.top_k[i], &fast.top_k[i], 4), 0) << "top-k row " << i;
            }
            EXPECT_GE(finite, 3);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuFastModel, ::testing::Values(CpuIsa::avx512, CpuIsa::avx2, CpuIsa::neon),
                         [](const auto & param_info) { return std::string(cpu_isa_name(param_info.param)); });

}  // namespace
}  // namespace tern
