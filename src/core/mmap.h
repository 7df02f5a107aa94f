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

// Reads a whole (small) file into a string; throws Error(io) naming the path.
std::string read_file_text(const std::string & path);
// Writes bytes to path atomically (temp file + rename); throws Error(io).
void write_file_bytes(const std::string & path, std::span<const uint8_t> bytes);

}  // namespace tern
