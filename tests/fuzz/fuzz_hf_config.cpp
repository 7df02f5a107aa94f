// libFuzzer target: config.json of a Hugging Face BitNet checkpoint (parse_hf_config).
#include "convert/hf_config.h"
#include "fuzz_common.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    tern::fuzz::expect_clean([&] {
        const auto c = tern::parse_hf_config(std::string_view(reinterpret_cast<const char *>(data), size), "config.json");
        if (c.hidden_size < 1 || c.vocab_size < 1 || c.context_length < 1) tern::fuzz::finding("accepted a size below 1");
    });
    return 0;
}
