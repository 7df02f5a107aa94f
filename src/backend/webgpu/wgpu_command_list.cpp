// PassCommandList (wgpu_command_list.h): the browser build's compute-pass command list.
#include "backend/webgpu/wgpu_command_list.h"

namespace tern {

void PassCommandList::flush() {
    if (words_.empty()) return;
    replay_(pass_, words_.data(), words_.size());
    words_.clear();
}

void PassCommandList::forget_state() {
    pipeline_ = 0;
    for (Bound & b : bound_) b = Bound{};
}

void PassCommandList::use(uint32_t pass) {
    if (pass == pass_) return;
    flush();
    pass_ = pass;
    forget_state();
}

void PassCommandList::set_pipeline(uint32_t pass, uint32_t pipeline) {
    use(pass);
    if (pipeline != 0 && pipeline == pipeline_) return;
    pipeline_ = pipeline;
    words_.insert(words_.end(), {op_set_pipeline, pipeline});
}

void PassCommandList::set_bind_group(uint32_t pass, uint32_t index, uint32_t group, size_t n, const uint32_t * offsets) {
    use(pass);
    if (index < k_groups) {
        Bound & b = bound_[index];
        if (n <= k_offsets) {
            bool same = group != 0 && b.group == group && b.n == n;
            for (size_t i = 0; same && i < n; ++i) same = b.offsets[i] == offsets[i];
            if (same) return;
            b.group = group;
            b.n     = static_cast<uint32_t>(n);
            for (size_t i = 0; i < n; ++i) b.offsets[i] = offsets[i];
        } else {
            b = Bound{};
        }
    }
    words_.insert(words_.end(), {op_set_bind_group | (index & 0xFFu) << 8 | static_cast<uint32_t>(n) << 16, group});
    words_.insert(words_.end(), offsets, offsets + n);
}

void PassCommandList::dispatch(uint32_t pass, uint32_t x, uint32_t y, uint32_t z) {
    use(pass);
    if (z == 1 && y == 1) {
        words_.insert(words_.end(), {op_dispatch_x, x});
    } else if (z == 1) {
        words_.insert(words_.end(), {op_dispatch_xy, x, y});
    } else {
        words_.insert(words_.end(), {op_dispatch, x, y, z});
    }
}

void PassCommandList::closing(uint32_t pass) {
    if (pass != pass_) return;
    flush();
    pass_ = 0;
    forget_state();
}

void PassCommandList::releasing_pipeline(uint32_t pipeline) {
    flush();
    if (pipeline_ == pipeline) pipeline_ = 0;
}

void PassCommandList::releasing_bind_group(uint32_t group) {
    flush();
    for (Bound & b : bound_)
        if (b.group == group) b = Bound{};
}

}  // namespace tern
