// libFuzzer target for the strict GGUF reader: GgufFile::from_bytes on arbitrary bytes, then
// everything an accepted file offers (gguf_exercise.h). Built only with clang and -DTERN_FUZZ=ON:
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DTERN_FUZZ=ON \
//       -DTERN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   ninja -C build-fuzz gguf_fuzz gguf_fuzz_seeds
//   build-fuzz/bin/gguf_fuzz_seeds build-fuzz/gguf-corpus        # writes the seed files
//   build-fuzz/bin/gguf_fuzz build-fuzz/gguf-corpus -max_total_time=300 -max_len=4096
//
// A crash, a sanitizer report, an error kind other than invalid_model, or a broken invariant of an
// accepted file is a finding.
#include "gguf_exercise.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    const bool strict_ok = tern::test::gguf_exercise(bytes, true);
    const bool lenient_ok = tern::test::gguf_exercise(bytes, false);
    if (strict_ok && !lenient_ok) tern::test::exercise_violation("strict accepts what lenient rejects");
    return 0;
}
