// Shared helpers for tests: paths of test data and a seeded RNG.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

namespace tern::test {

// $TERN_TEST_DATA_DIR overrides the built-in tests/data path (a test binary run on another machine,
// tools/device/families_run.sh).
inline std::string data_path(const std::string & name) {
    if (const char * dir = std::getenv("TERN_TEST_DATA_DIR"); dir && *dir) return std::string(dir) + "/" + name;
    return std::string(TERN_TEST_DATA_DIR) + "/" + name;
}
inline std::string shared_data_path(const std::string & name) { return std::string(TERN_SHARED_DATA_DIR) + "/" + name; }
inline std::string deps_path(const std::string & name) { return std::string(TERN_DEPS_DIR) + "/" + name; }
inline std::string binary_path(const std::string & name) { return std::string(TERN_BINARY_DIR) + "/" + name; }

// A fresh, empty temporary directory per call, removed by the caller if it wants (tests leave them
// in /tmp). A directory of the same name left by an earlier process whose pid was the same is
// emptied first: its files would otherwise show up in this test's folder.
inline std::filesystem::path temp_dir(const std::string & tag) {
    static int counter = 0;
    auto p = std::filesystem::temp_directory_path() /
             ("tern-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

}  // namespace tern::test
