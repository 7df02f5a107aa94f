requires packed_4x8_integer_dot_product;

// lm_head_i8_argmax: greedy decoding's LM head over the int8 copy of an F16 table
// (head_i8_pack.wgsl), which is half the bytes: per row an f32 value f and a bound B on its
// distance to the exact head's logit, in the form lm_head_f16_decode.wgsl's ARGMAX_ONLY writes them,
// so argmax_exact.wgsl then recomputes exactly (from the F16 table) the few rows with
// f + B >= max (f - B), and the greedy token is the exact head's.
//
// h = rms_norm(x) * nw (NORM), optionally rounded to f16, is staged as lib/head_input.wgsl does,
// then put on a 16-bit grid: H = round(h / S), S = max|h| / 32639, split as H = 256 a + b with a
// and b int8, so that a row's sum is two exact integer dot4 sums: f = (s S) (256 sum q a + sum q b).
// With eta = h - S H (|eta_i| <= 0.51 S, so ||eta|| <= 0.51 S sqrt(K)) and the row's (s, c, s ||q||):
//   |f - exact| <= ||e - s q|| ||h|| + s ||q|| ||eta|| + (the rounding of f and of the exact logit)
//               <= c (||h|| + ||eta||) + s ||q|| ||eta||  =  B
// (head_i8_pack.wgsl's c already holds ||e - s q||, (K + 3) u s ||q|| for roundings and u ||e||.)
//
//   q8: [n_vocab][K / 16] vec4<u32> (16 int8 each)   info: [n_vocab] (s, c, s ||q||, 0) f32
//   x: [K] f32   nw: [K] f32   logits: [n_vocab] f32 (f)   partial: [n_vocab] (bits(B), 0), then
//   [workgroups] (bits(max of f - B over the workgroup's rows), index)
// Bindings: 0 q8 (read), 1 info (read), 2 x (read), 3 nw (read), 4 logits (read_write),
//           5 partial (read_write), 6 head (read), 7 exact_out (read_write), 8 params (uniform)
// Dispatch: (ceil(n_vocab / (64 BLOCKS)), 1, 1), or with ITERS any number of workgroups (the host
// takes two per compute unit) that the table's team rows of 8 are dealt to in turn (row_of).
// 256 threads = 8 teams of 32 lanes; for each of the
// workgroup's BLOCKS blocks of 64 rows, team t computes rows 64 w + 8 r + t for r = 0..7; lane l
// reads vec4 words l, l + 32, ... of each row. TEAM_SG (subgroups of exactly 32 invocations, so a
// team is a subgroup): each row's lanes are summed by one subgroupAdd and the team keeps its best
// row in registers, so the stream has no barrier; otherwise each block of 64 rows is reduced in
// workgroup memory.
//
// EXACT_TAIL (greedy decoding): the kernel also does argmax_exact.wgsl's work, for its own rows, so
// that dispatch goes. While streaming, each team (or the block reduction) publishes its best lower
// bound f - B with an atomicMax into threshold slot p.thr_slot of `exact_out`; at the end every
// workgroup reads that slot, T' (the largest bound published so far: a lower bound of some row's
// exact logit, whatever the other workgroups have reached), lists its rows with f + B >= T', and
// recomputes them exactly (lib/head_exact_row.wgsl, argmax_exact's order and bits, with h's words
// loaded again from x and nw: h staged in workgroup memory, 10 KB more per workgroup, made the
// stream ~1.6% slower on an H100). A row below T' is below some row's exact logit, so the global
// best (largest, lowest index on ties) is among the workgroups' listed rows, and each workgroup
// writes its best (value bits, index) to exact_out[2 + 2 w] for argmax_final.wgsl /
// embed_argmax.wgsl. Workgroup 0 first zeroes the other slot (the lowest key: every row a
// candidate) for the next token's head. exact_out: u32 [slot 0, slot 1, then (value bits, index)
// per workgroup].

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_exact_row.wgsl"
// #include "lib/head_params.wgsl"

// #include "lib/dot4_native.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"

// #include "lib/head_i8_body.wgsl"

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;
@group(0) @binding(5) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> head: array<vec4<u32>>;  // the F16 table (EXACT_TAIL)
@group(0) @binding(7) var<storage, read_write> exact_out: array<atomic<u32>>;  // (EXACT_TAIL) see above
@group(0) @binding(8) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    head_i8(lid, wid, groups);
}
