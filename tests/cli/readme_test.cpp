// Every example in README.md runs as written after `scripts/demo.sh` (issue 56): the commands of
// its ```sh blocks and the inline `build/bin/tern ...` examples, in document order, in a scratch
// folder that sees the repository's build/, tests/, share/ and scripts/ (files the examples write
// stay there). A block after `<!-- readme-test: skip (why) -->` is not run; one after
// `<!-- readme-test: needs FILE -->` runs when FILE (a download) is in the repository, else is
// listed as skipped. `tern serve` runs as a user runs it: in the background until it answers on
// its port, while the rest of its block runs; then it is stopped with Ctrl-C.
#include "cli_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <regex>
#include <thread>
#include <unistd.h>

namespace tern {
namespace {

namespace fs = std::filesystem;

struct Example {
    std::string command;
    std::string needs;      // a file the example needs ("" = none)
    int         line  = 0;
    int         block = 0;  // examples of one block share servers started in it
};

std::vector<Example> readme_examples(const std::string & text, std::vector<std::string> & skipped) {
    std::vector<Example> out;
    std::istringstream   in(text);
    std::string          line, marker, pending;
    bool                 in_block = false, block_is_sh = false;
    int                  number = 0, block = 0, pending_line = 0;
    const std::regex     inline_example("`(build/bin/tern [^`]*)`");
    const std::regex     marker_re("<!-- readme-test: (skip|needs) ?([^>]*?) ?-->");
    while (std::getline(in, line)) {
        ++number;
        if (line.starts_with("```")) {
            in_block    = !in_block;
            block_is_sh = in_block && line == "```sh";
            ++block;
            if (!in_block) marker.clear();
            continue;
        }
        if (in_block) {
            if (!block_is_sh || (pending.empty() && (line.empty() || line.starts_with('#')))) continue;
            if (pending.empty()) pending_line = number;
            if (line.ends_with('\\')) {  // a command continued on the next line
                pending += line.substr(0, line.size() - 1) + " ";
                continue;
            }
            const std::string command = pending + line;
            pending.clear();
            if (marker.starts_with("skip")) {
                skipped.push_back(command + "   [" + marker + "]");
                continue;
            }
            out.push_back({command, marker.starts_with("needs ") ? marker.substr(6) : "", pending_line, block});
            continue;
        }
        std::smatch m;
        if (std::regex_search(line, m, marker_re)) {
            marker = m[1].str() + " " + m[2].str();
            continue;
        }
        for (auto it = std::sregex_iterator(line.begin(), line.end(), inline_example); it != std::sregex_iterator(); ++it) {
            out.push_back({(*it)[1].str(), "", number, ++block});
        }
    }
    return out;
}

// A server example, running in the background.
struct Server {
    pid_t pid  = -1;
    int   port = 0;
    int   line = 0;
};

bool port_answers(int port) {
    const std::string cmd = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + "' 2>/dev/null";
    return std::system(cmd.c_str()) == 0;
}

TEST(Readme, EveryExampleRunsAsWritten) {
    const fs::path repo    = fs::path(TERN_TEST_DATA_DIR).parent_path().parent_path();
    const fs::path build   = fs::path(TERN_BINARY_DIR).parent_path();
    const fs::path scratch = test::temp_dir("readme");
    fs::create_directory_symlink(build, scratch / "build");
    for (const char * d : {"tests", "share", "scripts"}) fs::create_directory_symlink(repo / d, scratch / d);

    std::vector<std::string> skipped;
    const auto               examples = readme_examples(test::slurp(repo / "README.md"), skipped);
    ASSERT_GE(examples.size(), 10u) << "README.md lost its examples?";
    std::vector<Server> servers;
    auto stop_servers = [&] {
        for (const Server & s : servers) {
            ::kill(-s.pid, SIGINT);  // the process group: bash and tern
            int status = 0;
            ::waitpid(s.pid, &status, 0);
            EXPECT_TRUE(WIFEXITED(status) || WIFSIGNALED(status)) << "README.md line " << s.line;
        }
        servers.clear();
    };
    int run = 0, block = -1;
    for (const Example & e : examples) {
        if (e.block != block) stop_servers();
        block = e.block;
        if (!e.needs.empty()) {
            if (!fs::exists(repo / e.needs)) {
                skipped.push_back(e.command + "   [needs " + e.needs + ", not here]");
                continue;
            }
            if (!fs::exists(scratch / e.needs)) fs::create_symlink(repo / e.needs, scratch / e.needs);
        }
        ++run;
        const fs::path log = scratch / ("example-" + std::to_string(e.line) + ".log");
        std::smatch    m;
        if (std::regex_search(e.command, m, std::regex("tern serve .*--port ([0-9]+)"))) {
            Server s{::fork(), std::stoi(m[1].str()), e.line};
            ASSERT_GE(s.pid, 0);
            if (s.pid == 0) {
                ::setpgid(0, 0);
                const std::string cmd = "cd " + test::shell_quote(scratch.string()) + " && exec " + e.command +
                                        " </dev/null >" + test::shell_quote(log.string()) + " 2>&1";
                ::execl("/bin/bash", "bash", "-c", cmd.c_str(), nullptr);
                ::_exit(127);
            }
            servers.push_back(s);
            bool up = false;
            for (int i = 0; i < 600 && !up; ++i) {
                int status = 0;
                if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
                    servers.pop_back();
                    break;  // it exited: a failure, reported below
                }
                up = port_answers(s.port);
                if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            EXPECT_TRUE(up) << "README.md line " << e.line << ": " << e.command << " did not answer on port " << s.port
                            << "\n" << test::slurp(log);
            continue;
        }
        const std::string cmd = "cd " + test::shell_quote(scratch.string()) + " && timeout 600 bash -c " +
                                test::shell_quote(e.command) + " </dev/null >" + test::shell_quote(log.string()) + " 2>&1";
        const int status = std::system(cmd.c_str());
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "README.md line " << e.line << ": " << e.command << "\n" << test::slurp(log);
    }
    stop_servers();
    std::printf("[ README   ] %d examples run; %zu not run:\n", run, skipped.size());
    for (const auto & s : skipped) std::printf("[ README   ]   %s\n", s.c_str());
}

}  // namespace
}  // namespace tern
