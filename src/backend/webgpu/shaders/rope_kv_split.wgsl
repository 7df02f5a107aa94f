// rope_kv_split: rope_kv.wgsl reading the qkv GEMM's split shares instead of its products: a GEMM split
// along K (gemm_split_sum.wgsl's input, last = 0) leaves [SPLIT][T][N] integer shares, and each
// thread here adds its four rows' shares and applies gemm_split_sum's epilogue (row_value, the same
// operations) before rope_kv's RoPE and stores: the bits of gemm_split_sum + rope_kv in one dispatch
// (30 fewer per 2B4T step at 64 streams).
//
//   part: [SPLIT][T][N] i32, N = (n_head + 2 n_head_kv) hd   rope: [pos][n_rot/2] (cos, sin) f32
//   q_out: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
//   cols: [T][4] i32 (PAGED; any buffer otherwise)   weights: the GEMM's codes | group scales [N] |
//   output scales [N] (u32 words)   act_scale: [T] f32 (the GEMM's activation scales)
// Bindings: 0 part, 1 rope (read); 2 q_out, 3 k_cache, 4 v_cache (read_write); 5 cols, 6 weights,
// 7 act_scale (read); 8 params
// Dispatch: (ceil(N / 4 / WG), T, 1), as rope_kv.

// #include "lib/numerics.wgsl"
// #include "lib/qkv_store.wgsl"

override WG: u32 = 64u;
override K_F16: bool = true;  // cache element types
override V_F16: bool = true;
override PAGED: bool = false;

struct Params {
    n_units: u32,     // N / 4
    head_dim: u32,
    n_rot: u32,       // rotated dimensions per head, a multiple of 4
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,        // position of token 0
    n_tokens: u32,    // T (part's token stride)
    n_split: u32,
    q_offset: u32,    // f32 index of q_out[0, 0]
    q_stride: u32,    // f32 elements between tokens of q_out
    k_offset: u32,    // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,    // element index of v_cache[0, 0]
    n_embd_kv: u32,   // cache elements per position
    cols_offset: u32, // PAGED: i32 index of cols[0]
    scales_offset: u32,   // u32 index of the GEMM's group scales in `weights`
    oscales_offset: u32,  // u32 index of its output scales
    ascale_offset: u32,   // f32 index of act_scale[0]
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> part: array<i32>;
@group(0) @binding(1) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(5) var<storage, read> cols: array<i32>;
@group(0) @binding(6) var<storage, read> weights: array<u32>;
@group(0) @binding(7) var<storage, read> act_scale: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

fn store_q(tok: u32, i: u32, v: f32) { q_out[p.q_offset + tok * p.q_stride + i] = v; }

// gemm_split_sum.wgsl's row_value: weight row `row`'s output for token t (s: its activation scale).
fn row_value(row: u32, t: u32, s: f32, rs: f32) -> f32 {
    let n_rows = 4u * p.n_units;
    var sum = 0;
    for (var z = 0u; z < p.n_split; z++) { sum += part[(z * p.n_tokens + t) * n_rows + row]; }
    let gs = bitcast<f32>(weights[p.scales_offset + row]);
    let os = bitcast<f32>(weights[p.oscales_offset + row]);
    let x  = div_by(f32(sum), s, rs) * gs;
    return mul_rn(x, os);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let unit = gid.x;
    let t    = gid.y;
    if (unit >= p.n_units) { return; }
    let hd   = p.head_dim;
    let head = (4u * unit) / hd;     // q heads, then k heads, then v heads
    let j    = (4u * unit) % hd;     // first head-relative slot of the unit
    let s    = act_scale[p.ascale_offset + t];
    let rs   = recip_part(s);
    var v: array<f32, 4>;
    for (var e = 0u; e < 4u; e++) { v[e] = row_value(head * hd + slot_dim(j + e), t, s, rs); }
    if (PAGED) {
        let c = p.cols_offset + 4u * t;
        store_qkv_unit(head, j, t, u32(cols[c]), u32(cols[c + 2u]), v);
    } else {
        store_qkv_unit(head, j, t, p.pos0 + t, p.pos0 + t, v);
    }
}
