// The WebGPU backend's tunables in one place: every size that changes speed and never results
// (workgroup sizes, lanes, tiles, thresholds between kernels, steps per submit), one struct of
// defaults per device class (for_adapter), and TERN_WEBGPU_TUNE="key=value,..." over it (apply:
// unknown keys and bad values are errors that name the key and what was expected). The defaults
// were measured on an H100 and an H200 (src/backend/webgpu/README.md, "Tuning";
// docs/perf-log.md has the trials behind them).
#pragma once

#include "backend/webgpu/wgpu_device.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// The dot4 prefill GEMM's tiling (ternary_gemm.wgsl): TM x TN results per thread, TR x TC threads.
struct GemmTiling {
    uint32_t tm = 4, tn = 8, tr = 16, tc = 8;
};

// The tensor-core GEMM's tiling (ternary_gemm_mma.wgsl): SGM x SGN subgroups of 32 per workgroup,
// each on 32 rows x 32 tokens.
struct MmaTiling {
    uint32_t sgm = 4, sgn = 1;
};

struct WebGpuTuning {
    // --- decode (one token) matmuls: webgpu_decode.cpp, shaders/*_decode.wgsl ---
    uint32_t decode_wg         = 256;  // threads per workgroup of a decode matmul (a power of two)
    uint32_t decode_wg_long    = 512;  // the same for rows longer than 4096 (2B4T's down projection)
    uint32_t decode_lanes      = 4;    // the fewest lanes (threads) per weight row (a power of two)
    uint32_t decode_lane_loads = 10;   // the most vec4 weight loads per lane (1..10; fewer: more lanes)
    uint32_t qkv_lanes         = 16;   // the fewest lanes per row of the qkv kernel
    uint32_t o_lanes           = 0;    // ... of a bitlinear over rows up to 4096 (the o-projection); 0: 32
                                       //     where 32-lane teams sum in registers and K >= 2048, else 16
    uint32_t o_wg              = 0;    // its threads; 0: 512 where o_lanes is 32 by default, else decode_wg
    uint32_t gate_up_lanes     = 4;    // the fewest lanes per row of gate+up
    uint32_t family_rows       = 16;   // output rows per workgroup of matvec_q8.wgsl (Q4_0 / Q8_0 decode)
    uint32_t family_wg         = 256;  // ... its threads (and matvec_q8k.wgsl's; a power of two)
    uint32_t family_rows_long  = 0;    // family_rows for rows of 4096+ values without the gate (down); 0: the same
    uint32_t family_prefetch   = 8;    // ... weight blocks per lane it loads before its prologue (0..8)
    uint32_t family_acts       = 3;    // Q4_0 / Q8_0: 1: the Q8_0-block input made once per token
                                       //    (act_q8_0.wgsl), then matvec_q8_acts.wgsl; 2: also by the gate+up
                                       //    for the down projection (QOUT); 3: also by one query's attention
                                       //    for the o-projection (attention.wgsl Q8_OUT); 0: matvec_q8.wgsl
                                       //    makes it in every workgroup
    uint32_t family_acts_rows  = 4;    // output rows per workgroup of matvec_q8_acts.wgsl (QOUT: at least 32)
    uint32_t family_q1_rope    = 256;  // one token's Q1_0 / Q2_0 / PQ2_0 [q; k; v] matvec with the QK-norm, RoPE and
                                       //    cache stores in its epilogue (matvec_q1_qkv.wgsl, a workgroup per head):
                                       //    its threads; 0: matvec_q8.wgsl, then rope_kv_family.wgsl
    uint32_t family_q1_sg      = 1;    // Q1_0 / Q2_0 / PQ2_0 (matvec_q8.wgsl WTYPE 7, matvec_q1_qkv.wgsl) where subgroups
                                       //    are 32 wide: 1: the prologue's norm total and the blocks' code sums by
                                       //    subgroup shuffles (one barrier; lib/quarters_q8_0.wgsl Q8_TOTAL_SG);
                                       //    0: workgroup trees (log2 WG + 2 barriers)
    uint32_t family_acts_loads = 0;    // ... blocks a lane loads at once (1..12); 0: all of its blocks, at most 12
                                       //    (Q8_0: 8); before: 4
    uint32_t family_qkv_rows   = 0;    // one token's normed [q; k; v] matvec_q8_acts.wgsl (PROLOGUE): its rows
                                       //    per workgroup (a multiple of 4 that divides the rows; else the
                                       //    default); 0: 32, or the fewest from 36 to 64 that make at most
                                       //    2 x compute_units workgroups where 32 make more (phi-3-mini: 36)
    // --- the LM head of one token: lm_head_i8_argmax.wgsl, argmax_exact.wgsl ---
    uint32_t head_i8_min_bytes = 64u << 20;  // greedy decoding streams an int8 copy of F16 heads this
                                             // large or larger (half the bytes; wider bounds)
    uint32_t family_head_i8 = 1;  // 1: greedy (and top-k) decoding of a Q8_0 / Q4_0 / Q6_K head streams
                                  //     the int8 copy of its f32 rows too (head_i8_min_bytes applies);
                                  //     0: lm_head_q.wgsl's exact logits + argmax (H200: 997 vs 1,320 tok/s, llama-3.2-1b)
    uint32_t head_groups  = 0;  // workgroups of the int8 head; 0: two per compute unit
    uint32_t exact_groups = 0;  // workgroups of argmax_exact; 0: 512 after the int8 head, 64 after F16
    uint32_t head_exact_form   = 1;  // one token's exact logits from an F16 head (top-p, min-p, logits):
                                     //     1: lm_head_f16_teams.wgsl (resident teams), 0: lm_head_f16_decode.wgsl
                                     //     (a workgroup per 64 rows; H100 683 vs 490 us for 2B4T's head)
    uint32_t head_exact_groups = 0;  // workgroups of lm_head_f16_teams.wgsl; 0: three per compute unit
    uint32_t head_exact_seg    = 5;   // ... vec4 words per lane it loads at once (1 to 10; a 2B4T row's
                                      //     are K / 256 = 10)
    uint32_t head_exact_ahead  = 1;   // ... 1: the next segment's words loaded into a second set of named
                                      //     registers while the current one is summed; 0: load, then sum
    uint32_t sample_scan_fused = 1;  // top-p without top-k after a one-token head: sample_scan.wgsl's
                                     // PHASE 2 (the maximum from the head's chunk winners; one dispatch)
                                     // instead of PHASE 0 + 1 (webgpu_sample.cpp)
    // --- the LM head of a batched step: webgpu_head_batch.cpp ---
    uint32_t head_batch_teams = 1;  // head_exact_batch.wgsl recomputes its listed rows by 8 teams of 32
                                    // lanes, a row each (TEAMS), in top-k heads (1: a sampled step's, many
                                    // rows per chunk) or in every batched head (2); 0: the whole workgroup
                                    // per row (greedy heads list a few rows: faster there)
    uint32_t head_mma_rows = 2;  // subgroups along the rows of lm_head_i8_mma.wgsl (tensor cores; 1 to
                                 //     4, where the workgroup memory fits); 0: lm_head_i8_batch (dot4)
    // --- attention: webgpu_ops.cpp, webgpu_attention_*.cpp ---
    uint32_t attn_wg                 = 0;    // threads of attention.wgsl; 0: one query 256 (512 past
                                             //     attn_wide_positions where it fits), prompts 128
    uint32_t attn_wide_positions     = 384;  // one query past this many positions: 512 threads
    uint32_t attn_long_positions     = 0;    // one query over this many or more: attention_split_*.wgsl;
                                             //     0: 800, or fewer where attention.wgsl keeps fewer scores
    uint32_t attn_split_dims         = 8;    // output dimensions per workgroup of attention_split_pv
    uint32_t attn_split_unroll       = 4;    // positions attention_split_pv loads ahead (1: none)
    uint32_t attn_split_tiles        = 1;    // one query over a long f16 cache (at most 512 positions): P·V by
                                             //     tiles of the row x 16 dimensions (attention_split_pvt +
                                             //     _combine); 0: attention_split_pv
    uint32_t attn_combine_fused      = 1;    // one query's attention_split_combine folded into the o-projection's
                                             //     prologue (lib/decode_io.wgsl PARTS) where that reads it next
                                             //     (H200, depth 4096: 479.4 / 478.5 vs 469.7 / 475.3 tok/s); 0: dispatched
    uint32_t attn_split_chunk        = 64;   // one query over a long cache: positions per attention_split_softmax
                                             //     workgroup (at most 1024 / G; 0: 1024 / G, at least 32)
    uint32_t attn_paged_tiles        = 512;  // P·V of a paged batch (f16 V) whose longest context has at least
                                             //     this many positions: attention_split_pvt + _combine (V tiles
                                             //     by coalesced vec4 loads, all G heads per tile) instead of
                                             //     attention_split_pv; 0: never
    uint32_t attn_split_heads        = 0;    // query heads per attention_split_pv workgroup (a divisor of
                                             //     G); 0: all G where that gives 2 workgroups per
                                             //     compute unit, else the largest divisor that does
    uint32_t attn_paged_deep         = 1;    // 1: a paged batch (f16 or f32 V, head_dim a multiple of 8)
                                             //     by attention_paged_super.wgsl (softmax inside the P·V
                                             //     workgroup, whole V rows; webgpu_attention_paged.cpp; H200
                                             //     64 streams, positions 20-1060: 9,285.7 vs 7,455.7 tok/s);
                                             //     0: split_attention's kernels for batches of columns up to
                                             //     512 positions (longer columns: attention_paged_super always)
    uint32_t attn_paged_block_rows   = 1;    // 1: the paged P·V kernels read the page table once per
                                             //     block of 32 positions (kv_row_in_block,
                                             //     lib/kv_pages.wgsl); 0: once per position
    uint32_t attn_split_pv_wg        = 0;    // threads of attention_split_pv; 0: 256, or for a paged
                                             //     batch the fewest (down to 64) that keep 16 per query
                                             //     head (a thread per block of a 512-position row)
    uint32_t attn_prefetch_loads     = 0;    // loads per thread of attention's weight-prefetch
                                             //     workgroups; 0: the fewest that stay on free units
    uint32_t attn_prefill_min_tokens = 16;   // query tokens from which prompts take attention_prefill_*
    uint32_t attn_pv_rows            = 32;   // P·V rows per workgroup of prompt attention (32 or 64)
    uint32_t attn_pv_split_groups    = 256;  // workgroups a P·V split aims for (0: never split)
    uint32_t attn_softmax_wg         = 64;   // threads per row of the prompt softmax
    uint32_t attn_softmax_wg_one     = 256;  // the same for one query (few, long rows)
    uint32_t attn_scratch_bytes      = 128u << 20;  // the prompt score buffer's budget (token chunks)
    // --- prefill (many tokens) matmuls: webgpu_prefill.cpp ---
    // tokens from which the GEMM replaces the per-token kernels; 0: 8 where the tensor-core GEMM
    // runs (H100, 8 streams: 1,838 tokens/s against 1,297 from 16), else 16
    uint32_t   gemm_min_tokens = 0;
    GemmTiling gemm_tile{0, 0, 0, 0};      // the dot4 GEMM's TMxTNxTRxTC; 0x0x0x0: 4x8x16x8, TC 4 up to 32 tokens
    MmaTiling  mma_tile{4, 1};             // the tensor-core GEMM's SGMxSGN
    MmaTiling  mma_tile_long{2, 1};        // the same for rows longer than 4096
    uint32_t   gemm_split_groups = 264;    // a GEMM (one scale group per row) with at most half this many
                                           //     workgroups is split along K into about this many (each
                                           //     share at least 4 chunks of 64); 0: never split
    uint32_t   norm_words_wg = 1024;       // threads of norm_quant_words.wgsl, the norms + int8 quantization of
                                           //     rows (rms_norm_quant, a split GEMM's sum fused before it) with
                                           //     each row's vec4 words in registers: raised to k / 32 (8 words
                                           //     per thread at most), lowered to the adapter's limit (H200, 64
                                           //     streams: 1024 12,103 / 8,380 tokens/s at depth 0 / 256, 512
                                           //     11,806 / 8,201, 256 11,301 / 7,923)
    // --- submits and waits: webgpu_decode_stream.cpp, wgpu_device.cpp ---
    uint32_t steps_per_submit = 4;     // greedy decoding's steps per submit, once the groups have grown
    uint32_t submit_ramp      = 8;     // steps recorded before the groups grow by one (from 1)
    uint32_t first_submit     = 8;     // dispatches in the first piece of a step after an idle device
                                       //     (then 2x, 4x, 8x, then the rest); 0: one submit
    uint32_t spin_us          = 20000; // how long a wait yields before it naps (a served 64-stream step waits
                                       //     ~5.2 ms: H200 HTTP 64 clients 8,156.9 / 8,216.3 tok/s with 20000
                                       //     against 7,988.8 / 7,995.2 with 4000, TTFT median ~430 vs ~1,700-2,000 ms)
    uint32_t compute_units    = 132;   // compute units (SMs) assumed where work is sized to the GPU:
                                       //     WebGPU does not tell (132: an H100 SXM's, an H200's)

    // The defaults for this adapter: discrete and integrated GPUs the struct's (measured on NVIDIA
    // H100 and H200); a CPU adapter (SwiftShader) does not spin (its worker threads need the CPU).
    static WebGpuTuning for_adapter(const WgpuAdapterSummary & adapter);
    // Applies "key=value,key=value" (TERN_WEBGPU_TUNE's form). Throws Error(invalid_argument) for an
    // unknown key or a value out of the key's range, naming both and what was expected.
    void apply(std::string_view settings);
    // "key=value,..." of every field, for logs.
    std::string describe() const;
};

}  // namespace tern
