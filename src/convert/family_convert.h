// `tern convert` for Hugging Face LlamaForCausalLM (Llama-2/3, Falcon3, TriLM), Qwen3ForCausalLM and
// Phi3ForCausalLM checkpoints: GGUF files with the tensor names, metadata keys and row layouts of
// llama.cpp's convert_hf_to_gguf for the `llama`, `qwen3` and `phi3` architectures.
//
//   HF (PyTorch order [out, in])                    GGUF (ne0 = in)                    notes
//   model.embed_tokens.weight                       token_embd.weight
//   model.layers.N.input_layernorm.weight           blk.N.attn_norm.weight             F32
//   ...self_attn.q_proj / k_proj / v_proj           blk.N.attn_q / attn_k / attn_v     llama: q/k rows permuted
//   ...self_attn.qkv_proj                           blk.N.attn_qkv                      phi3 (Q, K, V rows)
//   ...self_attn.q_norm / k_norm                    blk.N.attn_q_norm / attn_k_norm     qwen3, F32
//   ...self_attn.o_proj                             blk.N.attn_output
//   ...post_attention_layernorm                     blk.N.ffn_norm                      F32
//   ...mlp.gate_proj / up_proj / down_proj          blk.N.ffn_gate / ffn_up / ffn_down
//   ...mlp.gate_up_proj                             blk.N.ffn_up                        phi3 (gate rows first)
//   model.norm.weight                               output_norm.weight                  F32
//   lm_head.weight                                  output.weight                       absent when tied
//   (rope_scaling llama3)                           rope_freqs.weight [n_rot/2]         F32
//   (rope_scaling longrope)                         rope_factors_long / _short          F32
//
// Llama's permutation: llama.cpp rotates pairs (2i, 2i+1) ("norm" rope) where transformers rotates
// (i, i + d/2), so within every head of d rows, GGUF row 2i + t is HF row t·d/2 + i (heads counted
// with n_head for q and n_head_kv for k).
#pragma once

#include "convert/hf_convert.h"
#include "convert/hf_family_config.h"

namespace tern {

// Throws Error like convert_hf_checkpoint. The folder holds config.json (already parsed into
// `config`), *.safetensors, and tokenizer.json (byte-level BPE) or tokenizer.model (SentencePiece).
void convert_hf_family_checkpoint(const ConvertOptions & options, const HfFamilyConfig & config);

// GGUF row r of a permuted q/k matrix of `rows` rows and `n_heads` heads reads HF row
// llama_permuted_row(r, rows, n_heads).
int64_t llama_permuted_row(int64_t r, int64_t rows, int64_t n_heads);

}  // namespace tern
