// Session and the generation loop.
#include "engine/session.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/log.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

namespace tern {

namespace {
bool in_vocabulary(int32_t id, int64_t n_vocab) { return id >= 0 && id < n_vocab; }

// A token id given to the session (a prompt's, a first token's) must name a row of the vocabulary.
void check_token_id(int32_t id, int64_t n_vocab) {
    if (!in_vocabulary(id, n_vocab)) {
        fail(ErrorKind::invalid_argument,
             format("token id %d is outside the vocabulary (0..%lld)", id, static_cast<long long>(n_vocab - 1)));
    }
}
}  // namespace

Session::Session(const BitnetModel & model, const SessionOptions & options)
    : model_(model), options_(options) {
    const ModelConfig & c = model.config();
    if (options.n_ctx < 1 || options.n_ctx > k_max_context_length) {
        fail(ErrorKind::invalid_argument, format("context size %lld is out of range (expected 1..16777216)",
                                                 static_cast<long long>(options.n_ctx)));
    }
    if (options.n_batch < 1) {
        fail(ErrorKind::invalid_argument, format("batch size %lld must be >= 1", static_cast<long long>(options.n_batch)));
    }
    options_.n_batch = std::min(options.n_batch, options.n_ctx);
    kv_          = make_kv_cache(model.backend(), c, options.n_ctx, options.type_k, options.type_v);
    buf_         = model.make_buffers(options_.n_batch, options_.n_batch);
    round_head_  = options.round_head_input_f16.value_or(options.type_k == DType::f16);
    last_logits_.assign(static_cast<size_t>(c.n_vocab), 0.0f);
}

std::span<const float> Session::logits_view() const {
    if (logits_stale_) {  // only the top rows were read (decode_sampled): the rest are -inf
        std::fill(last_logits_.begin(), last_logits_.end(), -std::numeric_limits<float>::infinity());
        for (const Candidate & c : top_rows_) last_logits_[static_cast<size_t>(c.id)] = c.logit;
        logits_stale_ = false;
    }
    return last_logits_;
}

void Session::eval(std::span<const int32_t> tokens, std::span<float> all_logits) {
    const int64_t n       = static_cast<int64_t>(tokens.size());
    const int64_t n_vocab = model_.config().n_vocab;
    if (n == 0) return;
    if (n_past_ + n > kv_.n_ctx) {
        fail(ErrorKind::invalid_argument,
             format("%lld tokens do not fit the context: %lld of %lld positions are used", static_cast<long long>(n),
                    static_cast<long long>(n_past_), static_cast<long long>(kv_.n_ctx)),
             "raise the context size with -c, or shorten the prompt");
    }
    TERN_ASSERT(all_logits.empty() || static_cast<int64_t>(all_logits.size()) == n * n_vocab, "all_logits size");
    for (int32_t id : tokens) check_token_id(id, n_vocab);
    Backend & be = model_.backend();
    if (eval_progress_ && n > 1) eval_progress_(0, n);
    for (int64_t start = 0; start < n; start += buf_.n_batch) {
        const int64_t chunk    = std::min(buf_.n_batch, n - start);
        const bool    last     = start + chunk == n;
        const int64_t n_logits = !all_logits.empty() ? chunk : (last ? 1 : 0);
        be.write(buf_.tokens.tensor, tokens.data() + start, static_cast<size_t>(chunk) * sizeof(int32_t));
        model_.forward(buf_, kv_, n_past_, chunk, n_logits, round_head_, false);
        n_past_ += chunk;
        if (eval_progress_ && n > 1) eval_progress_(start + chunk, n);
        if (n_logits > 0) {
            const Tensor logits = buf_.logits.tensor.columns(0, n_logits);
            if (!all_logits.empty()) {
                top_rows_.clear();
                logits_stale_ = false;
                be.read(logits, all_logits.data() + start * n_vocab, static_cast<size_t>(chunk * n_vocab) * sizeof(float));
                if (last) {
                    std::memcpy(last_logits_.data(), all_logits.data() + (n - 1) * n_vocab,
                                static_cast<size_t>(n_vocab) * sizeof(float));
                }
            } else {
                read_last_logits(logits, false);
            }
        }
    }
}

void Session::rewind(int64_t n) {
    TERN_ASSERT(n >= 0 && n <= n_past_, "rewind to %lld of %lld positions", static_cast<long long>(n),
                static_cast<long long>(n_past_));
    n_past_ = n;
}

void Session::read_last_logits(const Tensor & logits, bool top_k) {
    Backend & be = model_.backend();
    if (top_k && be.read_top_k_rows(logits, top_rows_read_)) {
        top_rows_.resize(top_rows_read_.size());
        for (size_t i = 0; i < top_rows_.size(); ++i) top_rows_[i] = {top_rows_read_[i].first, top_rows_read_[i].second};
        logits_stale_ = true;
        return;
    }
    top_rows_.clear();
    logits_stale_ = false;
    be.read(logits, last_logits_.data(), last_logits_.size() * sizeof(float));
}

int64_t Session::decode_sampled(Sampler & sampler, const std::function<bool(int32_t)> & on_token) {
    Backend & be = model_.backend();
    TERN_ASSERT(be.can_hold_steps(), "decode_sampled needs a backend that holds steps");
    if (!sampled_token_.buffer) sampled_token_ = alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "sampled token");
    const Tensor & token   = sampled_token_.tensor;
    const Tensor   logits  = buf_.logits.tensor.columns(0, 1);
    const bool     top_k   = sampler.starts_with_top_k();
    const int64_t  k       = top_k ? sampler.params().top_k : 0;
    auto           draw    = [&] {
        return top_k && !top_rows_.empty() ? sampler.sample_top_k(top_rows_) : sampler.sample(logits_view());
    };
    // Host time per part of the loop (logged with -v): what the device may wait for is everything
    // between a step's end and the next one's submission (read, draw, write and submit).
    using clock = std::chrono::steady_clock;
    struct {
        double record = 0, read = 0, draw = 0, write = 0, submit = 0, emit = 0;
    } host;
    auto lap = [t = clock::now()](double & into) mutable {
        const auto now = clock::now();
        into += std::chrono::duration<double>(now - t).count();
        t = now;
    };
    int64_t drawn = 0;
    bool    held  = false;  // the step at n_past_ is recorded, waiting for its token
    auto    done  = [&] {
        if (held) be.drop_held_step();
        if (drawn > 0) {
            const double per = 1e3 / static_cast<double>(drawn);
            TERN_LOG_INFO("sampled decoding: %lld tokens; host ms per token: record %.3f, read %.3f, draw %.3f, "
                          "write %.3f, submit %.3f, on_token %.3f",
                          static_cast<long long>(drawn), host.record * per, host.read * per, host.draw * per,
                          host.write * per, host.submit * per, host.emit * per);
        }
        return drawn;
    };
    try {
        int32_t id = draw();  // from the last eval's logits
        lap(host.draw);
        while (true) {
            ++drawn;
            sampler.accept(id);
            if (n_past_ >= kv_.n_ctx) {
                on_token(id);
                return done();
            }
            be.write(token, &id, sizeof id);  // runs after the step before, and before the held one
            lap(host.write);
            if (held) {
                be.release_held_step();
                held = false;
            } else {
                model_.forward_token(buf_, kv_, n_past_, token, round_head_, k, /*hold=*/false);
            }
            lap(host.submit);
            // While the device runs that step: hand the id out, and record the next step; its token
            // is written once drawn. (If on_token stops here, the step fed `id` anyway: its cache
            // row lies at n_past(), which the next token fed overwrites.)
            const bool go = on_token(id);
            lap(host.emit);
            if (!go) return done();
            held = n_past_ + 1 < kv_.n_ctx &&
                   model_.forward_token(buf_, kv_, n_past_ + 1, token, round_head_, k, /*hold=*/true);
            if (!held && n_past_ + 1 < kv_.n_ctx) {
                // The backend could not hold that step (part of it was submitted while it was
                // recorded, e.g. to grow a table): it ran with this step's token and overwrote the
                // results. Run this step again to read them; the next one is recorded afresh.
                model_.forward_token(buf_, kv_, n_past_, token, round_head_, k, /*hold=*/false);
            }
            lap(host.record);
            read_last_logits(logits, top_k);
            lap(host.read);
            ++n_past_;
            id = draw();
            lap(host.draw);
        }
    } catch (...) {
        if (held) be.drop_held_step();  // (a held step left behind would block the next one)
        throw;
    }
}

// Greedy steps per submit (Backend::set_steps_per_submit): a submit costs time of its own (on an
// H200, splitting each step into two submits made tg128 1.071-1.075 ms per token against
// 1.046-1.048, into four 1.135; the host, whose time per step is close to the device's, pays much
// of it). H200 tg128 by steps per submit (three alternating rounds): 1 950.2-955.0 tokens/s, 2
// 958.2-960.6, 4 963.3-965.0, 6 963.1-964.1, 8 963.0-965.1. The groups start at one step and grow
// by one every k_greedy_group_ramp steps recorded, so that the host, which records a step in a
// little less time than the device runs it, gets ahead before it holds steps back; before a
// batch's ids are read, the next batch's first group and two steps more are recorded and
// submitted, so that the device runs them while the host reads the ids, hands them out and records
// the rest. (A tg128 run makes ~50 submits, each ~17.5 us of idle device on an H200; groups that
// grew while the device stayed fed, judged from queue-done callbacks, gained 0.5% on some hosts
// and lost 7% on another, and groups of 8 wherever the host outran the device lost 0.3% on an
// H200: src/backend/webgpu/README.md, "What a submit costs the device" and the round after.)
constexpr int64_t k_greedy_steps_per_submit = 4;
constexpr int64_t k_greedy_group_ramp       = 8;

namespace {
// Back to a submit per step when decode_greedy returns or throws, with nothing left unsubmitted.
struct StepGrouping {
    Backend & be;
    ~StepGrouping() {
        try {
            be.submit_steps();
        } catch (...) {  // a device error surfaces at the next wait
        }
        be.set_steps_per_submit(1);
    }
};
}  // namespace

int64_t Session::decode_greedy(int32_t first, int64_t n_max, const std::function<bool(int32_t)> & on_token,
                               int64_t batch) {
    const int64_t n_vocab = model_.config().n_vocab;
    check_token_id(first, n_vocab);
    Backend & be = model_.backend();
    batch        = std::max<int64_t>(1, batch);
    // Two id buffers of batch + 1 slots, used by batches in turn: step i of a batch reads slot i and
    // writes slot i + 1, except that a batch's first step reads the previous batch's last slot (in
    // the other buffer). So ids stay on the device from batch to batch, and the next batch's first
    // steps can be recorded before this batch's ids are read: the device never waits for the host
    // to read, hand out ids and record between batches.
    const int64_t per_buffer = batch + 1;
    if (!greedy_ids_.buffer || greedy_ids_.tensor.ne[0] < 2 * per_buffer) {
        greedy_ids_ = alloc_tensor(be, DType::i32, {2 * per_buffer, 1, 1, 1}, "greedy_ids");
    }
    greedy_host_.resize(static_cast<size_t>(batch));
    auto ids_view = [&](int which, int64_t first_slot, int64_t n) {
        Tensor t = greedy_ids_.tensor;
        t.offset += static_cast<size_t>(which * per_buffer + first_slot) * sizeof(int32_t);
        t.ne[0]  = n;
        return t;
    };
    StepGrouping  grouping{be};
    int64_t       n_recorded = 0;  // steps recorded in this call, for the groups' ramp
    const auto    group_size = [&] { return std::min(k_greedy_steps_per_submit, 1 + n_recorded / k_greedy_group_ramp); };
    const auto    record     = [&](int64_t pos, const Tensor & in, const Tensor & out) {
        be.set_steps_per_submit(group_size());
        model_.forward_greedy(buf_, kv_, pos, in, out, round_head_);
        ++n_recorded;
    };
    int64_t produced = 0;
    int     cur      = 0;
    be.write(ids_view(cur, 0, 1), &first, sizeof first);
    be.start_from_idle();
    int64_t steps    = std::min({batch, n_max, kv_.n_ctx - n_past_});
    int64_t recorded = 0;  // steps of this batch recorded already (its first ones, during the previous one)
    while (steps > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = recorded; i < steps; ++i) record(n_past_ + i, ids_view(cur, i, 1), ids_view(cur, i + 1, 1));
        be.read_begin(ids_view(cur, 1, steps), static_cast<size_t>(steps) * sizeof(int32_t));
        const int64_t next  = std::min({batch, n_max - produced - steps, kv_.n_ctx - (n_past_ + steps)});
        const int64_t ahead = std::min(next, group_size() + 2);
        if (next > 0) {  // the next batch's first steps, the first fed this batch's last id
            try {
                record(n_past_ + steps, ids_view(cur, steps, 1), ids_view(1 - cur, 1, 1));
                for (int64_t i = 1; i < ahead; ++i) {
                    record(n_past_ + steps + i, ids_view(1 - cur, i, 1), ids_view(1 - cur, i + 1, 1));
                }
                be.submit_steps();
            } catch (...) {
                try {  // leave no read in flight: the next read_begin would refuse
                    be.read_end(greedy_host_.data());
                } catch (...) {
                }
                throw;
            }
        }
        encode_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        be.read_end(greedy_host_.data());
        for (int64_t i = 0; i < steps; ++i) {
            const int32_t id = greedy_host_[static_cast<size_t>(i)];
            if (!in_vocabulary(id, n_vocab)) {
                fail(ErrorKind::device, format("the %s backend's greedy decoding produced token id %d, outside the "
                                               "vocabulary (0..%lld)", std::string(be.name()).c_str(), id,
                                               static_cast<long long>(n_vocab - 1)),
                     "this is a bug: run with --backend cpu, and report it");
            }
            ++produced;
            if (!on_token(id)) {
                // The ids before this one were fed (a step recorded ahead ran past them: its cache
                // row lies beyond n_past() and is overwritten when that position is used).
                n_past_ += i + 1;
                return produced;
            }
        }
        n_past_ += steps;
        cur      = 1 - cur;
        steps    = std::max<int64_t>(next, 0);
        recorded = steps > 0 ? ahead : 0;
    }
    return produced;
}

GenerationStats generate(Session & session, const Tokenizer & tokenizer, Sampler & sampler,
                         std::span<const int32_t> prompt, int64_t n_predict, const TokenCallback & on_token) {
    using clock = std::chrono::steady_clock;
    GenerationStats stats;
    stats.n_prompt = static_cast<int64_t>(prompt.size());
    for (int32_t id : prompt) sampler.accept(id);  // repetition penalties see the prompt (llama.cpp)
    const auto t0 = clock::now();
    session.eval(prompt);
    const auto t1 = clock::now();
    stats.prompt_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();

    // The first token's time: generation speed is measured from it (it comes from the prompt's logits).
    clock::time_point t_first = t1;
    auto              counted = [&] {
        if (++stats.n_generated == 1) t_first = clock::now();
    };
    StreamingDecoder decoder(tokenizer);
    const int64_t    limit = n_predict < 0 ? session.n_ctx() : n_predict;
    const auto &     sp    = sampler.params();
    const bool plain_greedy = sp.temp <= 0.0f && sp.repeat_penalty == 1.0f && sp.frequency_penalty == 0.0f &&
                              sp.presence_penalty == 0.0f;
    if (plain_greedy && limit > 0) {
        // The argmax of the prompt's logits, then the rest chained on the device.
        const int32_t first = sampler.sample(session.logits());
        bool          go    = true;
        auto          take  = [&](int32_t id) {
            if (tokenizer.is_eog(id)) {
                stats.stopped_by_eog = true;
                return false;
            }
            counted();
            go = on_token(id, decoder.push(id)) && stats.n_generated < limit;
            return go;
        };
        if (take(first) && session.n_past() < session.n_ctx()) {
            session.decode_greedy(first, limit - stats.n_generated, take);
        }
    }
    if (!plain_greedy && limit > 0 && session.model().backend().can_hold_steps()) {
        // Each step recorded while the one before runs (Session::decode_sampled).
        auto take = [&](int32_t id) {
            if (tokenizer.is_eog(id)) {
                stats.stopped_by_eog = true;
                return false;
            }
            counted();
            return on_token(id, decoder.push(id)) && stats.n_generated < limit;
        };
        session.decode_sampled(sampler, take);
    }
    while (!plain_greedy && !session.model().backend().can_hold_steps() && stats.n_generated < limit) {
        const int32_t id = sampler.sample(session.logits());
        sampler.accept(id);
        if (tokenizer.is_eog(id)) {
            stats.stopped_by_eog = true;
            break;
        }
        counted();
        const std::string text = decoder.push(id);
        if (!on_token(id, text)) break;
        if (session.n_past() >= session.n_ctx()) break;  // context full: stop rather than fail
        if (stats.n_generated >= limit) break;
        const int32_t next[1] = {id};
        session.eval(next);
    }
    const std::string rest = decoder.flush();
    if (!rest.empty()) on_token(-1, rest);
    const auto t_end  = clock::now();
    stats.generate_ms = std::chrono::duration<double, std::milli>(t_end - t1).count();
    stats.decode_ms   = stats.n_generated > 1 ? std::chrono::duration<double, std::milli>(t_end - t_first).count() : 0.0;
    return stats;
}

}  // namespace tern
