// How the reader words its errors (issue 56) and partial reads for `tern inspect`: every rejection
// carries a hint, the file name appears once, the version message says which versions are read, and
// a file cut short can be read as far as it goes (GgufReadOptions::partial) while any other
// corruption is still refused and no tensor data of a cut file is served.
#include "gguf/gguf_reader.h"

#include "core/error.h"
#include "core/mmap.h"
#include "gguf_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

using test::RawFile;

Error rejection(const std::vector<uint8_t> & bytes, const GgufReadOptions & options = {}) {
    try {
        (void) GgufFile::from_bytes(bytes, "mem.gguf", options);
    } catch (const Error & e) {
        return e;
    }
    ADD_FAILURE() << "accepted";
    return Error(ErrorKind::internal, "");
}

TEST(GgufMessages, VersionSaysWhichVersionsAreRead) {
    RawFile r = test::small_valid_file();
    r.version = 7;
    const Error e = rejection(r.build());
    EXPECT_NE(std::string(e.what()).find("GGUF version 7 is not supported (tern reads versions 2 and 3)"),
              std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("expected 3"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
}

// Where the last tensor's data ends: a file cut after it only lost padding, which is allowed.
size_t end_of_data(const std::vector<uint8_t> & bytes) {
    const GgufFile f   = GgufFile::from_bytes(bytes);
    size_t         end = f.data_offset();
    for (const auto & t : f.tensors()) end = std::max(end, f.data_offset() + static_cast<size_t>(t.offset) + t.n_bytes);
    return end;
}

// A file cut at every byte, and a few corrupt fields: every message has a hint.
TEST(GgufMessages, EveryRejectionHasAHint) {
    const std::vector<uint8_t> bytes = test::small_valid_file().build();
    for (size_t n = 0; n < end_of_data(bytes); ++n) {
        const Error e = rejection(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
        EXPECT_FALSE(e.hint().empty()) << "cut at " << n << ": " << e.what();
    }
    for (size_t pos : {size_t{8}, size_t{16}, size_t{24}}) {  // the two counts, the first key's length
        std::vector<uint8_t> b = bytes;
        test::poke<uint64_t>(b, pos, uint64_t{1} << 50);
        const Error e = rejection(b);
        EXPECT_FALSE(e.hint().empty()) << "field at " << pos << ": " << e.what();
    }
}

TEST(GgufMessages, TheFileNameAppearsOnce) {
    const std::vector<uint8_t> bytes = test::small_valid_file().build();
    const std::string          path  = (test::temp_dir("gguf-msg") / "cut.gguf").string();
    write_file_bytes(path, std::span<const uint8_t>(bytes.data(), 100));
    try {
        (void) GgufFile::open(path);
        FAIL() << "accepted";
    } catch (const Error & e) {
        const std::string m = e.what();
        EXPECT_EQ(m.find("'" + path + "': "), 0u) << m;
        EXPECT_EQ(m.find(path, path.size() + 2), std::string::npos) << "named twice: " << m;
    }
}

TEST(GgufMessages, PartialReadsKeepWhatIsCompleteAndServeNoTensorData) {
    const std::vector<uint8_t> bytes = test::small_valid_file().build();
    const GgufFile             full  = GgufFile::from_bytes(bytes);
    EXPECT_TRUE(full.truncation().empty());
    GgufReadOptions partial;
    partial.partial = true;
    EXPECT_TRUE(GgufFile::from_bytes(bytes, "full", partial).truncation().empty());
    size_t max_kvs_seen = 0;
    for (size_t n = 24; n < end_of_data(bytes); ++n) {
        const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
        const GgufFile f = GgufFile::from_bytes(cut, "cut", partial);  // never throws for a cut file
        EXPECT_FALSE(f.truncation().empty()) << n;
        EXPECT_LE(f.kvs().size(), full.kvs().size());
        for (size_t i = 0; i < f.kvs().size(); ++i) EXPECT_EQ(f.kvs()[i].key, full.kvs()[i].key);
        max_kvs_seen = std::max(max_kvs_seen, f.kvs().size());
        for (const auto & t : f.tensors()) EXPECT_THROW((void) f.tensor_data(t), Error) << n;
    }
    EXPECT_EQ(max_kvs_seen, full.kvs().size()) << "a file cut in its data keeps all its metadata";
    // Corruption that is not a short file is still refused.
    std::vector<uint8_t> bad_magic = bytes;
    bad_magic[0]                   = 'X';
    EXPECT_THROW((void) GgufFile::from_bytes(bad_magic, "bad", partial), Error);
    RawFile v = test::small_valid_file();
    v.version = 9;
    EXPECT_THROW((void) GgufFile::from_bytes(v.build(), "bad", partial), Error);
}

}  // namespace
}  // namespace tern
