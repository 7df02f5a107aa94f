// POSIX mmap of model files, and small whole-file helpers.
#include "core/mmap.h"

#include "core/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace tern {

MappedFile::MappedFile(const std::string & path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)),
             errno == ENOENT ? "check the path; models are files you download or make with `tern synth`/`tern convert`"
                             : "");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(ErrorKind::io, format("'%s' is not a regular file", path.c_str()));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void * p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            fail(ErrorKind::io, format("cannot map '%s' (%zu bytes): %s", path.c_str(), size_, std::strerror(err)));
        }
        data_ = static_cast<const uint8_t *>(p);
    }
    ::close(fd);
}

MappedFile::MappedFile(MappedFile && other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile & MappedFile::operator=(MappedFile && other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t *>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

std::string read_file_text(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) fail(ErrorKind::io, format("cannot read '%s'", path.c_str()));
    return ss.str();
}

void write_file_bytes(const std::string & path, std::span<const uint8_t> bytes) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail(ErrorKind::io, format("cannot create '%s': %s", tmp.c_str(), std::strerror(errno)));
        out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) fail(ErrorKind::io, format("cannot write '%s': %s", tmp.c_str(), std::strerror(errno)));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        fail(ErrorKind::io, format("cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(errno)));
    }
}

}  // namespace tern
