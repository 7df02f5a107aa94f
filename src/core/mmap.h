// Read-only memory mapping of a whole file (RAII). Model files are mapped, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tern {

class MappedFile {
public:
    MappedFile() = default;
    // Throws Error(io) naming the path if the file cannot be opened or mapped.
    explicit MappedFile(const std::string & path);
    MappedFile(MappedFile && other) noexcept;
    MappedFile & operator=(MappedFile && other) noexcept;
    MappedFile(const MappedFile &)             = delete;
    MappedFile & operator=(const MappedFile &) = delete;
    ~MappedFile();

    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    const uint8_t *          data() const { return data_; }
    size_t                   size() const { return size_; }
    const std::string &      path() const { return path_; }

private:
    void release();

    std::string     path_;
    const uint8_t * data_ = nullptr;
    size_t          size_ = 0;
};

// Largest file read_file_text reads by default: far more text than any context holds, and a bound
// for inputs that never end (/dev/zero, a pipe that keeps writing).
constexpr size_t k_max_text_file_bytes = size_t{256} << 20;

// Reads a whole file (or pipe) into a string; throws Error(io) naming the path, also when it holds
// more than max_bytes.
std::string read_file_text(const std::string & path, size_t max_bytes = k_max_text_file_bytes);
// Writes bytes to path through OutputFile (temp file + rename; only regular or new files);
// throws Error(invalid_argument / io).
void write_file_bytes(const std::string & path, std::span<const uint8_t> bytes);

}  // namespace tern
