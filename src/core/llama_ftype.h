// general.file_type as llama.cpp writes it (its llama_ftype enum), for the writers of GGUF files.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tern {

// llama_ftype of a file whose projections are of this type (FORMATS.md §2.4). 40 is bitnet.cpp's
// MOSTLY_I2_S; Q1_0 also writes 40 (mainline's MOSTLY_Q1_0 collides with it; readers take the key as
// a hint only); a type without an ftype gives 1024 (GUESSED).
uint32_t llama_file_type(DType type);

}  // namespace tern
