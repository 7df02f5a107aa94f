// libFuzzer target for the strict GGUF reader: GgufFile::from_bytes on arbitrary bytes, then
// everything an accepted file offers (gguf_exercise.h). Built with the other targets in tests/fuzz
// (clang, -DTERN_FUZZ=ON); `scripts/fuzz.sh 300 gguf_fuzz` builds it, writes the seeds
// (gguf_seeds.h, through fuzz_seeds) and runs it for 300 s.
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
