// Strict JSON parsing for the JSON tern reads from files (safetensors headers, config.json, the shard
// index, tokenizer.json): rejects invalid JSON, duplicate keys in any object (nlohmann would keep
// the last one) and nesting deeper than max_depth (checked before parsing: a hostile file cannot
// make the parser recurse 100,000 levels deep), with Error(invalid_model) messages that start with
// context. json_excerpt() describes a value for an error message without printing it whole.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tern {

// context names the input in errors, e.g. "safetensors 'model.safetensors': header".
nlohmann::json parse_json_strict(std::string_view text, const std::string & context, int max_depth = 32);

// The deepest nesting of [ and { outside strings (a linear scan, before any parser runs).
int json_nesting_depth(std::string_view text);

// A short, terminal-safe description of a value from an untrusted file: 42, true, null, the string
// "Ġhe..." (at most 40 bytes, control characters escaped), an array of 3 items, an object with 2 keys.
std::string json_excerpt(const nlohmann::json & value);

}  // namespace tern
