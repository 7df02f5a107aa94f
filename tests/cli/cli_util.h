// Helpers for the end-to-end tests of the `tern` executable: run it with arguments and stdin,
// capture both streams and the exit code; a tiny synthetic model shared by the tests of a process.
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace tern::test {

struct RunResult {
    int         code = -1;  // exit status, or 128 + signal
    std::string out, err;
};

inline std::string slurp(const std::filesystem::path & p) {
    std::ifstream     in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::string shell_quote(const std::string & s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs tern with arguments (each quoted), optional stdin text; captures both streams.
inline RunResult tern(const std::vector<std::string> & args, const std::string & stdin_text = "") {
    static const auto dir = temp_dir("cli");
    static int        n   = 0;
    const auto        in = dir / ("in" + std::to_string(n)), out = dir / ("out" + std::to_string(n)),
               err = dir / ("err" + std::to_string(n));
    ++n;
    std::ofstream(in) << stdin_text;
    std::string cmd = shell_quote(binary_path("tern"));
    for (const auto & a : args) cmd += " " + shell_quote(a);
    cmd += " <" + in.string() + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out  = slurp(out);
    r.err  = slurp(err);
    return r;
}

// `tern synth tiny --seed 3`, made once per test process.
inline const std::string & tiny_model() {
    static const std::string path = [] {
        const std::string p = (temp_dir("cli-model") / "tiny.gguf").string();
        const RunResult   r = tern({"synth", "tiny", "-o", p, "--seed", "3"});
        EXPECT_EQ(r.code, 0) << r.err;
        return p;
    }();
    return path;
}

inline bool has(const std::string & haystack, const std::string & needle) {
    return haystack.find(needle) != std::string::npos;
}

}  // namespace tern::test
