// Dawn's blob cache kept in files: what Dawn compiles for a pipeline (Tint's SPIR-V, the driver's
// VkPipelineCache data) is stored under a folder, so that the next run's device skips both. Chained
// to the device descriptor by WgpuContext (WgpuDeviceOptions::blob_cache_dir; native Dawn only).
//
// One file per key, named by a hash of the key: a header (magic, key and value sizes, a checksum of
// both), the key, the value. A file that is truncated, corrupt, of another key or over the size
// limit is a miss, never an error. Writes go to a temp file renamed into place; nothing more is
// stored once the folder holds max_bytes. Dawn calls load() and store() from its worker threads too.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tern {

inline constexpr uint64_t k_blob_cache_max_bytes = uint64_t{256} << 20;

class DawnBlobCache {
public:
    explicit DawnBlobCache(std::string dir, uint64_t max_bytes = k_blob_cache_max_bytes);

    // Dawn's load callback: value_size 0 asks for the size (0: a miss); else copies the value into
    // `value` and returns its size (a size other than value_size: a miss).
    size_t load(const uint8_t * key, size_t key_size, uint8_t * value, size_t value_size);
    void   store(const uint8_t * key, size_t key_size, const uint8_t * value, size_t value_size);

    const std::string & dir() const { return dir_; }
    uint64_t hits() const { return hits_; }      // values handed to Dawn
    uint64_t misses() const { return misses_; }  // size asks answered 0
    uint64_t stores() const { return stores_; }  // files written

private:
    std::string path_of(const uint8_t * key, size_t key_size) const;
    // The value of the file for `key`, or empty (a miss).
    std::vector<uint8_t> read(const uint8_t * key, size_t key_size) const;

    std::string           dir_;
    uint64_t              max_bytes_;
    std::atomic<uint64_t> bytes_{0};  // what the folder holds (counted at start, plus what was stored)
    std::atomic<uint64_t> hits_{0}, misses_{0}, stores_{0};
    std::mutex            mutex_;
    std::map<std::string, std::vector<uint8_t>> sized_;  // read by a size ask, for the load that follows
};

}  // namespace tern
