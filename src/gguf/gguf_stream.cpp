// Streamed GGUF files (GgufFile::open_streamed): the metadata and tensor directory are read from a
// prefix of the file that grows until they parse; tensor bytes are read with pread when a loader
// asks for them and freed when it says so. The browser build reads files this way from a File or
// Blob (Emscripten's WORKERFS) or a host file under Node (NODEFS), so the whole file never has to
// sit in the 4 GB wasm32 heap, only the tensors of one layer at a time.
#include "gguf/gguf_reader.h"

#include "core/error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace tern {

// The metadata and directory of a streamed file are read 1 MiB first, then 4x larger prefixes, up to
// 256 MiB (Llama-3's vocabulary and merges take about 6 MB).
constexpr size_t k_first_prefix_bytes = size_t{1} << 20;
constexpr size_t k_max_prefix_bytes   = size_t{256} << 20;

struct GgufFile::Stream {
    int                               fd = -1;
    std::vector<std::vector<uint8_t>> loaded;  // what tensor_data() read since the last release
    uint64_t                          read_bytes = 0, total_bytes = 0;
    std::function<void(uint64_t, uint64_t)> progress;

    ~Stream() {
        if (fd >= 0) ::close(fd);
    }
    // Reads n bytes at offset into dst; throws Error(io) naming the file.
    void read_at(const std::string & name, uint64_t offset, uint8_t * dst, size_t n) const {
        while (n > 0) {
            const ssize_t got = ::pread(fd, dst, n, static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                fail(ErrorKind::io, format("cannot read '%s' at offset %llu: %s", name.c_str(),
                                           static_cast<unsigned long long>(offset),
                                           got == 0 ? "the file ended early" : std::strerror(errno)));
            }
            dst += got;
            offset += static_cast<uint64_t>(got);
            n -= static_cast<size_t>(got);
        }
    }
};

GgufFile::GgufFile()                                = default;
GgufFile::GgufFile(GgufFile &&) noexcept            = default;
GgufFile & GgufFile::operator=(GgufFile &&) noexcept = default;
GgufFile::~GgufFile()                               = default;

GgufFile GgufFile::open_streamed(const std::string & path, const GgufReadOptions & options) {
    auto      stream = std::make_unique<Stream>();
    stream->fd       = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (stream->fd < 0) fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(stream->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(ErrorKind::io, format("'%s' is not a regular file; tern reads model files, which must be", path.c_str()));
    }
    const uint64_t size   = static_cast<uint64_t>(st.st_size);
    const auto     prefix = [&](uint64_t n) { return static_cast<size_t>(std::min<uint64_t>(size, n)); };
    for (size_t want = prefix(k_first_prefix_bytes);; want = prefix(std::min(uint64_t{want} * 4, uint64_t{k_max_prefix_bytes}))) {
        GgufFile f;
        f.name_      = path;
        f.file_size_ = size;
        f.owned_.resize(want);
        stream->read_at(path, 0, f.owned_.data(), want);
        f.bytes_ = f.owned_;
        try {
            f.parse_with_context(options);
        } catch (const gguf_detail::NeedMoreBytes &) {
            if (want == k_max_prefix_bytes) {
                fail(ErrorKind::invalid_model, format("'%s': the metadata and tensor directory take more than the %zu "
                                                      "MiB tern reads before the tensors", path.c_str(),
                                                      k_max_prefix_bytes >> 20),
                     "the file is corrupt (a count or length is far too large)");
            }
            continue;
        }
        for (const GgufTensorInfo & t : f.tensors_) stream->total_bytes += t.n_bytes;
        f.stream_ = std::move(stream);
        return f;
    }
}

std::span<const uint8_t> GgufFile::read_streamed(uint64_t offset, size_t n_bytes) const {
    std::vector<uint8_t> & buf = stream_->loaded.emplace_back(n_bytes);  // (inner buffers never move)
    stream_->read_at(name_, offset, buf.data(), n_bytes);
    stream_->read_bytes += n_bytes;
    if (stream_->progress) stream_->progress(stream_->read_bytes, stream_->total_bytes);
    return buf;
}

void GgufFile::release_tensor_data() const {
    if (stream_) stream_->loaded.clear();
}

void GgufFile::set_read_progress(std::function<void(uint64_t done, uint64_t total)> fn) {
    if (stream_) stream_->progress = std::move(fn);
}

}  // namespace tern
