// libFuzzer target: the whole load-and-run path on the CPU backend: a GGUF file (seeds: tiny
// synthesized models) -> model config, weights (shape/type/finiteness checks), tokenizer -> a
// session that evaluates a prompt and samples. With UBSan, a NaN reaching the int8 quantizer or
// any out-of-bounds index is a finding.
#include "backend/cpu/cpu_backend.h"
#include "engine/session.h"
#include "fuzz_common.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static const auto backend = tern::make_cpu_backend({1});
    tern::fuzz::expect_clean([&] {
        const tern::GgufFile  f     = tern::GgufFile::from_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
        const auto            model = tern::BitnetModel::load(f, *backend);
        const tern::Tokenizer tok   = tern::Tokenizer::from_gguf(f);
        if (tok.n_vocab() != model->config().n_vocab) return;  // the CLI refuses this pair
        tern::SessionOptions so;
        so.n_ctx   = 8;
        so.n_batch = 4;
        tern::Session        session(*model, so);
        std::vector<int32_t> ids = tok.encode("The ship", true, false);
        if (ids.size() > 6) ids.resize(6);
        if (ids.empty()) return;
        session.eval(ids);
        tern::SamplerParams p;
        p.seed = 1;
        tern::Sampler sampler(p, static_cast<int32_t>(model->config().n_vocab));
        (void) sampler.sample(session.logits());
    });
    return 0;
}
