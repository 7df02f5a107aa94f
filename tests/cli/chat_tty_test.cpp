// `tern chat` on a terminal (a pseudo-terminal here): line editing and history (libedit), /help,
// Ctrl-C stops a reply and the conversation goes on, Ctrl-C while a long message is read drops that
// message only, Ctrl-C twice at the prompt quits, Ctrl-D quits with the shell's prompt on a new line.
#include "cli_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tern {
namespace {

using test::tiny_model;
using clock_type = std::chrono::steady_clock;

// tern chat under a pseudo-terminal; everything it writes (stdout and stderr) is in `seen`.
class ChatTty {
public:
    explicit ChatTty(std::vector<std::string> extra) {
        std::vector<std::string> args = {test::binary_path("tern"), "chat", "-m", tiny_model(), "--seed", "1"};
        args.insert(args.end(), extra.begin(), extra.end());
        pid_ = ::forkpty(&fd_, nullptr, nullptr, nullptr);
        if (pid_ == 0) {
            std::vector<char *> argv;
            for (auto & a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~ChatTty() {
        if (pid_ > 0 && !exited_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) ::close(fd_);
    }
    bool started() const { return pid_ > 0; }

    void send(const std::string & keys) { ASSERT_EQ(::write(fd_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size())); }

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

constexpr size_t npos = std::string::npos;

TEST(ChatTty, HelpHistoryCtrlCAndCtrlD) {
    // -n -1 -c 4096 --temp 0: the random model's reply runs long enough to interrupt it.
    ChatTty chat({"-n", "-1", "-c", "4096", "--temp", "0"});
    ASSERT_TRUE(chat.started());
    size_t at = chat.expect("> ", 0);
    ASSERT_NE(at, npos) << chat.seen;

    // /help is answered by the chat, not sent to the model.
    chat.send("/help\r");
    at = chat.expect("/help\r\n", at);
    ASSERT_NE(at, npos) << chat.seen;
    const size_t help_end = chat.expect("> ", at);
    ASSERT_NE(help_end, npos) << chat.seen.substr(at);
    EXPECT_NE(chat.seen.substr(at, help_end - at).find("/reset"), npos) << chat.seen.substr(at);
    at = help_end;

    // A reply, stopped with Ctrl-C once it is under way; the prompt comes back.
    chat.send("Hello\r");
    at = chat.expect("Hello\r\n", at);
    ASSERT_NE(at, npos) << chat.seen;
    ASSERT_TRUE(chat.expect_output(at, 20)) << "no reply: " << chat.seen.substr(at);
    chat.send("\x03");
    at = chat.expect("reply stopped (Ctrl-C); the conversation goes on", at);
    ASSERT_NE(at, npos) << chat.seen;
    at = chat.expect("> ", at);
    ASSERT_NE(at, npos) << chat.seen;

    // History: the up arrow brings "Hello" back, and the conversation goes on with it.
    chat.send("\x1b[A");
    at = chat.expect("Hello", at, 5);
    ASSERT_NE(at, npos) << "no history: " << chat.seen;
    chat.send("\r");
    at = chat.expect("\r\n", at);
    ASSERT_NE(at, npos) << chat.seen;
    ASSERT_TRUE(chat.expect_output(at, 20)) << "the conversation did not go on: " << chat.seen.substr(at);
    chat.send("\x03");
    at = chat.expect("reply stopped", at);
    ASSERT_NE(at, npos) << chat.seen;
    at = chat.expect("> ", at);
    ASSERT_NE(at, npos) << chat.seen;

    // Ctrl-C at the prompt: a note; then Ctrl-D quits, leaving the cursor on a new line.
    chat.send("\x03");
    at = chat.expect("press Ctrl-C again (or Ctrl-D) to quit", at);
    ASSERT_NE(at, npos) << chat.seen;
    at = chat.expect("> ", at);
    ASSERT_NE(at, npos) << chat.seen;
    chat.send("\x04");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.seen.substr(at);
    EXPECT_TRUE(chat.seen.ends_with("\n")) << "the shell's prompt would follow '> ': " << chat.seen.substr(at);
}

TEST(ChatTty, CtrlCWhileAMessageIsReadDropsItAndTwiceAtThePromptQuits) {
    // -b 1: a long message is read one token per forward pass, slowly enough to interrupt.
    ChatTty chat({"-n", "4", "-c", "4096", "-b", "1"});
    ASSERT_TRUE(chat.started());
    size_t at = chat.expect("> ", 0);
    ASSERT_NE(at, npos) << chat.seen;
    chat.send(std::string(1500, 'a') + "\r");
    at = chat.expect("aaaa\r\n", at);
    ASSERT_NE(at, npos) << chat.seen.substr(0, 300);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    chat.send("\x03");
    at = chat.expect("stopped while reading the message; it was dropped", at);
    ASSERT_NE(at, npos) << chat.seen.substr(chat.seen.size() > 400 ? chat.seen.size() - 400 : 0);
    at = chat.expect("> ", at);
    ASSERT_NE(at, npos);
    // The conversation is still usable.
    chat.send("Hi\r");
    at = chat.expect("Hi\r\n", at);
    ASSERT_NE(at, npos) << chat.seen;
    at = chat.expect("\r\n> ", at);
    ASSERT_NE(at, npos) << chat.seen;
    // Ctrl-C twice at the prompt quits.
    chat.send("\x03");
    at = chat.expect("to quit", at);
    ASSERT_NE(at, npos) << chat.seen;
    chat.expect("> ", at);
    chat.send("\x03");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.seen.substr(at);
}

}  // namespace
}  // namespace tern
