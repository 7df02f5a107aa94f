// OpenAI request validation. Field names, ranges and rejections follow the OpenAI API reference;
// top_k, min_p, repeat_penalty, repeat_last_n and ignore_eos are llama.cpp's server extensions.
#include "openai_request.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tern::server {
namespace {

using nlohmann::json;

std::string type_name(const json & v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

[[noreturn]] void wrong_type(const std::string & field, const char * expected, const json & v) {
    throw bad_request("'" + field + "' must be " + expected + ", got " + type_name(v), field, "invalid_type");
}

[[noreturn]] void out_of_range(const std::string & field, const std::string & range, const json & v) {
    throw bad_request("'" + field + "' must be " + range + ", got " + v.dump(), field, "invalid_value");
}

double get_number(const json & body, const std::string & field, double lo, double hi, const char * range) {
    const json & v = body.at(field);
    if (!v.is_number()) wrong_type(field, "a number", v);
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) out_of_range(field, range, v);
    return x;
}

int64_t get_int(const json & body, const std::string & field, int64_t lo, int64_t hi) {
    const json & v = body.at(field);
    if (!v.is_number_integer()) wrong_type(field, "an integer", v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
        out_of_range(field, "in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) out_of_range(field, "in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    return x;
}

bool get_bool(const json & body, const std::string & field) {
    const json & v = body.at(field);
    if (!v.is_boolean()) wrong_type(field, "a boolean", v);
    return v.get<bool>();
}

std::string get_string(const json & body, const std::string & field) {
    const json & v = body.at(field);
    if (!v.is_string()) wrong_type(field, "a string", v);
    return v.get<std::string>();
}

[[noreturn]] void unsupported(const std::string & field, const std::string & what) {
    throw bad_request("'" + field + "': " + what + " is not supported by this server", field, "unsupported_parameter");
}

// A field that is accepted only with its "nothing asked" value (null, empty, or `neutral`).
void require_neutral(const json & body, const std::string & field, const json & neutral, const std::string & what) {
    const json & v = body.at(field);
    if (v.is_null() || v == neutral || (v.is_object() && v.empty()) || (v.is_array() && v.empty())) return;
    unsupported(field, what);
}

std::string message_content(const json & m, const std::string & field) {
    const json & c = m.at("content");
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) wrong_type(field, "a string or an array of text parts", c);
    std::string text;
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string part = field + "[" + std::to_string(i) + "]";
        const json &      p    = c[i];
        if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
            throw bad_request("'" + part + "' must be an object with a 'type'", part, "invalid_type");
        }
        if (p["type"] != "text") unsupported(part + ".type", "content of type " + p["type"].dump());
        if (!p.contains("text") || !p["text"].is_string()) {
            throw bad_request("'" + part + ".text' must be a string", part + ".text", "invalid_type");
        }
        text += p["text"].get<std::string>();
    }
    return text;
}

std::vector<ChatMessage> read_messages(const json & body) {
    const json & v = body.at("messages");
    if (!v.is_array()) wrong_type("messages", "an array", v);
    if (v.empty()) throw bad_request("'messages' must contain at least one message", "messages", "invalid_value");
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string field = "messages[" + std::to_string(i) + "]";
        const json &      m     = v[i];
        if (!m.is_object()) wrong_type(field, "an object", m);
        for (const auto & [key, val] : m.items()) {
            if (key != "role" && key != "content" && key != "name") {
                if (key == "tool_calls" || key == "function_call" || key == "tool_call_id") {
                    if (val.is_null() || (val.is_array() && val.empty())) continue;
                    unsupported(field + "." + key, "tool calling");
                }
                throw bad_request("Unrecognized message field: '" + field + "." + key + "'", field + "." + key,
                                  "unknown_parameter");
            }
        }
        if (!m.contains("role")) throw bad_request("'" + field + ".role' is required", field + ".role", "missing_required_parameter");
        std::string role = get_string(m, "role");
        if (role == "developer") role = "system";
        if (role == "tool" || role == "function") unsupported(field + ".role", "the role '" + role + "'");
        if (role != "system" && role != "user" && role != "assistant") {
            throw bad_request("'" + field + ".role' must be one of system, developer, user, assistant; got \"" +
                                  role.substr(0, 64) + "\"", field + ".role", "invalid_value");
        }
        if (!m.contains("content")) {
            throw bad_request("'" + field + ".content' is required", field + ".content", "missing_required_parameter");
        }
        out.push_back({role, message_content(m, field + ".content")});
    }
    return out;
}

void read_prompt(const json & body, GenerationRequest & r) {
    const json & p = body.at("prompt");
    if (p.is_string()) {
        r.prompt_text = p.get<std::string>();
        return;
    }
    if (!p.is_array()) wrong_type("prompt", "a string or an array of token ids", p);
    if (p.empty()) throw bad_request("'prompt' must not be an empty array", "prompt", "invalid_value");
    if (p.size() == 1 && p[0].is_string()) {
        r.prompt_text = p[0].get<std::string>();
        return;
    }
    if (p[0].is_string() || p[0].is_array()) unsupported("prompt", "more than one prompt per request");
    r.prompt_is_ids = true;
    for (size_t i = 0; i < p.size(); ++i) {
        if (!p[i].is_number_integer() || p[i].get<int64_t>() < 0 || p[i].get<int64_t>() > INT32_MAX) {
            throw bad_request("'prompt[" + std::to_string(i) + "]' must be a token id (a non-negative integer)",
                              "prompt", "invalid_value");
        }
        r.prompt_ids.push_back(p[i].get<int32_t>());
    }
}

std::vector<std::string> read_stop(const json & body, const RequestLimits & limits) {
    const json &             v = body.at("stop");
    std::vector<std::string> out;
    if (v.is_null()) return out;
    if (v.is_string()) {
        out.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        for (const json & s : v) {
            if (!s.is_string()) throw bad_request("'stop' must be a string or an array of strings", "stop", "invalid_type");
            out.push_back(s.get<std::string>());
        }
    } else {
        wrong_type("stop", "a string or an array of strings", v);
    }
    if (out.size() > limits.max_stops) {
        throw bad_request("'stop' may hold at most " + std::to_string(limits.max_stops) + " strings", "stop", "invalid_value");
    }
    for (const auto & s : out) {
        if (s.empty() || s.size() > limits.max_stop_bytes) {
            throw bad_request("each 'stop' string must have 1.." + std::to_string(limits.max_stop_bytes) + " bytes",
                              "stop", "invalid_value");
        }
    }
    return out;
}

}  // namespace

json parse_json_object(std::string_view body) {
    json j;
    try {
        j = json::parse(body.begin(), body.end());
    } catch (const json::parse_error & e) {
        throw bad_request(std::string("the body is not valid JSON: ") + e.what(), "", "invalid_json");
    }
    if (!j.is_object()) throw bad_request("the body must be a JSON object, got " + type_name(j), "", "invalid_json");
    return j;
}

GenerationRequest parse_generation_request(std::string_view body, Endpoint endpoint, const SamplerParams & defaults,
                                           const RequestLimits & limits) {
    const json        j    = parse_json_object(body);
    const bool        chat = endpoint == Endpoint::chat;
    GenerationRequest r;
    r.endpoint = endpoint;
    r.sampling = defaults;

    static const std::set<std::string> common = {
        "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
        "frequency_penalty", "repeat_penalty", "repeat_last_n", "n", "stream", "stream_options", "logprobs", "user",
        "logit_bias", "ignore_eos", "service_tier", "metadata", "store"};
    static const std::set<std::string> chat_only = {"messages", "top_logprobs", "max_completion_tokens",
                                                    "response_format", "tools", "tool_choice", "functions",
                                                    "function_call", "parallel_tool_calls"};
    static const std::set<std::string> completion_only = {"prompt", "echo", "best_of", "suffix"};
    for (const auto & [key, value] : j.items()) {
        if (common.count(key) || (chat ? chat_only : completion_only).count(key)) continue;
        throw bad_request("Unrecognized request argument supplied: " + key, key, "unknown_parameter");
    }
    const char * input = chat ? "messages" : "prompt";
    if (!j.contains(input)) {
        throw bad_request(std::string("'") + input + "' is required", input, "missing_required_parameter");
    }
    if (chat) {
        r.messages = read_messages(j);
    } else {
        read_prompt(j, r);
    }

    if (j.contains("model") && !j["model"].is_null()) r.model = get_string(j, "model");
    for (const char * f : {"max_tokens", "max_completion_tokens"}) {
        if (j.contains(f) && !j[f].is_null()) r.max_tokens = get_int(j, f, 1, limits.max_tokens);
    }
    if (j.contains("temperature") && !j["temperature"].is_null()) {
        r.sampling.temp = static_cast<float>(get_number(j, "temperature", 0.0, 2.0, "in [0, 2]"));
    }
    if (j.contains("top_p") && !j["top_p"].is_null()) {
        const double p = get_number(j, "top_p", 0.0, 1.0, "in (0, 1]");
        if (p <= 0.0) out_of_range("top_p", "in (0, 1]", j["top_p"]);
        r.sampling.top_p = static_cast<float>(p);
    }
    if (j.contains("top_k") && !j["top_k"].is_null()) r.sampling.top_k = static_cast<int32_t>(get_int(j, "top_k", 0, INT32_MAX));
    if (j.contains("min_p") && !j["min_p"].is_null()) {
        r.sampling.min_p = static_cast<float>(get_number(j, "min_p", 0.0, 1.0, "in [0, 1]"));
    }
    if (j.contains("presence_penalty") && !j["presence_penalty"].is_null()) {
        r.sampling.presence_penalty = static_cast<float>(get_number(j, "presence_penalty", -2.0, 2.0, "in [-2, 2]"));
    }
    if (j.contains("frequency_penalty") && !j["frequency_penalty"].is_null()) {
        r.sampling.frequency_penalty = static_cast<float>(get_number(j, "frequency_penalty", -2.0, 2.0, "in [-2, 2]"));
    }
    if (j.contains("repeat_penalty") && !j["repeat_penalty"].is_null()) {
        r.sampling.repeat_penalty = static_cast<float>(get_number(j, "repeat_penalty", 1e-3, 10.0, "in (0, 10]"));
    }
    if (j.contains("repeat_last_n") && !j["repeat_last_n"].is_null()) {
        r.sampling.repeat_last_n = static_cast<int32_t>(get_int(j, "repeat_last_n", -1, 1 << 20));
    }
    if (j.contains("seed") && !j["seed"].is_null()) {
        const json & s = j["seed"];
        if (!s.is_number_integer()) wrong_type("seed", "an integer", s);
        // A negative seed (llama.cpp's -1) asks for a random one.
        r.sampling.seed = s.is_number_unsigned() ? s.get<uint64_t>()
                          : s.get<int64_t>() < 0 ? k_sampler_random_seed
                                                 : static_cast<uint64_t>(s.get<int64_t>());
    }
    if (j.contains("stop")) r.stop = read_stop(j, limits);
    if (j.contains("n") && !j["n"].is_null() && get_int(j, "n", 1, 128) != 1) unsupported("n", "more than one choice (n > 1)");
    if (j.contains("stream") && !j["stream"].is_null()) r.stream = get_bool(j, "stream");
    if (j.contains("stream_options") && !j["stream_options"].is_null()) {
        const json & so = j["stream_options"];
        if (!so.is_object()) wrong_type("stream_options", "an object", so);
        if (!r.stream) throw bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
        for (const auto & [key, val] : so.items()) {
            if (key != "include_usage") {
                throw bad_request("Unrecognized stream option: " + key, "stream_options." + key, "unknown_parameter");
            }
            r.include_usage = get_bool(so, "include_usage");
        }
    }
    if (j.contains("ignore_eos") && !j["ignore_eos"].is_null()) r.ignore_eos = get_bool(j, "ignore_eos");
    if (j.contains("user") && !j["user"].is_null()) (void)get_string(j, "user");
    if (j.contains("logit_bias")) require_neutral(j, "logit_bias", json::object(), "logit_bias");
    if (chat) {
        const bool want = j.contains("logprobs") && !j["logprobs"].is_null() && get_bool(j, "logprobs");
        if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
            const int64_t k = get_int(j, "top_logprobs", 0, 20);
            if (!want) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
            r.logprobs = static_cast<int>(k);
        } else if (want) {
            r.logprobs = 0;
        }
        if (j.contains("response_format") && !j["response_format"].is_null()) {
            const json & rf = j["response_format"];
            if (!rf.is_object() || rf.value("type", "") != "text") unsupported("response_format", "a response format other than text");
        }
        for (const char * f : {"tools", "functions"}) {
            if (j.contains(f)) require_neutral(j, f, json::array(), "tool calling");
        }
        for (const char * f : {"tool_choice", "function_call"}) {
            if (j.contains(f)) require_neutral(j, f, "none", "tool calling");
        }
    } else {
        if (j.contains("logprobs") && !j["logprobs"].is_null()) r.logprobs = static_cast<int>(get_int(j, "logprobs", 0, 5));
        if (j.contains("echo") && !j["echo"].is_null() && get_bool(j, "echo")) unsupported("echo", "echoing the prompt");
        if (j.contains("best_of") && !j["best_of"].is_null() && get_int(j, "best_of", 1, 128) != 1) {
            unsupported("best_of", "best_of > 1");
        }
        if (j.contains("suffix")) require_neutral(j, "suffix", "", "a suffix (insertion)");
    }
    return r;
}

}  // namespace tern::server
