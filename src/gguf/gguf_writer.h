// GgufWriter: builds a GGUF v3 file (metadata in insertion order, tensors in the order added, each
// padded to ALIGNMENT) the way ggml's gguf_write lays it out, so files tern writes pass tern's and
// ggml's strict offset checks. Tensor payloads may be produced lazily, one at a time, so that
// writing a 1 GB model does not hold it in memory twice.
#pragma once

#include "core/dtype.h"
#include "gguf/gguf_types.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tern {

class GgufWriter {
public:
    using Fill = std::function<void(std::span<uint8_t> dst)>;

    void set_u8(const std::string & key, uint8_t v);
    void set_u32(const std::string & key, uint32_t v);
    void set_i32(const std::string & key, int32_t v);
    void set_u64(const std::string & key, uint64_t v);
    void set_f32(const std::string & key, float v);
    void set_f64(const std::string & key, double v);
    void set_bool(const std::string & key, bool v);
    void set_string(const std::string & key, const std::string & v);
    void set_string_array(const std::string & key, const std::vector<std::string> & v);
    void set_f32_array(const std::string & key, const std::vector<float> & v);
    void set_i32_array(const std::string & key, const std::vector<int32_t> & v);
    // Raw escape hatch for tests: an already-encoded value of the given type.
    void set_raw(const std::string & key, GgufType type, std::vector<uint8_t> encoded);
    bool has(const std::string & key) const;

    void set_alignment(uint32_t alignment);  // writes general.alignment (so does set_u32 of that key)
    uint32_t alignment() const { return alignment_; }

    // dims in ggml order (ne0 first). The payload must be exactly dtype_tensor_bytes(type, ...) bytes.
    void add_tensor(const std::string & name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> data);
    void add_tensor(const std::string & name, DType type, std::vector<int64_t> dims, Fill fill);
    size_t n_tensors() const { return tensors_.size(); }

    std::vector<uint8_t> to_bytes() const;
    // Streams the file to path through OutputFile (temp file + rename; refuses devices, FIFOs and
    // directories; no temp file left on errors or SIGINT/SIGTERM); shows a progress bar if asked.
    void write_file(const std::string & path, bool progress = false) const;

private:
    struct Kv {
        std::string          key;
        GgufType             type;
        std::vector<uint8_t> encoded;  // value bytes after the type field
    };
    struct Tensor {
        std::string          name;
        DType                type;
        std::vector<int64_t> dims;
        size_t               n_bytes;
        std::vector<uint8_t> data;  // empty when fill is set
        Fill                 fill;
    };
    void put(const std::string & key, GgufType type, std::vector<uint8_t> encoded);
    std::vector<uint8_t> header_bytes() const;  // everything before the data section, padded
    void check_tensor(const std::string & name, DType type, const std::vector<int64_t> & dims) const;

    std::vector<Kv>     kvs_;
    std::vector<Tensor> tensors_;
    uint32_t            alignment_ = k_gguf_default_alignment;
};

}  // namespace tern
