// libFuzzer target: a safetensors file (SafetensorsFile::from_bytes), then every float tensor read
// back the way the converter reads it.
#include "convert/safetensors.h"
#include "fuzz_common.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    tern::fuzz::expect_clean([&] {
        const auto f = tern::SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
        std::vector<float> row;
        for (const auto & t : f.tensors()) {
            if (t.data.size() != static_cast<size_t>(t.n_elements) * tern::st_dtype_size(t.dtype)) {
                tern::fuzz::finding("tensor size disagrees with its shape");
            }
            if (!tern::st_dtype_is_float(t.dtype) || t.n_elements == 0) continue;
            const int64_t n = std::min<int64_t>(t.n_elements, 64);
            row.resize(static_cast<size_t>(n));
            tern::st_read_f32(t, t.n_elements - n, n, row.data());
        }
    });
    return 0;
}
