// The pipelines one run used, kept in a file for the next run, which starts building them on Dawn's
// worker threads as soon as its device exists (PipelineCache::prebuild), while the weights load.
//
// File: a header line (the format, the build's shaders, the adapter and the tuning: a list made under
// other ones is not used), one key a line: "<shader> <signature> [NAME=value ...]", values printed to
// round-trip (%.17g), and a last line "end <checksum of the lines before>". A file whose checksum does
// not match (truncated, corrupt) or that is over k_max_pipeline_list_bytes is not used at all: with
// Dawn's validation off on a GPU (skip_validation), a key this build did not write could crash the
// pipeline's creation. Never an error. The file is written to a temp file and renamed over the old
// one; at most k_max_pipeline_list_keys keys are read or written.
#pragma once

#include "backend/webgpu/pipeline_cache.h"

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

inline constexpr size_t k_max_pipeline_list_keys  = 1024;
inline constexpr size_t k_max_pipeline_list_bytes = 512 * 1024;

// One key as a line (no newline).
std::string pipeline_key_line(const PipelineKey & key);

// The key of a line, its names interned in `names` (a deque: the views stay valid as it grows); empty
// for a malformed line, more than 24 overrides, or a shader this build does not embed.
std::optional<PipelineKey> parse_pipeline_key_line(std::string_view line, std::deque<std::string> & names);

// A hash of every embedded shader's source, for the header: a list is used by the build that wrote it.
uint64_t wgsl_shaders_hash();

// The keys of `path` whose header is `header` (none: no file, another header, a bad checksum); a
// line that does not parse is skipped.
std::vector<PipelineKey> read_pipeline_list(const std::string & path, std::string_view header,
                                            std::deque<std::string> & names);

// Writes `header` and the keys (the first k_max_pipeline_list_keys) to `path` through a temp file
// renamed over it, creating the folder. False (and nothing left behind) when it cannot.
bool write_pipeline_list(const std::string & path, std::string_view header, const std::vector<PipelineKey> & keys);

}  // namespace tern
