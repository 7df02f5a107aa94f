// `tern serve`: the OpenAI-compatible HTTP server (apps/server). Listens first (so /health can say
// "loading model"), loads the model, then serves until SIGINT or SIGTERM.
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"
#include "core/log.h"
#include "engine/batch_engine.h"
#include "http_server.h"
#include "scheduler.h"
#include "tokenizer/chat_template.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <pthread.h>
#include <thread>

namespace tern::cli {
namespace {

struct ServeArgs {
    ModelArgs           model;
    ContextArgs         ctx;
    SamplerParams       sampling;
    std::string         seed;  // --seed: -1 = random
    server::HttpOptions http;
    int                 parallel     = 4;
    size_t              max_queue    = 64;
    int64_t             kv_pages     = 0;   // 0: every slot can hold a full context
    int64_t             kv_page_size = 64;
    std::string         chat_template;      // empty: from the model
    std::string         alias;              // empty: the file name
    int64_t             max_tokens_limit = 0;  // 0: the context
    bool                no_warmup        = false;  // skip BatchEngine::warm_up
    int                 sampling_threads = 0;
    int                 sampling_form    = 1;      // server::SchedulerOptions::sampling_form
};

void serve(ServeArgs & a) {
    finish_sampler_params(a.sampling, a.seed);
    // SIGINT / SIGTERM end the server; every thread started from here on inherits the blocked mask,
    // and one thread waits for them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    if (a.http.n_threads == 0) a.http.n_threads = a.parallel + static_cast<int>(a.max_queue) + 4;
    a.http.defaults = a.sampling;
    server::HttpServer http(a.http);
    http.bind();
    std::fprintf(stderr, "tern serve: listening on http://%s:%d (loading the model)\n", a.http.host.c_str(),
                 http.bound_port());
    std::thread http_thread([&] { http.serve(); });
    std::atomic<bool>  stopping{false};
    std::mutex         scheduler_mutex;
    server::Scheduler * running = nullptr;  // set while the scheduler exists
    std::thread        signal_thread([&] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        stopping = true;
        {  // requests in flight end now (503), so that their handlers return and the server can stop
            std::lock_guard lock(scheduler_mutex);
            if (running) running->shutdown();
        }
        http.stop();
    });
    struct Join {  // on every way out: stop the server, wake the signal thread, join both
        std::thread &       h;
        std::thread &       s;
        server::HttpServer & http;
        std::atomic<bool> & stopping;
        ~Join() {
            if (!stopping.exchange(true)) pthread_kill(s.native_handle(), SIGTERM);
            http.stop();
            if (h.joinable()) h.join();
            s.join();
        }
    } join{http_thread, signal_thread, http, stopping};

    LoadedModel         lm = load_model(a.model);
    const ModelConfig & c  = lm.model->config();
    const auto          jinja = lm.file->get_string("tokenizer.chat_template");
    const auto choice = choose_chat_template(*lm.tokenizer, jinja ? std::optional<std::string_view>(*jinja) : std::nullopt,
                                             a.chat_template.empty() ? std::nullopt
                                                                     : std::optional<std::string_view>(a.chat_template));
    const SessionOptions so = session_options(a.ctx, *lm.model);
    BatchEngineOptions   eo;
    eo.page_size = a.kv_page_size;
    eo.n_pages   = a.kv_pages > 0 ? a.kv_pages : a.parallel * ((so.n_ctx + a.kv_page_size - 1) / a.kv_page_size);
    // One forward pass per step: the prompt tokens of a step (-b) plus one token per generating slot.
    eo.n_chunk   = std::min(so.n_batch, so.n_ctx) + a.parallel;
    eo.max_seqs  = a.parallel;
    eo.type_k    = so.type_k;
    eo.type_v    = so.type_v;
    if (eo.n_pages * eo.page_size < so.n_ctx) {
        fail(ErrorKind::invalid_argument,
             format("--kv-pages %lld x --kv-page-size %lld holds fewer positions than one context (-c %lld)",
                    static_cast<long long>(eo.n_pages), static_cast<long long>(eo.page_size),
                    static_cast<long long>(so.n_ctx)),
             "raise --kv-pages, or lower -c");
    }
    BatchEngine engine(*lm.model, eo);
    if (!a.no_warmup) {  // (a GPU compiles the lone-request decode kernels now, not in a client's first tokens)
        SamplerParams sp = a.sampling;
        sp.seed          = 1;
        const Sampler sampler(sp, static_cast<int32_t>(c.n_vocab));
        engine.warm_up(so.n_ctx, &sampler);
    }
    server::SchedulerOptions sched_opts;
    sched_opts.n_slots            = a.parallel;
    sched_opts.max_queue          = a.max_queue;
    sched_opts.n_prefill_per_step = std::min(so.n_batch, so.n_ctx);
    sched_opts.n_sampling_threads = a.sampling_threads;
    sched_opts.sampling_form      = a.sampling_form;
    server::Scheduler scheduler(engine, *lm.tokenizer, sched_opts);
    struct Published {  // the signal thread may shut the scheduler down while it exists
        std::mutex &         m;
        server::Scheduler *& p;
        ~Published() {
            std::lock_guard lock(m);
            p = nullptr;
        }
    } published{scheduler_mutex, running};
    {
        std::lock_guard lock(scheduler_mutex);
        running = &scheduler;
    }

    server::ServedModel served;
    served.id            = a.alias.empty() ? std::filesystem::path(lm.file->path()).filename().string() : a.alias;
    served.tokenizer     = lm.tokenizer.get();
    served.scheduler     = &scheduler;
    served.chat          = choice.template_;
    served.chat_reason   = choice.reason;
    served.chat_stop_ids = chat_template_stop_tokens(choice.template_, *lm.tokenizer);
    served.n_ctx         = so.n_ctx;
    served.n_vocab       = c.n_vocab;
    http.attach(served);
    std::fprintf(stderr,
                 "tern serve: ready: model '%s', %d slots, context %lld per request, KV pool %lld pages of %lld "
                 "positions (%s), chat format %s (%s)\n",
                 served.id.c_str(), a.parallel, static_cast<long long>(so.n_ctx), static_cast<long long>(eo.n_pages),
                 static_cast<long long>(eo.page_size), human_bytes(static_cast<double>(engine.pool().n_bytes())).c_str(),
                 std::string(chat_template_name(choice.template_)).c_str(), choice.reason.c_str());
    http_thread.join();  // until a signal stops the server
    std::fprintf(stderr, "tern serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App & app) {
    auto   args = std::make_shared<ServeArgs>();
    auto * cmd  = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching and a chat page");
    add_model_args(*cmd, args->model);
    cmd->add_option("--host", args->http.host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", args->http.port, "port to listen on (0 = any free port)")
        ->check(int_in(0, 65535))->capture_default_str();
    cmd->add_option("--parallel", args->parallel, "requests decoded at once (slots)")
        ->check(int_in(1, 256))->capture_default_str();
    cmd->add_option("--queue", args->max_queue, "requests that may wait for a slot; more get 503")
        ->check(int_in(0, 100000))->capture_default_str();
    // -b is the prompt tokens read per step over all slots: each step also decodes one token for every
    // generating slot, which waits for the step, so a smaller default than `tern run`'s keeps them going.
    args->ctx.n_batch = 128;
    add_context_args(*cmd, args->ctx);
    cmd->add_option("--kv-pages", args->kv_pages,
                    "KV cache pool size in pages (0 = --parallel full contexts); fewer makes requests wait for pages")
        ->check(int_in(0, int64_t{1} << 24))->capture_default_str();
    cmd->add_option("--kv-page-size", args->kv_page_size, "positions per KV cache page (a multiple of 16)")
        ->check(int_in(16, 65536))->capture_default_str();
    add_sampler_args(*cmd, args->sampling, args->seed);
    cmd->add_option("-n,--n-predict", args->http.n_predict,
                    "max_tokens for requests that do not say (-1 = until the context is full)")
        ->check(int_in(-1, int64_t{1} << 24))->capture_default_str();
    cmd->add_option("--max-tokens-limit", args->max_tokens_limit, "the most max_tokens a request may ask for (0 = the context)")
        ->check(int_in(0, int64_t{1} << 24))->capture_default_str();
    cmd->add_option("--chat-template", args->chat_template,
                    "chat format: " + chat_template_names() + " (default: recognised from the model)");
    cmd->add_option("--alias", args->alias, "model id that /v1/models lists (default: the file name)");
    cmd->add_option("--api-key", args->http.api_key, "require 'Authorization: Bearer KEY' (empty = no key)");
    cmd->add_option("--cors-origin", args->http.cors_origin, "Access-Control-Allow-Origin value (empty = no CORS headers)")
        ->capture_default_str();
    cmd->add_option("--max-body-size", args->http.max_body_bytes, "largest request body in bytes (larger: 413)")
        ->check(int_in(1024, int64_t{1} << 30))->capture_default_str();
    cmd->add_option("--timeout", args->http.timeout_s, "seconds to wait for more of a request (or for a client to take a reply) before closing")
        ->check(int_in(1, 86400))->capture_default_str();
    cmd->add_flag("--no-warmup", args->no_warmup,
                  "skip the warm-up decode steps at start (on a GPU they compile the kernels a lone request decodes "
                  "with before the first request)");
    cmd->add_option("--threads-http", args->http.n_threads, "HTTP worker threads (0 = parallel + queue + 4)")
        ->check(int_in(0, 4096))->capture_default_str();
    cmd->add_option("--sampling-threads", args->sampling_threads,
                    "threads sampling the slots' next tokens (0 = the machine's cores, at most --parallel)")
        ->check(int_in(0, 4096))->capture_default_str();
    cmd->add_option("--sampling-form", args->sampling_form,
                    "how a batched step's results become tokens: 0 = the device's top-k lists unpacked on the "
                    "scheduler thread, then sampled on the sampling threads; 1 = each slot's list unpacked beside "
                    "its sampling")
        ->check(int_in(0, 1))->capture_default_str();
    cmd->footer("Example: tern serve -m ggml-model-i2_s.gguf --port 8080 --parallel 8\n"
                "Then open http://127.0.0.1:8080/ for the chat page, or point any OpenAI client at\n"
                "http://127.0.0.1:8080/v1. Endpoints: /v1/chat/completions, /v1/completions, /v1/models, /health,\n"
                "/metrics, /tokenize, /detokenize. The default model has no chat format: it serves /v1/completions.");
    cmd->callback([args] {
        args->http.limits.max_tokens = args->max_tokens_limit > 0 ? args->max_tokens_limit : int64_t{1} << 24;
        serve(*args);
    });
}

}  // namespace tern::cli
