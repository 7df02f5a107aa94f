// quantize_model: the tensor plan (which type each tensor becomes), validation, and the lazy,
// multi-threaded rewrite; see quantize_model.h.
#include "convert/quantize_model.h"

#include "core/error.h"
#include "core/llama_ftype.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quant/block_formats.h"
#include "quant/ternarize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace tern {
namespace {

namespace fs = std::filesystem;

struct TypeName {
    const char * name;
    DType        type;
};
constexpr TypeName k_type_names[] = {
    {"F32", DType::f32},     {"F16", DType::f16},     {"BF16", DType::bf16},   {"Q8_0", DType::q8_0},
    {"Q4_0", DType::q4_0},   {"Q4_K", DType::q4_k},   {"Q4_K_S", DType::q4_k}, {"Q4_K_M", DType::q4_k},
    {"Q6_K", DType::q6_k},   {"TQ2_0", DType::tq2_0}, {"TQ1_0", DType::tq1_0}, {"I2_S", DType::i2_s},
};

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_ternary(DType t) { return t == DType::i2_s || t == DType::tq2_0 || t == DType::tq1_0; }
std::string type_str(DType t) { return std::string(dtype_name(t)); }

// Elements a row must be a multiple of for type t.
int64_t row_multiple(DType t) { return t == DType::i2_s ? 128 : dtype_traits(t).block_size; }

struct Plan {
    const GgufTensorInfo * info = nullptr;
    DType                  to   = DType::f32;
};

class Planner {
public:
    Planner(const GgufFile & f, const QuantizeOptions & o) : f_(f), o_(o), has_output_(f.find_tensor("output.weight")) {}

    std::vector<Plan> run() const {
        std::vector<Plan> plan;
        for (const auto & t : f_.tensors()) plan.push_back({&t, choose(t)});
        return plan;
    }

private:
    DType choose(const GgufTensorInfo & t) const {
        const std::string name(t.name);
        const bool        matrix = t.n_dims >= 2 && t.ne[1] > 1 && name.ends_with(".weight");
        if (!matrix) return t.type;
        const bool is_embd = name == "token_embd.weight", is_head = name == "output.weight" || (is_embd && !has_output_);
        if (is_embd && o_.token_embedding_type) return explicit_type(t, *o_.token_embedding_type, "--token-embedding-type");
        if (is_head && o_.output_tensor_type) return explicit_type(t, *o_.output_tensor_type, "--output-tensor-type");
        if (!o_.type) return t.type;  // COPY
        const DType type = *o_.type;
        DType       want = type;
        if (is_head) {
            want = is_ternary(type) ? t.type : (type == DType::q8_0 || is_float(type)) ? type : DType::q6_k;
        } else if (is_embd) {
            want = is_ternary(type) ? t.type : type;
        }
        return fitting_default(t, want);
    }

    DType explicit_type(const GgufTensorInfo & t, DType want, const char * flag) const {
        if (t.ne[0] % row_multiple(want) != 0) {
            fail(ErrorKind::invalid_argument,
                 format("%s %s: tensor '%.*s' has rows of %lld values, not a multiple of %lld", flag, type_str(want).c_str(),
                        static_cast<int>(t.name.size()), t.name.data(), static_cast<long long>(t.ne[0]),
                        static_cast<long long>(row_multiple(want))),
                 "choose a type with smaller blocks (q8_0, q4_0 or f16)");
        }
        return want;
    }

    static DType fitting_default(const GgufTensorInfo & t, DType want) {
        DType type = want;
        while (t.ne[0] % row_multiple(type) != 0) {
            const DType next = type == DType::q4_k   ? DType::q4_0
                               : type == DType::q6_k ? DType::q8_0
                               : is_ternary(type)    ? t.type
                                                     : DType::f16;
            TERN_LOG_WARN("quantize: tensor '%.*s' has rows of %lld values, not a multiple of %lld for %s; using %s",
                          static_cast<int>(t.name.size()), t.name.data(), static_cast<long long>(t.ne[0]),
                          static_cast<long long>(row_multiple(type)), type_str(type).c_str(), type_str(next).c_str());
            type = next;
        }
        return type;
    }

    const GgufFile &        f_;
    const QuantizeOptions & o_;
    bool                    has_output_;
};

// Re-encodes one metadata value for the writer (the bytes after the type field).
std::vector<uint8_t> encode_value(const GgufValue & v) {
    std::vector<uint8_t> out;
    auto put = [&out](const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        out.insert(out.end(), b, b + n);
    };
    if (v.type == GgufType::string) {
        const uint64_t n = v.n_bytes;
        put(&n, 8);
    } else if (v.type == GgufType::array) {
        const auto elem = static_cast<uint32_t>(v.elem_type);
        put(&elem, 4);
        put(&v.count, 8);
    }
    put(v.data, v.n_bytes);  // strings in an array keep their own length prefixes
    return out;
}

void check_paths(const QuantizeOptions & o) {
    if (o.input_path.empty() || o.output_path.empty()) fail(ErrorKind::invalid_argument, "quantize: give IN and OUT files");
    std::error_code ec;
    if (fs::exists(o.output_path, ec)) {
        if (!fs::is_regular_file(o.output_path, ec)) {
            fail(ErrorKind::invalid_argument, format("'%s' exists and is not a regular file; refusing to replace it",
                                                     o.output_path.c_str()));
        }
        if (fs::equivalent(o.input_path, o.output_path, ec)) {
            fail(ErrorKind::invalid_argument, format("OUT '%s' is the input file", o.output_path.c_str()),
                 "write to a new file; the input is read while the output is written");
        }
    }
}

// Float rows [first, first + count) of a tensor (any readable type), checked to be finite.
void read_rows(const GgufFile & f, const GgufTensorInfo & t, int64_t first, int64_t count, float * out) {
    const auto data = f.tensor_data(t);
    for (int64_t r = 0; r < count; ++r) {
        float * row = out + r * t.ne[0];
        dequantize_tensor_row(t.type, data, t.n_elements, t.ne[0], first + r, row);
        for (int64_t i = 0; i < t.ne[0]; ++i) {
            if (!std::isfinite(row[i])) {
                fail(ErrorKind::invalid_model,
                     format("tensor '%.*s' has a non-finite value (%g) in row %lld", static_cast<int>(t.name.size()),
                            t.name.data(), static_cast<double>(row[i]), static_cast<long long>(first + r)),
                     "the model file is damaged");
            }
        }
    }
}

void fill(const GgufFile & f, const Plan & p, ThreadPool & pool, std::span<uint8_t> dst) {
    const GgufTensorInfo & t = *p.info;
    if (p.to == t.type) {
        const auto src = f.tensor_data(t);
        std::memcpy(dst.data(), src.data(), src.size());
        return;
    }
    const int64_t k = t.ne[0], rows = t.rows();
    if (is_ternary(p.to)) {  // the whole tensor at once: one absmean scale
        std::vector<float> x(static_cast<size_t>(t.n_elements));
        pool.parallel_for(rows, 64, [&](int64_t b, int64_t e, int) { read_rows(f, t, b, e - b, x.data() + b * k); });
        quantize_ternary_tensor(p.to, x.data(), rows, k, dst);
        return;
    }
    const size_t row_bytes = dtype_row_bytes(p.to, k);
    pool.parallel_for(rows, 16, [&](int64_t b, int64_t e, int) {
        std::vector<float> row(static_cast<size_t>(k));
        for (int64_t r = b; r < e; ++r) {
            read_rows(f, t, r, 1, row.data());
            quantize_row(p.to, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, k);
        }
    });
}

}  // namespace

std::optional<DType> parse_quantize_type(std::string_view name, std::string_view what) {
    std::string upper(name);
    for (char & c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper == "COPY") return std::nullopt;
    for (const auto & tn : k_type_names) {
        if (upper == tn.name) return tn.type;
    }
    fail(ErrorKind::invalid_argument, format("%.*s: unknown type '%.*s'", static_cast<int>(what.size()), what.data(),
                                             static_cast<int>(name.size()), name.data()),
         "types: " + quantize_type_names());
}

std::string quantize_type_names() {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_K (= Q4_K_S, Q4_K_M), Q6_K, TQ2_0, TQ1_0, I2_S, COPY";
}

std::vector<QuantizedTensor> quantize_model(const QuantizeOptions & o) {
    check_paths(o);
    return with_context(format("cannot quantize '%s'", o.input_path.c_str()), [&] {
        const GgufFile          f    = GgufFile::open(o.input_path);
        const std::vector<Plan> plan = Planner(f, o).run();
        std::vector<QuantizedTensor> report;
        for (const Plan & p : plan) {
            const GgufTensorInfo & t = *p.info;
            if (p.to != t.type && !is_float(t.type) && !(is_ternary(t.type) && is_ternary(p.to)) && !o.allow_requantize) {
                fail(ErrorKind::invalid_argument,
                     format("tensor '%.*s' is already quantized (%s); writing it as %s would quantize it twice",
                            static_cast<int>(t.name.size()), t.name.data(), type_str(t.type).c_str(), type_str(p.to).c_str()),
                     "pass --allow-requantize to do it anyway, or start from an F16/BF16/F32 model");
            }
            report.push_back({std::string(t.name), t.type, p.to, t.n_bytes, dtype_tensor_bytes(p.to, t.ne[0], t.n_elements)});
        }

        GgufWriter w;
        for (const auto & kv : f.kvs()) {  // in file order; general.file_type keeps its place
            if (kv.key == "general.file_type" && o.type) {
                w.set_u32("general.file_type", llama_file_type(*o.type));
            } else {
                w.set_raw(std::string(kv.key), kv.value.type, encode_value(kv.value));
            }
        }
        if (o.type && !w.has("general.file_type")) w.set_u32("general.file_type", llama_file_type(*o.type));
        ThreadPool pool(o.threads);
        for (const Plan & p : plan) {
            const GgufTensorInfo & t = *p.info;
            std::vector<int64_t>   dims(t.ne.begin(), t.ne.begin() + t.n_dims);
            w.add_tensor(std::string(t.name), p.to, std::move(dims), [&f, &pool, p](std::span<uint8_t> dst) {
                fill(f, p, pool, dst);
            });
        }
        w.write_file(o.output_path, o.progress);
        return report;
    });
}

}  // namespace tern
