// A terminal progress bar on stderr for long loads and conversions. It draws only when stderr is a
// terminal (logs and CI output stay clean) and can be silenced with enabled = false.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tern {

class ProgressBar {
public:
    ProgressBar(std::string label, uint64_t total, bool enabled = true);
    ~ProgressBar();
    void update(uint64_t done);  // absolute progress, 0..total
    void finish();

private:
    std::string label_;
    uint64_t    total_;
    bool        active_;
    int         last_permille_ = -1;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace tern
