// Compiled WGSL: shader modules (one per embedded shader), bind group layouts (one per binding
// signature), and compute pipelines keyed by PipelineKey. Everything is created once, inside error
// scopes; a WGSL error becomes Error(device) "file.wgsl:line:col: message".
//
// Binding signatures are strings with one letter per binding, in binding order:
//   r = var<storage, read>, w = var<storage, read_write>, u = var<uniform> (dynamic offset).
// Shaders bind whole buffers and take element offsets in their uniform Params, so one bind group
// serves every view into the same buffers (and views need no 256-byte alignment).
#pragma once

#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgsl_shaders.h"

#include <array>
#include <compare>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tern {

// An `override` constant of a shader.
struct WgslOverride {
    std::string_view name;   // empty: unused slot
    double           value = 0;
    auto operator<=>(const WgslOverride &) const = default;
};

struct PipelineKey {
    std::string_view             shader;     // table name, e.g. "matmul_ternary"
    std::string_view             signature;  // binding signature, e.g. "rrrwu"
    std::array<WgslOverride, 24> overrides{};
    auto operator<=>(const PipelineKey &) const = default;
    std::string label() const;  // "matmul_ternary[ROWS=4,TOKS=1]"
    // Sets `name` in the first unused slot (asserts there is one).
    void add(std::string_view name, double value);
};

// A hash of everything operator== compares (every dispatch looks its pipeline up: a hash table, not
// an ordered map's ~8 comparisons of 24 overrides each, which cost the browser build 5% of its host
// time per step).
struct PipelineKeyHash {
    size_t operator()(const PipelineKey & key) const;
};

class PipelineCache {
public:
    explicit PipelineCache(const WgpuContext & ctx) : ctx_(ctx) {}
    ~PipelineCache();  // waits for the pipelines prebuild() left in flight
    PipelineCache(const PipelineCache &)             = delete;
    PipelineCache & operator=(const PipelineCache &) = delete;

    // A device-wide override (e.g. FMA_FUSED) given to every pipeline whose shader declares it.
    void set_constant(std::string_view name, double value) { constants_[std::string(name)] = value; }
    // Build pipelines from the "<shader>_sg" variants (subgroup reductions) where they exist. Set it
    // before the first pipeline: modules and pipelines made earlier are kept.
    void set_subgroup_variants(bool on) { subgroup_variants_ = on; }
    bool subgroup_variants() const { return subgroup_variants_; }
    // The embedded shader a key's `shader` name compiles from: itself or its "_sg" variant.
    const WgslShader & variant(std::string_view shader) const;

    // The key's pipeline: built now (inside an error scope), or taken from prebuild() once its build is
    // done (waiting for it if need be; one that failed is built again here, which names the error).
    WGPUComputePipeline pipeline(const PipelineKey & key);   // throws Error(device)
    // Starts building these pipelines on the library's worker threads (wgpuDeviceCreateComputePipelineAsync)
    // and returns how many it started: none where the library lacks the call (the browser build), or
    // for keys built or started already, or whose module does not compile. Set the constants and the
    // subgroup variants first. pipeline() collects them; a key never asked for costs only its build.
    size_t prebuild(const std::vector<PipelineKey> & keys);
    // The keys pipeline() returned, in the order first asked for (what the next run will want).
    const std::vector<PipelineKey> & used() const { return used_; }
    size_t n_prebuilt() const { return n_prebuilt_; }  // pipeline() calls served by prebuild()
    WGPUBindGroupLayout layout(std::string_view signature);
    WGPUShaderModule    module(std::string_view shader);     // throws Error(device)

    size_t n_pipelines() const { return pipelines_.size(); }

private:
    struct Layout {
        WgpuHandle<WGPUBindGroupLayout> group;
        WgpuHandle<WGPUPipelineLayout>  pipeline;
    };
    // A pipeline prebuild() started: filled by its callback (on a wait's event processing).
    struct Pending {
        bool                done     = false;
        bool                ok       = false;
        WGPUComputePipeline pipeline = nullptr;
        double              t0_ms    = 0;  // steady-clock ms when it was started
        double              ms       = 0;  // from the start to its callback (run by a wait's event processing)
    };

    // A key's pipeline descriptor and what it points at (filled in place: desc points into label and consts).
    struct Described {
        std::string                    label;
        std::vector<WGPUConstantEntry> consts;
        WGPUComputePipelineDescriptor  desc{};
    };

    // The descriptor's override constants of a key: its own, then the device-wide ones its shader declares.
    std::vector<WGPUConstantEntry> constants(const PipelineKey & key) const;
    // Fills d for key with its module `shader`; the key's layout must exist (layout(key.signature)).
    void                           describe(const PipelineKey & key, WGPUShaderModule shader, Described & d) const;
    WGPUComputePipeline            keep(const PipelineKey & key, WgpuHandle<WGPUComputePipeline> p);

    const WgpuContext &                                        ctx_;
    std::map<std::string, WgpuHandle<WGPUShaderModule>, std::less<>> modules_;
    std::map<std::string, Layout, std::less<>>                 layouts_;
    std::unordered_map<PipelineKey, WgpuHandle<WGPUComputePipeline>, PipelineKeyHash> pipelines_;
    std::map<std::string, double, std::less<>>                 constants_;
    std::unordered_map<PipelineKey, std::unique_ptr<Pending>, PipelineKeyHash> pending_;
    std::vector<PipelineKey>                                   used_;
    size_t                                                     n_prebuilt_ = 0;
    bool                                                       subgroup_variants_ = false;
};

// Compiles one shader into a module inside an error scope; Error(device) with "file:line:col: message"
// lines when it does not compile. (PipelineCache::module uses it; tests call it on broken sources.)
WgpuHandle<WGPUShaderModule> compile_wgsl(const WgpuContext & ctx, const WgslShader & shader);

// The embedded shader called `name` (wgsl_shaders(), then the tables add_wgsl_shaders added), or nullptr.
const WgslShader * find_wgsl_shader(std::string_view name);
// Makes a table of further shaders findable (the tests' own kernels, tests/backend/shaders).
void add_wgsl_shaders(std::span<const WgslShader> table);

// Maps a line of the expanded source to "file.wgsl:line" (helpers appended after the kernel).
std::string wgsl_location(const WgslShader & shader, uint64_t line, uint64_t column);

}  // namespace tern
