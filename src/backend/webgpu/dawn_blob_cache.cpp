// Dawn's blob cache in files (dawn_blob_cache.h).
#include "backend/webgpu/dawn_blob_cache.h"

#include "core/error.h"
#include "core/fnv1a.h"
#include "core/output_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tern {

namespace {

constexpr char     k_magic[8]   = {'t', 'e', 'r', 'n', 'b', 'l', 'b', '1'};
constexpr size_t   k_header     = 8 + 3 * 8;  // magic, key size, value size, checksum
void put_u64(std::vector<uint8_t> & out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get_u64(const uint8_t * p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

}  // namespace

DawnBlobCache::DawnBlobCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    uint64_t bytes = 0;
    for (auto it = std::filesystem::directory_iterator(dir_, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
        std::error_code size_ec;
        const auto      size = it->file_size(size_ec);
        if (!size_ec) bytes += size;
    }
    bytes_ = bytes;
}

std::string DawnBlobCache::path_of(const uint8_t * key, size_t key_size) const {
    return format("%s/%016llx-%zu.blob", dir_.c_str(), static_cast<unsigned long long>(fnv1a(key, key_size)), key_size);
}

std::vector<uint8_t> DawnBlobCache::read(const uint8_t * key, size_t key_size) const {
    std::vector<uint8_t> file;
    std::FILE *          f = std::fopen(path_of(key, key_size).c_str(), "rb");
    if (!f) return {};
    uint8_t chunk[1 << 16];
    size_t  n;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0 && file.size() <= max_bytes_) file.insert(file.end(), chunk, chunk + n);
    std::fclose(f);
    if (file.size() < k_header || std::memcmp(file.data(), k_magic, 8) != 0) return {};
    const uint64_t ks = get_u64(&file[8]), vs = get_u64(&file[16]), sum = get_u64(&file[24]);
    if (ks != key_size || vs == 0 || file.size() != k_header + ks + vs) return {};
    const uint8_t * stored_key = file.data() + k_header;
    if (std::memcmp(stored_key, key, key_size) != 0) return {};
    if (fnv1a(stored_key + ks, vs, fnv1a(stored_key, ks)) != sum) return {};
    return {file.begin() + static_cast<std::ptrdiff_t>(k_header + ks), file.end()};
}

size_t DawnBlobCache::load(const uint8_t * key, size_t key_size, uint8_t * value, size_t value_size) {
    const std::string name = path_of(key, key_size);
    if (value_size == 0 || value == nullptr) {
        std::vector<uint8_t> v = read(key, key_size);
        if (v.empty()) {
            ++misses_;
            return 0;
        }
        const size_t size = v.size();
        std::lock_guard<std::mutex> lock(mutex_);
        sized_[name] = std::move(v);
        return size;
    }
    std::vector<uint8_t> v;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = sized_.find(name); it != sized_.end()) {
            v = std::move(it->second);
            sized_.erase(it);
        }
    }
    if (v.empty()) v = read(key, key_size);
    if (v.size() != value_size) return v.size();  // (Dawn takes another size as a miss)
    std::memcpy(value, v.data(), v.size());
    ++hits_;
    return v.size();
}

void DawnBlobCache::store(const uint8_t * key, size_t key_size, const uint8_t * value, size_t value_size) {
    if (value_size == 0) return;
    const uint64_t size = k_header + key_size + value_size;
    if (bytes_.fetch_add(size) + size > max_bytes_) {  // full: nothing more is stored
        bytes_ -= size;
        return;
    }
    std::vector<uint8_t> file(k_magic, k_magic + 8);
    file.reserve(size);
    put_u64(file, key_size);
    put_u64(file, value_size);
    put_u64(file, fnv1a(value, value_size, fnv1a(key, key_size)));
    file.insert(file.end(), key, key + key_size);
    file.insert(file.end(), value, value + value_size);
    try {  // (a temp file renamed into place, removed on any failure and on Ctrl-C)
        OutputFile out(path_of(key, key_size));
        out.write(file.data(), file.size());
        out.commit();
    } catch (const Error &) {
        bytes_ -= size;
        return;
    }
    ++stores_;
}

}  // namespace tern
