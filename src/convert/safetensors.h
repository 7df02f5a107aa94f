// Strict reader of Hugging Face safetensors checkpoints (FORMATS.md §4.14), memory-mapped.
//
// On-disk layout of one file:
//   u64 LE header length H | H bytes of JSON | data region (the rest of the file)
//   JSON: { "<name>": {"dtype": "BF16", "shape": [640, 2560], "data_offsets": [begin, end]}, ...,
//           "__metadata__": {"<key>": "<string>", ...} (optional) }
//   offsets are relative to the first byte after the header.
// Every length, offset and size is checked before use (H vs the file size, offsets inside the data
// region, end - begin == product(shape) * dtype size, no two tensors overlapping, no duplicate
// keys); errors name the file and the tensor. Sharded checkpoints are read through
// model.safetensors.index.json ("weight_map": tensor name -> shard file).
#pragma once

#include "core/mmap.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// The element types tern reads. Other safetensors dtypes (F64, I32, F8_E4M3, ...) are rejected
// with Error(unsupported) naming the tensor.
enum class StDType : uint8_t { u8, i8, bf16, f16, f32 };

std::string_view st_dtype_name(StDType type);  // spelled as in the file: "U8", "BF16", ...
size_t           st_dtype_size(StDType type);
bool             st_dtype_is_float(StDType type);  // bf16, f16, f32

struct StTensor {
    std::string              name;
    StDType                  dtype = StDType::u8;
    std::vector<int64_t>     shape;  // PyTorch order: shape[0] outermost ([out, in] for a linear weight)
    std::span<const uint8_t> data;   // inside the file mapping
    int64_t                  n_elements = 1;

    std::string shape_string() const;  // "[640, 2560]"
};

class SafetensorsFile {
public:
    // Maps and validates path. Throws Error(io) if it cannot be read, Error(invalid_model) if it is
    // malformed, Error(unsupported) for a dtype tern does not read.
    static SafetensorsFile open(const std::string & path);
    // Validates an in-memory image (tests, fuzzing); the bytes are kept by the object.
    static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

    const std::string &                        path() const { return name_; }
    const std::vector<StTensor> &              tensors() const { return tensors_; }  // by data offset
    const std::map<std::string, std::string> & metadata() const { return metadata_; }
    const StTensor *                           find(std::string_view name) const;

private:
    SafetensorsFile() = default;
    void parse();

    std::string                        name_;
    MappedFile                         mapping_;
    std::vector<uint8_t>               owned_;
    std::span<const uint8_t>           bytes_;
    std::vector<StTensor>              tensors_;
    std::map<std::string, std::string> metadata_;
};

// A whole checkpoint folder: model.safetensors.index.json (sharded), else model.safetensors, else
// the only *.safetensors file in the folder.
class SafetensorsCheckpoint {
public:
    static SafetensorsCheckpoint open_dir(const std::string & dir);

    const StTensor *         find(std::string_view name) const;
    std::vector<std::string> names() const;  // sorted
    size_t                   n_files() const { return files_.size(); }

private:
    std::vector<std::unique_ptr<SafetensorsFile>>        files_;
    std::map<std::string, const StTensor *, std::less<>> index_;
};

// Converts elements [first, first + count) of a BF16 / F16 / F32 tensor to f32 (exact).
void st_read_f32(const StTensor & t, int64_t first, int64_t count, float * out);

}  // namespace tern
