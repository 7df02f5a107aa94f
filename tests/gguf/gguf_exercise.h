// Shared by the libFuzzer target and the seeded mutation test: parse untrusted bytes, and if the
// reader accepts them, use everything it returned the way the loader would (getters, describe,
// tensor views, row decoding) and check the invariants an accepted file must satisfy (§1.9).
// Returns true if the file was accepted. Anything other than tern::Error(invalid_model) escaping,
// or a broken invariant, aborts: that is what the fuzzer and the test look for.
#pragma once

#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

namespace tern::test {

[[noreturn]] inline void exercise_violation(const char * what) {
    std::fprintf(stderr, "gguf exercise: invariant violated: %s\n", what);
    std::abort();
}

inline bool gguf_exercise(std::span<const uint8_t> bytes, bool strict_offsets = true) {
    std::optional<GgufFile> parsed;
    try {
        parsed.emplace(GgufFile::from_bytes(bytes, "fuzz", GgufReadOptions{.strict_offsets = strict_offsets}));
    } catch (const Error & e) {
        if (e.kind() != ErrorKind::invalid_model) exercise_violation("error kind is not invalid_model");
        if (std::string_view(e.what()).empty()) exercise_violation("empty error message");
        return false;
    }
    const GgufFile & f = *parsed;
    if (f.file_size() != bytes.size()) exercise_violation("file size");
    if (f.data_offset() > f.file_size()) exercise_violation("data offset past the end");
    if (f.alignment() < 8 || (f.alignment() & (f.alignment() - 1)) != 0) exercise_violation("alignment");

    for (const auto & kv : f.kvs()) {
        if (f.find(kv.key) != &kv) exercise_violation("duplicate or unfindable key");
        (void) GgufFile::describe(kv.value, 4);
        // Every typed getter either answers or throws tern::Error; none may read out of bounds.
        try { (void) f.get_string(kv.key); } catch (const Error &) {}
        try { (void) f.get_int(kv.key); } catch (const Error &) {}
        try { (void) f.get_float(kv.key); } catch (const Error &) {}
        try { (void) f.get_bool(kv.key); } catch (const Error &) {}
        try { (void) f.get_string_array(kv.key); } catch (const Error &) {}
        try { (void) f.get_f32_array(kv.key); } catch (const Error &) {}
        try { (void) f.get_int_array(kv.key); } catch (const Error &) {}
    }

    std::vector<float> row;
    for (const auto & t : f.tensors()) {
        if (f.find_tensor(t.name) != &t) exercise_violation("duplicate or unfindable tensor");
        if (t.name.empty() || t.name.size() > 63) exercise_violation("tensor name length");
        if (t.n_dims < 1 || t.n_dims > 4) exercise_violation("n_dims");
        int64_t n = 1;
        for (int d = 0; d < 4; ++d) {
            if (t.ne[d] < 1) exercise_violation("dimension < 1");
            n *= t.ne[d];
        }
        if (n != t.n_elements) exercise_violation("element count");
        if (t.offset % f.alignment() != 0) exercise_violation("misaligned offset");
        if (t.offset > f.file_size() - f.data_offset() || t.n_bytes > f.file_size() - f.data_offset() - t.offset) {
            exercise_violation("tensor outside the file");
        }
        if (t.n_bytes != dtype_tensor_bytes(t.type, t.ne[0], t.n_elements)) exercise_violation("tensor byte size");
        const auto data = f.tensor_data(t);
        if (data.size() != t.n_bytes) exercise_violation("tensor_data size");
        // Decode the first and the last row (bounded, to keep executions fast).
        if (t.ne[0] <= 8192) {
            row.resize(static_cast<size_t>(t.ne[0]));
            dequantize_tensor_row(t.type, data, t.n_elements, t.ne[0], 0, row.data());
            dequantize_tensor_row(t.type, data, t.n_elements, t.ne[0], t.rows() - 1, row.data());
            if (dtype_is_lowbit(t.type)) {  // the load-time repack path
                std::vector<int8_t> values(static_cast<size_t>(t.ne[0]));
                std::vector<float>  scales(static_cast<size_t>(t.ne[0] / lowbit_scale_group(t.type, t.ne[0])));
                lowbit_decode_row(t.type, data, t.n_elements, t.rows() - 1, t.ne[0], values.data(), scales.data());
                for (int8_t v : values) {
                    if (v < -1 || v > 2) exercise_violation("low-bit value out of range");
                }
            }
        }
    }
    // Accepted tensors never share bytes (§1.9 check 18).
    std::vector<const GgufTensorInfo *> by_offset;
    for (const auto & t : f.tensors()) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto a, auto b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        if (by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes > by_offset[i]->offset) exercise_violation("overlap");
    }
    return true;
}

}  // namespace tern::test
