// Strict, validating GGUF v3 reader over a memory-mapped file (FORMATS.md §1).
//
// On-disk layout (all little-endian):
//   1. header: "GGUF" | u32 version (3; 2 accepted) | u64 n_tensors | u64 n_kv
//   2. n_kv pairs:      string key | u32 value_type | value   (arrays: u32 elem_type | u64 count | elems)
//   3. n_tensors infos: string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset
//   4. zero padding to ALIGNMENT (general.alignment, default 32), then the data section;
//      tensor i lives at data_offset + offset_i.
// Every length, count, dimension and offset is checked against the bytes that remain before it is
// used (checklist of FORMATS.md §1.9); a bad file throws Error(invalid_model) naming the key or
// tensor, what was expected and what was found. Values are views into the mapping: no copies.
// A streamed file (open_streamed) holds only the metadata and directory in memory and reads each
// tensor's bytes when asked (the browser build: files larger than the wasm32 heap).
#pragma once

#include "core/dtype.h"
#include "core/mmap.h"
#include "gguf/gguf_types.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// One metadata value: a view of its encoded bytes inside the file.
struct GgufValue {
    GgufType        type      = GgufType::u8;
    GgufType        elem_type = GgufType::u8;  // arrays only
    uint64_t        count     = 0;             // arrays only: number of elements
    const uint8_t * data      = nullptr;       // scalars: the value; strings: the bytes; arrays: first element
    size_t          n_bytes   = 0;             // encoded size of data (strings: length; arrays: all elements)
};

struct GgufKv {
    std::string_view key;
    GgufValue        value;
    size_t           file_offset = 0;  // where the pair starts (diagnostics, tests)
};

struct GgufTensorInfo {
    std::string_view       name;
    uint32_t               n_dims = 0;
    std::array<int64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] is contiguous
    DType                  type = DType::f32;
    uint64_t               offset     = 0;  // relative to the data section
    size_t                 n_bytes    = 0;  // exact payload size (i2_s: n/4 + 32)
    int64_t                n_elements = 0;

    int64_t rows() const { return n_elements / ne[0]; }
};

struct GgufReadOptions {
    // Require offset_{i+1} = offset_i + PAD(n_bytes_i, ALIGNMENT) (check 17). With false only
    // alignment, bounds and non-overlap are required.
    bool strict_offsets = true;
    // For `tern inspect`: a file cut short is read as far as it goes instead of rejected. The
    // metadata and tensor infos that are complete are kept, truncation() says where the file ends,
    // and tensor_data() refuses to serve any tensor. Corruption other than a short file still throws.
    bool partial = false;
};

namespace gguf_detail {
// Thrown by the parser of a streamed file's prefix that ends inside the metadata or directory.
struct NeedMoreBytes {};
}  // namespace gguf_detail

class GgufFile {
public:
    // Maps and validates the file at path. Throws Error(io) / Error(invalid_model).
    static GgufFile open(const std::string & path, const GgufReadOptions & options = {});
    // Reads and validates the metadata and tensor directory of the file at path (a prefix of the
    // file, grown until they fit) without mapping it; tensor_data() then reads each tensor from the
    // file when asked, into memory this GgufFile owns until release_tensor_data(). For files larger
    // than the memory the process may use (the browser build's 4 GB wasm32 heap). Throws as open().
    static GgufFile open_streamed(const std::string & path, const GgufReadOptions & options = {});
    // Validates an in-memory image (tests, fuzzing). The bytes are copied.
    static GgufFile from_bytes(std::span<const uint8_t> bytes, std::string name = "<memory>",
                               const GgufReadOptions & options = {});

    const std::string & path() const { return name_; }
    uint32_t            version() const { return version_; }
    uint32_t            alignment() const { return alignment_; }
    size_t              data_offset() const { return data_offset_; }
    uint64_t            file_size() const { return file_size_; }  // (may exceed a 32-bit size_t: wasm32)
    bool                streamed() const { return stream_ != nullptr; }

    const std::vector<GgufKv> &         kvs() const { return kvs_; }
    const std::vector<GgufTensorInfo> & tensors() const { return tensors_; }

    const GgufKv *         find(std::string_view key) const;
    const GgufTensorInfo * find_tensor(std::string_view name) const;
    // Throws Error(invalid_model) for a file read with GgufReadOptions::partial that was cut short.
    // A streamed file reads the bytes now (Error(io) if it cannot); the span stays valid until
    // release_tensor_data().
    std::span<const uint8_t> tensor_data(const GgufTensorInfo & info) const;
    // Streamed files: frees the bytes tensor_data() read (every span it returned becomes invalid).
    // A model loader calls it once the weights read so far are uploaded. Mapped files: nothing.
    void release_tensor_data() const;
    // Streamed files: fn(tensor bytes read so far, all tensor bytes) after each read (progress).
    void set_read_progress(std::function<void(uint64_t done, uint64_t total)> fn);
    // Empty for a complete file; for a partial read of a truncated one, what was cut off.
    const std::string & truncation() const { return truncation_; }

    // Typed getters. nullopt if the key is absent; Error(invalid_model) naming the key if present
    // with the wrong type. Integers accept any integer type (FORMATS.md §1.11) and must fit int64.
    std::optional<std::string_view> get_string(std::string_view key) const;
    std::optional<int64_t>          get_int(std::string_view key) const;
    std::optional<double>           get_float(std::string_view key) const;  // FLOAT32 or FLOAT64
    std::optional<bool>             get_bool(std::string_view key) const;
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
    std::optional<std::vector<float>>            get_f32_array(std::string_view key) const;
    std::optional<std::vector<int64_t>>          get_int_array(std::string_view key) const;

    // Renders a scalar value (or an array summary) for `tern inspect`.
    static std::string describe(const GgufValue & value, size_t max_items = 8);

    GgufFile(GgufFile &&) noexcept;
    GgufFile & operator=(GgufFile &&) noexcept;
    ~GgufFile();

private:
    struct Stream;  // gguf_stream.cpp: the open file, the bytes read, progress
    GgufFile();
    void parse_with_context(const GgufReadOptions & options);
    void parse(const GgufReadOptions & options);
    void parse_sections(const GgufReadOptions & options);
    std::span<const uint8_t> read_streamed(uint64_t offset, size_t n_bytes) const;

    std::string          name_;
    MappedFile           mapping_;   // empty for from_bytes
    std::vector<uint8_t> owned_;     // from_bytes storage
    std::span<const uint8_t> bytes_;  // the whole file, or a streamed file's metadata and directory
    uint64_t             file_size_   = 0;
    std::unique_ptr<Stream> stream_;  // streamed files only
    uint32_t             version_     = 0;
    uint32_t             alignment_   = k_gguf_default_alignment;
    size_t               data_offset_ = 0;
    std::vector<GgufKv>         kvs_;
    std::vector<GgufTensorInfo> tensors_;
    std::string                 truncation_;
};

// Reads scalar values out of a GgufValue (little-endian, unaligned-safe).
int64_t     gguf_value_as_int(const GgufValue & v, std::string_view key);    // integer types only
double      gguf_value_as_float(const GgufValue & v, std::string_view key);  // f32 / f64 only
std::string_view gguf_value_as_string(const GgufValue & v);

}  // namespace tern
