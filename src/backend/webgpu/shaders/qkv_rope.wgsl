requires packed_4x8_integer_dot_product;

// qkv_rope: [q; k; v] = Wqkv a (exactly as bitlinear.wgsl), NeoX RoPE on the q and k heads at
// positions pos0 + t, q to `q_out`, k and v into the KV cache at those positions (f16, rounded to
// nearest even like core/fp16.h, or f32). cos/sin come from a host-made table (rope_table.h) so that
// they are the CPU's std::cos / std::sin of ggml's f32 theta recurrence, bit for bit.
//
//   weights: codes [N][K/16] u32 | group scales [N][n_groups] | output scales [N], N = (n_head + 2 n_head_kv) hd
//   act_q: [K, T] int8   act_scale: [T]   rope: [pos][n_rot/2] (cos, sin) f32
//   q_out: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
// Bindings: 0 weights, 1 act_q, 2 act_scale, 3 rope (read); 4 q_out, 5 k_cache, 6 v_cache
//           (read_write); 7 params (uniform)
// Dispatch: (N / ROWS, ceil(T / TOKS), 1), ROWS a multiple of 4 dividing head_dim. Rows are visited
// in "slots": within a head, slot 4u + e (4u < n_rot) is dimension 2u, 2u+1, 2u+half, 2u+1+half for
// e = 0..3 (half = n_rot / 2), and slot j >= n_rot is dimension j. So one epilogue thread holds both
// members of two RoPE pairs and two whole f16 words of the cache.

// #include "lib/ternary.wgsl"
// #include "lib/ternary_rows.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/qkv_store.wgsl"

override WG: u32 = 256u;
override ROWS: u32 = 8u;      // slots per workgroup, a multiple of 4 dividing head_dim and WG
override TOKS: u32 = 1u;      // 1..8
override N_GROUPS: u32 = 1u;  // scale groups per row
override K_F16: bool = true;  // cache element types
override V_F16: bool = true;

struct Params {
    k_words: u32,         // K / 16
    group_words: u32,     // words per scale group
    n_tokens: u32,
    scales_offset: u32,   // u32 index of the group scales in `weights`
    oscales_offset: u32,  // u32 index of the output scales in `weights`
    act_offset: u32,      // u32 index of act_q[0, 0]
    act_stride: u32,      // u32 words between tokens of act_q
    ascale_offset: u32,   // f32 index of act_scale[0]
    head_dim: u32,
    n_rot: u32,           // rotated dimensions per head, a multiple of 4
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,            // position of token 0
    q_offset: u32,        // f32 index of q_out[0, 0]
    q_stride: u32,        // f32 elements between tokens of q_out
    k_offset: u32,        // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,        // element index of v_cache[0, 0]
    n_embd_kv: u32,       // cache elements per position
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> act_q: array<u32>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<uniform> p: Params;

fn store_q(tok: u32, i: u32, v: f32) { q_out[p.q_offset + tok * p.q_stride + i] = v; }

var<workgroup> dots: array<atomic<i32>, ROWS * TOKS * N_GROUPS>;  // [slot][token][group]

fn epilogue(slot: u32, row: u32, t: u32, as_: f32) -> f32 {
    return row_epilogue((slot * TOKS + t) * N_GROUPS, row, as_);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let hd    = p.head_dim;
    let lanes = WG / ROWS;
    let team  = lid / lanes;
    let lane  = lid % lanes;
    let slot0 = wid.x * ROWS;            // global slot of this workgroup's first row
    let head  = slot0 / hd;              // q heads, then k heads, then v heads
    let j0    = slot0 % hd;
    let tok0  = wid.y * TOKS;
    let n_tok = min(TOKS, p.n_tokens - tok0);
    for (var i = lid; i < ROWS * TOKS * N_GROUPS; i += WG) { atomicStore(&dots[i], 0); }
    workgroupBarrier();

    let row = head * hd + slot_dim(j0 + team);
    accumulate_row_dots(row, team, lane, lanes, tok0, n_tok);
    workgroupBarrier();

    // One thread per (group of 4 slots, token).
    let units = ROWS / 4u;
    for (var oi = lid; oi < units * TOKS; oi += WG) {
        let u = oi / TOKS;
        let t = oi % TOKS;
        if (t < n_tok) {
            let as_ = act_scale[p.ascale_offset + tok0 + t];
            let j   = j0 + 4u * u;                    // first head-relative slot of the unit
            var v: array<f32, 4>;
            for (var e = 0u; e < 4u; e++) {
                v[e] = epilogue(4u * u + e, head * hd + slot_dim(j + e), t, as_);
            }
            store_qkv_unit(head, j, tok0 + t, p.pos0 + tok0 + t, p.pos0 + tok0 + t, v);
        }
    }
}
