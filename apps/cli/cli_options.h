// Option checks with messages that say which flag, what was expected and what was found
// ("--n-predict: expected an integer from -1 to 16777216, found 'gl'"), in place of CLI11's own
// ("Value gl not in range"). Every numeric option of the CLI goes through one of these, so a value
// is checked before CLI11 converts it.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tern::cli {

// An integer in [lo, hi] (decimal; a leading '-' for negatives).
CLI::Validator int_in(int64_t lo, int64_t hi);
// A finite number in [lo, hi].
CLI::Validator number_in(double lo, double hi);
// A finite number (any sign; the command checks the range and says why).
CLI::Validator finite_number();
// One of the given words.
CLI::Validator one_of(std::vector<std::string> words);
// A file that exists and can be read (a regular file, a pipe or a device such as /dev/stdin), not
// a directory.
CLI::Validator readable_file();

// --seed: -1 (llama.cpp's "random") or an integer 0..2^64-1; 4294967295 also means random, as
// llama.cpp's LLAMA_DEFAULT_SEED does. Returns the seed the sampler takes.
uint64_t parse_seed(const std::string & text);
CLI::Validator seed_value();

}  // namespace tern::cli
