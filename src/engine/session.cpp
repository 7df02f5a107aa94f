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

Session::Session(const BitnetModel & model, const SessionOptions & options, KvCache view, int64_t n_past)
    : model_(model), options_(options) {
    TERN_ASSERT(view.n_ctx >= 1 && n_past >= 0 && n_past <= view.n_ctx && view.storage.empty() &&
                    static_cast<int64_t>(view.layers.size()) == model.config().n_layer,
                "a session over a view");
    if (options.n_batch < 1) {
        fail(ErrorKind::invalid_argument, format("batch size %lld must be >= 1", static_cast<long long>(options.n_batch)));
    }
    options_.n_ctx   = view.n_ctx;
    options_.type_k  = view.type_k;
    options_.type_v  = view.type_v;
    options_.n_batch = std::min(options.n_batch, view.n_ctx);
    kv_              = std::move(view);
    buf_             = model.make_buffers(options_.n_batch, options_.n_batch);
    round_head_      = options.round_head_input_f16.value_or(options_.type_k == DType::f16);
    n_past_          = n_past;
    last_logits_.assign(static_cast<size_t>(model.config().n_vocab), 0.0f);
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
        model_.forward(buf_, kv_, n_past_, chunk, n_logits, round_head_);
        n_past_ += chunk;
        if (eval_progress_ && n > 1) eval_progress_(start + chunk, n);
        if (n_logits > 0) {
            const Tensor logits = buf_.logits.tensor.columns(0, n_logits);
            if (!all_logits.empty()) {
                be.read(logits, all_logits.data() + start * n_vocab, static_cast<size_t>(chunk * n_vocab) * sizeof(float));
                if (last) {
                    std::memcpy(last_logits_.data(), all_logits.data() + (n - 1) * n_vocab,
                                static_cast<size_t>(n_vocab) * sizeof(float));
                }
            } else {
                be.read(logits, last_logits_.data(), last_logits_.size() * sizeof(float));
            }
        }
    }
}

void Session::warm_up(const Sampler * sampler, int64_t until) {
    Backend & be = model_.backend();
    if (!be.counts_dispatches() || n_past_ != 0) return;
    int32_t id = 0;
    // A few steps from position 0 (the first step's kernels; from the second on, the forms that
    // pull the next weight into L2 while they run), then two at each position the backend names
    // (its kernels' other forms, its tables' growth).
    decode_greedy(0, 4, [](int32_t) { return true; }, 4);
    // A short generation does not pay for the kernels of long ones: positions from `end` on are
    // left out, and a step at end - 1 stands in for the context's last (tables sized to the last
    // position this run reaches, e.g. WebGPU's RoPE table).
    const int64_t        end = until < 0 ? kv_.n_ctx : std::clamp<int64_t>(until, 1, kv_.n_ctx);
    std::vector<int64_t> at  = be.warm_up_positions(kv_.n_ctx);
    if (end < kv_.n_ctx && !at.empty()) {
        std::erase_if(at, [&](int64_t pos) { return pos >= end - 1; });
        if (end - 1 >= 4) at.push_back(end - 1);
    }
    for (const int64_t pos : at) {
        n_past_ = pos;
        decode_greedy(0, 2, [](int32_t) { return true; }, 2);
    }
    n_past_ = 0;
    if (sampler != nullptr && sampler->chain_only() && be.samples_on_device(sampler->chain())) {
        const SamplingChain chain = sampler->chain();
        n_past_         = 0;
        DecodeRequest r = decode_request(0, 1);
        r.batch         = 1;
        r.sampling      = &chain;
        r.uniform       = [] { return 0.5f; };
        be.decode(r)->next({&id, 1});
    }
    be.synchronize();
    take_encode_seconds();
    n_past_ = 0;
}

void Session::rewind(int64_t n) {
    TERN_ASSERT(n >= 0 && n <= n_past_, "rewind to %lld of %lld positions", static_cast<long long>(n),
                static_cast<long long>(n_past_));
    n_past_ = n;
}

DecodeRequest Session::decode_request(int32_t first, int64_t n_max) {
    DecodeRequest r;
    r.first  = first;
    r.pos0   = n_past_;
    r.n_max  = std::max<int64_t>(0, std::min(n_max, kv_.n_ctx - n_past_));
    r.logits = buf_.logits.tensor.columns(0, 1);
    r.record = [this](const DecodeStep & step) { model_.record_step(buf_, kv_, step, round_head_); };
    return r;
}

int64_t Session::decode_greedy(int32_t first, int64_t n_max, const std::function<bool(int32_t)> & on_token,
                               int64_t batch) {
    const int64_t n_vocab = model_.config().n_vocab;
    check_token_id(first, n_vocab);
    Backend &     be = model_.backend();
    DecodeRequest r  = decode_request(first, n_max);
    r.batch          = std::max<int64_t>(1, batch);
    if (r.n_max == 0) return 0;
    ids_.resize(static_cast<size_t>(r.batch));
    const auto stream   = be.decode(r);
    int64_t    produced = 0;
    const auto finish   = [&] {
        n_past_ += produced;  // `first` and every id before the last were fed
        encode_seconds_ += stream->host_seconds();
        return produced;
    };
    while (const size_t n = stream->next(ids_)) {
        for (size_t i = 0; i < n; ++i) {
            const int32_t id = ids_[i];
            if (!in_vocabulary(id, n_vocab)) {
                fail(ErrorKind::device, format("the %s backend's greedy decoding produced token id %d, outside the "
                                               "vocabulary (0..%lld)", std::string(be.name()).c_str(), id,
                                               static_cast<long long>(n_vocab - 1)),
                     "this is a bug: run with --backend cpu, and report it");
            }
            ++produced;
            if (!on_token(id)) return finish();
        }
    }
    return finish();
}

int64_t Session::decode_sampled(Sampler & sampler, const std::function<bool(int32_t)> & on_token) {
    const int32_t first = sampler.sample(last_logits_);
    sampler.accept(first);
    return decode_sampled_from(sampler, first, true, on_token);
}

int64_t Session::decode_sampled_after(Sampler & sampler, int32_t first, const std::function<bool(int32_t)> & on_token) {
    check_token_id(first, model_.config().n_vocab);
    return decode_sampled_from(sampler, first, false, on_token);
}

int64_t Session::decode_sampled_from(Sampler & sampler, int32_t first, bool hand_out_first,
                                     const std::function<bool(int32_t)> & on_token) {
    if (sampler.chain_only() && model_.backend().samples_on_device(sampler.chain())) {
        return decode_sampled_on_device(sampler, first, hand_out_first, on_token);
    }
    DecodeRequest r = decode_request(first, kv_.n_ctx);
    if (r.n_max == 0) {  // the context is full: the id is handed out, not fed
        if (!hand_out_first) return 0;
        on_token(first);
        return 1;
    }
    r.top_k = sampler.starts_with_top_k() ? sampler.params().top_k : 0;
    r.pick  = [&](const StepLogits & l) {
        int32_t id = 0;
        if (!l.rows.empty()) {
            rows_.resize(l.rows.size());
            for (size_t i = 0; i < rows_.size(); ++i) rows_[i] = {l.rows[i].id, l.rows[i].logit};
            id = sampler.sample_top_k(rows_);
        } else {
            id = sampler.sample(l.all);
        }
        sampler.accept(id);
        return id;
    };
    const auto stream = model_.backend().decode(r);  // its first step, fed `first`, runs while on_token does
    int64_t    drawn  = hand_out_first ? 1 : 0;
    const auto finish = [&] {
        encode_seconds_ += stream->host_seconds();
        return drawn;
    };
    if (hand_out_first && !on_token(first)) return finish();
    int32_t id = 0;
    while (stream->next({&id, 1}) == 1) {
        ++n_past_;  // the id before this one was fed and accepted
        ++drawn;
        if (!on_token(id)) return finish();
    }
    return finish();
}

int64_t Session::decode_sampled_on_device(Sampler & sampler, int32_t first, bool hand_out_first,
                                          const std::function<bool(int32_t)> & on_token) {
    const int64_t       n_vocab = model_.config().n_vocab;
    const SamplingChain chain   = sampler.chain();
    Backend &           be      = model_.backend();
    int64_t             drawn   = hand_out_first ? 1 : 0;
    if (hand_out_first && !on_token(first)) return drawn;
    int32_t prev = first;  // the last id handed out, not yet fed
    // Each stream runs from n_past() until the caller stops, the context is full or the device
    // hands a step back (k_sample_on_host): that step's logits are then computed again on the host
    // and drawn with the uniform the device had, and a new stream goes on from there.
    while (n_past_ < kv_.n_ctx) {
        const Rng            rng0 = sampler.rng();  // the stream draws one uniform per recorded step
        std::vector<float> & us   = uniforms_;
        us.clear();
        DecodeRequest r = decode_request(prev, kv_.n_ctx);
        r.sampling      = &chain;
        r.uniform       = [&] {
            us.push_back(sampler.next_uniform());
            return us.back();
        };
        ids_.resize(static_cast<size_t>(r.batch));
        auto    stream = be.decode(r);
        int64_t taken  = 0;  // ids taken from this stream (each used one uniform)
        bool    go = true, host_step = false;
        while (go && !host_step) {
            const size_t n = stream->next(ids_);
            if (n == 0) break;
            for (size_t i = 0; i < n && go; ++i) {
                const int32_t id = ids_[i];
                if (id == k_sample_on_host) {
                    host_step = true;
                    break;
                }
                if (!in_vocabulary(id, n_vocab)) {
                    fail(ErrorKind::device, format("the %s backend's sampling produced token id %d, outside the "
                                                   "vocabulary (0..%lld)", std::string(be.name()).c_str(), id,
                                                   static_cast<long long>(n_vocab - 1)),
                         "this is a bug: run with --backend cpu, and report it");
                }
                ++taken;
                ++n_past_;  // the id before this one was fed
                ++drawn;
                sampler.accept(id);
                prev = id;
                go   = on_token(id);
            }
        }
        encode_seconds_ += stream->host_seconds();
        stream.reset();  // (steps run ahead still run; their cache rows lie past n_past())
        // Rewind the random stream to just after the uniforms of the ids taken.
        sampler.set_rng(rng0);
        for (int64_t i = 0; i < taken; ++i) sampler.next_uniform();
        if (!go || !host_step) return drawn;
        // The step at n_past() (fed prev) on the host, drawn with that step's uniform.
        const int32_t feed[1] = {prev};
        eval(feed);
        const float   u  = sampler.next_uniform();
        const int32_t id = sample_chain(last_logits_, chain, u);
        ++drawn;
        sampler.accept(id);
        prev = id;
        if (!on_token(id)) return drawn;
    }
    return drawn;
}

GenerationStats generate(Session & session, const Tokenizer & tokenizer, Sampler & sampler,
                         std::span<const int32_t> prompt, int64_t n_predict, const TokenCallback & on_token,
                         bool stop_at_eog) {
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
            if (stop_at_eog && tokenizer.is_eog(id)) {
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
    if (!plain_greedy && limit > 0) {
        // Each id drawn on the host from the step's logits (Session::decode_sampled).
        auto take = [&](int32_t id) {
            if (stop_at_eog && tokenizer.is_eog(id)) {
                stats.stopped_by_eog = true;
                return false;
            }
            counted();
            return on_token(id, decoder.push(id)) && stats.n_generated < limit;
        };
        session.decode_sampled(sampler, take);
    }
    const std::string rest = decoder.flush();
    if (!rest.empty()) on_token(-1, rest);
    const auto t_end  = clock::now();
    stats.generate_ms = std::chrono::duration<double, std::milli>(t_end - t1).count();
    stats.decode_ms   = stats.n_generated > 1 ? std::chrono::duration<double, std::milli>(t_end - t_first).count() : 0.0;
    return stats;
}

}  // namespace tern
