// Validators for the CLI's options; see cli_options.h.
#include "cli_options.h"

#include "core/error.h"
#include "core/utf8.h"
#include "sampler/sampler.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sys/stat.h>

namespace tern::cli {
namespace {

std::string shown(const std::string & s) { return "'" + printable(s, 40) + "'"; }

bool parse_i64(const std::string & s, int64_t & v) {
    const char * end = s.data() + s.size();
    const auto   r   = std::from_chars(s.data(), end, v);
    return !s.empty() && r.ec == std::errc() && r.ptr == end;
}

bool parse_double(const std::string & s, double & v) {
    if (s.empty()) return false;
    errno              = 0;
    char *       end   = nullptr;
    const double x     = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno == ERANGE) return false;
    v = x;
    return true;
}

std::string range_text(double lo, double hi) {
    return format("%g to %g", lo, hi);
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
    return CLI::Validator(
        [lo, hi](std::string & s) -> std::string {
            int64_t v = 0;
            if (!parse_i64(s, v)) {
                return format("expected an integer from %lld to %lld, found %s", static_cast<long long>(lo),
                              static_cast<long long>(hi), shown(s).c_str());
            }
            if (v < lo || v > hi) {
                return format("expected an integer from %lld to %lld, found %lld", static_cast<long long>(lo),
                              static_cast<long long>(hi), static_cast<long long>(v));
            }
            return {};
        },
        format("%lld..%lld", static_cast<long long>(lo), static_cast<long long>(hi)));
}

CLI::Validator number_in(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string & s) -> std::string {
            double v = 0;
            if (!parse_double(s, v) || !std::isfinite(v)) {
                return format("expected a number from %s, found %s", range_text(lo, hi).c_str(), shown(s).c_str());
            }
            if (v < lo || v > hi) return format("expected a number from %s, found %s", range_text(lo, hi).c_str(), s.c_str());
            return {};
        },
        format("%g..%g", lo, hi));
}

CLI::Validator finite_number() {
    return CLI::Validator(
        [](std::string & s) -> std::string {
            double v = 0;
            if (!parse_double(s, v) || !std::isfinite(v)) return format("expected a number, found %s", shown(s).c_str());
            return {};
        },
        "");
}

CLI::Validator one_of(std::vector<std::string> words) {
    std::string list;
    for (const auto & w : words) list += (list.empty() ? "" : ", ") + w;
    return CLI::Validator(
        [words, list](std::string & s) -> std::string {
            for (const auto & w : words) {
                if (s == w) return {};
            }
            return format("expected one of %s, found %s", list.c_str(), shown(s).c_str());
        },
        "{" + list + "}");
}

CLI::Validator readable_file() {
    return CLI::Validator(
        [](std::string & s) -> std::string {
            struct stat st {};
            if (::stat(s.c_str(), &st) != 0) return format("no such file: %s", shown(s).c_str());
            if (S_ISDIR(st.st_mode)) return format("%s is a directory, expected a file", shown(s).c_str());
            return {};
        },
        "");
}

uint64_t parse_seed(const std::string & text) {
    if (text == "-1") return k_sampler_random_seed;
    uint64_t     v   = 0;
    const char * end = text.data() + text.size();
    const auto   r   = std::from_chars(text.data(), end, v);
    if (text.empty() || r.ec != std::errc() || r.ptr != end) {
        fail(ErrorKind::invalid_argument, format("--seed: expected -1 (random) or an integer from 0 to 2^64-1, found %s",
                                                 shown(text).c_str()));
    }
    return v;
}

CLI::Validator seed_value() {
    return CLI::Validator(
        [](std::string & s) -> std::string {
            try {
                parse_seed(s);
            } catch (const Error &) {
                return format("expected -1 (random) or an integer from 0 to 2^64-1, found %s", shown(s).c_str());
            }
            return {};
        },
        "");
}

}  // namespace tern::cli
