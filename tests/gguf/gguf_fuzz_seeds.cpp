// Writes the seed corpus of gguf_fuzz (gguf_seeds.h) into a folder, so that no binary seed files
// live in the repository. Usage: gguf_fuzz_seeds <dir>
#include "gguf_seeds.h"

#include "core/mmap.h"

#include <cstdio>
#include <filesystem>

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
        return 2;
    }
    std::filesystem::create_directories(argv[1]);
    for (const auto & [name, bytes] : tern::test::gguf_seed_files()) {
        tern::write_file_bytes(std::string(argv[1]) + "/" + name + ".gguf", bytes);
    }
    return 0;
}
