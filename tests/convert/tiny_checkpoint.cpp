// Synthetic HF BitNet checkpoint folders for the converter tests; see tiny_checkpoint.h.
#include "tiny_checkpoint.h"

#include "test_util.h"

#include <cmath>
#include <random>

namespace tern::test {

std::string byte_token(uint8_t b) {
    // Printable bytes map to themselves; the other 68 to U+0100.. in increasing byte order.
    auto printable = [](int x) { return (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff); };
    uint32_t cp = b;
    if (!printable(b)) {
        int n = 0;
        for (int x = 0; x < b; ++x) n += !printable(x);
        cp = 256 + static_cast<uint32_t>(n);
    }
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return out;
}

std::vector<uint8_t> hf_pack(const std::vector<int8_t> & values, int64_t out, int64_t in) {
    const int64_t        q = out / 4;
    std::vector<uint8_t> packed(static_cast<size_t>(q * in), 0);
    for (int64_t r = 0; r < out; ++r) {
        for (int64_t c = 0; c < in; ++c) {
            const int field = values[static_cast<size_t>(r * in + c)] + 1;
            packed[static_cast<size_t>((r % q) * in + c)] |= static_cast<uint8_t>(field << (2 * (r / q)));
        }
    }
    return packed;
}

std::vector<int8_t> reference_absmean(const std::vector<float> & w, float & scale) {
    double sum = 0;
    for (float x : w) sum += std::fabs(static_cast<double>(x));
    const float mean = static_cast<float>(sum / static_cast<double>(w.size()));
    const float s_w  = 1.0f / std::max(mean, 1e-5f);
    scale            = 1.0f / s_w;
    std::vector<int8_t> t;
    for (float x : w) t.push_back(static_cast<int8_t>(std::clamp(std::nearbyint(x * s_w), -1.0f, 1.0f)));
    return t;
}

StEntry * TinyCheckpoint::find(const std::string & hf_name) {
    for (auto & e : tensors) {
        if (e.name == hf_name) return &e;
    }
    return nullptr;
}

nlohmann::json tokenizer_json() {
    using nlohmann::json;
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_token(static_cast<uint8_t>(b))] = b;
    const std::vector<std::pair<std::string, std::string>> merges = {
        {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"o", "n"}, {"e", "r"}, {"Ġ", "s"},
    };
    json merge_list = json::array();
    int  id         = 256;
    for (const auto & [l, r] : merges) {
        vocab[l + r] = id++;
        merge_list.push_back(l + " " + r);
    }
    json added = json::array();
    for (const char * text : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}) {
        added.push_back({{"id", id++}, {"content", text}, {"special", true}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}});
    }
    const std::string regex =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    return {
        {"version", "1.0"},
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
          {"ignore_merges", true}, {"vocab", vocab}, {"merges", merge_list}}},
    };
}

void TinyCheckpoint::write() const {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_text(dir / "config.json", config.dump(2));
    write_text(dir / "tokenizer.json", tokenizer_json().dump());
    write_text(dir / "tokenizer_config.json",
               nlohmann::json{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}}.dump());
    if (!spec.sharded) {
        write_bytes(dir / "model.safetensors", build_safetensors(tensors, {{"format", "pt"}}));
        return;
    }
    // Two shards split in the middle; the index maps every tensor to its shard.
    const size_t                half = tensors.size() / 2;
    const std::vector<StEntry>  a(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(half));
    const std::vector<StEntry>  b(tensors.begin() + static_cast<std::ptrdiff_t>(half), tensors.end());
    const std::string           na = "model-00001-of-00002.safetensors", nb = "model-00002-of-00002.safetensors";
    write_bytes(dir / na, build_safetensors(a));
    write_bytes(dir / nb, build_safetensors(b));
    nlohmann::json map = nlohmann::json::object();
    for (const auto & e : a) map[e.name] = na;
    for (const auto & e : b) map[e.name] = nb;
    write_text(dir / "model.safetensors.index.json", nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2));
}

TinyCheckpoint make_tiny_checkpoint(const std::string & tag, const TinySpec & spec) {
    TinyCheckpoint ck;
    ck.spec = spec;
    ck.dir  = temp_dir(tag) / "tiny-bitnet";
    const int64_t hd = ck.head_dim(), q_dim = spec.n_heads * hd, kv_dim = spec.n_kv_heads * hd;

    nlohmann::json & c = ck.config;
    c = {{"architectures", {"BitNetForCausalLM"}}, {"model_type", "bitnet"}, {"hidden_size", spec.hidden},
         {"intermediate_size", spec.intermediate}, {"num_hidden_layers", spec.n_layers},
         {"num_attention_heads", spec.n_heads}, {"num_key_value_heads", spec.n_kv_heads},
         {"vocab_size", spec.vocab}, {"max_position_embeddings", spec.context}, {"rms_norm_eps", 1e-5},
         {"rope_theta", 500000.0}, {"hidden_act", "relu2"}, {"bos_token_id", 264}, {"eos_token_id", 265},
         {"torch_dtype", "bfloat16"}};
    if (spec.head_dim) c["head_dim"] = *spec.head_dim;
    if (spec.tie) c["tie_word_embeddings"] = *spec.tie;
    const std::string mode = !spec.quant_mode.empty() ? spec.quant_mode : (spec.packed ? "offline" : "online");
    nlohmann::json    qc   = {{"quant_method", "bitnet"}, {"quantization_mode", mode}};
    if (!spec.linear_class.empty()) qc["linear_class"] = spec.linear_class;
    c["quantization_config"] = qc;

    std::mt19937_64                       rng(spec.seed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    auto random_floats = [&](int64_t n, float lo, float hi) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float & x : v) x = bf16_round(lo + (hi - lo) * (unit(rng) * 0.5f + 0.5f));
        return v;
    };
    auto add_float = [&](const std::string & hf, const std::string & gguf, std::vector<int64_t> shape, float lo, float hi) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        const auto v = random_floats(n, lo, hi);
        ck.tensors.push_back({hf, "BF16", std::move(shape), bf16_bytes(v)});
        ck.floats[gguf] = v;
    };
    int  n_proj      = 0;
    auto add_ternary = [&](const std::string & hf_prefix, const std::string & gguf, int64_t out, int64_t in) {
        ExpectedTernary e{hf_prefix + ".weight", gguf, out, in, {}, 0.0f};
        if (spec.packed) {
            std::uniform_int_distribution<int> tri(-1, 1);
            e.values.resize(static_cast<size_t>(out * in));
            for (int8_t & v : e.values) v = static_cast<int8_t>(tri(rng));
            const float ws = 0.5f + 0.125f * static_cast<float>(n_proj);  // exact in bf16
            e.scale        = spec.linear_class == "autobitlinear" ? ws : 1.0f / ws;
            ck.tensors.push_back({e.hf_name, "U8", {out / 4, in}, hf_pack(e.values, out, in)});
            ck.tensors.push_back({hf_prefix + ".weight_scale", "BF16", {1}, bf16_bytes({ws})});
        } else {
            // Magnitudes like the 2B4T masters (~1-7) with one dead row (~1e-34) per tensor.
            auto w = random_floats(out * in, -4.0f, 4.0f);
            for (int64_t col = 0; col < in; ++col) w[static_cast<size_t>(in + col)] = bf16_round((col % 2 ? -1e-34f : 1e-34f));
            e.values = reference_absmean(w, e.scale);
            ck.tensors.push_back({e.hf_name, "BF16", {out, in}, bf16_bytes(w)});
        }
        ck.ternary.push_back(std::move(e));
        ++n_proj;
    };

    add_float("model.embed_tokens.weight", "token_embd.weight", {spec.vocab, spec.hidden}, -1.0f, 1.0f);
    for (int64_t il = 0; il < spec.n_layers; ++il) {
        const std::string hf = "model.layers." + std::to_string(il) + ".", gg = "blk." + std::to_string(il) + ".";
        add_float(hf + "input_layernorm.weight", gg + "attn_norm.weight", {spec.hidden}, 0.01f, 2.0f);
        add_ternary(hf + "self_attn.q_proj", gg + "attn_q.weight", q_dim, spec.hidden);
        add_ternary(hf + "self_attn.k_proj", gg + "attn_k.weight", kv_dim, spec.hidden);
        add_ternary(hf + "self_attn.v_proj", gg + "attn_v.weight", kv_dim, spec.hidden);
        add_float(hf + "self_attn.attn_sub_norm.weight", gg + "attn_sub_norm.weight", {q_dim}, 0.01f, 2.0f);
        add_ternary(hf + "self_attn.o_proj", gg + "attn_output.weight", spec.hidden, q_dim);
        add_float(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {spec.hidden}, 0.01f, 2.0f);
        add_ternary(hf + "mlp.gate_proj", gg + "ffn_gate.weight", spec.intermediate, spec.hidden);
        add_ternary(hf + "mlp.up_proj", gg + "ffn_up.weight", spec.intermediate, spec.hidden);
        add_float(hf + "mlp.ffn_sub_norm.weight", gg + "ffn_sub_norm.weight", {spec.intermediate}, 0.01f, 2.0f);
        add_ternary(hf + "mlp.down_proj", gg + "ffn_down.weight", spec.hidden, spec.intermediate);
    }
    add_float("model.norm.weight", "output_norm.weight", {spec.hidden}, 0.01f, 2.0f);
    if (spec.lm_head) add_float("lm_head.weight", "output.weight", {spec.vocab, spec.hidden}, -1.0f, 1.0f);
    ck.write();
    return ck;
}

}  // namespace tern::test
