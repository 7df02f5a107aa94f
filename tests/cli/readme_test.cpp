// Every example in README.md runs as written after `scripts/demo.sh` (issue 56): the commands of
// its ```sh blocks and the inline `build/bin/tern ...` examples, in document order, in a scratch
// folder that sees the repository's build/, tests/, share/ and scripts/ (files the examples write
// stay there). A block after `<!-- readme-test: skip (why) -->` is not run; one after
// `<!-- readme-test: needs FILE -->` runs when FILE (a download) is in the repository, else is
// listed as skipped.
#include "cli_util.h"

#include <gtest/gtest.h>

#include <regex>

namespace tern {
namespace {

namespace fs = std::filesystem;

struct Example {
    std::string command;
    std::string needs;  // a file the example needs ("" = none)
    int         line = 0;
};

std::vector<Example> readme_examples(const std::string & text, std::vector<std::string> & skipped) {
    std::vector<Example> out;
    std::istringstream   in(text);
    std::string          line, marker;
    bool                 in_block = false, block_is_sh = false;
    int                  number   = 0;
    const std::regex     inline_example("`(build/bin/tern [^`]*)`");
    const std::regex     marker_re("<!-- readme-test: (skip|needs) ?([^>]*?) ?-->");
    while (std::getline(in, line)) {
        ++number;
        if (line.starts_with("```")) {
            if (!in_block) {
                in_block    = true;
                block_is_sh = line == "```sh";
            } else {
                in_block = false;
                marker.clear();
            }
            continue;
        }
        if (in_block) {
            if (!block_is_sh || line.empty() || line.starts_with('#')) continue;
            if (marker.starts_with("skip")) {
                skipped.push_back(line + "   [" + marker + "]");
                continue;
            }
            out.push_back({line, marker.starts_with("needs ") ? marker.substr(6) : "", number});
            continue;
        }
        std::smatch m;
        if (std::regex_search(line, m, marker_re)) {
            marker = m[1].str() + " " + m[2].str();
            continue;
        }
        for (auto it = std::sregex_iterator(line.begin(), line.end(), inline_example); it != std::sregex_iterator(); ++it) {
            out.push_back({(*it)[1].str(), "", number});
        }
    }
    return out;
}

TEST(Readme, EveryExampleRunsAsWritten) {
    const fs::path repo   = fs::path(TERN_TEST_DATA_DIR).parent_path().parent_path();
    const fs::path build  = fs::path(TERN_BINARY_DIR).parent_path();
    const fs::path scratch = test::temp_dir("readme");
    fs::create_directory_symlink(build, scratch / "build");
    for (const char * d : {"tests", "share", "scripts"}) fs::create_directory_symlink(repo / d, scratch / d);

    std::vector<std::string> skipped;
    const auto               examples = readme_examples(test::slurp(repo / "README.md"), skipped);
    ASSERT_GE(examples.size(), 10u) << "README.md lost its examples?";
    int run = 0;
    for (const Example & e : examples) {
        if (!e.needs.empty()) {
            if (!fs::exists(repo / e.needs)) {
                skipped.push_back(e.command + "   [needs " + e.needs + ", not here]");
                continue;
            }
            if (!fs::exists(scratch / e.needs)) fs::create_symlink(repo / e.needs, scratch / e.needs);
        }
        const fs::path log = scratch / ("example-" + std::to_string(e.line) + ".log");
        const std::string cmd = "cd " + test::shell_quote(scratch.string()) + " && timeout 600 bash -c " +
                                test::shell_quote(e.command) + " </dev/null >" + test::shell_quote(log.string()) + " 2>&1";
        const int status = std::system(cmd.c_str());
        ++run;
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "README.md line " << e.line << ": " << e.command << "\n" << test::slurp(log);
    }
    std::printf("[ README   ] %d examples run; %zu not run:\n", run, skipped.size());
    for (const auto & s : skipped) std::printf("[ README   ]   %s\n", s.c_str());
}

}  // namespace
}  // namespace tern
