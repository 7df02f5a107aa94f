// Safetensors parsing and validation, and the folder-level (sharded) view; see safetensors.h.
#include "convert/safetensors.h"

#include "core/json_strict.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/log.h"
#include "core/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>

namespace tern {
namespace {

using json = nlohmann::json;
using nlohmann::json_sax;

// The reference implementation refuses headers above 100 MB; real ones are a few hundred kB.
constexpr uint64_t k_max_header_bytes = 100'000'000;
// A valid header nests three levels deep (root -> entry -> shape array); allow some slack.
constexpr int k_max_json_depth = 8;

struct DTypeName {
    std::string_view name;
    StDType          type;
};
constexpr DTypeName k_dtypes[] = {
    {"U8", StDType::u8}, {"I8", StDType::i8}, {"BF16", StDType::bf16}, {"F16", StDType::f16}, {"F32", StDType::f32},
};
// Valid safetensors dtypes that tern does not read.
constexpr std::string_view k_unsupported_dtypes[] = {
    "BOOL", "I16", "U16", "I32", "U32", "I64", "U64", "F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
    "F4", "C64",
};

[[noreturn]] void bad(const std::string & file, const std::string & msg, const std::string & hint = {}) {
    fail(ErrorKind::invalid_model, format("safetensors '%s': %s", file.c_str(), msg.c_str()), hint);
}

bool as_u64(const json & v, uint64_t & out) {
    if (!v.is_number_unsigned()) return false;
    out = v.get<uint64_t>();
    return true;
}

StTensor parse_entry(const std::string & file, const std::string & name, const json & entry, uint64_t data_size,
                     const uint8_t * data, uint64_t & begin_out, uint64_t & end_out) {
    const std::string shown = printable(name);
    const char *      n     = shown.c_str();
    if (!entry.is_object()) bad(file, format("tensor '%s': entry is %s, expected an object", n, json_excerpt(entry).c_str()));
    auto field = [&](const char * key) -> const json & {
        auto it = entry.find(key);
        if (it == entry.end()) bad(file, format("tensor '%s': missing field '%s'", n, key));
        return *it;
    };
    StTensor t;
    t.name = name;

    const json & dtype = field("dtype");
    if (!dtype.is_string()) bad(file, format("tensor '%s': dtype is %s, expected a string", n, json_excerpt(dtype).c_str()));
    const std::string dname = printable(dtype.get<std::string>(), 40);
    bool              known = false;
    for (const auto & d : k_dtypes) {
        if (d.name == dname) t.dtype = d.type, known = true;
    }
    if (!known) {
        for (std::string_view u : k_unsupported_dtypes) {
            if (u == dname) {
                fail(ErrorKind::unsupported,
                     format("safetensors '%s': tensor '%s' has dtype %s, which tern does not read", file.c_str(), n,
                            dname.c_str()),
                     "supported dtypes: U8, I8, BF16, F16, F32");
            }
        }
        bad(file, format("tensor '%s': unknown dtype '%s'", n, dname.c_str()));
    }

    const json & shape = field("shape");
    if (!shape.is_array()) bad(file, format("tensor '%s': shape is %s, expected an array", n, json_excerpt(shape).c_str()));
    uint64_t n_elem = 1;
    for (const json & d : shape) {
        uint64_t v = 0;
        if (!as_u64(d, v)) bad(file, format("tensor '%s': shape %s has an entry that is not an integer >= 0", n, json_excerpt(shape).c_str()));
        if (v > static_cast<uint64_t>(INT64_MAX) || (v != 0 && n_elem > static_cast<uint64_t>(INT64_MAX) / v)) {
            bad(file, format("tensor '%s': shape %s overflows", n, json_excerpt(shape).c_str()));
        }
        n_elem *= v;
        t.shape.push_back(static_cast<int64_t>(v));
    }
    t.n_elements = static_cast<int64_t>(n_elem);

    const json & offs = field("data_offsets");
    uint64_t     begin = 0, end = 0;
    if (!offs.is_array() || offs.size() != 2 || !as_u64(offs[0], begin) || !as_u64(offs[1], end)) {
        bad(file, format("tensor '%s': data_offsets %s, expected [begin, end] with integers >= 0", n, json_excerpt(offs).c_str()));
    }
    if (end < begin) bad(file, format("tensor '%s': data_offsets [%llu, %llu] end before begin", n, (unsigned long long) begin, (unsigned long long) end));
    if (end > data_size) {
        bad(file, format("tensor '%s': data_offsets [%llu, %llu] run past the data region (%llu bytes)", n,
                         (unsigned long long) begin, (unsigned long long) end, (unsigned long long) data_size),
            "the file is truncated");
    }
    const uint64_t elem = st_dtype_size(t.dtype);
    if (n_elem > UINT64_MAX / elem || end - begin != n_elem * elem) {
        bad(file, format("tensor '%s': %s %s needs %llu bytes, data_offsets [%llu, %llu] hold %llu", n, dname.c_str(),
                         t.shape_string().c_str(), (unsigned long long) (n_elem * elem), (unsigned long long) begin,
                         (unsigned long long) end, (unsigned long long) (end - begin)));
    }
    t.data    = {data + begin, static_cast<size_t>(end - begin)};
    begin_out = begin;
    end_out   = end;
    return t;
}

// Reads the header as a stream of SAX events and hands each root entry (a tensor's small object, or
// __metadata__) to on_entry as a little JSON value of its own: the header is never held as one
// DOM (a 50 MB header of a million tensors would take over a gigabyte) and no step rescans what
// came before. Keys repeated inside one object are errors (nlohmann would keep the last one).
class HeaderReader : public json_sax<json> {
public:
    using OnEntry = std::function<void(std::string && key, json && value)>;
    HeaderReader(const std::string & file, OnEntry on_entry) : file_(file), on_entry_(std::move(on_entry)) {}

    std::string error;  // set when a handler stops the parse

    bool null() override { return value(json(nullptr)); }
    bool boolean(bool b) override { return value(json(b)); }
    bool number_integer(number_integer_t v) override { return value(json(v)); }
    bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
    bool number_float(number_float_t v, const string_t &) override { return value(json(v)); }
    bool string(string_t & v) override { return value(json(std::move(v))); }
    bool binary(binary_t &) override { return stop("binary values are not JSON"); }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t & k) override {
        if (stack_.empty()) {  // a root key: a tensor name or __metadata__
            root_key_ = std::move(k);
            return true;
        }
        if (stack_.back()->contains(k)) {
            return stop(format("tensor '%s': the key \"%s\" appears twice in one object", printable(root_key_).c_str(),
                               printable(k).c_str()));
        }
        pending_key_ = std::move(k);
        return true;
    }
    bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override {
        return stop("the header is not valid JSON");
    }

private:
    bool stop(std::string message) {
        if (error.empty()) error = std::move(message);
        return false;
    }
    // A scalar: either inside the entry being built, or an entry of its own.
    bool value(json && v) {
        if (depth_ == 0) return stop("the header is not a JSON object");
        if (stack_.empty()) {
            on_entry_(std::move(root_key_), std::move(v));
            return true;
        }
        add(std::move(v));
        return true;
    }
    void add(json && v) {
        json & top = *stack_.back();
        if (top.is_object()) {
            top[pending_key_] = std::move(v);
        } else {
            top.push_back(std::move(v));
        }
    }
    bool open(json && container) {
        if (++depth_ > k_max_json_depth) return stop(format("the header nests deeper than %d levels", k_max_json_depth));
        if (depth_ == 1) {
            if (!container.is_object()) return stop("the header is a JSON array, expected an object");
            return true;
        }
        if (stack_.empty()) {
            entry_ = std::move(container);
            stack_.push_back(&entry_);
        } else {
            json & top = *stack_.back();
            json * child = nullptr;
            if (top.is_object()) {
                top[pending_key_] = std::move(container);
                child             = &top[pending_key_];
            } else {
                top.push_back(std::move(container));
                child = &top.back();
            }
            stack_.push_back(child);
        }
        return true;
    }
    bool close() {
        --depth_;
        if (stack_.empty()) return true;  // the root object ended
        stack_.pop_back();
        if (stack_.empty()) on_entry_(std::move(root_key_), std::move(entry_));
        return true;
    }

    const std::string &  file_;
    OnEntry              on_entry_;
    int                  depth_ = 0;
    std::string          root_key_, pending_key_;
    json                 entry_;
    std::vector<json *>  stack_;  // the containers of the entry being built, innermost last
};

}  // namespace

std::string_view st_dtype_name(StDType type) {
    for (const auto & d : k_dtypes) {
        if (d.type == type) return d.name;
    }
    return "?";
}

size_t st_dtype_size(StDType type) {
    switch (type) {
        case StDType::u8: case StDType::i8: return 1;
        case StDType::bf16: case StDType::f16: return 2;
        case StDType::f32: return 4;
    }
    return 1;
}

bool st_dtype_is_float(StDType type) { return type == StDType::bf16 || type == StDType::f16 || type == StDType::f32; }

std::string StTensor::shape_string() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

SafetensorsFile SafetensorsFile::open(const std::string & path) {
    SafetensorsFile f;
    f.name_    = path;
    f.mapping_ = MappedFile(path);
    f.bytes_   = f.mapping_.bytes();
    f.parse();
    return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
    SafetensorsFile f;
    f.name_  = std::move(name);
    f.owned_ = std::move(bytes);
    f.bytes_ = f.owned_;
    f.parse();
    return f;
}

void SafetensorsFile::parse() {
    const uint64_t size = bytes_.size();
    if (size < 8) {
        bad(name_, format("file is %llu bytes; a safetensors file starts with an 8-byte header length",
                          (unsigned long long) size),
            "the file is truncated or not a safetensors file");
    }
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes_[static_cast<size_t>(i)];
    if (header_len > size - 8) {
        bad(name_, format("header length %llu runs past the end of the file (%llu bytes, so at most %llu)",
                          (unsigned long long) header_len, (unsigned long long) size, (unsigned long long) (size - 8)),
            "the file is truncated or not a safetensors file");
    }
    if (header_len > k_max_header_bytes) {
        bad(name_, format("header length %llu exceeds the %llu-byte limit", (unsigned long long) header_len,
                          (unsigned long long) k_max_header_bytes));
    }
    const std::string_view text(reinterpret_cast<const char *>(bytes_.data() + 8), static_cast<size_t>(header_len));
    if (json_nesting_depth(text) > k_max_json_depth) {
        bad(name_, format("header: JSON nests deeper than %d levels", k_max_json_depth));
    }
    const uint64_t         data_size = size - 8 - header_len;
    const uint8_t *        data      = bytes_.data() + 8 + header_len;
    struct Range {
        uint64_t begin, end;
        size_t   index;
    };
    std::vector<Range> ranges;
    bool               seen_metadata = false;
    HeaderReader       reader(name_, [&](std::string && key, json && value) {
        if (key == "__metadata__") {
            if (seen_metadata) bad(name_, "the key \"__metadata__\" appears twice");
            seen_metadata = true;
            if (!value.is_object()) bad(name_, format("__metadata__ is %s, expected an object of strings", json_excerpt(value).c_str()));
            for (auto & [mk, mv] : value.items()) {
                if (!mv.is_string()) {
                    bad(name_, format("__metadata__ value '%s' is %s, expected a string", printable(mk).c_str(),
                                      json_excerpt(mv).c_str()));
                }
                metadata_[mk] = mv.get<std::string>();
            }
            return;
        }
        if (key.empty()) bad(name_, "a tensor has an empty name");
        uint64_t begin = 0, end = 0;
        tensors_.push_back(parse_entry(name_, key, value, data_size, data, begin, end));
        ranges.push_back({begin, end, tensors_.size() - 1});
    });
    if (!json::sax_parse(text.begin(), text.end(), &reader)) {
        bad(name_, reader.error.empty() ? std::string("the header is not valid JSON") : reader.error,
            "the file is truncated or damaged");
    }
    // Tensor names must be unique (sorted copies of the names: no per-name hash set to hold).
    {
        std::vector<std::string_view> names;
        names.reserve(tensors_.size());
        for (const auto & t : tensors_) names.emplace_back(t.name);
        std::sort(names.begin(), names.end());
        for (size_t i = 1; i < names.size(); ++i) {
            if (names[i] == names[i - 1]) {
                bad(name_, format("header: the key \"%s\" appears twice in one object", printable(names[i]).c_str()));
            }
        }
    }
    // No two tensors may share bytes (empty tensors occupy nothing).
    std::sort(ranges.begin(), ranges.end(), [](const Range & a, const Range & b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    const Range * prev = nullptr;
    for (const Range & r : ranges) {
        if (r.begin == r.end) continue;
        if (prev && r.begin < prev->end) {
            bad(name_, format("tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                              printable(tensors_[prev->index].name).c_str(), (unsigned long long) prev->begin,
                              (unsigned long long) prev->end, printable(tensors_[r.index].name).c_str(),
                              (unsigned long long) r.begin, (unsigned long long) r.end));
        }
        prev = &r;
    }
    std::vector<StTensor> ordered;
    ordered.reserve(tensors_.size());
    for (const Range & r : ranges) ordered.push_back(std::move(tensors_[r.index]));
    tensors_ = std::move(ordered);
}

const StTensor * SafetensorsFile::find(std::string_view name) const {
    for (const auto & t : tensors_) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_dir(const std::string & dir) {
    namespace fs = std::filesystem;
    SafetensorsCheckpoint ckpt;
    const fs::path        root(dir);
    std::error_code       ec;
    if (!fs::is_directory(root, ec)) {
        fail(ErrorKind::io, format("checkpoint folder '%s' does not exist or is not a folder", dir.c_str()),
             "pass the folder that holds config.json and the *.safetensors files");
    }
    const fs::path index_path = root / "model.safetensors.index.json";
    if (fs::exists(index_path, ec)) {
        const std::string index_name = index_path.string();
        const std::string text       = read_file_text(index_name);
        const json        index      = parse_json_strict(text, "checkpoint index '" + index_name + "'");
        if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
            bad(index_name, "expected an object with a \"weight_map\" object (tensor name -> shard file)");
        }
        std::map<std::string, SafetensorsFile *> shards;
        for (const auto & [tensor, shard] : index["weight_map"].items()) {
            if (!shard.is_string()) bad(index_name, format("weight_map['%s'] is %s, expected a file name", printable(tensor).c_str(), json_excerpt(shard).c_str()));
            const std::string file = shard.get<std::string>();
            if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos || file == "." || file == "..") {
                bad(index_name, format("weight_map['%s'] = '%s' is not a plain file name in the checkpoint folder", printable(tensor).c_str(), printable(file).c_str()));
            }
            auto it = shards.find(file);
            if (it == shards.end()) {
                ckpt.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open((root / file).string())));
                it = shards.emplace(file, ckpt.files_.back().get()).first;
            }
            const StTensor * t = it->second->find(tensor);
            if (!t) {
                bad(it->second->path(), format("the index lists tensor '%s' in this shard, but the shard does not contain it", printable(tensor).c_str()));
            }
            ckpt.index_.emplace(tensor, t);
        }
        for (const auto & f : ckpt.files_) {
            for (const auto & t : f->tensors()) {
                if (!ckpt.index_.count(t.name)) {
                    TERN_LOG_WARN("convert: tensor '%s' in '%s' is not listed in the index; ignoring it", printable(t.name).c_str(), f->path().c_str());
                }
            }
        }
        return ckpt;
    }
    fs::path single = root / "model.safetensors";
    if (!fs::exists(single, ec)) {
        std::vector<fs::path> found;
        for (const auto & e : fs::directory_iterator(root, ec)) {
            if (e.path().extension() == ".safetensors") found.push_back(e.path());
        }
        if (found.size() != 1) {
            fail(ErrorKind::io,
                 format("checkpoint folder '%s' has no model.safetensors.index.json and %zu *.safetensors files, expected 1",
                        dir.c_str(), found.size()),
                 "pass the Hugging Face model folder (config.json, tokenizer.json, model*.safetensors)");
        }
        single = found[0];
    }
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single.string())));
    for (const auto & t : ckpt.files_.back()->tensors()) ckpt.index_.emplace(t.name, &t);
    return ckpt;
}

const StTensor * SafetensorsCheckpoint::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
    std::vector<std::string> out;
    for (const auto & [name, t] : index_) out.push_back(name);
    return out;
}

void st_read_f32(const StTensor & t, int64_t first, int64_t count, float * out) {
    TERN_ASSERT(first >= 0 && count >= 0 && first + count <= t.n_elements, "read [%lld, +%lld) of '%s'",
                (long long) first, (long long) count, t.name.c_str());
    const uint8_t * p = t.data.data();
    switch (t.dtype) {
        case StDType::bf16:
            for (int64_t i = 0; i < count; ++i) {
                const uint8_t * q = p + 2 * (first + i);
                out[i]            = bf16_to_fp32(static_cast<uint16_t>(q[0] | (q[1] << 8)));
            }
            return;
        case StDType::f16:
            for (int64_t i = 0; i < count; ++i) {
                const uint8_t * q = p + 2 * (first + i);
                out[i]            = fp16_to_fp32(static_cast<uint16_t>(q[0] | (q[1] << 8)));
            }
            return;
        case StDType::f32:
            std::memcpy(out, p + 4 * first, static_cast<size_t>(count) * 4);
            return;
        default: TERN_ASSERT(false, "st_read_f32 on %s tensor '%s'", std::string(st_dtype_name(t.dtype)).c_str(), t.name.c_str());
    }
}

}  // namespace tern
