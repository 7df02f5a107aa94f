// GgufFile: parsing and the validation checklist of FORMATS.md §1.9. Every check names the key or
// tensor, what was expected and what was found.
#include "gguf/gguf_reader.h"

#include "core/error.h"
#include "core/utf8.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace tern {
namespace {

constexpr size_t k_header_bytes   = 24;
constexpr size_t k_min_kv_bytes   = 13;  // u64 key length + u32 type + 1-byte value
constexpr size_t k_min_info_bytes = 24;  // u64 name length + u32 n_dims + u32 type + u64 offset

template <typename T>
T load_le(const uint8_t * p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // little-endian host assumed (FORMATS.md §1.10)
    return v;
}

uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

[[noreturn]] void bad(std::string message, std::string hint = {}) {
    fail(ErrorKind::invalid_model, std::move(message), std::move(hint));
}

// Thrown instead of Error when a partial read (GgufReadOptions::partial) reaches the end of the file.
struct Truncated {
    std::string message;
};
constexpr const char * k_truncated_hint = "the download or copy may be incomplete; compare the file size with the original";

// Bounds-checked sequential reader over the file image.
class Cursor {
public:
    // prefix: `bytes` is the start of a longer file (open_streamed), so running past its end means
    // the prefix must grow (NeedMoreBytes), not that the file is cut short.
    Cursor(std::span<const uint8_t> bytes, bool partial, bool prefix = false)
        : bytes_(bytes), partial_(partial), prefix_(prefix) {}

    // A length or count that cannot fit in the rest of the file: in a partial read the file was
    // cut short, else it is corrupt or truncated.
    [[noreturn]] void runs_past_end(const std::string & message) const {
        if (prefix_) throw gguf_detail::NeedMoreBytes{};
        if (partial_) throw Truncated{message};
        bad(message, k_truncated_hint);
    }

    size_t pos() const { return pos_; }
    size_t remaining() const { return bytes_.size() - pos_; }

    const uint8_t * take(size_t n, const std::string & what) {
        if (n > remaining()) {
            runs_past_end(format("file is truncated: %s needs %zu bytes at offset %zu, but the file ends at %zu",
                                 what.c_str(), n, pos_, bytes_.size()));
        }
        const uint8_t * p = bytes_.data() + pos_;
        pos_ += n;
        return p;
    }
    // True if a complete string (u64 length + bytes) starts here; skip_string() then steps over it.
    // Used where formatting a description per element would dominate the parse (vocab arrays).
    bool has_string() const { return remaining() >= 8 && load_le<uint64_t>(bytes_.data() + pos_) <= remaining() - 8; }
    void skip_string() { pos_ += 8 + static_cast<size_t>(load_le<uint64_t>(bytes_.data() + pos_)); }
    uint32_t u32(const std::string & what) { return load_le<uint32_t>(take(4, what)); }
    uint64_t u64(const std::string & what) { return load_le<uint64_t>(take(8, what)); }

    std::string_view string(const std::string & what) {
        const uint64_t len = u64(what + " length");
        if (len > remaining()) {
            runs_past_end(format("%s: string length %llu exceeds the %zu bytes left in the file (offset %zu)",
                                 what.c_str(), static_cast<unsigned long long>(len), remaining(), pos_));
        }
        const uint8_t * p = take(static_cast<size_t>(len), what);
        return {reinterpret_cast<const char *>(p), static_cast<size_t>(len)};
    }

private:
    std::span<const uint8_t> bytes_;
    size_t                   pos_ = 0;
    bool                     partial_;
    bool                     prefix_;
};

// Reads one value of type t (not ARRAY) and returns a view of it; validates strings and bools.
GgufValue read_scalar(Cursor & cur, GgufType t, const std::string & what) {
    GgufValue v;
    v.type = t;
    if (t == GgufType::string) {
        const std::string_view s = cur.string(what);
        v.data    = reinterpret_cast<const uint8_t *>(s.data());
        v.n_bytes = s.size();
        return v;
    }
    const size_t n = gguf_type_size(t);
    v.data    = cur.take(n, what);
    v.n_bytes = n;
    if (t == GgufType::boolean && *v.data > 1) {
        bad(format("%s: BOOL value is %u; expected 0 or 1", what.c_str(), *v.data));
    }
    return v;
}

GgufType checked_type(uint32_t raw, const std::string & what) {
    if (raw >= k_gguf_type_count) {
        bad(format("%s: value type %u is not a GGUF type (expected 0..12)", what.c_str(), raw));
    }
    return static_cast<GgufType>(raw);
}

// Element count of a tensor, checked dimension by dimension against int64 overflow.
int64_t checked_elements(const std::array<int64_t, 4> & ne, uint32_t n_dims, const std::string & what) {
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        if (ne[d] > std::numeric_limits<int64_t>::max() / n) {
            bad(format("%s: element count overflows int64 (dimension %u is %lld)", what.c_str(), d,
                       static_cast<long long>(ne[d])));
        }
        n *= ne[d];
    }
    return n;
}

}  // namespace

GgufFile GgufFile::open(const std::string & path, const GgufReadOptions & options) {
    GgufFile f;
    f.name_    = path;
    f.mapping_   = MappedFile(path);
    f.bytes_     = f.mapping_.bytes();
    f.file_size_ = f.bytes_.size();
    f.parse_with_context(options);
    return f;
}

GgufFile GgufFile::from_bytes(std::span<const uint8_t> bytes, std::string name, const GgufReadOptions & options) {
    GgufFile f;
    f.name_  = std::move(name);
    f.owned_.assign(bytes.begin(), bytes.end());
    f.bytes_     = f.owned_;
    f.file_size_ = f.bytes_.size();
    f.parse_with_context(options);
    return f;
}

// Errors start with the file name; one without a hint gets the likely causes.
void GgufFile::parse_with_context(const GgufReadOptions & options) {
    try {
        parse(options);
    } catch (const Error & e) {
        throw Error(e.kind(), format("'%s': %s", name_.c_str(), e.what()),
                    !e.hint().empty() ? e.hint()
                                      : format("the file is corrupt or truncated (it is %zu bytes); compare its size "
                                               "and checksum with the original, or convert it again",
                                               static_cast<size_t>(file_size_)));
    }
}

void GgufFile::parse(const GgufReadOptions & options) {
    try {
        parse_sections(options);
    } catch (const Truncated & t) {  // partial reads only: keep what was complete
        truncation_ = t.message;
    }
}

void GgufFile::parse_sections(const GgufReadOptions & options) {
    if (file_size_ < k_header_bytes) {
        bad(format("file is %zu bytes, smaller than the 24-byte GGUF header", static_cast<size_t>(file_size_)),
            "this is not a GGUF model file, or it is truncated");
    }
    Cursor cur(bytes_, options.partial, bytes_.size() < file_size_);
    const uint8_t * magic = cur.take(4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
        bad(format("not a GGUF file: magic is '%s', expected 'GGUF'",
                   printable(std::string_view(reinterpret_cast<const char *>(magic), 4)).c_str()),
            "tern reads GGUF files; convert a Hugging Face checkpoint folder with `tern convert`");
    }
    version_ = cur.u32("version");
    if ((version_ & 0xffffu) == 0 && version_ != 0) {
        bad(format("version field is 0x%08x: this looks like a byte-swapped (big-endian) GGUF file", version_),
            "tern reads little-endian GGUF files only");
    }
    if (version_ == 1) {
        bad("GGUF version 1 is no longer supported (tern reads versions 2 and 3)",
            "re-convert the model with a current converter");
    }
    if (version_ != 2 && version_ != 3) {
        bad(format("GGUF version %u is not supported (tern reads versions 2 and 3)", version_),
            "the file is corrupt, or was written by a newer GGUF writer than tern knows");
    }

    const uint64_t n_tensors = cur.u64("tensor count");
    const uint64_t n_kv      = cur.u64("metadata count");
    if (n_tensors > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        n_tensors > cur.remaining() / k_min_info_bytes) {
        cur.runs_past_end(format("tensor count %llu cannot fit in the %zu bytes after the header",
                                 static_cast<unsigned long long>(n_tensors), cur.remaining()));
    }
    if (n_kv > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || n_kv > cur.remaining() / k_min_kv_bytes) {
        cur.runs_past_end(format("metadata count %llu cannot fit in the %zu bytes after the header",
                                 static_cast<unsigned long long>(n_kv), cur.remaining()));
    }

    // --- metadata ---
    // Counts are only bounded by the file size here; reserving that much up front would let a
    // corrupt count in a large file allocate several times the file size (§1.9 check 1).
    constexpr uint64_t k_max_reserve = 4096;
    kvs_.reserve(static_cast<size_t>(std::min(n_kv, k_max_reserve)));
    std::unordered_set<std::string_view> seen_keys;
    for (uint64_t i = 0; i < n_kv; ++i) {
        GgufKv kv;
        kv.file_offset = cur.pos();
        kv.key         = cur.string(format("metadata key #%llu", static_cast<unsigned long long>(i)));
        if (kv.key.empty()) bad(format("metadata key #%llu is empty", static_cast<unsigned long long>(i)));
        if (!is_valid_utf8(kv.key)) {
            bad(format("metadata key #%llu ('%s') is not valid UTF-8", static_cast<unsigned long long>(i),
                       printable(kv.key).c_str()));
        }
        const std::string what = format("metadata key '%s'", printable(kv.key).c_str());
        if (!seen_keys.insert(kv.key).second) bad(format("duplicate %s", what.c_str()));
        const GgufType type = checked_type(cur.u32(what + " type"), what);
        if (type != GgufType::array) {
            kv.value = read_scalar(cur, type, what);
        } else {
            const GgufType elem = checked_type(cur.u32(what + " element type"), what + " array");
            if (elem == GgufType::array) bad(format("%s: nested arrays are not supported", what.c_str()));
            const uint64_t count = cur.u64(what + " array count");
            kv.value.type      = GgufType::array;
            kv.value.elem_type = elem;
            kv.value.count     = count;
            const size_t start = cur.pos();
            kv.value.data      = bytes_.data() + start;
            if (elem == GgufType::string) {
                if (count > cur.remaining() / 8) {
                    cur.runs_past_end(format("%s: array of %llu strings cannot fit in the %zu bytes left", what.c_str(),
                                             static_cast<unsigned long long>(count), cur.remaining()));
                }
                for (uint64_t j = 0; j < count; ++j) {
                    if (!cur.has_string()) {  // throws the precise message
                        cur.string(format("%s element %llu", what.c_str(), static_cast<unsigned long long>(j)));
                    }
                    cur.skip_string();
                }
            } else {
                const size_t es = gguf_type_size(elem);
                if (count > cur.remaining() / es) {
                    cur.runs_past_end(format("%s: array of %llu %s values (%zu bytes each) does not fit in the %zu "
                                             "bytes left in the file",
                                             what.c_str(), static_cast<unsigned long long>(count),
                                             std::string(gguf_type_name(elem)).c_str(), es, cur.remaining()));
                }
                cur.take(static_cast<size_t>(count) * es, what);
                if (elem == GgufType::boolean) {
                    for (uint64_t j = 0; j < count; ++j) {
                        if (kv.value.data[j] > 1) {
                            bad(format("%s element %llu: BOOL value is %u; expected 0 or 1", what.c_str(),
                                       static_cast<unsigned long long>(j), kv.value.data[j]));
                        }
                    }
                }
            }
            kv.value.n_bytes = cur.pos() - start;
        }
        kvs_.push_back(kv);
    }

    if (const GgufKv * a = find("general.alignment")) {
        if (a->value.type != GgufType::u32) {
            bad(format("metadata key 'general.alignment' has type %s; expected UINT32",
                       std::string(gguf_type_name(a->value.type)).c_str()));
        }
        alignment_ = load_le<uint32_t>(a->value.data);
        if (alignment_ < 8 || (alignment_ & (alignment_ - 1)) != 0) {
            bad(format("general.alignment is %u; expected a power of two >= 8", alignment_));
        }
    }

    // --- tensor directory ---
    tensors_.reserve(static_cast<size_t>(std::min(n_tensors, k_max_reserve)));
    std::unordered_set<std::string_view> seen_names;
    const bool bitnet_cpp_arch = [&] {
        const auto arch = get_string("general.architecture");
        return arch && (*arch == "bitnet-b1.58" || *arch == "bitnet-25");
    }();
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo t;
        t.name = cur.string(format("tensor #%llu name", static_cast<unsigned long long>(i)));
        const std::string what = format("tensor '%s'", printable(t.name).c_str());
        if (t.name.empty()) bad(format("tensor #%llu has an empty name", static_cast<unsigned long long>(i)));
        if (t.name.size() > k_gguf_max_tensor_name) {
            bad(format("%s: name is %zu bytes; at most %zu are allowed", what.c_str(), t.name.size(),
                       k_gguf_max_tensor_name));
        }
        if (!seen_names.insert(t.name).second) bad(format("duplicate %s", what.c_str()));
        t.n_dims = cur.u32(what + " n_dims");
        if (t.n_dims == 0 || t.n_dims > 4) bad(format("%s: n_dims is %u; expected 1..4", what.c_str(), t.n_dims));
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const auto v = static_cast<int64_t>(cur.u64(what + " dimension"));
            if (v < 1) bad(format("%s: dimension %u is %lld; expected >= 1", what.c_str(), d, static_cast<long long>(v)));
            t.ne[d] = v;
        }
        const uint32_t raw_type = cur.u32(what + " type");
        t.offset                = cur.u64(what + " offset");
        t.n_elements            = checked_elements(t.ne, t.n_dims, what);
        const auto traits       = dtype_traits(raw_type);
        if (!traits) {
            bad(format("%s has ggml type id %u, %s, which tern cannot read", what.c_str(), raw_type,
                       std::string(dtype_unsupported_name(raw_type, bitnet_cpp_arch)).c_str()),
                "supported types: f32 f16 bf16 q8_0 q4_0 q4_k q6_k i2_s tq1_0 tq2_0 q1_0 q2_0 pq2_0; "
                "re-quantize the model to one of them");
        }
        t.type = static_cast<DType>(raw_type);
        if (t.type == DType::i2_s) {
            if (t.ne[0] % 128 != 0) {
                bad(format("%s (i2_s): row length %lld is not a multiple of 128", what.c_str(),
                           static_cast<long long>(t.ne[0])));
            }
        } else if (t.ne[0] % traits->block_size != 0) {
            bad(format("%s (%s): row length %lld is not a multiple of the block size %u", what.c_str(),
                       std::string(traits->name).c_str(), static_cast<long long>(t.ne[0]), traits->block_size));
        }
        if (t.type != DType::q2_0) {  // q2_0 sizes are resolved below (g64 vs g128)
            const uint64_t n_units = (t.type == DType::i2_s) ? static_cast<uint64_t>(t.n_elements) / 4
                                                             : static_cast<uint64_t>(t.n_elements) / traits->block_size;
            const uint64_t unit_bytes = (t.type == DType::i2_s) ? 1 : traits->block_bytes;
            if (n_units > (std::numeric_limits<uint64_t>::max() / 4) / unit_bytes) {
                bad(format("%s: byte size overflows", what.c_str()));
            }
            t.n_bytes = static_cast<size_t>(n_units * unit_bytes + (t.type == DType::i2_s ? 32 : 0));
        }
        tensors_.push_back(t);
    }

    // --- data section ---
    const size_t dir_end = cur.pos();
    data_offset_         = n_tensors == 0 ? dir_end : static_cast<size_t>(pad_to(dir_end, alignment_));
    if (data_offset_ > file_size_) {
        Cursor(bytes_, options.partial).runs_past_end(format(
            "file is truncated: the data section starts at offset %zu, but the file ends at %llu", data_offset_,
            static_cast<unsigned long long>(file_size_)));
    }
    const uint64_t data_size = file_size_ - data_offset_;

    // Offsets in directory order are checked below; q2_0 group sizes need the distance to the next tensor.
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });

    // FORMATS.md §2.3: type 42 is mainline Q2_0 g64 or legacy PrismML g128; decide from the bytes
    // each tensor occupies, and require one answer for the whole file.
    int q2_group = 0;  // 0 = undecided, 64 or 128
    for (size_t k = 0; k < order.size(); ++k) {
        GgufTensorInfo & t = tensors_[order[k]];
        if (t.type != DType::q2_0) continue;
        const std::string what = format("tensor '%s'", printable(t.name).c_str());
        const bool     last    = k + 1 == order.size();
        if (t.offset > data_size) bad(format("%s: offset %llu is past the end of the data section (%llu bytes)", what.c_str(),
                                             static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(data_size)));
        const uint64_t avail = last ? data_size - t.offset : tensors_[order[k + 1]].offset - t.offset;
        const uint64_t s64   = static_cast<uint64_t>(t.n_elements) / 64 * 18;
        const uint64_t s128  = (t.ne[0] % 128 == 0) ? static_cast<uint64_t>(t.n_elements) / 128 * 34 : 0;
        // The last tensor may have lost some or all of its trailing padding (check 19 does not require
        // it), so any size from the unpadded to the padded one fits there.
        auto fits = [&](uint64_t s) {
            return s != 0 && (pad_to(s, alignment_) == avail || (last && s <= avail && avail <= pad_to(s, alignment_)));
        };
        const bool g64 = fits(s64), g128 = fits(s128);
        int group = 0;
        if (g64 && !g128) group = 64;
        if (g128 && !g64) group = 128;
        if (!g64 && !g128) {
            bad(format("%s (q2_0): occupies %llu bytes, which matches neither Q2_0 group size (g64: %llu, g128: %llu)",
                       what.c_str(), static_cast<unsigned long long>(avail), static_cast<unsigned long long>(s64),
                       static_cast<unsigned long long>(s128)));
        }
        if (group != 0) {
            if (q2_group != 0 && q2_group != group) {
                bad(format("%s (q2_0): group size %d disagrees with other q2_0 tensors (group size %d)", what.c_str(),
                           group, q2_group));
            }
            q2_group = group;
        }
    }
    for (auto & t : tensors_) {
        if (t.type != DType::q2_0) continue;
        if (q2_group == 128) {
            t.type    = DType::pq2_0;
            t.n_bytes = static_cast<size_t>(t.n_elements / 128 * 34);
        } else {
            t.n_bytes = static_cast<size_t>(t.n_elements / 64 * 18);
        }
    }

    uint64_t expected = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const GgufTensorInfo & t    = tensors_[i];
        const std::string      what = format("tensor '%s'", printable(t.name).c_str());
        if (t.offset % alignment_ != 0) {
            bad(format("%s: offset %llu is not a multiple of the alignment %u", what.c_str(),
                       static_cast<unsigned long long>(t.offset), alignment_));
        }
        if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
            if (options.partial && t.offset % alignment_ == 0) {
                throw Truncated{format("file is truncated: tensor '%s' needs bytes up to offset %llu, but the file "
                                       "ends at %llu", printable(t.name).c_str(),
                                       static_cast<unsigned long long>(data_offset_ + t.offset + t.n_bytes),
                                       static_cast<unsigned long long>(file_size_))};
            }
            bad(format("%s: data at offset %llu, %zu bytes long, lies outside the data section of %llu bytes",
                       what.c_str(), static_cast<unsigned long long>(t.offset), t.n_bytes,
                       static_cast<unsigned long long>(data_size)),
                "the file is truncated or its tensor directory is corrupt");
        }
        if (options.strict_offsets && t.offset != expected) {
            bad(format("%s has offset %llu, expected %llu (tensors must follow each other in directory order)",
                       what.c_str(), static_cast<unsigned long long>(t.offset),
                       static_cast<unsigned long long>(expected)),
                "the file may be corrupt, or its block sizes differ from the type table tern uses");
        }
        expected = t.offset + pad_to(t.n_bytes, alignment_);
    }
    for (size_t k = 1; k < order.size(); ++k) {  // non-overlap (needed when offsets are not strict)
        const GgufTensorInfo & a = tensors_[order[k - 1]];
        const GgufTensorInfo & b = tensors_[order[k]];
        if (a.offset + a.n_bytes > b.offset) {
            bad(format("tensor '%s' overlaps tensor '%s'", printable(a.name).c_str(), printable(b.name).c_str()));
        }
    }
}

const GgufKv * GgufFile::find(std::string_view key) const {
    for (const auto & kv : kvs_) {
        if (kv.key == key) return &kv;
    }
    return nullptr;
}

const GgufTensorInfo * GgufFile::find_tensor(std::string_view name) const {
    for (const auto & t : tensors_) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo & info) const {
    if (!truncation_.empty()) {
        bad(format("'%s': tensor '%s' cannot be read: %s", name_.c_str(), printable(info.name).c_str(), truncation_.c_str()),
            k_truncated_hint);
    }
    if (stream_) return read_streamed(data_offset_ + info.offset, info.n_bytes);
    return bytes_.subspan(data_offset_ + info.offset, info.n_bytes);
}

int64_t gguf_value_as_int(const GgufValue & v, std::string_view key) {
    switch (v.type) {
        case GgufType::u8:  return *v.data;
        case GgufType::i8:  return static_cast<int8_t>(*v.data);
        case GgufType::u16: return load_le<uint16_t>(v.data);
        case GgufType::i16: return load_le<int16_t>(v.data);
        case GgufType::u32: return load_le<uint32_t>(v.data);
        case GgufType::i32: return load_le<int32_t>(v.data);
        case GgufType::i64: return load_le<int64_t>(v.data);
        case GgufType::u64: {
            const uint64_t u = load_le<uint64_t>(v.data);
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                bad(format("metadata key '%.*s': value %llu is too large", static_cast<int>(key.size()), key.data(),
                           static_cast<unsigned long long>(u)));
            }
            return static_cast<int64_t>(u);
        }
        default:
            bad(format("metadata key '%.*s' has type %s; expected an integer", static_cast<int>(key.size()), key.data(),
                       std::string(gguf_type_name(v.type)).c_str()));
    }
}

double gguf_value_as_float(const GgufValue & v, std::string_view key) {
    if (v.type == GgufType::f32) return load_le<float>(v.data);
    if (v.type == GgufType::f64) return load_le<double>(v.data);
    bad(format("metadata key '%.*s' has type %s; expected FLOAT32 or FLOAT64", static_cast<int>(key.size()), key.data(),
               std::string(gguf_type_name(v.type)).c_str()));
}

std::string_view gguf_value_as_string(const GgufValue & v) {
    return {reinterpret_cast<const char *>(v.data), v.n_bytes};
}

namespace {
[[noreturn]] void wrong_type(std::string_view key, const GgufValue & v, const char * expected) {
    std::string got(gguf_type_name(v.type));
    if (v.type == GgufType::array) got += format(" of %s", std::string(gguf_type_name(v.elem_type)).c_str());
    bad(format("metadata key '%.*s' has type %s; expected %s", static_cast<int>(key.size()), key.data(), got.c_str(),
               expected));
}
}  // namespace

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::string) wrong_type(key, kv->value, "STRING");
    return gguf_value_as_string(kv->value);
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (!gguf_type_is_integer(kv->value.type)) wrong_type(key, kv->value, "an integer");
    return gguf_value_as_int(kv->value, key);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::f32 && kv->value.type != GgufType::f64) wrong_type(key, kv->value, "FLOAT32 or FLOAT64");
    return gguf_value_as_float(kv->value, key);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::boolean) wrong_type(key, kv->value, "BOOL");
    return *kv->value.data != 0;
}

std::optional<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::array || kv->value.elem_type != GgufType::string) {
        wrong_type(key, kv->value, "ARRAY of STRING");
    }
    std::vector<std::string_view> out;
    out.reserve(static_cast<size_t>(kv->value.count));
    const uint8_t * p = kv->value.data;
    for (uint64_t i = 0; i < kv->value.count; ++i) {  // bounds were checked when the file was parsed
        const uint64_t len = load_le<uint64_t>(p);
        out.emplace_back(reinterpret_cast<const char *>(p + 8), static_cast<size_t>(len));
        p += 8 + len;
    }
    return out;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::array || kv->value.elem_type != GgufType::f32) wrong_type(key, kv->value, "ARRAY of FLOAT32");
    std::vector<float> out(static_cast<size_t>(kv->value.count));
    if (!out.empty()) std::memcpy(out.data(), kv->value.data, out.size() * 4);
    return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
    const GgufKv * kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != GgufType::array || !gguf_type_is_integer(kv->value.elem_type)) {
        wrong_type(key, kv->value, "ARRAY of an integer type");
    }
    const size_t         es = gguf_type_size(kv->value.elem_type);
    std::vector<int64_t> out(static_cast<size_t>(kv->value.count));
    for (size_t i = 0; i < out.size(); ++i) {
        GgufValue e;
        e.type    = kv->value.elem_type;
        e.data    = kv->value.data + i * es;
        e.n_bytes = es;
        out[i]    = gguf_value_as_int(e, key);
    }
    return out;
}

std::string GgufFile::describe(const GgufValue & v, size_t max_items) {
    auto scalar = [](GgufType t, const uint8_t * p, size_t n) -> std::string {
        GgufValue e;
        e.type    = t;
        e.data    = p;
        e.n_bytes = n;
        switch (t) {
            case GgufType::f32: return format("%g", static_cast<double>(load_le<float>(p)));
            case GgufType::f64: return format("%g", load_le<double>(p));
            case GgufType::boolean: return *p ? "true" : "false";
            case GgufType::string: {
                std::string s = printable(gguf_value_as_string(e));
                return "\"" + s + "\"";
            }
            // UINT64 above INT64_MAX is a legal value; only the int64 getter has to refuse it.
            case GgufType::u64: return format("%llu", static_cast<unsigned long long>(load_le<uint64_t>(p)));
            default: return format("%lld", static_cast<long long>(gguf_value_as_int(e, "")));
        }
    };
    if (v.type != GgufType::array) return scalar(v.type, v.data, v.n_bytes);
    std::string out = format("[%s x %llu]", std::string(gguf_type_name(v.elem_type)).c_str(),
                             static_cast<unsigned long long>(v.count));
    const uint8_t * p = v.data;
    out += " [";
    for (uint64_t i = 0; i < v.count && i < max_items; ++i) {
        if (i) out += ", ";
        if (v.elem_type == GgufType::string) {
            const uint64_t len = load_le<uint64_t>(p);
            out += scalar(GgufType::string, p + 8, static_cast<size_t>(len));
            p += 8 + len;
        } else {
            const size_t es = gguf_type_size(v.elem_type);
            out += scalar(v.elem_type, p, es);
            p += es;
        }
    }
    if (v.count > max_items) out += ", ...";
    out += "]";
    return out;
}

}  // namespace tern
