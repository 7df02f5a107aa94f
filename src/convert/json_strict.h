// Strict JSON parsing for the converter's inputs (safetensors headers, config.json, the shard
// index): rejects invalid JSON, duplicate keys in any object (nlohmann would keep the last one) and
// nesting deeper than max_depth, with Error(invalid_model) messages that start with context.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tern {

// context names the input in errors, e.g. "safetensors 'model.safetensors': header".
nlohmann::json parse_json_strict(std::string_view text, const std::string & context, int max_depth = 32);

}  // namespace tern
