// The configuration of a decoder-only model of any family tern reads, from GGUF metadata and the
// tensor directory, validated (FORMATS.md §4.3, §6; llama.cpp's llama-arch / llama-model loaders):
//
//   arch            family  rope   FFN                     attention extras          head
//   bitnet-b1.58,   bitnet  NeoX   ReLU²(gate) * up,       sub-norms before o / down  tied or output
//   bitnet-25                      sub-norm
//   bitnet          bitnet  NeoX   SiLU(gate) * up         sub-norms                  tied or output
//   llama           llama   norm   SiLU(gate) * up         rope_freqs (Llama-3 rope   tied or output
//   (Llama-3,                      (SwiGLU)                scaling) optional
//    Falcon3, TriLM)
//   qwen3           qwen3   NeoX   SwiGLU                  per-head RMS QK-norm       tied or output
//                                                          before RoPE
//   phi3            phi3    NeoX   SwiGLU on a fused       fused attn_qkv;            output
//                                  gate+up (gate first)    rope_factors_long/short
//
// "norm" rope rotates pairs (2i, 2i+1) (llama.cpp's converter permutes HF's q/k rows so that this
// equals transformers' rotate_half); NeoX rotates (i, i + n_rot/2). GQA everywhere. This is the
// shared skeleton's view of a file; the forward pass per family comes with the general linear op.
#pragma once

#include "core/dtype.h"
#include "gguf/gguf_reader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tern {

enum class ModelFamily { bitnet, llama, qwen3, phi3 };
enum class RopeStyle { norm, neox };
enum class GluActivation { relu2, silu };  // applied to the gate; the FFN is act(gate) * up

std::string_view model_family_name(ModelFamily family);

struct FamilyConfig {
    std::string   arch;  // general.architecture
    std::string   name;  // general.name
    ModelFamily   family = ModelFamily::llama;
    int64_t       n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_ff = 0;
    int64_t       n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
    float         norm_eps       = 1e-5f;
    float         rope_freq_base = 10000.0f;
    float         rope_freq_scale = 1.0f;  // linear rope scaling: 1 / rope.scaling.factor
    RopeStyle     rope_style     = RopeStyle::neox;
    GluActivation glu            = GluActivation::silu;

    bool    sub_norms        = false;  // bitnet: attn_sub_norm / ffn_sub_norm
    bool    qk_norm          = false;  // qwen3: attn_q_norm / attn_k_norm [head_dim]
    bool    fused_qkv        = false;  // attn_qkv [n_embd, n_q + 2 n_kv] instead of attn_q/k/v
    bool    fused_gate_up    = false;  // phi3: ffn_up [n_embd, 2 n_ff] = gate rows then up rows
    bool    tied_head        = false;  // no output.weight: the head is token_embd
    bool    rope_freqs       = false;  // rope_freqs.weight [n_rot/2]: theta_i divided by it (Llama-3.1+)
    bool    rope_factors     = false;  // phi3 rope_factors_long / _short [n_rot/2]
    int64_t n_ctx_orig       = 0;      // rope.scaling.original_context_length (phi3 long/short choice)

    int64_t n_q() const { return n_head * head_dim; }      // rows of attn_q
    int64_t n_kv() const { return n_head_kv * head_dim; }  // rows of attn_k and attn_v
};

// Throws Error(invalid_model) naming the key or tensor for missing or out-of-range values and
// inconsistent shapes, Error(unsupported) for architectures and features tern does not run (rope
// scaling types other than none / linear, yarn, per-layer head counts, Bonsai-2 Hadamard keys).
FamilyConfig read_family_config(const GgufFile & file);

bool is_family_arch(std::string_view arch);  // the arch strings of the table above

// One tensor the family needs (or may have), with its expected shape (ne0 first).
struct TensorSpec {
    std::string          name;
    std::vector<int64_t> shape;
    bool                 matrix   = true;   // a weight matrix (any weight type) or a vector (float)
    bool                 optional = false;
};

// Every tensor the configuration implies, in llama.cpp's order per layer.
std::vector<TensorSpec> family_tensor_specs(const FamilyConfig & config);

// Checks presence, shape and type class of every tensor in family_tensor_specs: matrices must be of
// a weight type tern reads (dtype_traits), vectors F32 (or F16 / BF16). Throws Error(invalid_model)
// naming the tensor, what was expected and what was found; unknown extra tensors are logged.
void check_family_tensors(const GgufFile & file, const FamilyConfig & config);

}  // namespace tern
