// `tern chat` as a function, so that `tern run -cnv` (llama.cpp's conversation mode) can start it.
#pragma once

#include "cli_common.h"

#include <string>

namespace tern::cli {

struct ChatArgs {
    ModelArgs     model;
    ContextArgs   ctx;
    SamplerParams sampling;
    std::string   seed;
    std::string   system      = "You are a helpful assistant.";
    std::string   first_message;  // run -cnv -p TEXT: the first user turn
    int64_t       n_predict   = 512;
    bool          single_turn = false;  // -st: one reply, then exit
};

void chat(ChatArgs a);

}  // namespace tern::cli
