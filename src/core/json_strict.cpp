// Strict JSON parsing; see json_strict.h.
#include "core/json_strict.h"

#include "core/error.h"
#include "core/utf8.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace tern {
namespace {

// Maximum nesting of [ and { outside strings, checked before parsing so that a hostile input
// cannot make the parser build an arbitrarily deep tree.
}  // namespace

int json_nesting_depth(std::string_view text) {
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

namespace {

// A SAX pass that only looks for a key repeated inside one object (linear: nlohmann's callback
// parser rescans a parent object whenever a child object ends, quadratic in a header of a million
// tensors).
class DuplicateKeys : public nlohmann::json_sax<nlohmann::json> {
public:
    std::string duplicate;

    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t &) override { return true; }
    bool string(string_t &) override { return true; }
    bool binary(binary_t &) override { return true; }
    bool start_object(std::size_t) override {
        open_.emplace_back();
        return true;
    }
    bool key(string_t & k) override {
        if (!open_.back().insert(k).second) {
            duplicate = k;
            return false;  // stop: one is enough
        }
        return true;
    }
    bool end_object() override {
        open_.pop_back();
        return true;
    }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override { return false; }

private:
    std::vector<std::unordered_set<std::string>> open_;
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, const std::string & context, int max_depth) {
    using json = nlohmann::json;
    if (json_nesting_depth(text) > max_depth) {
        fail(ErrorKind::invalid_model, format("%s: JSON nests deeper than %d levels", context.c_str(), max_depth));
    }
    DuplicateKeys keys;
    const bool    well_formed = json::sax_parse(text.begin(), text.end(), &keys);
    if (!keys.duplicate.empty()) {
        fail(ErrorKind::invalid_model, format("%s: the key \"%s\" appears twice in one object", context.c_str(),
                                              printable(keys.duplicate, 64).c_str()));
    }
    json j = well_formed ? json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false) : json(json::value_t::discarded);
    if (j.is_discarded()) {
        fail(ErrorKind::invalid_model, format("%s: not valid JSON", context.c_str()),
             "the file is truncated or damaged");
    }
    return j;
}

std::string json_excerpt(const nlohmann::json & v) {
    using json = nlohmann::json;
    switch (v.type()) {
        case json::value_t::string: return "the string \"" + printable(v.get_ref<const std::string &>(), 40) + "\"";
        case json::value_t::array: {
            // A short flat array is shown: ["LlamaForCausalLM"], [0, 1].
            bool   flat  = v.size() <= 8;
            size_t bytes = 0;
            for (const auto & e : v) {
                flat = flat && !e.is_structured();
                if (e.is_string()) bytes += e.get_ref<const std::string &>().size();
            }
            if (flat && bytes <= 80) return printable(v.dump(), 120);
            return format("an array of %zu item%s", v.size(), v.size() == 1 ? "" : "s");
        }
        case json::value_t::object: return format("an object with %zu key%s", v.size(), v.size() == 1 ? "" : "s");
        case json::value_t::discarded: return "nothing";
        default: return v.dump();  // a number, true, false or null: short
    }
}

}  // namespace tern
