// POSIX mmap of model files, and small whole-file helpers.
#include "core/mmap.h"

#include "core/error.h"
#include "core/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace tern {

MappedFile::MappedFile(const std::string & path) : path_(path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (and hang).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)),
             errno == ENOENT ? "check the path; models are files you download or make with `tern synth`/`tern convert`"
                             : "");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        const char * what = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not a regular file";
        fail(ErrorKind::io, format("'%s' is %s; tern maps model files, which must be regular files", path.c_str(), what));
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

std::string read_file_text(const std::string & path, size_t max_bytes) {
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
    std::string out;
    char        buf[1 << 16];
    for (;;) {
        const size_t n = std::fread(buf, 1, sizeof buf, f);
        if (n > max_bytes - out.size()) {
            std::fclose(f);
            fail(ErrorKind::io, format("'%s' is larger than the %zu MiB tern reads as text", path.c_str(), max_bytes >> 20),
                 "give a smaller file (a prompt or a text to score)");
        }
        out.append(buf, n);
        if (n < sizeof buf) break;
    }
    const bool error = std::ferror(f) != 0;
    std::fclose(f);
    if (error) fail(ErrorKind::io, format("cannot read '%s': %s", path.c_str(), std::strerror(errno)));
    return out;
}

void write_file_bytes(const std::string & path, std::span<const uint8_t> bytes) {
    OutputFile out(path);
    out.write(bytes.data(), bytes.size());
    out.commit();
}

}  // namespace tern
