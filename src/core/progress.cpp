// ProgressBar: one line redrawn with \r, by update() and by a ticker thread (5 times a second).
#include "core/progress.h"

#include <cstdio>
#include <unistd.h>

namespace tern {

namespace {
#ifdef __EMSCRIPTEN__
constexpr bool k_has_terminal = false;  // the browser build: no terminal to draw on, no threads to tick
#else
constexpr bool k_has_terminal = true;
#endif
}  // namespace

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled, double show_after_s)
    : label_(std::move(label)), total_(total), active_(k_has_terminal && enabled && ::isatty(STDERR_FILENO) != 0),
      show_after_s_(show_after_s), start_(std::chrono::steady_clock::now()) {
    if (active_) ticker_ = std::thread([this] { tick(); });
}

ProgressBar::~ProgressBar() { finish(false); }  // not finished: the work failed; erase the bar

void ProgressBar::tick() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
        draw_locked();
        wake_.wait_for(lock, std::chrono::milliseconds(200));
    }
}

void ProgressBar::update(uint64_t done) {
    if (!active_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = done > total_ ? total_ : done;
}

void ProgressBar::set_suffix(const std::string & text) {
    if (!active_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    suffix_ = text;
}

void ProgressBar::draw_locked() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (!shown_ && secs < show_after_s_) return;
    shown_ = true;
    constexpr int width    = 30;
    const int     permille = total_ == 0 ? 0 : static_cast<int>(done_ * 1000 / total_);
    const int     fill     = permille * width / 1000;
    char          bar[width + 1];
    for (int i = 0; i < width; ++i) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %6.1fs%s%s\033[K", label_.c_str(), bar, permille / 10.0, secs,
                 suffix_.empty() ? "" : "  ", suffix_.c_str());
    std::fflush(stderr);
}

void ProgressBar::finish(bool keep) {
    if (!active_) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    ticker_.join();
    active_ = false;
    if (!shown_) return;
    if (keep) {
        done_ = total_;
        draw_locked();
        std::fprintf(stderr, "\n");
    } else {
        std::fprintf(stderr, "\r\033[K");
    }
    std::fflush(stderr);
}

}  // namespace tern
