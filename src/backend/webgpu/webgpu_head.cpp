// The LM heads of WebGpuBackend (output_head): one token's exact logits with the final norm and the
// first argmax stage fused in (lm_head_f16_decode.wgsl); greedy decoding's argmax-only heads, which
// stream the table with f32 sums or its int8 copy (lm_head_i8_argmax.wgsl) and recompute exactly the
// rows that can win (argmax_exact.wgsl or the int8 head's own tail); and a top-k sampler's head,
// which recomputes only the rows that can be in its top k and lists them for the host.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tern {
namespace {

// The uniform of the decode heads (shaders/lib/head_params.wgsl, for lm_head_f16_decode.wgsl and
// lm_head_i8_argmax.wgsl).
struct HeadParams {
    uint32_t n_vocab, x_offset, out_offset, k;
    float    eps;
    uint32_t partial_offset;
    uint32_t thr_slot;  // lm_head_i8_argmax.wgsl EXACT_TAIL
};

HeadParams head_params(const Weight & head, const Tensor & x, const Tensor & logits, float eps) {
    return {static_cast<uint32_t>(head.n_rows), gpu_offset(x, 4), gpu_offset(logits, 4), static_cast<uint32_t>(head.n_cols),
            eps, 0, 0};
}

// argmax_exact.wgsl's MAX_BOUNDS: the most lower bounds its TOP_K mode ranks.
constexpr uint32_t k_top_k_max_bounds = 1024;

}  // namespace

bool WebGpuBackend::try_decode_head(const Tensor & logits, const GpuTable & head, const Tensor & h_or_x,
                                    const GpuNorm * norm, float eps, bool round_input_f16, bool argmax_only) {
    // One token and an F16 table whose row fits, with the reduction space, in workgroup memory.
    const uint64_t wg_storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    if (!head.f16 || h_or_x.ne[1] != 1 || head.n_cols % 8 != 0 || head.n_cols > 4096 ||
        static_cast<uint64_t>(head.n_cols) * 4 + 16384 + 4096 > wg_storage) {
        return false;
    }
    const HeadParams p = head_params(head, h_or_x, logits, eps);
    const auto &     a = ctx_.adapter();
    if (!argmax_only && tune_.head_exact_form != 0) {
        // Resident teams (lm_head_f16_teams.wgsl): three workgroups per compute unit (head_exact_groups),
        // team rows of 8 dealt to them in turn; each team's best row is a partial for argmax_final.
        const uint32_t team_rows = static_cast<uint32_t>((head.n_rows + 7) / 8);
        const uint32_t groups =
            std::min(tune_.head_exact_groups != 0 ? tune_.head_exact_groups : 3 * tune_.compute_units, team_rows);
        const uint32_t iters     = (team_rows + groups - 1) / groups;
        const bool     team_sg   = pipelines_.subgroup_variants() && a.subgroup_min == 32 && a.subgroup_max == 32;
        const PipelineKey key{"lm_head_f16_teams",
                              "rrrwwu",
                              {{{"K", static_cast<double>(head.n_cols)},
                                {"NORM", norm ? 1.0 : 0.0},
                                {"TEAM_SG", team_sg ? 1.0 : 0.0},
                                {"ITERS", static_cast<double>(iters)},
                                {"SEG", static_cast<double>(tune_.head_exact_seg)},
                                {"AHEAD", tune_.head_exact_ahead != 0 ? 1.0 : 0.0},
                                {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
        const uint32_t   n_chunks = 8 * groups;
        const WGPUBuffer partials = argmax_partials(static_cast<size_t>(n_chunks) * 8);
        const WGPUBuffer bufs[]   = {head.buffer->get(), gpu_buffer(h_or_x),
                                     norm ? norm->buffer->get() : gpu_buffer(h_or_x), gpu_buffer(logits), partials};
        step_->dispatch(key, bufs, &p, sizeof p, groups);
        head_partials_ = {gpu_buffer(logits), gpu_offset(logits, 4), n_chunks, step_->serial()};
        return true;
    }
    const uint32_t n_chunks = static_cast<uint32_t>((head.n_rows + 63) / 64);
    // argmax_only: per-row bounds, then the blocks' lower bounds (lm_head_f16_decode.wgsl).
    const WGPUBuffer partials =
        argmax_partials((static_cast<size_t>(n_chunks) + (argmax_only ? static_cast<size_t>(head.n_rows) : 0)) * 8);
    const PipelineKey key{"lm_head_f16_decode",
                          "rrrwwu",
                          {{{"K", static_cast<double>(head.n_cols)},
                            {"NORM", norm ? 1.0 : 0.0},
                            {"ARGMAX_ONLY", argmax_only ? 1.0 : 0.0},
                            {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
    const WGPUBuffer  bufs[] = {head.buffer->get(), gpu_buffer(h_or_x),
                                norm ? norm->buffer->get() : gpu_buffer(h_or_x), gpu_buffer(logits), partials};
    step_->dispatch(key, bufs, &p, sizeof p, n_chunks);
    head_partials_ = {};
    if (!argmax_only) head_partials_ = {gpu_buffer(logits), gpu_offset(logits, 4), n_chunks, step_->serial()};
    return true;
}

bool WebGpuBackend::greedy_head_i8_applies(const GpuTable & head) const {
    const uint64_t wg_storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    // A Q8_0 / Q4_0 / Q6_K head (blocks) has its f32 rows in `buffer` (dequantize_row's values, which
    // the exact head multiplies): the copy and the exact rows read those (TABLE_F32).
    const bool table = head.f16 || (head.blocks != nullptr && tune_.family_head_i8 != 0);
    return table && !head.q8_failed && head.n_bytes >= tune_.head_i8_min_bytes && head.n_cols % 16 == 0 &&
           head.n_cols <= 4096 && static_cast<uint64_t>(head.n_cols) * 9 / 2 + 16384 <= wg_storage;
}

bool WebGpuBackend::ensure_head_q8(const GpuTable & head) {
    if (!greedy_head_i8_applies(head)) return false;
    if (head.q8) return true;
    // Made once, on the device: 0.5 bytes of GPU memory per byte of an F16 table (a Q6_K head's
    // 1 + 16 / K bytes per value: 1.2 times its blocks; Q4_0 1.8 times). If that is not there,
    // greedy decoding takes the exact head (slower, same ids).
    try {
        head.q8 = make_buffer(static_cast<size_t>(head.n_rows) * static_cast<size_t>(head.n_cols), nullptr,
                              "LM head int8 copy");
        head.q8_info = make_buffer(static_cast<size_t>(head.n_rows) * 16, nullptr, "LM head int8 scales");
    } catch (const Error & e) {
        TERN_LOG_WARN("webgpu: no room for the LM head's int8 copy (%s); greedy decoding takes the exact head",
                      e.what());
        head.q8.reset();
        head.q8_failed = true;
        return false;
    }
    const uint32_t n_vocab = static_cast<uint32_t>(head.n_rows);
    const uint32_t groups  = std::min<uint32_t>((n_vocab + 7) / 8, 65535);
    struct {
        uint32_t n_vocab, n_groups;
    } p{n_vocab, groups};
    const PipelineKey key{"head_i8_pack",
                          "rwwu",
                          {{{"K", static_cast<double>(head.n_cols)}, {"TABLE_F32", head.f16 ? 0.0 : 1.0}}}};
    const WGPUBuffer  bufs[] = {head.buffer->get(), head.q8->get(), head.q8_info->get()};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    return true;
}

WebGpuBackend::HeadInt8Copy WebGpuBackend::read_head_int8_copy(const Weight & head) {
    const GpuTable & e = as_table(head);
    HeadInt8Copy     out;
    if (!ensure_head_q8(e)) return out;
    out.codes.resize(static_cast<size_t>(e.n_rows * e.n_cols));
    out.info.resize(static_cast<size_t>(e.n_rows) * 4);
    Tensor t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(out.codes.size() / 4), 1, 1, 1};
    t.buffer = e.q8.get();
    read(t, out.codes.data(), out.codes.size());
    t.ne     = {static_cast<int64_t>(out.info.size()), 1, 1, 1};
    t.buffer = e.q8_info.get();
    read(t, out.info.data(), out.info.size() * 4);
    return out;
}

std::vector<float> WebGpuBackend::read_greedy_head_bounds(int64_t n_rows) {
    std::vector<uint32_t> pairs(static_cast<size_t>(2 * n_rows));  // (bits(B), 0) per row
    if (!argmax_partial_ || argmax_partial_->size_bytes() < pairs.size() * 4) return {};
    Tensor t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(pairs.size()), 1, 1, 1};
    t.buffer = argmax_partial_.get();
    read(t, pairs.data(), pairs.size() * 4);
    std::vector<float> out(static_cast<size_t>(n_rows));
    for (size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], &pairs[2 * i], 4);
    return out;
}

uint32_t WebGpuBackend::try_decode_head_i8(const Tensor & logits, const GpuTable & head, const Tensor & x,
                                           const GpuNorm & norm, float eps, bool round_input_f16, bool exact_tail) {
    if (x.ne[1] != 1 || !ensure_head_q8(head)) return 0;
    const uint32_t n_vocab = static_cast<uint32_t>(head.n_rows);
    const auto     k       = static_cast<double>(head.n_cols);
    // The team rows (8 rows each) are dealt to two workgroups per compute unit in turn (ITERS), so
    // every workgroup that can run at once has a share and the shares differ by at most one team
    // row; in blocks of 64 rows the 2B4T head took 251 workgroups of 8 blocks, two on most units and
    // one on 13. H100 tg128 (three alternating rounds each, one machine per call): 909.2-912.0
    // tokens/s against 905.7-909.6 on one machine, within noise on two others (907.0-911.0 either way);
    // three per unit (396) 899.3-901.0 and one (132) 894.1-896.0 against 907.6-911.0.
    // (WebGpuTuning::head_groups)
    const uint32_t groups_wanted = tune_.head_groups != 0 ? tune_.head_groups : 2 * tune_.compute_units;
    // A team of 32 lanes per row is a subgroup when subgroups are exactly 32 wide: rows are summed by
    // subgroupAdd and the stream has no barriers (TEAM_SG); else the teams sum in workgroup memory.
    const auto & a       = ctx_.adapter();
    const bool   team_sg = pipelines_.subgroup_variants() && a.subgroup_min == 32 && a.subgroup_max == 32;
    PipelineKey  key{ternary_shader("lm_head_i8_argmax"),
                    "rrrrwwrwu",
                    {{{"K", k},
                      {"NORM", 1.0},
                      {"TEAM_SG", team_sg ? 1.0 : 0.0},
                      {"EXACT_TAIL", exact_tail ? 1.0 : 0.0},
                      {"TABLE_F32", head.f16 ? 0.0 : 1.0},
                      {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
    const uint32_t team_rows = (n_vocab + 7) / 8;
    const uint32_t groups    = std::min(groups_wanted, team_rows);
    const uint32_t iters     = (team_rows + groups - 1) / groups;
    key.add("ITERS", static_cast<double>(team_sg ? iters : (iters + 7) / 8 * 8));  // (whole blocks)
    // Per-row bounds, then each workgroup's lower bound.
    const WGPUBuffer partials = argmax_partials((static_cast<size_t>(groups) + n_vocab) * 8);
    HeadParams       p        = head_params(head, x, logits, eps);
    // The exact tail's pairs and threshold slots (zeroed when the buffer is made: key 0, no bound).
    const WGPUBuffer exact = grown(head_exact_, (2 + 2 * static_cast<size_t>(groups)) * 4, "head exact argmax");
    if (exact_tail) {
        p.thr_slot     = head_thr_slot_;
        head_thr_slot_ = 1 - head_thr_slot_;
    }
    const WGPUBuffer  bufs[] = {head.q8->get(),     head.q8_info->get(), gpu_buffer(x), norm.buffer->get(),
                                gpu_buffer(logits), partials,            head.buffer->get(), exact};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    head_partials_ = {};
    return groups;
}

// argmax_exact.wgsl's workgroup memory: h (K f32), the candidate list and reductions, the bounds.
bool WebGpuBackend::exact_rows_fit(const GpuTable & head) const {
    return static_cast<uint64_t>(head.n_cols) * 4 + 8192 + 4 * k_top_k_max_bounds <=
           ctx_.limits().maxComputeWorkgroupStorageSize;
}

uint32_t WebGpuBackend::encode_exact_rows(const Tensor & logits, const GpuTable & head, const Tensor & x,
                                          const GpuNorm & norm, float eps, bool round_input_f16, uint32_t n_bounds,
                                          bool int8, uint32_t top_k) {
    // Workgroups of argmax_exact.wgsl: each recomputes its own candidates one after another, so with
    // the int8 head's wider bounds (tens of candidates) many small groups finish sooner than a few
    // big ones. (The F16 path's tight bounds leave one or two candidates: 64 groups, as measured
    // before.) (WebGpuTuning::exact_groups)
    const uint32_t        n_blocks   = static_cast<uint32_t>((head.n_rows + 63) / 64);
    const uint32_t        k_groups   = tune_.exact_groups > 0 ? tune_.exact_groups : (int8 ? 512u : 64u);
    const uint32_t        groups     = std::min<uint32_t>(k_groups, n_blocks);
    struct {
        uint32_t n_vocab, x_offset, logits_offset, k;
        float    eps;
        uint32_t n_chunks, rows_per_group;
    } p{static_cast<uint32_t>(head.n_rows),
        gpu_offset(x, 4),
        gpu_offset(logits, 4),
        static_cast<uint32_t>(head.n_cols),
        eps,
        n_bounds,
        static_cast<uint32_t>((head.n_rows + groups - 1) / groups)};
    const PipelineKey key{"argmax_exact",
                          "rrrwrwu",
                          {{{"K", static_cast<double>(head.n_cols)},
                            {"NORM", 1.0},
                            {"TOP_K", static_cast<double>(top_k)},
                            {"TABLE_F32", head.f16 ? 0.0 : 1.0},
                            {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
    WGPUBuffer out  = nullptr;
    const int  list = top_k_next_;
    if (top_k == 0) {
        out = grown(exact_partial_, groups * 8, "exact argmax partials");
    } else {
        if (!top_k_lists_[list]) top_k_lists_[list] = make_buffer(top_k_list_bytes(), nullptr, "top-k rows");
        // The count starts at 0: a queue write runs after the steps already submitted and before
        // this one (whose list is not the one a submitted, unread step fills).
        if (!top_k_list_zero_[list]) {
            const uint32_t zero = 0;
            wgpu().wgpuQueueWriteBuffer(ctx_.queue(), top_k_lists_[list]->get(), 0, &zero, 4);
        }
        top_k_list_zero_[list] = false;
        out         = top_k_lists_[list]->get();
        top_k_next_ = 1 - list;
    }
    const WGPUBuffer bufs[] = {head.buffer->get(), gpu_buffer(x), norm.buffer->get(), gpu_buffer(logits),
                               argmax_partial_->get(), out};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    if (top_k > 0) {
        top_k_pending_.push_back({gpu_buffer(logits), gpu_offset(logits, 4), list, step_->serial()});
        if (top_k_pending_.size() > 2) top_k_pending_.pop_front();
    }
    return groups;
}

// The sampler's top-k, when it comes first: the int8 head's values and bounds for every row, then
// argmax_exact.wgsl with TOP_K recomputes exactly the rows whose upper bound reaches the k-th
// largest of the workgroups' lower bounds (each is some row's lower bound, so at least k rows lie
// above it) and writes -inf to the others. Anything else: the exact head.
void WebGpuBackend::head_top_k(const Tensor & logits, const GpuTable & e, const LinearInput & in, bool round_input_f16,
                               int64_t k) {
    const Tensor &  x   = in.x;
    const GpuNorm & nw  = as_norm(*in.norm);
    const float     eps = in.eps;
    if (x.ne[1] == 1 && k >= 1 && exact_rows_fit(e)) {
        const uint32_t n_bounds = try_decode_head_i8(logits, e, x, nw, eps, round_input_f16);
        if (n_bounds > 0 && static_cast<int64_t>(n_bounds) >= k && n_bounds <= k_top_k_max_bounds) {
            const int list = top_k_next_;
            encode_exact_rows(logits, e, x, nw, eps, round_input_f16, n_bounds, true, static_cast<uint32_t>(k));
            sample_list_ = {gpu_buffer(logits), gpu_offset(logits, 4), list};
            return;
        }
        // (The int8 head ran into `logits`; the exact head below overwrites every row.)
    }
    sample_list_ = {};
    head_logits(logits, e, in, round_input_f16, Tensor{});
}

bool WebGpuBackend::read_top_k_rows(const Tensor & logits, std::vector<LogitRow> & rows) {
    rows.clear();
    // The list read is the last head's, or with a held step the one before it (the held step's head
    // is the last): older entries are heads whose lists nobody read, and go.
    const size_t keep = step_->holding() ? 2 : 1;
    while (top_k_pending_.size() > keep) top_k_pending_.pop_front();
    if (top_k_pending_.size() < keep) {
        top_k_pending_.clear();
        return false;
    }
    const TopKList e = top_k_pending_.front();
    top_k_pending_.pop_front();
    // Nothing recorded since the head, or since then only a held step (whose head is the next entry).
    const bool untouched = top_k_pending_.empty() ? e.serial == step_->serial() : step_->holding();
    if (e.logits != gpu_buffer(logits) || e.offset != gpu_offset(logits, 4) || !untouched) {
        top_k_pending_.clear();
        return false;
    }
    std::vector<uint32_t> words(2 + 2 * size_t{k_top_k_list_rows});
    Tensor                t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(words.size()), 1, 1, 1};
    t.buffer = top_k_lists_[e.list].get();
    read(t, words.data(), words.size() * 4);
    const uint32_t n = words[0];
    if (n > k_top_k_list_rows) return false;  // more candidates than the list holds
    rows.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
        rows[i] = {static_cast<int32_t>(words[2 + 2 * i]), std::bit_cast<float>(words[3 + 2 * i])};
    }
    return true;
}

void WebGpuBackend::output_head(const HeadOutput & out, const Weight & head, const LinearInput & in,
                                bool round_input_f16) {
    const GpuTable & e = as_table(head);
    const Tensor &   x = in.x;
    TERN_ASSERT(x.ne[0] == e.n_cols && out.logits.ne[0] == e.n_rows && out.logits.ne[1] == x.ne[1] &&
                    (in.norm == nullptr || in.norm->n_cols == x.ne[0]),
                "output_head shapes");
    if (in.norm == nullptr) {
        Backend::output_head(out, head, in, round_input_f16);  // (no norm to fuse)
    } else if (out.ids.buffer != nullptr && out.sampling != nullptr) {
        // Sampled on the device: exact logits where the chain can look (a top-k chain: the rows that
        // can be among its top k), then sample.wgsl.
        const int64_t k = out.sampling->top_k;
        sample_list_    = {};  // (set by head_top_k where its list holds the candidates)
        if (k > 0 && k < e.n_rows && x.ne[1] == 1) {
            head_top_k(out.logits, e, in, round_input_f16, k);
        } else {
            head_logits(out.logits, e, in, round_input_f16, Tensor{});
        }
        sample(out.ids, out.logits, *out.sampling, out.uniform);
    } else if (out.ids.buffer != nullptr && x.ne[1] == 1) {
        head_ids(out.ids, out.logits, e, in, round_input_f16);
    } else if ((out.ids.buffer != nullptr || out.top_k > 0) && x.ne[1] > 1 && head_batches(out, e, in, round_input_f16)) {
        // (several columns: the int8 copy once for all, webgpu_head_batch.cpp)
    } else if (out.ids.buffer == nullptr && out.top_k > 0) {
        head_top_k(out.logits, e, in, round_input_f16, out.top_k);
    } else {
        head_logits(out.logits, e, in, round_input_f16, out.ids);
    }
}

void WebGpuBackend::head_logits(const Tensor & logits, const GpuTable & e, const LinearInput & in, bool round_input_f16,
                                const Tensor & ids) {
    if (try_decode_head(logits, e, in.x, &as_norm(*in.norm), in.eps, round_input_f16, false)) {
        if (ids.buffer != nullptr) argmax(ids, logits);
        return;
    }
    HeadOutput out;
    out.logits = logits;
    out.ids    = ids;
    Backend::output_head(out, e, in, round_input_f16);
}

void WebGpuBackend::head_ids(const Tensor & ids, const Tensor & logits, const GpuTable & table, const LinearInput & in,
                             bool round_input_f16) {
    const GpuTable * e   = &table;
    const GpuNorm *  nw  = &as_norm(*in.norm);
    const Tensor &   x   = in.x;
    const float      eps = in.eps;
    TERN_ASSERT(ids.ne[0] == 1, "head_ids shapes");
    // The fast head: the int8 copy, which recomputes its own candidates (EXACT_TAIL), or the F16
    // table's f32 sums with one lower bound per 64-row block for argmax_exact; neither: the exact head.
    // (The tail costs no measurable time: H200 llama-3.2-1b Q4_0 tg64 1,478-1,483 tok/s with it left
    // out, 1,479-1,482 with it; each 32-lane team recomputing its own rows lost, 1,430-1,432; perf-log.)
    uint32_t groups = 0;
    bool     tail   = false;
    if (exact_rows_fit(*e)) {
        groups = try_decode_head_i8(logits, *e, x, *nw, eps, round_input_f16, /*exact_tail=*/true);
        tail   = groups > 0;
        if (!tail && try_decode_head(logits, *e, x, nw, eps, round_input_f16, true)) {
            const uint32_t n_blocks = static_cast<uint32_t>((e->n_rows + 63) / 64);
            groups = encode_exact_rows(logits, *e, x, *nw, eps, round_input_f16, n_blocks, false, 0);
        }
    }
    if (groups == 0) {
        head_logits(logits, table, in, round_input_f16, ids);
        return;
    }
    const WGPUBuffer pairs = tail ? head_exact_->get() : exact_partial_->get();
    const uint32_t   first = tail ? 1 : 0;  // (vec2 index: the tail's pair 0 holds its slots)
    // argmax_final reduces the groups' winners into ids. It waits (StepEncoder::defer) until the next
    // command: when that is the next step's embed of this id, embed_argmax.wgsl does both in one
    // dispatch (WebGpuBackend::embed); anything else records it first.
    const WGPUBuffer  ids_buffer = gpu_buffer(ids);
    const uint32_t    ids_offset = gpu_offset(ids, 4);
    auto              record     = [this, groups, pairs, first, ids_buffer, ids_offset] {
        struct {
            uint32_t n_chunks, ids_offset, chunks_offset;
        } pf{groups, ids_offset, first};
        const PipelineKey key_final{"argmax_final", "rwu", {{{"WG", 256}}}};
        const WGPUBuffer  bufs_final[] = {pairs, ids_buffer};
        step_->dispatch(key_final, bufs_final, &pf, sizeof pf, 1);
    };
    folded_pairs_        = pairs;
    folded_pairs_offset_ = first;
    folded_chunks_       = groups;
    step_->defer(ids_buffer, ids.offset, std::move(record));
}

}  // namespace tern
