// Strict JSON parsing; see json_strict.h.
#include "convert/json_strict.h"

#include "core/error.h"

#include <algorithm>
#include <set>
#include <vector>

namespace tern {
namespace {

// Maximum nesting of [ and { outside strings, checked before parsing so that a hostile input
// cannot make the parser build an arbitrarily deep tree.
int json_depth(std::string_view text) {
    int  depth = 0, max_depth = 0;
    bool in_string = false, escaped = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (ch == '\\') {
                escaped = true;
            } else if (ch == '"') {
                in_string = false;
            }
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            max_depth = std::max(max_depth, ++depth);
        } else if (ch == ']' || ch == '}') {
            --depth;
        }
    }
    return max_depth;
}

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, const std::string & context, int max_depth) {
    using json = nlohmann::json;
    if (json_depth(text) > max_depth) {
        fail(ErrorKind::invalid_model, format("%s: JSON nests deeper than %d levels", context.c_str(), max_depth));
    }
    std::vector<std::set<std::string>> open_objects;
    std::string                        duplicate;
    auto cb = [&](int /*depth*/, json::parse_event_t event, json & parsed) {
        if (event == json::parse_event_t::object_start) {
            open_objects.emplace_back();
        } else if (event == json::parse_event_t::object_end) {
            if (!open_objects.empty()) open_objects.pop_back();
        } else if (event == json::parse_event_t::key && !open_objects.empty()) {
            const auto & key = parsed.get_ref<const std::string &>();
            if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
        }
        return true;
    };
    json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        fail(ErrorKind::invalid_model, format("%s: not valid JSON", context.c_str()),
             "the file is truncated or damaged");
    }
    if (!duplicate.empty()) {
        fail(ErrorKind::invalid_model, format("%s: the key \"%s\" appears twice in one object", context.c_str(), duplicate.c_str()));
    }
    return j;
}

}  // namespace tern
