// core/utf8 (RFC 3629), which the GGUF reader uses to validate keys (FORMATS.md §1.9 check 5).
#include "core/utf8.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

// Every scalar value encodes to the RFC 3629 byte count and decodes back; surrogates are rejected.
TEST(Utf8, EveryCodePointRoundTrips) {
    for (uint32_t cp = 0; cp <= 0x10ffff; ++cp) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        std::string s;
        utf8_append(s, cp);
        const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        ASSERT_EQ(s.size(), want) << cp;
        uint32_t back = 0xffffffff;
        ASSERT_EQ(utf8_decode(s, 0, back), want) << cp;
        ASSERT_EQ(back, cp);
        ASSERT_TRUE(is_valid_utf8(s)) << cp;
        ASSERT_EQ(utf8_incomplete_tail(s), 0u) << cp;
        for (size_t cut = 1; cut < want; ++cut) {  // every proper prefix is incomplete, not valid
            const std::string prefix = s.substr(0, cut);
            ASSERT_FALSE(is_valid_utf8(prefix)) << cp;
            ASSERT_EQ(utf8_incomplete_tail("x" + prefix), cut) << cp;
        }
    }
}

TEST(Utf8, IllFormedSequencesAreRejected) {
    const char * bad[] = {
        "\x80",                  // lone continuation
        "\xbf",
        "\xc0\x80",              // overlong NUL
        "\xc1\xbf",              // overlong
        "\xe0\x80\xaf",          // overlong 3-byte
        "\xf0\x80\x80\xaf",      // overlong 4-byte
        "\xed\xa0\x80",          // U+D800 (surrogate)
        "\xed\xbf\xbf",          // U+DFFF
        "\xf4\x90\x80\x80",      // U+110000
        "\xf5\x80\x80\x80",      // lead byte beyond F4
        "\xf8\x88\x80\x80\x80",  // 5-byte form
        "\xfe", "\xff",
        "\xc3",                  // truncated
        "\xe2\x82",
        "\xc3\x28",              // bad continuation
        "\xe2\x28\xa1",
        "a\xe2\x82\xac" "b\x80",  // valid, then a stray continuation
    };
    for (const char * s : bad) EXPECT_FALSE(is_valid_utf8(s)) << testing::PrintToString(std::string(s));
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("\xef\xbb\xbf"));            // U+FEFF
    EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));        // U+10FFFF
    EXPECT_TRUE(is_valid_utf8("\xed\x9f\xbf"));            // U+D7FF
    EXPECT_TRUE(is_valid_utf8(std::string("a\0b", 3)));    // NUL is a valid scalar value
    uint32_t cp = 0;
    EXPECT_EQ(utf8_decode("ab", 2, cp), 0u);               // past the end
}

TEST(Utf8, IncompleteTail) {
    EXPECT_EQ(utf8_incomplete_tail(""), 0u);
    EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
    EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82"), 2u);
    EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82\xac"), 0u);
    EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98"), 3u);
    EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98\x80"), 0u);
    EXPECT_EQ(utf8_incomplete_tail("\x80\x80\x80"), 0u);  // no lead byte within reach
    EXPECT_EQ(utf8_incomplete_tail("\xff"), 0u);          // invalid, not incomplete
}

}  // namespace
}  // namespace tern
