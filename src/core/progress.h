// A terminal progress bar on stderr for long loads and conversions. It draws only when stderr is a
// terminal (logs and CI output stay clean), can be silenced with enabled = false, and with
// show_after_s > 0 appears only once that much time has passed (a quick load shows nothing).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tern {

class ProgressBar {
public:
    ProgressBar(std::string label, uint64_t total, bool enabled = true, double show_after_s = 0.0);
    ~ProgressBar();
    void update(uint64_t done);  // absolute progress, 0..total
    void finish();

private:
    std::string label_;
    uint64_t    total_;
    bool        active_;
    int         last_permille_ = -1;
    std::chrono::steady_clock::time_point start_;
    double      show_after_s_ = 0.0;
    bool        drawn_        = false;
};

}  // namespace tern
