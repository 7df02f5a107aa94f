// Reading what users point tern at: text files bounded in size (/dev/zero never ends), model
// files that are FIFOs refused at once (not a hang), and printable() for text from files.
#include "core/error.h"
#include "core/mmap.h"
#include "core/utf8.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

namespace tern {
namespace {

TEST(ReadFileText, StopsAtTheLimitOnAnEndlessInput) {
    try {
        read_file_text("/dev/zero", size_t{1} << 20);
        FAIL() << "no error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::io);
        EXPECT_NE(std::string(e.what()).find("/dev/zero"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("larger than"), std::string::npos) << e.what();
    }
    EXPECT_EQ(k_max_text_file_bytes, size_t{256} << 20);
}

TEST(ReadFileText, ReadsFilesAndPipes) {
    const auto p = test::temp_dir("text") / "t.txt";
    write_file_bytes(p.string(), std::span<const uint8_t>(reinterpret_cast<const uint8_t *>("a\0b"), 3));
    EXPECT_EQ(read_file_text(p.string()), std::string("a\0b", 3));
}

TEST(MappedFile, AFifoIsRefusedAtOnce) {
    const auto fifo = test::temp_dir("fifo") / "model.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ::alarm(10);  // without O_NONBLOCK the open waits for a writer forever: fail instead of hanging
    try {
        MappedFile m(fifo.string());
        FAIL() << "no error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::io);
        EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
    }
    ::alarm(0);
}

TEST(Printable, EscapesControlsAndBadBytesKeepsUtf8) {
    EXPECT_EQ(printable("plain Ġhello 東京"), "plain Ġhello 東京");
    EXPECT_EQ(printable("\x1b[2Jgone"), "\\x1b[2Jgone");
    EXPECT_EQ(printable(std::string("a\0b\n", 4)), "a\\x00b\\x0a");
    EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\u{9b}31m") << "C1 CSI";
    EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
    EXPECT_EQ(printable(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace tern
