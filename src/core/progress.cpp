// ProgressBar: redraws one line with \r at most once per 0.1% of progress.
#include "core/progress.h"

#include <cstdio>
#include <unistd.h>

namespace tern {

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled, double show_after_s)
    : label_(std::move(label)), total_(total), active_(enabled && ::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()), show_after_s_(show_after_s) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done) {
    if (!active_ || total_ == 0) return;
    const int permille = static_cast<int>(done >= total_ ? 1000 : done * 1000 / total_);
    if (permille == last_permille_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (!drawn_ && elapsed < show_after_s_) return;
    drawn_         = true;
    last_permille_ = permille;
    constexpr int width = 30;
    const int     fill  = permille * width / 1000;
    char          bar[width + 1];
    for (int i = 0; i < width; ++i) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %6.1fs", label_.c_str(), bar, permille / 10.0, secs);
    std::fflush(stderr);
}

void ProgressBar::finish() {
    if (!active_) return;
    update(total_);
    if (drawn_) std::fprintf(stderr, "\n");
    active_ = false;
}

}  // namespace tern
