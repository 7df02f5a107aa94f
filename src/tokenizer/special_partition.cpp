// Special-token partition with the LSTRIP/RSTRIP whitespace rules (FORMATS.md §5.3).
#include "tokenizer/special_partition.h"

namespace tern::tok {
namespace {

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

std::vector<Fragment> partition_special(std::string_view text, const Vocab & vocab, bool parse_special) {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({-1, text});

    std::vector<Fragment> next;
    for (const SpecialToken & special : vocab.specials) {
        if (!parse_special && vocab.types[static_cast<size_t>(special.id)] != TokenType::user_defined) continue;
        const std::string_view needle = vocab.texts[static_cast<size_t>(special.id)];
        // Raw fragments are sub-views of `text`: a candidate absent from the whole text (the usual
        // case) cannot occur in any of them, which one search decides.
        if (text.find(needle) == std::string_view::npos) continue;

        next.clear();
        for (const Fragment & f : fragments) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            std::string_view rest = f.text;
            for (size_t at; (at = rest.find(needle)) != std::string_view::npos;) {
                std::string_view left = rest.substr(0, at);
                if (special.lstrip) {
                    while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
                }
                if (!left.empty()) next.push_back({-1, left});
                next.push_back({special.id, {}});
                rest = rest.substr(at + needle.size());
                if (special.rstrip) {
                    while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
                }
            }
            if (!rest.empty()) next.push_back({-1, rest});
        }
        fragments.swap(next);
    }
    return fragments;
}

}  // namespace tern::tok
