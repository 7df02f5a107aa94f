// The fast CPU backend against the scalar reference on whole family models (llama, qwen3: the tiny
// HF checkpoints of tests/data/hf_parity converted with each Q8_0-block weight type: Q4_0 / Q8_0
// Q-block tiles, Q1_0 binary tiles, Q2_0 / PQ2_0 2-bit tiles, PQ2_0 also base-3): every prompt
// position's logits (prompts in batches: the kernels' many-token paths) and 12 greedy decode steps,
// bit for bit, for each instruction set this machine runs.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "convert/hf_convert.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tern {
namespace {

std::string converted(const std::string & name, DType weight) {
    ConvertOptions o;
    o.input_dir   = test::data_path("hf_parity/" + name);
    o.output_path = (test::temp_dir("fast-family-" + name + "-" + std::string(dtype_name(weight))) / "m.gguf").string();
    o.progress    = false;
    o.weight_type = weight;
    o.head_type   = DType::f32;
    convert_hf_checkpoint(o);
    return o.output_path;
}

// Logits of a 37-token prompt in batches of 16, then 12 greedy steps (one token each).
std::vector<float> run(const GgufFile & file, Backend & be, DType cache) {
    auto          model = BitnetModel::load(file, be);
    const int64_t nv    = model->config().n_vocab;
    std::vector<int32_t> prompt;
    for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<int32_t>((i * 97 + 5) % nv));
    SessionOptions so;
    so.n_ctx   = 64;
    so.n_batch = 16;
    so.type_k = so.type_v = cache;
    Session            s(*model, so);
    std::vector<float> out(prompt.size() * static_cast<size_t>(nv));
    s.eval(prompt, out);
    for (int step = 0; step < 12; ++step) {
        const auto    l       = s.logits();
        const int32_t next[1] = {static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin())};
        s.eval(next);
        out.insert(out.end(), s.logits().begin(), s.logits().end());
    }
    return out;
}

class CpuFastFamily : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuFastFamily, MatchesTheReferenceBitForBit) {
    const CpuIsa isa = GetParam();
    if (!cpu_isa_available(isa)) GTEST_SKIP() << "no " << cpu_isa_name(isa) << " kernels here (" << cpu_feature_list() << ")";
    const bool emulated = std::getenv("TERN_TEST_EMULATED") != nullptr;  // under qemu: fewer cases
    // (llama_tied_rope3's n_ff of 352 takes no Q1_0 / Q2_0 groups; qwen3_tied's 128 / 384 do.)
    const std::vector<std::pair<const char *, std::vector<DType>>> cases{
        {"llama_tied_rope3", emulated ? std::vector{DType::q4_0} : std::vector{DType::q4_0, DType::q8_0}},
        {"qwen3_tied", emulated ? std::vector{DType::q1_0} : std::vector{DType::q4_0, DType::q8_0, DType::q1_0, DType::q2_0, DType::pq2_0}}};
    for (const auto & [name, types] : cases) {
        for (const DType weight : types) {
            const GgufFile file  = GgufFile::open(converted(name, weight));
            const DType    cache = weight == DType::q8_0 ? DType::f32 : DType::f16;
            SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(weight)));
            auto                     ref  = make_cpu_reference_backend(2);
            const std::vector<float> want = run(file, *ref, cache);
            // PQ2_0 also in base-3 tiles where the set reads them (the kernels' scalar fallback).
            for (const int base3 : weight == DType::pq2_0 ? std::vector<int>{-1, 1} : std::vector<int>{-1}) {
                CpuOptions o;
                o.n_threads = 3, o.isa = isa, o.base3 = base3;
                auto                     fast = make_cpu_fast_backend(o);
                const std::vector<float> got  = run(file, *fast, cache);
                ASSERT_EQ(want.size(), got.size());
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_EQ(std::memcmp(&want[i], &got[i], 4), 0) << "base3 " << base3 << " logit " << i << ": " << want[i] << " vs " << got[i];
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuFastFamily, ::testing::Values(CpuIsa::avx512, CpuIsa::avx2, CpuIsa::neon),
                         [](const auto & param_info) { return std::string(cpu_isa_name(param_info.param)); });

}  // namespace
}  // namespace tern
