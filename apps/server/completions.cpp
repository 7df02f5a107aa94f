// /v1/completions and /v1/chat/completions: from a validated request to a queued Job, then the
// answer as one JSON body or as server-sent events (data: {chunk}\n\n ... data: [DONE]\n\n).
// While it waits, the handler polls the client's socket: a client that hangs up cancels its job,
// which frees the slot at the scheduler's next step.
#include "client_socket.h"
#include "routes.h"

#include <chrono>
#include <random>

namespace tern::server {
namespace {

using nlohmann::json;
constexpr auto k_poll = std::chrono::milliseconds(50);  // how often a waiting handler checks its client

std::string make_id(const char * prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
    return std::string(prefix) + buf;
}

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<int32_t> prompt_tokens(const ServedModel & m, const GenerationRequest & r) {
    const char * field = r.endpoint == Endpoint::chat ? "messages" : "prompt";
    std::vector<int32_t> ids;
    if (r.endpoint == Endpoint::chat) {
        if (m.chat == ChatTemplate::none) {
            throw bad_request("model '" + m.id + "' has no chat format (" + m.chat_reason +
                                  "), so it cannot answer chat messages; send a plain prompt to /v1/completions, "
                                  "or start the server with --chat-template NAME if the model was trained for one",
                              "messages", "no_chat_template");
        }
        try {
            ids = chat_template_tokens(m.chat, *m.tokenizer, r.messages, true);
        } catch (const Error & e) {
            throw bad_request(e.what(), "messages");
        }
    } else if (r.prompt_is_ids) {
        for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
            if (r.prompt_ids[i] >= m.n_vocab) {
                throw bad_request("'prompt[" + std::to_string(i) + "]' = " + std::to_string(r.prompt_ids[i]) +
                                      " is outside the vocabulary (0.." + std::to_string(m.n_vocab - 1) + ")",
                                  "prompt", "invalid_value");
            }
        }
        ids = r.prompt_ids;
    } else {
        ids = m.tokenizer->encode(r.prompt_text, /*add_bos=*/true, /*parse_special=*/true);  // as `tern run`
    }
    if (ids.empty()) throw bad_request("the prompt is empty", field, "invalid_value");
    if (static_cast<int64_t>(ids.size()) >= m.n_ctx) {
        throw bad_request("the prompt is " + std::to_string(ids.size()) + " tokens, and the context holds " +
                              std::to_string(m.n_ctx) + " (prompt and reply together; the server's -c)",
                          field, "context_length_exceeded");
    }
    return ids;
}

JobSpec make_spec(const ServedModel & m, const HttpOptions & o, const GenerationRequest & r) {
    JobSpec spec;
    spec.prompt         = prompt_tokens(m, r);
    const int64_t room  = m.n_ctx - static_cast<int64_t>(spec.prompt.size());
    if (r.max_tokens) {
        if (*r.max_tokens > room) {
            throw bad_request("max_tokens = " + std::to_string(*r.max_tokens) + " and a prompt of " +
                                  std::to_string(spec.prompt.size()) + " tokens do not fit the context of " +
                                  std::to_string(m.n_ctx) + " tokens; ask for at most " + std::to_string(room),
                              "max_tokens", "context_length_exceeded");
        }
        spec.max_tokens = *r.max_tokens;
    } else {
        spec.max_tokens = o.n_predict > 0 ? std::min(o.n_predict, room) : room;
    }
    spec.sampling   = r.sampling;
    spec.stop       = r.stop;
    spec.logprobs   = r.logprobs;
    spec.ignore_eos = r.ignore_eos;
    if (r.endpoint == Endpoint::chat) spec.stop_ids = m.chat_stop_ids;
    try {
        validate(spec.sampling);
    } catch (const Error & e) {
        throw bad_request(e.what());
    }
    return spec;
}

json bytes_of(const std::string & piece) {
    json b = json::array();
    for (unsigned char c : piece) b.push_back(c);
    return b;
}

// Chat: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}].
void append_chat_logprobs(json & content, const Tokenizer & tok, const std::vector<TokenLogprob> & lps) {
    for (const auto & lp : lps) {
        const std::string piece = tok.token_to_piece(lp.id);
        json              top   = json::array();
        for (const auto & [id, l] : lp.top) {
            const std::string p = tok.token_to_piece(id);
            top.push_back({{"token", p}, {"logprob", l}, {"bytes", bytes_of(p)}});
        }
        content.push_back({{"token", piece}, {"logprob", lp.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
}

// Completions: {tokens, token_logprobs, top_logprobs: [{piece: logprob}], text_offset}.
void append_completion_logprobs(json & lp, const Tokenizer & tok, const std::vector<TokenLogprob> & lps,
                                size_t & offset) {
    for (const auto & t : lps) {
        const std::string piece = tok.token_to_piece(t.id);
        lp["tokens"].push_back(piece);
        lp["token_logprobs"].push_back(t.logprob);
        json top = json::object();
        for (const auto & [id, l] : t.top) top[tok.token_to_piece(id)] = l;
        lp["top_logprobs"].push_back(top);
        lp["text_offset"].push_back(offset);
        offset += piece.size();
    }
}

json empty_completion_logprobs() {
    return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
}

json usage_json(int64_t n_prompt, int64_t n_generated) {
    return {{"prompt_tokens", n_prompt}, {"completion_tokens", n_generated}, {"total_tokens", n_prompt + n_generated}};
}

// Everything one response needs to name itself.
struct Reply {
    const ServedModel & m;
    Endpoint            endpoint;
    std::string         id;
    std::string         model;
    int64_t             created;
    int                 logprobs;
    size_t              text_offset = 0;  // completions logprobs

    json envelope(bool chunk) const {
        const bool chat = endpoint == Endpoint::chat;
        return {{"id", id},
                {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                {"created", created},
                {"model", model},
                {"system_fingerprint", "tern-0.1.0"}};
    }
    // One choice holding `text` (a delta when streaming) and the logprobs of its tokens.
    json choice(const std::string & text, const std::vector<TokenLogprob> & lps, const json & finish, bool chunk,
                bool first_chunk) {
        json c = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
        if (endpoint == Endpoint::chat) {
            if (chunk) {
                json delta = json::object();
                if (first_chunk) delta["role"] = "assistant";
                if (!text.empty() || first_chunk) delta["content"] = text;
                c["delta"] = delta;
            } else {
                c["message"] = {{"role", "assistant"}, {"content", text}};
            }
            if (logprobs >= 0) {
                json content = json::array();
                append_chat_logprobs(content, *m.tokenizer, lps);
                c["logprobs"] = {{"content", content}};
            }
        } else {
            c["text"] = text;
            if (logprobs >= 0) {
                json lp = empty_completion_logprobs();
                append_completion_logprobs(lp, *m.tokenizer, lps, text_offset);
                c["logprobs"] = lp;
            }
        }
        return c;
    }
};

void answer_whole(const std::shared_ptr<Job> & job, Reply & reply, int fd, httplib::Response & res) {
    std::string               text;
    std::vector<TokenLogprob> lps;
    JobEvent                  e;
    auto                      checked = std::chrono::steady_clock::now();
    for (;;) {
        const bool got = job->next(e, k_poll);
        // Tokens may arrive faster than k_poll: look at the client every k_poll either way.
        if (const auto now = std::chrono::steady_clock::now(); !got || now - checked >= k_poll) {
            checked = now;
            if (client_gone(fd)) {
                job->cancel();
                return;
            }
        }
        if (!got) continue;
        if (e.error) {
            send_error(res, *e.error);
            return;
        }
        text += e.text;
        lps.insert(lps.end(), e.logprobs.begin(), e.logprobs.end());
        if (e.done) break;
    }
    json body       = reply.envelope(false);
    body["choices"] = json::array({reply.choice(text, lps, e.finish_reason, false, false)});
    body["usage"]   = usage_json(e.n_prompt, e.n_generated);
    send_json(res, 200, body);
}

// State of one event stream across the content provider's calls.
struct Stream {
    std::shared_ptr<Job> job;
    Reply                reply;
    int                  fd;
    bool                 include_usage;
    bool                 first = true;
};

bool write_event(httplib::DataSink & sink, const json & j) {
    const std::string s = "data: " + dump_json(j) + "\n\n";
    return sink.write(s.data(), s.size());
}

// One call: waits for the next event and writes it; false ends the response (client gone).
bool stream_step(Stream & st, httplib::DataSink & sink) {
    JobEvent e;
    while (!st.job->next(e, k_poll)) {
        if (client_gone(st.fd)) {
            st.job->cancel();
            return false;
        }
    }
    bool ok = true;
    if (e.error) {
        ok = write_event(sink, error_body(*e.error));
    } else {
        if (!e.text.empty() || !e.logprobs.empty() || st.first) {
            json c       = st.reply.envelope(true);
            c["choices"] = json::array({st.reply.choice(e.text, e.logprobs, nullptr, true, st.first)});
            ok           = write_event(sink, c);
            st.first     = false;
        }
        if (ok && e.done) {
            json c       = st.reply.envelope(true);
            c["choices"] = json::array({st.reply.choice("", {}, e.finish_reason, true, false)});
            if (st.reply.endpoint == Endpoint::chat) c["choices"][0]["delta"] = json::object();
            ok = write_event(sink, c);
            if (ok && st.include_usage) {
                json u       = st.reply.envelope(true);
                u["choices"] = json::array();
                u["usage"]   = usage_json(e.n_prompt, e.n_generated);
                ok           = write_event(sink, u);
            }
        }
    }
    if (ok && e.done) {
        static const char done[] = "data: [DONE]\n\n";
        ok = sink.write(done, sizeof done - 1);
        if (ok) sink.done();
        return ok;
    }
    if (!ok) st.job->cancel();
    return ok;
}

}  // namespace

void handle_generation(const ServedModel & m, const HttpOptions & o, Endpoint endpoint, const httplib::Request & req,
                       httplib::Response & res) {
    if (!m.scheduler) throw ApiError(503, "server_error", "the model is still loading; retry shortly", "", "loading");
    const GenerationRequest r    = parse_generation_request(req.body, endpoint, o.defaults, o.limits);
    JobSpec                 spec = make_spec(m, o, r);
    auto                    job  = m.scheduler->submit(std::move(spec));
    const int               fd   = find_client_socket(req.remote_addr, req.remote_port, req.local_port);
    Reply reply{m, endpoint, make_id(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-"), r.model.empty() ? m.id : r.model,
                unix_seconds(), r.logprobs};
    if (!r.stream) {
        answer_whole(job, reply, fd, res);
        return;
    }
    auto st = std::make_shared<Stream>(Stream{job, reply, fd, r.include_usage});
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [st](size_t, httplib::DataSink & sink) { return stream_step(*st, sink); },
        [st](bool) { st->job->cancel(); });  // (a finished job is no longer scheduled: cancel is a no-op)
}

}  // namespace tern::server
