// A `tern` process on a pseudo-terminal, for the tests of what a person at a terminal sees: chat's
// line editing and Ctrl-C, progress bars (drawn only on terminals).
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <poll.h>
#include <pty.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace tern::test {

using clock_type = std::chrono::steady_clock;

// `tern ARGS` under a pseudo-terminal (stdin, stdout and stderr a terminal, as a person runs it);
// everything it writes is in `seen`.
class TtyProcess {
public:
    explicit TtyProcess(const std::vector<std::string> & tern_args) {
        std::vector<std::string> args = {binary_path("tern")};
        args.insert(args.end(), tern_args.begin(), tern_args.end());
        pid_ = ::forkpty(&fd_, nullptr, nullptr, nullptr);
        if (pid_ == 0) {
            std::vector<char *> argv;
            for (auto & a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~TtyProcess() {
        if (pid_ > 0 && !exited_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) ::close(fd_);
    }
    bool started() const { return pid_ > 0; }

    // Keys typed after a pause: the line editor switches the terminal's mode when it starts reading a
    // line, and keys that arrive before it has (the prompt is printed first) can be discarded by that
    // switch, as a user's type-ahead can be.
    void send(const std::string & keys) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        ASSERT_EQ(::write(fd_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
    }

    // Reads until `what` appears at or after position `from` of `seen`; returns the position just
    // after it, or npos on timeout (or when the terminal closes first).
    size_t expect(const std::string & what, size_t from, double timeout_s = 30) {
        const auto end = clock_type::now() + std::chrono::duration<double>(timeout_s);
        for (;;) {
            if (const size_t at = seen.find(what, from); at != std::string::npos) return at + what.size();
            if (clock_type::now() > end) return std::string::npos;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) > 0) {
                char          buf[4096];
                const ssize_t n = ::read(fd_, buf, sizeof buf);
                if (n <= 0) return std::string::npos;
                seen.append(buf, static_cast<size_t>(n));
            }
        }
    }
    // Reads until at least n bytes follow position `from` (output is under way).
    bool expect_output(size_t from, size_t n, double timeout_s = 30) {
        const auto end = clock_type::now() + std::chrono::duration<double>(timeout_s);
        while (seen.size() < from + n) {
            if (clock_type::now() > end) return false;
            expect("\x01never", seen.size(), 0.05);
        }
        return true;
    }
    // Waits for the process to end; its exit status (or -1 on timeout).
    int wait_exit(double timeout_s = 30) {
        const auto end = clock_type::now() + std::chrono::duration<double>(timeout_s);
        while (clock_type::now() < end) {
            expect("\x01never", seen.size(), 0.1);  // drain the output
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                exited_ = true;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
        }
        return -1;
    }

    std::string seen;

private:
    int   fd_     = -1;
    pid_t pid_    = -1;
    bool  exited_ = false;
};

}  // namespace tern::test
