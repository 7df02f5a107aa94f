// OutputFile: how tern writes a file a user named (-o FILE, --logits-out FILE, ...), safely.
//
//   target path is ...          what happens
//   a regular file              written to a temp file next to it, renamed over it by commit()
//                               (its permission bits are kept): until then the old file is intact
//   missing                     the same, creating it (mode 0666 minus the umask)
//   a symlink                   followed (also a dangling one): the link stays, its target is
//                               written as above
//   a directory, device node,   refused with Error(invalid_argument) naming the path and what it
//   FIFO or socket              is; nothing is created
//
// The temp file ("<target>.tmp-XXXXXX", unique, never an existing file) is removed on every path
// that does not reach commit(): an Error from write(), an exception elsewhere (the destructor),
// and SIGINT / SIGTERM / SIGHUP, whose handler deletes every live temp file before the signal
// takes its normal course (the handler is installed while an OutputFile exists, only for signals
// whose disposition is the default one).
//
//   OutputFile out(path);          // throws Error(invalid_argument / io)
//   out.write(bytes.data(), n);    // throws Error(io) naming the path (disk full, ...)
//   out.commit();                  // the target now has the new content
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace tern {

class OutputFile {
public:
    explicit OutputFile(const std::string & path);
    ~OutputFile();  // removes the temp file unless commit() succeeded
    OutputFile(const OutputFile &)             = delete;
    OutputFile & operator=(const OutputFile &) = delete;

    void write(const void * data, size_t n);
    // Flushes, closes and renames the temp file over the target. Throws Error(io) (then the temp
    // file is gone and the target untouched).
    void commit();

    const std::string & path() const { return path_; }         // as given
    const std::string & target() const { return target_; }     // symlinks resolved
    const std::string & temp_path() const { return temp_; }

private:
    void discard() noexcept;

    std::string path_, target_, temp_;
    FILE *      file_ = nullptr;
    int         slot_ = -1;  // index in the signal handler's table of live temp files
};

// Checks that path may be written by OutputFile (see the table above) without creating anything;
// returns the target (symlinks resolved). Throws Error(invalid_argument). For commands that check
// their -o before long work.
std::string check_output_path(const std::string & path);

}  // namespace tern
