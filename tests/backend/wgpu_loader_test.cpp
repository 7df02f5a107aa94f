// The loader's ELF symbol-table lookup (how tern finds dawn.node's local webgpu.h functions), on
// this test executable: a function with internal linkage is not exported, so dlsym cannot see it,
// but the symbol table names it at the address the program calls.
#include "backend/webgpu/wgpu_loader.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tern {
namespace {

// Not exported; kept by `used` (and called below) so that it exists with a symbol of its own.
__attribute__((noinline, used)) int tern_loader_test_local_marker(int x) {
    return x * 3 + 1;
}

TEST(WgpuLoader, SymbolTableGivesTheAddressOfALocalFunction) {
    void * self = dlopen(nullptr, RTLD_LAZY);
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(dlsym(self, "_ZN4tern12_GLOBAL__N_129tern_loader_test_local_markerEi"), nullptr) << "exported";
    const auto syms = elf_function_symbols("/proc/self/exe", self, {"_ZN4tern12_GLOBAL__N_129tern_loader"});
    const auto it   = syms.find("_ZN4tern12_GLOBAL__N_129tern_loader_test_local_markerEi");
    if (syms.empty()) GTEST_SKIP() << "this executable has no symbol table (stripped)";
    ASSERT_NE(it, syms.end());
    EXPECT_EQ(it->second, reinterpret_cast<void *>(&tern_loader_test_local_marker));
    auto * fn = reinterpret_cast<int (*)(int)>(it->second);
    EXPECT_EQ(fn(4), 13);
}

TEST(WgpuLoader, SymbolTableOfANonElfOrTruncatedFileIsEmpty) {
    void * self = dlopen(nullptr, RTLD_LAZY);
    ASSERT_NE(self, nullptr);
    const std::string path = testing::TempDir() + "/tern_not_elf.bin";
    for (const std::string & content : {std::string("not an ELF file at all"), std::string("\x7f" "ELF\x02\x01\x01", 7)}) {
        std::ofstream(path, std::ios::binary) << content;
        EXPECT_TRUE(elf_function_symbols(path, self, {""}).empty());
    }
    // A real header whose section table lies past the end of the file.
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    std::string   head(64, '\0');
    exe.read(head.data(), 64);
    std::ofstream(path, std::ios::binary) << head;
    EXPECT_TRUE(elf_function_symbols(path, self, {""}).empty());
    EXPECT_TRUE(elf_function_symbols(path + ".missing", self, {""}).empty());
    std::remove(path.c_str());
}

}  // namespace
}  // namespace tern
