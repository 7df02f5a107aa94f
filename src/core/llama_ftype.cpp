#include "core/llama_ftype.h"

namespace tern {

uint32_t llama_file_type(DType type) {
    switch (type) {
        case DType::f32: return 0;
        case DType::f16: return 1;
        case DType::q4_0: return 2;
        case DType::q8_0: return 7;
        case DType::q4_k: return 14;  // MOSTLY_Q4_K_S: the closest name for an all-Q4_K file
        case DType::q6_k: return 18;
        case DType::bf16: return 32;
        case DType::tq1_0: return 36;
        case DType::tq2_0: return 37;
        case DType::i2_s: return 40;
        case DType::q1_0: return 40;
        default: return 1024;
    }
}

}  // namespace tern
