// A terminal progress bar on stderr for long work (loads, conversions, prompts, perplexity). It
// draws only when stderr is a terminal (logs and CI output stay clean), only once the work has
// taken show_after_s seconds (short work shows nothing), and redraws a few times a second from a
// background thread, so the clock moves even while one long step runs (a 650 MB tensor).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tern {

class ProgressBar {
public:
    ProgressBar(std::string label, uint64_t total, bool enabled = true, double show_after_s = 0.0);
    ~ProgressBar();  // erases the bar if finish() was not called (the work failed)
    ProgressBar(const ProgressBar &)             = delete;
    ProgressBar & operator=(const ProgressBar &) = delete;

    void update(uint64_t done);                 // absolute progress, 0..total
    void set_suffix(const std::string & text);  // shown after the numbers, e.g. "ppl 12.34"
    // Stops redrawing. keep: leave the bar's last state on its own line (if it was drawn); else
    // erase it (a chat's "processing prompt" line).
    void finish(bool keep = true);

    // Whether progress would be drawn at all (stderr is a terminal and enabled).
    bool active() const { return active_; }

private:
    void tick();
    void draw_locked();

    std::string label_, suffix_;
    uint64_t    total_;
    uint64_t    done_ = 0;
    bool        active_;
    bool        shown_ = false;
    bool        stop_  = false;
    double      show_after_s_;
    std::chrono::steady_clock::time_point start_;
    std::mutex              mutex_;
    std::condition_variable wake_;
    std::thread             ticker_;
};

}  // namespace tern
