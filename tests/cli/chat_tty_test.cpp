// `tern chat` on a terminal (a pseudo-terminal here): line editing and history (libedit), /help,
// Ctrl-C stops a reply and the conversation goes on, Ctrl-C while a long message is read drops that
// message only, Ctrl-C twice at the prompt quits, Ctrl-D quits with the shell's prompt on a new line.
#include "cli_util.h"
#include "tty_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tern {
namespace {

using test::tiny_model;

// tern chat under a pseudo-terminal.
class ChatTty : public test::TtyProcess {
public:
    explicit ChatTty(const std::vector<std::string> & extra) : TtyProcess(args(extra)) {}

private:
    static std::vector<std::string> args(const std::vector<std::string> & extra) {
        std::vector<std::string> a = {"chat", "-m", tiny_model(), "--seed", "1"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
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
    // -b 1 and the reference kernels: a long message is read one token per forward pass, slowly
    // enough to interrupt on a quiet machine too (the SIMD kernels read it in ~0.3 s).
    setenv("TERN_CPU_ISA", "ref", 1);
    ChatTty chat({"-n", "4", "-c", "4096", "-b", "1"});
    unsetenv("TERN_CPU_ISA");
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
