// Whole-model tests on synthetic models (tern synth): KV-cache decode equals full recompute, results
// do not depend on threads or batch size, ternary file types agree, and bad files fail cleanly.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/bitnet_model.h"
#include "synth/synth.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tern {
namespace {

std::string synth_model(const std::string & tag, DType linear = DType::i2_s, DType embd = DType::f16, uint64_t seed = 7) {
    const auto   dir = test::temp_dir("model-" + tag);
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (dir / "m.gguf").string();
    o.seed        = seed;
    o.linear_type = linear;
    o.embd_type   = embd;
    o.progress    = false;
    write_synthetic_model(o);
    return o.output_path;
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % n_vocab);
    return ids;
}

// All-position logits of `ids`, evaluated in chunks of `n_batch` (1 = token-by-token decode).
std::vector<float> run_logits(const std::string & path, const std::vector<int32_t> & ids, int64_t n_batch, int threads,
                              DType cache = DType::f16, int64_t n_ctx = 64, CpuIsa isa = CpuIsa::automatic) {
    const GgufFile file  = GgufFile::open(path);
    auto           be    = make_cpu_backend({threads, isa});
    auto           model = BitnetModel::load(file, *be);
    SessionOptions so;
    so.n_ctx   = n_ctx;
    so.n_batch = n_batch;
    so.type_k = so.type_v = cache;
    Session            s(*model, so);
    const int64_t      nv = model->config().n_vocab;
    std::vector<float> out(ids.size() * static_cast<size_t>(nv));
    for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(n_batch)) {
        const size_t m = std::min(ids.size() - start, static_cast<size_t>(n_batch));
        s.eval(std::span<const int32_t>(ids.data() + start, m), std::span<float>(out.data() + start * nv, m * nv));
    }
    return out;
}

TEST(ModelForward, DecodeTokenByTokenEqualsFullRecompute) {
    const std::string path = synth_model("decode");
    const auto        ids  = some_tokens(40, 271);
    for (DType cache : {DType::f16, DType::f32}) {
        const auto full   = run_logits(path, ids, 64, 2, cache);
        const auto decode = run_logits(path, ids, 1, 2, cache);
        const auto chunks = run_logits(path, ids, 7, 2, cache);
        ASSERT_EQ(full.size(), decode.size());
        // The reference kernels compute each token independently of the batch: bit-identical.
        EXPECT_EQ(std::memcmp(full.data(), decode.data(), full.size() * 4), 0);
        EXPECT_EQ(std::memcmp(full.data(), chunks.data(), full.size() * 4), 0);
    }
}

// Past one superblock of 512 positions, where attention takes the block order (cpu_ops.h): the
// prompt path's rows (a prompt of 600, and chunks of 100 whose rows start past 511) equal decode's,
// on the reference and on the machine's fast kernels, and the two agree.
TEST(ModelForward, DecodeEqualsFullRecomputePastOneSuperblock) {
    const std::string path = synth_model("decode-long");
    const auto        ids  = some_tokens(600, 271);
    std::vector<float> first;
    for (const CpuIsa isa : {CpuIsa::ref, CpuIsa::automatic}) {
        SCOPED_TRACE(isa == CpuIsa::ref ? "reference" : "fast");
        const auto full   = run_logits(path, ids, 600, 2, DType::f16, 640, isa);
        const auto decode = run_logits(path, ids, 1, 2, DType::f16, 640, isa);
        const auto chunks = run_logits(path, ids, 100, 2, DType::f16, 640, isa);
        ASSERT_EQ(full.size(), decode.size());
        EXPECT_EQ(std::memcmp(full.data(), decode.data(), full.size() * 4), 0);
        EXPECT_EQ(std::memcmp(full.data(), chunks.data(), full.size() * 4), 0);
        if (first.empty()) {
            first = full;
        } else {
            EXPECT_EQ(std::memcmp(full.data(), first.data(), full.size() * 4), 0);
        }
    }
}

TEST(ModelForward, ThreadCountDoesNotChangeResults) {
    const std::string path = synth_model("threads");
    const auto        ids  = some_tokens(12, 271);
    const auto        one  = run_logits(path, ids, 12, 1);
    const auto        two  = run_logits(path, ids, 12, 2);
    const auto        five = run_logits(path, ids, 12, 5);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0);
    EXPECT_EQ(std::memcmp(one.data(), five.data(), one.size() * 4), 0);
}

TEST(ModelForward, LogitsAreFiniteAndDependOnContext) {
    const std::string path = synth_model("finite");
    const auto        ids  = some_tokens(10, 271);
    const auto        l    = run_logits(path, ids, 10, 2);
    for (float v : l) ASSERT_TRUE(std::isfinite(v));
    // Same token at two positions with different histories gives different logits.
    std::vector<int32_t> rep(10, 42);
    const auto           lr = run_logits(path, rep, 10, 2);
    EXPECT_NE(std::memcmp(lr.data(), lr.data() + 271 * 5, 271 * 4), 0);
}

TEST(ModelForward, TernaryFileTypesGiveTheSameModel) {
    // Same seed => same ternary values; TQ types store the scale per block as f16, so logits agree
    // closely but not bit for bit.
    const auto ids  = some_tokens(16, 271);
    const auto i2s  = run_logits(synth_model("i2s"), ids, 16, 2, DType::f32);
    for (DType t : {DType::tq2_0, DType::tq1_0}) {
        const auto other = run_logits(synth_model(std::string(dtype_name(t)), t), ids, 16, 2, DType::f32);
        double     max_d = 0;
        int        agree = 0;
        for (size_t p = 0; p < ids.size(); ++p) {
            const float * a = i2s.data() + p * 271;  // n_vocab of the byte vocabulary
            const float * b = other.data() + p * 271;
            for (int v = 0; v < 271; ++v) max_d = std::max(max_d, static_cast<double>(std::fabs(a[v] - b[v])));
            agree += std::max_element(a, a + 271) - a == std::max_element(b, b + 271) - b;
        }
        EXPECT_LT(max_d, 0.5) << dtype_name(t);
        EXPECT_GE(agree, 14) << dtype_name(t);
    }
}

TEST(ModelForward, EmbeddingTypesLoadAndRun) {
    const auto ids = some_tokens(6, 271);
    for (DType e : {DType::f32, DType::bf16, DType::q8_0, DType::q4_0}) {
        const auto l = run_logits(synth_model(std::string("embd-") + std::string(dtype_name(e)), DType::i2_s, e), ids, 6, 2);
        for (float v : l) ASSERT_TRUE(std::isfinite(v)) << dtype_name(e);
    }
}

TEST(ModelForward, ContextOverflowIsAnError) {
    const GgufFile file  = GgufFile::open(synth_model("overflow"));
    auto           be    = make_cpu_backend({1});
    auto           model = BitnetModel::load(file, *be);
    SessionOptions so;
    so.n_ctx = 8;
    Session    s(*model, so);
    const auto ids = some_tokens(9, 271);
    try {
        s.eval(ids);
        FAIL() << "expected an error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("do not fit the context"), std::string::npos) << e.what();
    }
    const int32_t bad[1] = {271};
    EXPECT_THROW(s.eval(bad), Error);
    for (const int32_t first : {-1, 271}) {  // greedy decoding's first token is checked the same way
        try {
            s.decode_greedy(first, 2, [](int32_t) { return true; });
            FAIL() << "expected an error for token " << first;
        } catch (const Error & e) {
            EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
            EXPECT_NE(std::string(e.what()).find("outside the vocabulary (0..270)"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(s.n_past(), 0);
}

// Copies a model file while dropping or changing one thing, to check load errors.
std::string rewrite_model(const std::string & src, const std::string & tag,
                          const std::function<bool(GgufWriter &, const GgufTensorInfo &, std::span<const uint8_t>)> & tensor_hook,
                          const std::function<void(GgufWriter &)> & meta_hook = nullptr) {
    const GgufFile f = GgufFile::open(src);
    GgufWriter     w;
    for (const auto & kv : f.kvs()) {
        std::vector<uint8_t> enc;
        if (kv.value.type == GgufType::array) {
            enc.resize(12);
            const uint32_t et = static_cast<uint32_t>(kv.value.elem_type);
            std::memcpy(enc.data(), &et, 4);
            std::memcpy(enc.data() + 4, &kv.value.count, 8);
            enc.insert(enc.end(), kv.value.data, kv.value.data + kv.value.n_bytes);
        } else if (kv.value.type == GgufType::string) {
            const uint64_t n = kv.value.n_bytes;
            enc.resize(8);
            std::memcpy(enc.data(), &n, 8);
            enc.insert(enc.end(), kv.value.data, kv.value.data + n);
        } else {
            enc.assign(kv.value.data, kv.value.data + kv.value.n_bytes);
        }
        w.set_raw(std::string(kv.key), kv.value.type, enc);
    }
    if (meta_hook) meta_hook(w);
    for (const auto & t : f.tensors()) {
        const auto data = f.tensor_data(t);
        if (tensor_hook(w, t, data)) continue;
        std::vector<int64_t> dims(t.ne.begin(), t.ne.begin() + t.n_dims);
        w.add_tensor(std::string(t.name), t.type, dims, std::vector<uint8_t>(data.begin(), data.end()));
    }
    const std::string out = (test::temp_dir("rewrite-" + tag) / "m.gguf").string();
    w.write_file(out);
    return out;
}

void expect_load_error(const std::string & path, ErrorKind kind, const std::vector<std::string> & needles) {
    const GgufFile file = GgufFile::open(path);
    auto           be   = make_cpu_backend({1});
    try {
        BitnetModel::load(file, *be);
        FAIL() << "expected an error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto & n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
}

TEST(ModelLoad, MissingTensorIsNamed) {
    const std::string src = synth_model("missing");
    const std::string bad = rewrite_model(src, "missing", [](GgufWriter &, const GgufTensorInfo & t, auto) {
        return t.name == "blk.1.ffn_down.weight";
    });
    expect_load_error(bad, ErrorKind::invalid_model, {"blk.1.ffn_down.weight", "missing"});
}

TEST(ModelLoad, WrongShapeIsNamedWithExpectedAndFound) {
    const std::string src = synth_model("shape");
    const std::string bad = rewrite_model(src, "shape", [](GgufWriter & w, const GgufTensorInfo & t, std::span<const uint8_t> d) {
        if (t.name != "blk.0.attn_norm.weight") return false;
        std::vector<uint8_t> bytes(d.begin(), d.end());
        bytes.resize(64 * 4);
        w.add_tensor(std::string(t.name), t.type, {64}, bytes);
        return true;
    });
    expect_load_error(bad, ErrorKind::invalid_model, {"blk.0.attn_norm.weight", "[256]", "[64]"});
}

TEST(ModelLoad, NonTernaryProjectionIsUnsupported) {
    const std::string src = synth_model("f32proj");
    const std::string bad = rewrite_model(src, "f32proj", [](GgufWriter & w, const GgufTensorInfo & t, auto) {
        if (t.name != "blk.0.attn_q.weight") return false;
        w.add_tensor(std::string(t.name), DType::f32, {256, 256}, std::vector<uint8_t>(256 * 256 * 4, 0));
        return true;
    });
    expect_load_error(bad, ErrorKind::unsupported, {"blk.0.attn_q.weight", "f32"});
}

TEST(ModelLoad, UnknownArchitectureAndMissingKeys) {
    const std::string src = synth_model("arch");
    const std::string arch = rewrite_model(src, "arch", [](auto &, auto &, auto) { return false; },
                                           [](GgufWriter & w) { w.set_string("general.architecture", "gpt2"); });
    expect_load_error(arch, ErrorKind::unsupported, {"gpt2"});
    // A known family whose keys are missing (a BitNet file relabelled llama) names the first key.
    const std::string relabelled = rewrite_model(src, "llama", [](auto &, auto &, auto) { return false; },
                                                 [](GgufWriter & w) { w.set_string("general.architecture", "llama"); });
    expect_load_error(relabelled, ErrorKind::invalid_model, {"llama.embedding_length"});
    const std::string bad_heads = rewrite_model(src, "heads", [](auto &, auto &, auto) { return false; },
                                                [](GgufWriter & w) { w.set_u32("bitnet-b1.58.attention.head_count_kv", 3); });
    expect_load_error(bad_heads, ErrorKind::invalid_model, {"head_count_kv"});
    const std::string bad_eps = rewrite_model(src, "eps", [](auto &, auto &, auto) { return false; }, [](GgufWriter & w) {
        w.set_string("bitnet-b1.58.attention.layer_norm_rms_epsilon", "tiny");
    });
    expect_load_error(bad_eps, ErrorKind::invalid_model, {"layer_norm_rms_epsilon", "STRING"});
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Greedy decoding with the token kept on the device must give the host loop's tokens, and stopping
// early must leave the context exactly after the last token fed.
TEST(ModelForward, DeviceGreedyDecodeMatchesHostGreedy) {
    const GgufFile file  = GgufFile::open(synth_model("greedy"));
    auto           be    = make_cpu_backend({2});
    auto           model = BitnetModel::load(file, *be);
    SessionOptions so;
    so.n_ctx = 64;
    const auto prompt = some_tokens(5, 271);
    auto argmax = [](std::span<const float> l) {
        return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    };

    Session              host(*model, so);
    std::vector<int32_t> want;
    host.eval(prompt);
    for (int i = 0; i < 20; ++i) {
        want.push_back(argmax(host.logits()));
        const int32_t next[1] = {want.back()};
        host.eval(next);
    }

    Session              dev(*model, so);
    std::vector<int32_t> got;
    dev.eval(prompt);
    got.push_back(argmax(dev.logits()));
    const int64_t n = dev.decode_greedy(got[0], 19, [&](int32_t id) { got.push_back(id); return true; }, 7);
    EXPECT_EQ(n, 19);
    EXPECT_EQ(got, want);
    EXPECT_EQ(dev.n_past(), 5 + 19);

    Session stop(*model, so);
    stop.eval(prompt);
    int seen = 0;
    stop.decode_greedy(want[0], 19, [&](int32_t) { return ++seen < 4; }, 3);
    EXPECT_EQ(seen, 4);
    EXPECT_EQ(stop.n_past(), 5 + 4);  // the first token and the next three were fed; the fourth was not
    const int32_t next[1] = {want[4]};
    stop.eval(next);
    const auto l = stop.logits();
    EXPECT_EQ(argmax(l), want[5]);  // the context continues exactly where it stopped

    // Up to a full context: batches of 3 end with a partial one at the last position.
    SessionOptions small = so;
    small.n_ctx          = 12;
    Session full(*model, small);
    full.eval(prompt);
    std::vector<int32_t> to_end{want[0]};
    const int64_t n_full = full.decode_greedy(want[0], 100, [&](int32_t id) { to_end.push_back(id); return true; }, 3);
    EXPECT_EQ(n_full, 7);  // positions 5 .. 11 fed, the 7th id comes from the last one
    EXPECT_EQ(full.n_past(), 12);
    EXPECT_EQ(to_end, std::vector<int32_t>(want.begin(), want.begin() + 8));
}

}  // namespace
}  // namespace tern
