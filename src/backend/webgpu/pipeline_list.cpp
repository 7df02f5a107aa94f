// Reading and writing the list of a run's pipelines (pipeline_list.h).
#include "backend/webgpu/pipeline_list.h"

#include "core/error.h"
#include "core/fnv1a.h"
#include "core/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tern {

namespace {

bool is_name(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

bool is_signature(std::string_view s) {
    if (s.empty() || s.size() > 32) return false;
    for (char c : s) {
        if (c != 'r' && c != 'w' && c != 'u') return false;
    }
    return true;
}

std::string_view intern(std::string_view s, std::deque<std::string> & names) {
    for (const std::string & n : names) {
        if (n == s) return n;
    }
    return names.emplace_back(s);
}

// "end <FNV-1a 64 of text>\n": the list's last line.
std::string end_line(std::string_view text) {
    return format("end %016llx\n", static_cast<unsigned long long>(fnv1a(text)));
}

}  // namespace

uint64_t wgsl_shaders_hash() {
    static const uint64_t hash = [] {
        uint64_t h = k_fnv1a_offset;
        for (const WgslShader & s : wgsl_shaders()) h = fnv1a(s.source, fnv1a(s.name, h));
        return h;
    }();
    return hash;
}

std::string pipeline_key_line(const PipelineKey & key) {
    std::string line = std::string(key.shader) + " " + std::string(key.signature);
    for (const auto & o : key.overrides) {
        if (o.name.empty()) continue;
        line += format(" %.*s=%.17g", static_cast<int>(o.name.size()), o.name.data(), o.value);
    }
    return line;
}

std::optional<PipelineKey> parse_pipeline_key_line(std::string_view line, std::deque<std::string> & names) {
    std::vector<std::string_view> words;
    for (size_t at = 0; at < line.size();) {
        size_t end = line.find(' ', at);
        if (end == std::string_view::npos) end = line.size();
        if (end > at) words.push_back(line.substr(at, end - at));
        at = end + 1;
    }
    if (words.size() < 2 || words.size() > 2 + 24) return std::nullopt;
    if (!is_name(words[0]) || !is_signature(words[1]) || !find_wgsl_shader(words[0])) return std::nullopt;
    PipelineKey key;
    key.shader    = intern(words[0], names);
    key.signature = intern(words[1], names);
    for (size_t i = 2; i < words.size(); ++i) {
        const size_t eq = words[i].find('=');
        if (eq == std::string_view::npos || !is_name(words[i].substr(0, eq))) return std::nullopt;
        const std::string value(words[i].substr(eq + 1));
        char *            end = nullptr;
        errno                 = 0;
        const double v        = std::strtod(value.c_str(), &end);
        if (value.empty() || errno != 0 || end != value.c_str() + value.size()) return std::nullopt;
        key.overrides[i - 2] = {intern(words[i].substr(0, eq), names), v};
    }
    return key;
}

std::vector<PipelineKey> read_pipeline_list(const std::string & path, std::string_view header,
                                            std::deque<std::string> & names) {
    std::vector<PipelineKey> keys;
    std::ifstream            in(path, std::ios::binary);
    if (!in) return keys;
    std::string text(k_max_pipeline_list_bytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    // The last line, "end <checksum of everything before it>", vouches for the rest.
    if (text.size() > k_max_pipeline_list_bytes || text.empty() || text.back() != '\n') return keys;
    const size_t last = text.rfind('\n', text.size() - 2);
    if (last == std::string::npos) return keys;
    const std::string body = text.substr(0, last + 1);
    if (text.substr(last + 1) != end_line(body)) return keys;
    std::istringstream lines(body);
    std::string        line;
    if (!std::getline(lines, line) || line != header) return keys;
    while (keys.size() < k_max_pipeline_list_keys && std::getline(lines, line)) {
        if (auto key = parse_pipeline_key_line(line, names)) keys.push_back(*key);
    }
    return keys;
}

bool write_pipeline_list(const std::string & path, std::string_view header, const std::vector<PipelineKey> & keys) {
    std::string text = std::string(header) + "\n";
    for (size_t i = 0; i < keys.size() && i < k_max_pipeline_list_keys; ++i) {
        std::string line = pipeline_key_line(keys[i]) + "\n";
        if (text.size() + line.size() + 32 > k_max_pipeline_list_bytes) break;
        text += line;
    }
    text += end_line(text);
    std::error_code             ec;
    const std::filesystem::path target(path);
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
    try {  // (a temp file renamed into place, removed on any failure and on Ctrl-C)
        OutputFile out(path);
        out.write(text.data(), text.size());
        out.commit();
        return true;
    } catch (const Error &) {
        return false;
    }
}

}  // namespace tern
