// Backend helpers shared by every backend.
#include "backend/backend.h"

#include "core/error.h"

namespace tern {

Tensor Tensor::columns(int64_t first, int64_t count) const {
    TERN_ASSERT(ne[2] == 1 && ne[3] == 1, "columns() needs a 2-D tensor");
    TERN_ASSERT(first >= 0 && count >= 0 && first + count <= ne[1], "columns [%lld, %lld) of %lld",
                static_cast<long long>(first), static_cast<long long>(first + count), static_cast<long long>(ne[1]));
    Tensor t = *this;
    t.offset += static_cast<size_t>(first) * row_bytes();
    t.ne[1] = count;
    return t;
}

OwnedTensor alloc_tensor(Backend & backend, DType type, std::array<int64_t, 4> ne, const char * label) {
    OwnedTensor out;
    out.tensor.type = type;
    out.tensor.ne   = ne;
    out.buffer      = backend.alloc(out.tensor.n_bytes(), label);
    out.tensor.buffer = out.buffer.get();
    return out;
}

}  // namespace tern
