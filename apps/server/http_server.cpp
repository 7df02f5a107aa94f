// HTTP plumbing: routes, authentication, CORS, limits, and the small endpoints (/health, /metrics,
// /v1/models, /tokenize, /detokenize, the chat page). The generation endpoints are in completions.cpp.
#include "http_server.h"

#include "core/error.h"
#include "core/log.h"
#include "routes.h"

#include <sys/socket.h>

#include <csignal>
#include <cstdio>

namespace tern::server {

// The chat page (chat_page.html, embedded at build time by cmake/embed_file_script.cmake).
extern const unsigned char k_chat_page[];
extern const size_t        k_chat_page_size;

using nlohmann::json;

std::string dump_json(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response & res, int status, const json & body) {
    res.status = status;
    res.set_content(dump_json(body), "application/json; charset=utf-8");
}

void send_error(httplib::Response & res, const ApiError & e) { send_json(res, e.status, error_body(e)); }

struct HttpServer::Impl {
    HttpOptions                      options;
    httplib::Server                  http;
    std::atomic<const ServedModel *> model{nullptr};
    int                              port = -1;
    int                              listen_fd = -1;  // the socket the library last made to listen on

    const ServedModel * ready() const { return model.load(); }

    // Runs a handler, turning whatever it throws into an OpenAI error reply.
    template <typename F>
    httplib::Server::Handler guarded(F f) {
        return [this, f](const httplib::Request & req, httplib::Response & res) {
            try {
                if (!authorized(req)) {
                    throw ApiError(401, "invalid_request_error",
                                   "missing or incorrect API key: send 'Authorization: Bearer <key>' (the server's --api-key)",
                                   "", "invalid_api_key");
                }
                f(req, res);
            } catch (const ApiError & e) {
                send_error(res, e);
            } catch (const Error & e) {
                send_error(res, api_error_from(e));
            } catch (const std::bad_alloc &) {
                send_error(res, ApiError(500, "server_error", "out of memory"));
            } catch (const std::exception & e) {
                send_error(res, ApiError(500, "server_error", e.what()));
            }
        };
    }

    bool authorized(const httplib::Request & req) const {
        if (options.api_key.empty()) return true;
        const std::string h = req.get_header_value("Authorization");
        return h == "Bearer " + options.api_key;
    }

    void routes() {
        http.Get("/", [](const httplib::Request &, httplib::Response & res) {
            res.set_content(std::string(reinterpret_cast<const char *>(k_chat_page), k_chat_page_size), "text/html; charset=utf-8");
        });
        http.Get("/health", [this](const httplib::Request &, httplib::Response & res) { health(res); });
        http.Get("/v1/health", [this](const httplib::Request &, httplib::Response & res) { health(res); });
        http.Get("/metrics", guarded([this](const httplib::Request &, httplib::Response & res) { metrics(res); }));
        http.Get("/v1/models", guarded([this](const httplib::Request &, httplib::Response & res) { models(res); }));
        http.Get("/models", guarded([this](const httplib::Request &, httplib::Response & res) { models(res); }));
        for (const char * path : {"/v1/completions", "/completions"}) {
            http.Post(path, guarded([this](const httplib::Request & req, httplib::Response & res) {
                          handle_generation(loaded(), options, Endpoint::completions, req, res);
                      }));
        }
        for (const char * path : {"/v1/chat/completions", "/chat/completions"}) {
            http.Post(path, guarded([this](const httplib::Request & req, httplib::Response & res) {
                          handle_generation(loaded(), options, Endpoint::chat, req, res);
                      }));
        }
        http.Post("/tokenize", guarded([this](const httplib::Request & req, httplib::Response & res) { tokenize(req, res); }));
        http.Post("/detokenize",
                  guarded([this](const httplib::Request & req, httplib::Response & res) { detokenize(req, res); }));
        http.Options(R"(.*)", [](const httplib::Request &, httplib::Response & res) { res.status = 204; });
    }

    const ServedModel & loaded() const {
        static const ServedModel loading{};
        const ServedModel * m = ready();
        return m ? *m : loading;  // a ServedModel without scheduler answers 503 "loading"
    }

    const ServedModel & require_model() const {
        const ServedModel * m = ready();
        if (!m) throw ApiError(503, "server_error", "the model is still loading; retry shortly", "", "loading");
        return *m;
    }

    void health(httplib::Response & res) {
        const ServedModel * m = ready();
        if (!m) {
            send_json(res, 503, {{"status", "loading model"}});
            return;
        }
        const SchedulerStats s    = m->scheduler->stats();
        const int64_t        idle = s.slots_total - s.slots_busy;
        json body = {{"status", idle > 0 ? "ok" : "no slot available"}, {"slots_idle", idle},
                     {"slots_processing", s.slots_busy}, {"queue_depth", s.queue_depth}};
        send_json(res, idle > 0 ? 200 : 503, body);
    }

    void models(httplib::Response & res) {
        const ServedModel & m = require_model();
        json model = {{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "tern"},
                      {"meta", {{"n_ctx", m.n_ctx}, {"n_vocab", m.n_vocab},
                                {"chat_template", std::string(chat_template_name(m.chat))}}}};
        send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
    }

    void metrics(httplib::Response & res) {
        const ServedModel * m = ready();
        std::string         out;
        auto metric = [&](const char * name, const char * type, const char * help, double value, const char * labels = "") {
            char line[512];
            std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s%s %.17g\n", name, help, name, type, name,
                          labels, value);
            out += line;
        };
        metric("tern_model_loaded", "gauge", "1 when the model is loaded and requests are served", m ? 1 : 0);
        if (m) {
            const SchedulerStats s = m->scheduler->stats();
            out += "# HELP tern_requests_total Requests by how they ended (started: admitted into a slot).\n"
                   "# TYPE tern_requests_total counter\n";
            for (auto [outcome, n] : {std::pair{"started", s.requests_started}, std::pair{"finished", s.requests_finished},
                                      std::pair{"cancelled", s.requests_cancelled}, std::pair{"failed", s.requests_failed},
                                      std::pair{"rejected", s.requests_rejected}}) {
                out += "tern_requests_total{outcome=\"" + std::string(outcome) + "\"} " + std::to_string(n) + "\n";
            }
            metric("tern_prompt_tokens_total", "counter", "Prompt tokens admitted.", static_cast<double>(s.prompt_tokens));
            metric("tern_generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
            metric("tern_generated_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.",
                   s.tokens_per_second);
            metric("tern_decode_steps_total", "counter", "Scheduler steps (one forward over the active slots).",
                   static_cast<double>(s.steps));
            metric("tern_queue_depth", "gauge", "Requests waiting for a slot.", static_cast<double>(s.queue_depth));
            metric("tern_slots_busy", "gauge", "Slots running a request.", static_cast<double>(s.slots_busy));
            metric("tern_slots_total", "gauge", "Slots (--parallel).", static_cast<double>(s.slots_total));
            metric("tern_kv_pages_used", "gauge", "KV cache pages held by running requests.",
                   static_cast<double>(s.kv_pages_used));
            metric("tern_kv_pages_total", "gauge", "KV cache pages in the pool.", static_cast<double>(s.kv_pages_total));
            metric("tern_decode_steps_ahead_total", "counter",
                   "Steps recorded while the step before ran (then released with its sampled tokens).",
                   static_cast<double>(s.steps_ahead));
            out += "# HELP tern_step_seconds_total The scheduler thread's time in batched steps, by phase "
                   "(record: recording and submitting a step; release: submitting one recorded ahead; record_ahead: while the "
                   "device ran the step before; sample: unpacking each slot's top-k list, unless unpack counts it, "
                   "and sampling).\n"
                   "# TYPE tern_step_seconds_total counter\n";
            for (auto [phase, v] : {std::pair{"record", s.record_seconds}, std::pair{"release", s.release_seconds},
                                    std::pair{"wait", s.wait_seconds},
                                    std::pair{"unpack", s.unpack_seconds}, std::pair{"sample", s.sample_seconds},
                                    std::pair{"deliver", s.deliver_seconds},
                                    std::pair{"record_ahead", s.record_ahead_seconds}}) {
                char line[160];
                std::snprintf(line, sizeof line, "tern_step_seconds_total{phase=\"%s\"} %.9g\n", phase, v);
                out += line;
            }
            metric("tern_full_logit_reads_total", "counter",
                   "Batched passes that read every logit back (no device list of top-k rows, or one overflowed).",
                   static_cast<double>(s.full_logit_reads));
            metric("tern_listed_columns_total", "counter",
                   "Sampled streams' steps whose top-k candidate rows the device listed.",
                   static_cast<double>(s.listed_columns));
            metric("tern_listed_rows_total", "counter", "Candidate rows those lists counted.",
                   static_cast<double>(s.listed_rows));
        }
        res.set_content(out, "text/plain; version=0.0.4; charset=utf-8");
    }

    void tokenize(const httplib::Request & req, httplib::Response & res) {
        const ServedModel & m = require_model();
        const json          j = parse_json_object(req.body);
        for (const auto & [key, v] : j.items()) {
            if (key != "content" && key != "add_special" && key != "parse_special" && key != "with_pieces") {
                throw bad_request("Unrecognized request argument supplied: " + key, key, "unknown_parameter");
            }
        }
        if (!j.contains("content") || !j["content"].is_string()) {
            throw bad_request("'content' must be a string", "content", "invalid_type");
        }
        auto flag = [&](const char * key) {
            if (!j.contains(key)) return false;
            if (!j[key].is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean", key, "invalid_type");
            return j[key].get<bool>();
        };
        const std::vector<int32_t> ids =
            m.tokenizer->encode(j["content"].get<std::string>(), flag("add_special"), flag("parse_special"));
        json tokens = json::array();
        if (flag("with_pieces")) {
            for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", m.tokenizer->token_to_piece(id)}});
        } else {
            tokens = ids;
        }
        send_json(res, 200, {{"tokens", tokens}});
    }

    void detokenize(const httplib::Request & req, httplib::Response & res) {
        const ServedModel & m = require_model();
        const json          j = parse_json_object(req.body);
        for (const auto & [key, v] : j.items()) {
            if (key != "tokens") throw bad_request("Unrecognized request argument supplied: " + key, key, "unknown_parameter");
        }
        if (!j.contains("tokens") || !j["tokens"].is_array()) {
            throw bad_request("'tokens' must be an array of token ids", "tokens", "invalid_type");
        }
        std::vector<int32_t> ids;
        for (size_t i = 0; i < j["tokens"].size(); ++i) {
            const json & t = j["tokens"][i];
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= m.n_vocab) {
                throw bad_request("'tokens[" + std::to_string(i) + "]' must be a token id in 0.." +
                                      std::to_string(m.n_vocab - 1) + ", got " + t.dump(),
                                  "tokens", "invalid_value");
            }
            ids.push_back(t.get<int32_t>());
        }
        send_json(res, 200, {{"content", m.tokenizer->decode(ids)}});
    }
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    Impl & s       = *impl_;
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server
    s.http.set_payload_max_length(s.options.max_body_bytes);
    s.http.set_read_timeout(s.options.timeout_s, 0);
    s.http.set_write_timeout(s.options.timeout_s, 0);
    s.http.set_keep_alive_timeout(5);
    s.http.set_tcp_nodelay(true);  // tokens are small writes: do not hold them back (Nagle)
    // The library's own options (address reuse), and the socket kept for bind()'s backlog.
    s.http.set_socket_options([&s](socket_t sock) {
        httplib::default_socket_options(sock);
        s.listen_fd = sock;
    });
    const int n_threads = s.options.n_threads;
    s.http.new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
    const std::string origin = s.options.cors_origin;
    s.http.set_post_routing_handler([origin](const httplib::Request &, httplib::Response & res) {
        if (origin.empty()) return;
        res.set_header("Access-Control-Allow-Origin", origin);
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "86400");
    });
    // Replies the library makes itself (404, 413, 400 for unreadable HTTP) get an OpenAI error body.
    s.http.set_error_handler([](const httplib::Request &, httplib::Response & res) {
        if (res.body.empty()) send_error(res, api_error_for_status(res.status));
    });
    s.routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
    Impl & s = *impl_;
    if (s.options.port == 0) {
        s.port = s.http.bind_to_any_port(s.options.host);
    } else {
        s.port = s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
    }
    if (s.port < 0) {
        fail(ErrorKind::io, format("cannot listen on %s:%d", s.options.host.c_str(), s.options.port),
             "is another server using the port? pick another with --port, or --port 0 for any free one");
    }
    // cpp-httplib 0.11 (Debian 12) listens with a backlog of 5: 64 clients connecting at once
    // overflowed the accept queue, and some were reset (issue 53). Linux takes a second listen()
    // on a listening socket as a new backlog (capped by net.core.somaxconn).
    if (s.listen_fd >= 0 && ::listen(s.listen_fd, SOMAXCONN) != 0) {
        TERN_LOG_WARN("server: could not raise the listen backlog; clients that connect at once may be refused");
    }
}

int HttpServer::bound_port() const { return impl_->port; }

void HttpServer::serve() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
    if (impl_ && impl_->http.is_running()) impl_->http.stop();
}

void HttpServer::attach(const ServedModel & model) { impl_->model.store(&model); }

}  // namespace tern::server
