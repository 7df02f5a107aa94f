// GgufWriter: encodes metadata and the tensor directory, then streams tensor payloads.
#include "gguf/gguf_writer.h"

#include "core/error.h"
#include "core/output_file.h"
#include "core/progress.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

namespace tern {
namespace {

template <typename T>
void append_le(std::vector<uint8_t> & out, T v) {
    uint8_t b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    out.insert(out.end(), b, b + sizeof v);
}

void append_string(std::vector<uint8_t> & out, const std::string & s) {
    append_le<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

template <typename T>
std::vector<uint8_t> encode_scalar(T v) {
    std::vector<uint8_t> out;
    append_le(out, v);
    return out;
}

uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::put(const std::string & key, GgufType type, std::vector<uint8_t> encoded) {
    // The layout must follow whatever general.alignment the file declares, however it was set;
    // otherwise readers would find every tensor offset misaligned (FORMATS.md §1.6).
    if (key == "general.alignment") {
        TERN_ASSERT(type == GgufType::u32 && encoded.size() == 4, "general.alignment must be a UINT32");
        uint32_t a = 0;
        std::memcpy(&a, encoded.data(), 4);
        TERN_ASSERT(a >= 8 && (a & (a - 1)) == 0, "alignment %u", a);
        alignment_ = a;
    }
    for (auto & kv : kvs_) {
        if (kv.key == key) {
            kv.type    = type;
            kv.encoded = std::move(encoded);
            return;
        }
    }
    kvs_.push_back({key, type, std::move(encoded)});
}

bool GgufWriter::has(const std::string & key) const {
    for (const auto & kv : kvs_) {
        if (kv.key == key) return true;
    }
    return false;
}

void GgufWriter::set_u8(const std::string & key, uint8_t v) { put(key, GgufType::u8, encode_scalar(v)); }
void GgufWriter::set_u32(const std::string & key, uint32_t v) { put(key, GgufType::u32, encode_scalar(v)); }
void GgufWriter::set_i32(const std::string & key, int32_t v) { put(key, GgufType::i32, encode_scalar(v)); }
void GgufWriter::set_u64(const std::string & key, uint64_t v) { put(key, GgufType::u64, encode_scalar(v)); }
void GgufWriter::set_f32(const std::string & key, float v) { put(key, GgufType::f32, encode_scalar(v)); }
void GgufWriter::set_f64(const std::string & key, double v) { put(key, GgufType::f64, encode_scalar(v)); }
void GgufWriter::set_bool(const std::string & key, bool v) { put(key, GgufType::boolean, encode_scalar<uint8_t>(v ? 1 : 0)); }

void GgufWriter::set_string(const std::string & key, const std::string & v) {
    std::vector<uint8_t> out;
    append_string(out, v);
    put(key, GgufType::string, std::move(out));
}

void GgufWriter::set_string_array(const std::string & key, const std::vector<std::string> & v) {
    std::vector<uint8_t> out;
    append_le<uint32_t>(out, static_cast<uint32_t>(GgufType::string));
    append_le<uint64_t>(out, v.size());
    for (const auto & s : v) append_string(out, s);
    put(key, GgufType::array, std::move(out));
}

void GgufWriter::set_f32_array(const std::string & key, const std::vector<float> & v) {
    std::vector<uint8_t> out;
    append_le<uint32_t>(out, static_cast<uint32_t>(GgufType::f32));
    append_le<uint64_t>(out, v.size());
    for (float f : v) append_le(out, f);
    put(key, GgufType::array, std::move(out));
}

void GgufWriter::set_i32_array(const std::string & key, const std::vector<int32_t> & v) {
    std::vector<uint8_t> out;
    append_le<uint32_t>(out, static_cast<uint32_t>(GgufType::i32));
    append_le<uint64_t>(out, v.size());
    for (int32_t x : v) append_le(out, x);
    put(key, GgufType::array, std::move(out));
}

void GgufWriter::set_raw(const std::string & key, GgufType type, std::vector<uint8_t> encoded) {
    put(key, type, std::move(encoded));
}

void GgufWriter::set_alignment(uint32_t alignment) { set_u32("general.alignment", alignment); }

void GgufWriter::check_tensor(const std::string & name, DType type, const std::vector<int64_t> & dims) const {
    TERN_ASSERT(!name.empty() && name.size() <= k_gguf_max_tensor_name, "tensor name '%s'", name.c_str());
    TERN_ASSERT(!dims.empty() && dims.size() <= 4, "tensor '%s' has %zu dims", name.c_str(), dims.size());
    for (const auto & t : tensors_) TERN_ASSERT(t.name != name, "duplicate tensor '%s'", name.c_str());
    for (int64_t d : dims) TERN_ASSERT(d >= 1, "tensor '%s' has dimension %lld", name.c_str(), static_cast<long long>(d));
    // The reader's check 14 (FORMATS.md §1.9): never write a file tern itself would reject.
    TERN_ASSERT(type != DType::i2_s || dims[0] % 128 == 0, "i2_s tensor '%s': ne0 %lld is not a multiple of 128",
                name.c_str(), static_cast<long long>(dims[0]));
    TERN_ASSERT(dtype_traits(static_cast<uint32_t>(type)).has_value(), "tensor '%s': type %s cannot be stored in a file",
                name.c_str(), std::string(dtype_name(type)).c_str());
}

void GgufWriter::add_tensor(const std::string & name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> data) {
    check_tensor(name, type, dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const size_t expected = dtype_tensor_bytes(type, dims[0], n);
    TERN_ASSERT(data.size() == expected, "tensor '%s': %zu bytes given, %zu expected", name.c_str(), data.size(), expected);
    tensors_.push_back({name, type, std::move(dims), expected, std::move(data), nullptr});
}

void GgufWriter::add_tensor(const std::string & name, DType type, std::vector<int64_t> dims, Fill fill) {
    check_tensor(name, type, dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const size_t bytes = dtype_tensor_bytes(type, dims[0], n);
    tensors_.push_back({name, type, std::move(dims), bytes, {}, std::move(fill)});
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
    std::vector<uint8_t> out;
    for (char c : std::string_view("GGUF")) out.push_back(static_cast<uint8_t>(c));
    append_le<uint32_t>(out, 3);
    append_le<uint64_t>(out, tensors_.size());
    append_le<uint64_t>(out, kvs_.size());
    for (const auto & kv : kvs_) {
        append_string(out, kv.key);
        append_le<uint32_t>(out, static_cast<uint32_t>(kv.type));
        out.insert(out.end(), kv.encoded.begin(), kv.encoded.end());
    }
    uint64_t offset = 0;
    for (const auto & t : tensors_) {
        append_string(out, t.name);
        append_le<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims) append_le<uint64_t>(out, static_cast<uint64_t>(d));
        append_le<uint32_t>(out, static_cast<uint32_t>(t.type));
        append_le<uint64_t>(out, offset);
        offset += pad_to(t.n_bytes, alignment_);
    }
    if (!tensors_.empty()) out.resize(pad_to(out.size(), alignment_), 0);
    return out;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out = header_bytes();
    for (const auto & t : tensors_) {
        const size_t start = out.size();
        out.resize(start + pad_to(t.n_bytes, alignment_), 0);
        std::span<uint8_t> dst(out.data() + start, t.n_bytes);
        if (t.fill) {
            t.fill(dst);
        } else {
            std::memcpy(dst.data(), t.data.data(), t.n_bytes);
        }
    }
    return out;
}

void GgufWriter::write_file(const std::string & path, bool progress) const {
    // A temp file renamed over path at the end; removed on any error, exception (a Fill callback
    // that throws) or SIGINT/SIGTERM. Devices, FIFOs and directories are refused (OutputFile).
    OutputFile                 out(path);
    const std::vector<uint8_t> head = header_bytes();
    out.write(head.data(), head.size());
    uint64_t total = 0;
    for (const auto & t : tensors_) total += t.n_bytes;
    ProgressBar          bar("writing " + path, total, progress);
    uint64_t             done = 0;
    std::vector<uint8_t> buf;
    for (const auto & t : tensors_) {
        const size_t padded = pad_to(t.n_bytes, alignment_);
        if (t.fill) {
            buf.assign(padded, 0);
            t.fill(std::span<uint8_t>(buf.data(), t.n_bytes));
            out.write(buf.data(), padded);
        } else {
            out.write(t.data.data(), t.n_bytes);
            static const uint8_t zeros[256] = {};
            for (size_t pad = padded - t.n_bytes; pad > 0;) {
                const size_t k = pad < sizeof zeros ? pad : sizeof zeros;
                out.write(zeros, k);
                pad -= k;
            }
        }
        done += t.n_bytes;
        bar.update(done);
    }
    bar.finish();
    out.commit();
}

}  // namespace tern
