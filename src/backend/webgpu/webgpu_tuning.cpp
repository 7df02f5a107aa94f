// WebGpuTuning: per-device-class defaults and the one parser of TERN_WEBGPU_TUNE (webgpu_tuning.h).
#include "backend/webgpu/webgpu_tuning.h"

#include "core/error.h"

#include <charconv>
#include <limits>
#include <vector>

namespace tern {
namespace {

// How a field's value is written and checked.
enum class Kind {
    number,       // an unsigned integer in [lo, hi]
    pow2,         // a power of two in [lo, hi]
    pow2_or_0,    // 0 (automatic) or a power of two in [lo, hi]
    gemm_tiling,  // TMxTNxTRxTC (each >= 1), or 0x0x0x0
    mma_tiling,   // SGMxSGN (each >= 1)
};

struct Field {
    std::string_view key;
    Kind             kind;
    uint32_t         lo = 0, hi = std::numeric_limits<uint32_t>::max();
    uint32_t WebGpuTuning::*   number = nullptr;
    GemmTiling WebGpuTuning::* gemm   = nullptr;
    MmaTiling WebGpuTuning::*  mma    = nullptr;
};

constexpr uint32_t k_max = std::numeric_limits<uint32_t>::max();

const std::vector<Field> & fields() {
    using T = WebGpuTuning;
    static const std::vector<Field> f = {
        {"decode_wg", Kind::pow2, 32, 1024, &T::decode_wg},
        {"decode_wg_long", Kind::pow2, 32, 1024, &T::decode_wg_long},
        {"decode_lanes", Kind::pow2, 4, 64, &T::decode_lanes},
        {"decode_lane_loads", Kind::number, 1, 10, &T::decode_lane_loads},
        {"qkv_lanes", Kind::pow2, 4, 64, &T::qkv_lanes},
        {"o_lanes", Kind::pow2_or_0, 4, 64, &T::o_lanes},
        {"o_wg", Kind::pow2_or_0, 32, 1024, &T::o_wg},
        {"gate_up_lanes", Kind::pow2, 4, 64, &T::gate_up_lanes},
        {"family_rows", Kind::pow2, 1, 128, &T::family_rows},
        {"family_wg", Kind::pow2, 64, 1024, &T::family_wg},
        {"family_rows_long", Kind::pow2_or_0, 1, 128, &T::family_rows_long},
        {"family_prefetch", Kind::number, 0, 8, &T::family_prefetch},
        {"family_q1_rope", Kind::pow2_or_0, 64, 1024, &T::family_q1_rope},
        {"family_acts", Kind::number, 0, 3, &T::family_acts},
        {"family_q1_sg", Kind::number, 0, 1, &T::family_q1_sg},
        {"family_acts_rows", Kind::pow2, 1, 128, &T::family_acts_rows},
        {"family_acts_loads", Kind::number, 0, 12, &T::family_acts_loads},
        {"family_qkv_rows", Kind::number, 0, 128, &T::family_qkv_rows},
        {"head_i8_min_bytes", Kind::number, 0, k_max, &T::head_i8_min_bytes},
        {"family_head_i8", Kind::number, 0, 1, &T::family_head_i8},
        {"head_groups", Kind::number, 0, 65535, &T::head_groups},
        {"exact_groups", Kind::number, 0, 65535, &T::exact_groups},
        {"head_exact_form", Kind::number, 0, 1, &T::head_exact_form},
        {"head_exact_groups", Kind::number, 0, 65535, &T::head_exact_groups},
        {"head_exact_seg", Kind::number, 1, 10, &T::head_exact_seg},
        {"head_exact_ahead", Kind::number, 0, 1, &T::head_exact_ahead},
        {"head_batch_teams", Kind::number, 0, 2, &T::head_batch_teams},
        {"sample_scan_fused", Kind::number, 0, 1, &T::sample_scan_fused},
        {"head_mma_rows", Kind::number, 0, 4, &T::head_mma_rows},
        {"attn_wg", Kind::pow2_or_0, 64, 1024, &T::attn_wg},
        {"attn_wide_positions", Kind::number, 0, k_max, &T::attn_wide_positions},
        {"attn_long_positions", Kind::number, 0, k_max, &T::attn_long_positions},
        {"attn_split_dims", Kind::pow2, 2, 16, &T::attn_split_dims},
        {"attn_split_unroll", Kind::pow2, 1, 8, &T::attn_split_unroll},
        {"attn_split_heads", Kind::number, 0, 16, &T::attn_split_heads},
        {"attn_split_tiles", Kind::number, 0, 1, &T::attn_split_tiles},
        {"attn_paged_tiles", Kind::number, 0, k_max, &T::attn_paged_tiles},
        {"attn_combine_fused", Kind::number, 0, 1, &T::attn_combine_fused},
        {"attn_split_chunk", Kind::pow2_or_0, 32, 1024, &T::attn_split_chunk},
        {"attn_paged_deep", Kind::number, 0, 1, &T::attn_paged_deep},
        {"attn_paged_block_rows", Kind::number, 0, 1, &T::attn_paged_block_rows},
        {"attn_split_pv_wg", Kind::pow2_or_0, 64, 1024, &T::attn_split_pv_wg},
        {"attn_prefetch_loads", Kind::number, 0, 64, &T::attn_prefetch_loads},
        {"attn_prefill_min_tokens", Kind::number, 2, k_max, &T::attn_prefill_min_tokens},
        {"attn_pv_rows", Kind::pow2, 32, 64, &T::attn_pv_rows},
        {"attn_pv_split_groups", Kind::number, 0, 65535, &T::attn_pv_split_groups},
        {"attn_softmax_wg", Kind::pow2, 32, 256, &T::attn_softmax_wg},
        {"attn_softmax_wg_one", Kind::pow2, 32, 256, &T::attn_softmax_wg_one},
        {"attn_scratch_bytes", Kind::number, 1, k_max, &T::attn_scratch_bytes},
        {"gemm_min_tokens", Kind::number, 0, k_max, &T::gemm_min_tokens},
        {"gemm_split_groups", Kind::number, 0, k_max, &T::gemm_split_groups},
        {"norm_words_wg", Kind::pow2, 32, 1024, &T::norm_words_wg},
        {"gemm_tile", Kind::gemm_tiling, 0, 0, nullptr, &T::gemm_tile},
        {"mma_tile", Kind::mma_tiling, 0, 0, nullptr, nullptr, &T::mma_tile},
        {"mma_tile_long", Kind::mma_tiling, 0, 0, nullptr, nullptr, &T::mma_tile_long},
        {"steps_per_submit", Kind::number, 1, 64, &T::steps_per_submit},
        {"submit_ramp", Kind::number, 1, k_max, &T::submit_ramp},
        {"first_submit", Kind::number, 0, k_max, &T::first_submit},
        {"spin_us", Kind::number, 0, 10000000, &T::spin_us},
        {"compute_units", Kind::number, 1, 65535, &T::compute_units},
    };
    return f;
}

std::string known_keys() {
    std::string s;
    for (const Field & f : fields()) s += (s.empty() ? "" : ", ") + std::string(f.key);
    return s;
}

bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The unsigned numbers of "AxBx..." (n of them), or false.
bool parse_numbers(std::string_view text, uint32_t * out, int n) {
    for (int i = 0; i < n; ++i) {
        const size_t     x    = i + 1 < n ? text.find('x') : text.size();
        const std::string_view part = text.substr(0, x);
        if (part.empty() || x == std::string_view::npos) return false;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out[i]);
        if (ec != std::errc() || end != part.data() + part.size()) return false;
        text = i + 1 < n ? text.substr(x + 1) : std::string_view();
    }
    return true;
}

[[noreturn]] void bad_value(const Field & f, std::string_view value, const std::string & expected) {
    fail(ErrorKind::invalid_argument,
         format("TERN_WEBGPU_TUNE: %.*s=%.*s: expected %s", static_cast<int>(f.key.size()), f.key.data(),
                static_cast<int>(value.size()), value.data(), expected.c_str()),
         "src/backend/webgpu/README.md lists every key with its default");
}

void set(WebGpuTuning & t, const Field & f, std::string_view value) {
    if (f.kind == Kind::gemm_tiling) {
        uint32_t   v[4];
        const bool parsed   = parse_numbers(value, v, 4);
        const bool all_zero = parsed && v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0;
        if (!parsed || (!all_zero && (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[3] == 0))) {
            bad_value(f, value, "TMxTNxTRxTC, four numbers >= 1 (e.g. 4x8x16x8), or 0x0x0x0 for the default choice");
        }
        t.*f.gemm = {v[0], v[1], v[2], v[3]};
        return;
    }
    if (f.kind == Kind::mma_tiling) {
        uint32_t v[2];
        if (!parse_numbers(value, v, 2) || v[0] == 0 || v[1] == 0) {
            bad_value(f, value, "SGMxSGN, two numbers >= 1 (e.g. 4x1)");
        }
        t.*f.mma = {v[0], v[1]};
        return;
    }
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    const bool number    = !value.empty() && ec == std::errc() && end == value.data() + value.size();
    const bool zero_ok   = f.kind == Kind::pow2_or_0 && number && v == 0;
    const bool in_range  = number && v >= f.lo && v <= f.hi;
    const bool pow2_ok   = f.kind == Kind::number || is_pow2(v);
    if (!zero_ok && !(in_range && pow2_ok)) {
        const std::string range = format("%u..%u", f.lo, f.hi);
        bad_value(f, value,
                  f.kind == Kind::number ? "an unsigned number in " + range
                  : f.kind == Kind::pow2 ? "a power of two in " + range
                                         : "0 (automatic) or a power of two in " + range);
    }
    t.*f.number = v;
}

}  // namespace

WebGpuTuning WebGpuTuning::for_adapter(const WgpuAdapterSummary & adapter) {
    WebGpuTuning t;
    if (adapter.is_cpu) t.spin_us = 0;
    return t;
}

void WebGpuTuning::apply(std::string_view settings) {
    while (!settings.empty()) {
        const size_t           comma = settings.find(',');
        const std::string_view item  = settings.substr(0, comma);
        settings = comma == std::string_view::npos ? std::string_view() : settings.substr(comma + 1);
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            fail(ErrorKind::invalid_argument,
                 format("TERN_WEBGPU_TUNE: '%.*s' is not key=value", static_cast<int>(item.size()), item.data()),
                 "write it like TERN_WEBGPU_TUNE=decode_wg=256,steps_per_submit=4");
        }
        const std::string_view key = item.substr(0, eq);
        const Field *          f   = nullptr;
        for (const Field & c : fields()) {
            if (c.key == key) f = &c;
        }
        if (f == nullptr) {
            fail(ErrorKind::invalid_argument,
                 format("TERN_WEBGPU_TUNE: unknown key '%.*s'", static_cast<int>(key.size()), key.data()),
                 "known keys: " + known_keys());
        }
        set(*this, *f, item.substr(eq + 1));
    }
}

std::string WebGpuTuning::describe() const {
    std::string s;
    for (const Field & f : fields()) {
        s += s.empty() ? "" : ",";
        s += f.key;
        s += "=";
        if (f.kind == Kind::gemm_tiling) {
            const GemmTiling & g = this->*f.gemm;
            s += format("%ux%ux%ux%u", g.tm, g.tn, g.tr, g.tc);
        } else if (f.kind == Kind::mma_tiling) {
            const MmaTiling & m = this->*f.mma;
            s += format("%ux%u", m.sgm, m.sgn);
        } else {
            s += std::to_string(this->*f.number);
        }
    }
    return s;
}

}  // namespace tern
