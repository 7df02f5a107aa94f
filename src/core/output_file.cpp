// OutputFile: temp file + rename for regular targets, refusal for everything else, and a signal
// handler that removes live temp files; see output_file.h.
#include "core/output_file.h"

#include "core/error.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace tern {
namespace {

// ---- the temp files a signal must remove ----
// A fixed table, so that the handler only reads memory and calls unlink (async-signal-safe).
constexpr int    k_slots     = 32;
constexpr size_t k_path_max  = 4096;
constexpr int    k_signals[] = {SIGINT, SIGTERM, SIGHUP};

struct Slot {
    std::atomic<bool> used{false};
    char              path[k_path_max] = {};
};
Slot             g_slots[k_slots];
struct sigaction g_previous[std::size(k_signals)];
bool             g_installed = false;
std::mutex       g_mutex;  // guards slot allocation and installation (not used by the handler)

void remove_temp_files_and_reraise(int sig) {
    for (Slot & s : g_slots) {
        if (s.used.load(std::memory_order_acquire)) ::unlink(s.path);
    }
    for (size_t i = 0; i < std::size(k_signals); ++i) {
        if (k_signals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
    }
    ::raise(sig);  // pending until the handler returns, then handled as before (default: terminate)
}

void install_handler_locked() {
    if (g_installed) return;
    g_installed = true;
    for (size_t i = 0; i < std::size(k_signals); ++i) {
        struct sigaction current {};
        ::sigaction(k_signals[i], nullptr, &current);
        g_previous[i] = current;
        if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) continue;  // someone else's
        struct sigaction sa {};
        sa.sa_handler = remove_temp_files_and_reraise;
        sigemptyset(&sa.sa_mask);
        ::sigaction(k_signals[i], &sa, nullptr);
    }
}

int register_temp(const std::string & path) {
    if (path.size() >= k_path_max) return -1;  // not removable on a signal; still removed on errors
    std::lock_guard<std::mutex> lock(g_mutex);
    install_handler_locked();
    for (int i = 0; i < k_slots; ++i) {
        if (!g_slots[i].used.load(std::memory_order_relaxed)) {
            std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
            g_slots[i].used.store(true, std::memory_order_release);
            return i;
        }
    }
    return -1;
}

void unregister_temp(int slot) {
    if (slot < 0) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_slots[slot].used.store(false, std::memory_order_release);
}

// ---- the target ----
std::string parent_dir(const std::string & p) {
    const size_t slash = p.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : p.substr(0, slash);
}

const char * kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// Follows symlinks (at most 40, as the kernel does) to the path that will be written; `existing`
// gets its stat when it exists. Refuses anything but a regular file or a missing one.
std::string resolve_target(const std::string & path, struct stat & st, bool & exists) {
    if (path.empty()) fail(ErrorKind::invalid_argument, "the output file name is empty");
    std::string p = path;
    for (int hops = 0;; ++hops) {
        if (::lstat(p.c_str(), &st) != 0) {
            if (errno != ENOENT) {
                fail(ErrorKind::io, format("cannot write '%s': %s", path.c_str(), std::strerror(errno)));
            }
            exists = false;
            struct stat dir {};
            const std::string parent = parent_dir(p);
            if (::stat(parent.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
                fail(ErrorKind::io, format("cannot create '%s': the folder '%s' does not exist", path.c_str(), parent.c_str()),
                     "create the folder first, or write somewhere else");
            }
            return p;
        }
        if (S_ISREG(st.st_mode)) {
            exists = true;
            return p;
        }
        if (!S_ISLNK(st.st_mode)) {
            const std::string via = p == path ? "" : format(" (the symlink '%s' points to '%s')", path.c_str(), p.c_str());
            fail(ErrorKind::invalid_argument,
                 format("cannot write '%s': it is %s%s; tern writes only regular files", path.c_str(), kind_of(st.st_mode),
                        via.c_str()),
                 S_ISDIR(st.st_mode) ? "give a file name inside the folder" : "give the path of a regular file (new or existing)");
        }
        if (hops >= 40) fail(ErrorKind::io, format("cannot write '%s': too many levels of symbolic links", path.c_str()));
        char      buf[k_path_max];
        const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
        if (n < 0) fail(ErrorKind::io, format("cannot read the symlink '%s': %s", p.c_str(), std::strerror(errno)));
        const std::string link(buf, static_cast<size_t>(n));
        p = link.starts_with('/') ? link : parent_dir(p) + "/" + link;
    }
}

}  // namespace

std::string check_output_path(const std::string & path) {
    struct stat st {};
    bool        exists = false;
    return resolve_target(path, st, exists);
}

OutputFile::OutputFile(const std::string & path) : path_(path) {
    struct stat st {};
    bool        exists = false;
    target_            = resolve_target(path, st, exists);
    std::string tmpl   = target_ + ".tmp-XXXXXX";
    const int   fd     = ::mkstemp(tmpl.data());
    if (fd < 0) {
        const int err = errno;
        fail(ErrorKind::io, format("cannot create a file next to '%s': %s", path.c_str(), std::strerror(err)),
             err == EACCES || err == EROFS ? "the folder is not writable; write somewhere else" : "");
    }
    temp_ = tmpl;
    slot_ = register_temp(temp_);
    // mkstemp creates 0600; give the file the mode the target had, or a new file's usual mode.
    mode_t mode = 0;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
    }
    ::fchmod(fd, mode);
    file_ = ::fdopen(fd, "wb");
    if (!file_) {
        const int err = errno;
        ::close(fd);
        discard();
        fail(ErrorKind::io, format("cannot write '%s': %s", path.c_str(), std::strerror(err)));
    }
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
    if (file_) std::fclose(file_);
    file_ = nullptr;
    if (!temp_.empty()) ::unlink(temp_.c_str());
    unregister_temp(slot_);
    slot_ = -1;
    temp_.clear();
}

void OutputFile::write(const void * data, size_t n) {
    if (!file_) fail(ErrorKind::internal, format("OutputFile '%s': write after commit or failure", path_.c_str()));
    if (n != 0 && std::fwrite(data, 1, n, file_) != n) {
        const int err = errno;
        discard();
        fail(ErrorKind::io, format("cannot write '%s': %s", path_.c_str(), std::strerror(err)));
    }
}

void OutputFile::commit() {
    if (!file_) fail(ErrorKind::internal, format("OutputFile '%s': commit twice or after a failure", path_.c_str()));
    // fsync before rename: after a crash the target holds either the old or the whole new content.
    const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
    int        err     = errno;
    const bool closed  = std::fclose(file_) == 0;
    file_              = nullptr;
    if (flushed && !closed) err = errno;
    if (!flushed || !closed) {
        discard();
        fail(ErrorKind::io, format("cannot write '%s': %s", path_.c_str(), std::strerror(err)));
    }
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
        err = errno;
        discard();
        fail(ErrorKind::io, format("cannot replace '%s': %s", target_.c_str(), std::strerror(err)));
    }
    temp_.clear();  // renamed: nothing left to remove
    unregister_temp(slot_);
    slot_ = -1;
}

}  // namespace tern
