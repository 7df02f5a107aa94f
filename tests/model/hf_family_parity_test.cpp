// Parity of the llama / qwen3 / phi3 families with Hugging Face transformers: tiny random
// checkpoints made by tools/hf_parity/make_family_reference.py (tests/data/hf_parity/README.md)
// go through `tern convert` to F32 GGUF files; the CPU reference with an f32 KV cache must give
// transformers' float32 logits at every position of every prompt within k_rel_tol of the row's
// largest logit, the same top-1 wherever transformers' top two differ by more than k_top1_margin,
// and the same greedy continuations (one token per forward pass through the KV cache). These
// models compute in float (no activation quantization), so there are no rounding ties to allow for.
//
// The committed data holds llama_tied_rope3 (Llama-3 rope scaling, GQA, tied head) and qwen3_tied
// (QK-norm, head_dim 64 x 4 heads != n_embd 128). $TERN_HF_FAMILY_DIR may name the folder of the
// whole reference set (hf_family.tar.gz) to run llama_untied_hd64 and phi3_untied too.
#include "backend/cpu/cpu_backend.h"
#include "convert/hf_convert.h"
#include "core/mmap.h"
#include "engine/session.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tern {
namespace {

constexpr double k_rel_tol     = 1e-5;  // |dlogit| <= this * max(1, max|logit| of the row); measured <= 1.6e-6
constexpr double k_top1_margin = 1e-3;  // top-1 must agree where HF's top-2 gap exceeds this

// Folders to check: the committed ones, and every model folder under $TERN_HF_FAMILY_DIR.
std::vector<std::string> family_dirs() {
    std::vector<std::string> dirs = {test::data_path("hf_parity/llama_tied_rope3"), test::data_path("hf_parity/qwen3_tied")};
    if (const char * extra = std::getenv("TERN_HF_FAMILY_DIR"); extra && *extra) {
        for (const char * name : {"llama_untied_hd64", "phi3_untied"}) {
            const std::filesystem::path p = std::filesystem::path(extra) / name;
            if (std::filesystem::exists(p / "reference.json")) dirs.push_back(p.string());
        }
    }
    return dirs;
}

std::string dir_name(const ::testing::TestParamInfo<std::string> & info) {
    return std::filesystem::path(info.param).filename().string();
}

class HfFamilyParity : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        dir_  = GetParam();
        name_ = std::filesystem::path(dir_).filename().string();
        ref_  = nlohmann::json::parse(read_file_text(dir_ + "/reference.json"));
        ConvertOptions o;
        o.input_dir   = dir_;
        o.output_path = (test::temp_dir("family-parity-" + name_) / "model.gguf").string();
        o.progress    = false;
        o.weight_type = DType::f32;
        o.head_type   = DType::f32;
        convert_hf_checkpoint(o);
        file_      = std::make_unique<GgufFile>(GgufFile::open(o.output_path));
        backend_   = make_cpu_backend({2});
        model_     = BitnetModel::load(*file_, *backend_);
        tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
    }

    std::vector<float> hf_logits(const nlohmann::json & prompt) const {
        const std::string bytes = read_file_text(dir_ + "/" + prompt["logits_file"].get<std::string>());
        std::vector<float> out(bytes.size() / 4);
        std::memcpy(out.data(), bytes.data(), out.size() * 4);
        return out;
    }

    std::string                  dir_, name_;
    nlohmann::json               ref_;
    std::unique_ptr<GgufFile>    file_;
    std::unique_ptr<Backend>     backend_;
    std::unique_ptr<BitnetModel> model_;
    std::unique_ptr<Tokenizer>   tokenizer_;
};

TEST_P(HfFamilyParity, ConvertedModelHasTheFamilyOfItsCheckpoint) {
    const std::string cls = ref_["model"]["cls"].get<std::string>();
    EXPECT_EQ(model_->config().arch, cls);
    EXPECT_EQ(model_->config().n_vocab, ref_["model"]["vocab"].get<int64_t>());
    EXPECT_EQ(model_->config().n_layer, ref_["model"]["layers"].get<int64_t>());
}

TEST_P(HfFamilyParity, F32LogitsAndGreedyMatchTransformers) {
    const int64_t  nv = model_->config().n_vocab;
    SessionOptions so;
    so.n_ctx   = 512;
    so.n_batch = 64;  // prompts longer than a batch run as several forward passes
    so.type_k = so.type_v = DType::f32;
    Session s(*model_, so);
    double  worst = 0, sum = 0;
    int64_t n_pos = 0, n_values = 0, top1_checked = 0;
    for (const auto & p : ref_["prompts"]) {
        const auto ids = p["ids"].get<std::vector<int32_t>>();
        const auto hf  = hf_logits(p);
        ASSERT_EQ(hf.size(), ids.size() * static_cast<size_t>(nv)) << p["logits_file"];
        std::vector<float> ours(hf.size());
        s.reset();
        s.eval(ids, ours);
        for (size_t pos = 0; pos < ids.size(); ++pos, ++n_pos) {
            const float * a    = ours.data() + pos * nv;
            const float * b    = hf.data() + pos * nv;
            double        maxd = 0, row_max = 1;
            for (int64_t v = 0; v < nv; ++v) row_max = std::max(row_max, static_cast<double>(std::fabs(b[v])));
            for (int64_t v = 0; v < nv; ++v, ++n_values) {
                const double d = std::fabs(static_cast<double>(a[v]) - b[v]);
                maxd           = std::max(maxd, d);
                sum += d;
            }
            worst = std::max(worst, maxd / row_max);
            EXPECT_LE(maxd, k_rel_tol * row_max) << name_ << ": " << p["text"] << " position " << pos;
            std::vector<float> sorted(b, b + nv);
            std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
            if (sorted[0] - sorted[1] > k_top1_margin) {
                ++top1_checked;
                EXPECT_EQ(std::max_element(a, a + nv) - a, std::max_element(b, b + nv) - b)
                    << name_ << ": " << p["text"] << " position " << pos;
            }
        }
    }
    int64_t greedy_checked = 0;
    for (const auto & g : ref_["greedy"]) {
        const auto ids  = g["ids"].get<std::vector<int32_t>>();
        const auto want = g["tokens"].get<std::vector<int32_t>>();
        s.reset();
        Sampler greedy({.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f}, static_cast<int32_t>(nv));
        s.eval(ids);
        for (size_t i = 0; i < want.size(); ++i) {
            const int32_t id = greedy.sample(s.logits());
            ASSERT_EQ(id, want[i]) << name_ << ": " << g["text"] << " greedy token " << i;
            const int32_t next[1] = {id};
            s.eval(next);
            ++greedy_checked;
        }
    }
    std::printf("[ parity ] %s f32: %lld positions, max |dlogit| / max(1, max|logit|) %.3g, mean |dlogit| %.3g, "
                "top-1 checked at %lld, %lld greedy tokens identical\n",
                name_.c_str(), static_cast<long long>(n_pos), worst, sum / static_cast<double>(n_values),
                static_cast<long long>(top1_checked), static_cast<long long>(greedy_checked));
}

TEST_P(HfFamilyParity, TokenizerGivesTheReferenceIds) {
    for (const auto & p : ref_["prompts"]) {
        const auto ids = tokenizer_->encode(p["text"].get<std::string>(), true, false);
        EXPECT_EQ(ids, p["ids"].get<std::vector<int32_t>>()) << name_ << ": " << p["text"];
    }
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyParity, ::testing::ValuesIn(family_dirs()), dir_name);

}  // namespace
}  // namespace tern
