// OpenAI request validation (every bad field is a 400 naming it) and stop-string scanning.
#include "openai_request.h"
#include "stop_strings.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

GenerationRequest parse(const std::string & body, Endpoint e = Endpoint::completions) {
    return parse_generation_request(body, e, SamplerParams{}, RequestLimits{});
}

// The request must fail with a 400 whose param is `param`.
void expect_rejected(const std::string & body, const std::string & param, Endpoint e = Endpoint::completions) {
    try {
        parse(body, e);
        ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError & err) {
        EXPECT_EQ(err.status, 400) << body;
        EXPECT_EQ(err.type, "invalid_request_error") << body;
        EXPECT_EQ(err.param, param) << body << " -> " << err.what();
        const auto j = error_body(err);
        EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("code")) << j.dump();
    }
}

TEST(OpenAiRequest, ReadsEveryListedParameter) {
    const auto r = parse(R"({"model":"m","prompt":"Hi","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":3,
        "min_p":0.1,"seed":42,"stop":["a","bc"],"presence_penalty":0.5,"frequency_penalty":-0.5,"n":1,
        "logprobs":5,"stream":true,"stream_options":{"include_usage":true},"user":"u","logit_bias":{}})");
    EXPECT_EQ(r.prompt_text, "Hi");
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.sampling.temp, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 3);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
    EXPECT_EQ(r.logprobs, 5);
    EXPECT_TRUE(r.stream && r.include_usage);
    const auto c = parse(R"({"messages":[{"role":"developer","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},
        {"type":"text","text":"b"}]}],"logprobs":true,"top_logprobs":3,"max_completion_tokens":4,"seed":-1})",
                         Endpoint::chat);
    ASSERT_EQ(c.messages.size(), 2u);
    EXPECT_EQ(c.messages[0].role, "system");
    EXPECT_EQ(c.messages[1].content, "ab");
    EXPECT_EQ(c.logprobs, 3);
    EXPECT_EQ(c.max_tokens, 4);
    EXPECT_EQ(c.sampling.seed, k_sampler_random_seed);
    const auto ids = parse(R"({"prompt":[1,2,3]})");
    EXPECT_TRUE(ids.prompt_is_ids);
    EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
}

TEST(OpenAiRequest, RejectsBadInputNamingTheField) {
    expect_rejected("{", "");                                            // malformed JSON
    expect_rejected("[1,2]", "");                                        // not an object
    expect_rejected("{\"prompt\":\"\xff\xfe\"}", "");                    // invalid UTF-8
    expect_rejected(R"({"max_tokens":5})", "prompt");                    // missing
    expect_rejected(R"({"prompt":"a","max_tokens":-1})", "max_tokens");
    expect_rejected(R"({"prompt":"a","max_tokens":0})", "max_tokens");
    expect_rejected(R"({"prompt":"a","max_tokens":99999999999})", "max_tokens");
    expect_rejected(R"({"prompt":"a","max_tokens":"5"})", "max_tokens");
    expect_rejected(R"({"prompt":"a","max_tokens":5.5})", "max_tokens");
    expect_rejected(R"({"prompt":"a","temperature":3})", "temperature");
    expect_rejected(R"({"prompt":"a","temperature":"hot"})", "temperature");
    expect_rejected(R"({"prompt":"a","top_p":0})", "top_p");
    expect_rejected(R"({"prompt":"a","top_k":-2})", "top_k");
    expect_rejected(R"({"prompt":"a","min_p":1.5})", "min_p");
    expect_rejected(R"({"prompt":"a","presence_penalty":2.5})", "presence_penalty");
    expect_rejected(R"({"prompt":"a","seed":"x"})", "seed");
    expect_rejected(R"({"prompt":"a","stop":5})", "stop");
    expect_rejected(R"({"prompt":"a","stop":[""]})", "stop");
    expect_rejected(R"({"prompt":"a","n":2})", "n");
    expect_rejected(R"({"prompt":"a","logprobs":6})", "logprobs");
    expect_rejected(R"({"prompt":"a","echo":true})", "echo");
    expect_rejected(R"({"prompt":"a","stream":"yes"})", "stream");
    expect_rejected(R"({"prompt":"a","stream_options":{"include_usage":true}})", "stream_options");
    expect_rejected(R"({"prompt":"a","frobnicate":1})", "frobnicate");  // unknown field, as OpenAI
    expect_rejected(R"({"prompt":["a","b"]})", "prompt");
    expect_rejected(R"({"prompt":[1,-2]})", "prompt");
    expect_rejected(R"({"prompt":"a","logit_bias":{"5":10}})", "logit_bias");
    expect_rejected(R"({"messages":[]})", "messages", Endpoint::chat);
    expect_rejected(R"({"messages":"hi"})", "messages", Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user"}]})", "messages[0].content", Endpoint::chat);
    expect_rejected(R"({"messages":[{"content":"x"}]})", "messages[0].role", Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content[0].type",
                    Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user","content":"x","extra":1}]})", "messages[0].extra", Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", "tools",
                    Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs", Endpoint::chat);
    expect_rejected(R"({"messages":[{"role":"user","content":"x"}],"prompt":"a"})", "prompt", Endpoint::chat);
}

// Seeded mutations of valid bodies (bytes flipped, inserted, deleted, duplicated): every outcome is
// a parsed request or an ApiError 400, never another exception (run under ASan + UBSan in CI).
TEST(OpenAiRequest, MutatedBodiesGiveA400OrARequest) {
    const std::vector<std::pair<std::string, Endpoint>> seeds = {
        {R"({"prompt":"Hi","max_tokens":7,"temperature":0.5,"stop":["a"],"logprobs":2,"stream":true,
            "stream_options":{"include_usage":true},"seed":3})", Endpoint::completions},
        {R"({"prompt":[1,2,3],"top_k":4,"min_p":0.1})", Endpoint::completions},
        {R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":"y"}],
            "logprobs":true,"top_logprobs":2,"max_completion_tokens":3})", Endpoint::chat},
    };
    uint64_t rng   = 0x9e3779b97f4a7c15ull;
    auto     next  = [&] { return rng = rng * 6364136223846793005ull + 1442695040888963407ull, rng >> 33; };
    const char alphabet[] = "{}[]\":,0123456789-+.eE truefalsn\\u" "\xff" "\x80" "\x00" "abc";
    int parsed = 0, rejected = 0;
    for (int i = 0; i < 4000; ++i) {
        auto [body, endpoint] = seeds[static_cast<size_t>(i) % seeds.size()];
        for (int m = 0; m < 1 + static_cast<int>(next() % 4); ++m) {
            const size_t at = body.empty() ? 0 : next() % body.size();
            switch (next() % 4) {
                case 0: if (!body.empty()) body[at] = alphabet[next() % (sizeof alphabet - 1)]; break;
                case 1: body.insert(at, 1, alphabet[next() % (sizeof alphabet - 1)]); break;
                case 2: if (!body.empty()) body.erase(at, 1 + next() % 8); break;
                default: body.insert(at, body.substr(at, next() % 16)); break;
            }
        }
        try {
            parse_generation_request(body, endpoint, SamplerParams{}, RequestLimits{});
            ++parsed;
        } catch (const ApiError & e) {
            EXPECT_EQ(e.status, 400);
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 1000);
    EXPECT_GT(parsed, 10);
}

TEST(StopStrings, HoldsBackPossiblePrefixesAndCutsAtTheFirstMatch) {
    const std::vector<std::string> stops = {"END", "\n\n"};
    EXPECT_EQ(scan_stops("hello", 0, stops).end, 5u);
    const auto held = scan_stops("hello E", 0, stops);
    EXPECT_FALSE(held.found);
    EXPECT_EQ(held.end, 6u);  // "E" may become "END"
    EXPECT_EQ(scan_stops("hello EN", 6, stops).end, 6u);
    const auto hit = scan_stops("hello END more", 6, stops);
    EXPECT_TRUE(hit.found);
    EXPECT_EQ(hit.end, 6u);
    const auto first = scan_stops("a\n\nb END", 0, stops);
    EXPECT_TRUE(first.found);
    EXPECT_EQ(first.end, 1u);
    EXPECT_EQ(scan_stops("x", 0, {}).end, 1u);
}

}  // namespace
}  // namespace tern::server
