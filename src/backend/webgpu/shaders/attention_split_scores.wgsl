// attention_split_scores: the first of the split attention kernels (webgpu_attention_split.cpp),
// one query per column with its positions spread over many workgroups: the scaled scores of the G
// query heads of a KV head against every position the column sees, with attention.wgsl's numerics
// (q rounded to f16 with an f16 K cache, where products of two f16 values are exact in f32; an f32
// cache's products rounded with mul_rn; each block of 16 dimensions summed in order from 0, the
// block sums in order from 0: cpu::dot_blocked16; then mul_rn by the scale), and each workgroup's
// largest score per query head, for the softmax's max:
//   scores[t][kvh][j][pos] = (q_(t, kvh G + j) · k_pos) * scale      for pos <= the column's position
//   wmax[t][kvh][j][w]     = max of workgroup w's scores of that row
//
//   q: [n_head hd, T] f32   k_cache: [n_head_kv hd, rows] f16 pairs or f32, as vec4<u32> (16 bytes)
//   cols, pages: lib/kv_pages.wgsl   scores: [T][n_head_kv][G][ld] f32   wmax: [T][n_head_kv][G][wmax_ld] f32
// Bindings: 0 q, 1 k_cache, 2 cols, 3 pages (read); 4 scores, 5 wmax (read_write); 6 params
// Dispatch: (ceil(n_max / TP), n_head_kv, T); workgroups past their column's positions return.
// Thread (position, block) loads its block of 16 K values straight into registers (by vec4 loads
// where K_VEC: every block starts at a multiple of 16 bytes, else word by word) and sums it against
// each of the G query rows staged in workgroup memory; threads (position, j) then add its block
// sums in order. Thread lid is (position lid % TP, block lid / TP): a warp's lanes share one block,
// so their q reads are broadcasts (lanes over a position's blocks read 16 b + d: 4-way bank
// conflicts on every product; H200 d4096 scores 16.1 -> 11.9 us) and their score stores are
// consecutive words.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;
override S: u32 = 8u;          // threads per position: head_dim's blocks of 16, rounded up to a power of two
override TP: u32 = WG / S;     // positions per workgroup
override HD: u32 = 128u;       // head_dim, a multiple of 4
override GROUP: u32 = 4u;      // G = n_head / n_head_kv
override K_F16: bool = true;
override K_VEC: bool = false;  // k_offset, n_embd_kv and HD multiples of 8 (f16) or 4 (f32) elements
override NB: u32 = (HD + 15u) / 16u;  // blocks of 16 dimensions

struct Params {
    n_embd_kv: u32,     // cache elements per row
    q_offset: u32,      // f32 index of q[0, 0]
    q_stride: u32,      // f32 elements between columns of q
    k_offset: u32,      // element index of k_cache[0, 0]
    ld: u32,            // f32 elements between score rows
    wmax_ld: u32,       // f32 elements between rows of wmax
    n_head_kv: u32,
    pos0: u32,          // without PAGED: position of column 0
    max_pages: u32,     // PAGED: entries per sequence in `pages`
    cols_offset: u32,
    pages_offset: u32,
    scale: f32,         // 1 / sqrt(head_dim)
    rn_zero: u32,       // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> cols: array<i32>;
@group(0) @binding(3) var<storage, read> pages: array<i32>;
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;
@group(0) @binding(5) var<storage, read_write> wmax: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> q_s: array<f32, GROUP * HD>;   // [j][d], f16-rounded with an f16 cache
var<workgroup> blk_s: array<f32, GROUP * WG>;  // [j][thread]: the block sums
var<workgroup> sc_s: array<f32, GROUP * TP>;   // [j][position]: the scores, for the max

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX (as attention.wgsl starts its max), as bits

// a * b as the CPU rounds it: exact when both are f16 values (so contraction cannot change it).
fn prod(a: f32, b: f32) -> f32 {
    if (K_F16) { return a * b; }
    return mul_rn(a, b);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t   = wid.z;
    let kvh = wid.y;
    let col = kv_column_uniform(lid, t);
    let n   = col.pos + 1u;
    let p0  = wid.x * TP;
    if (p0 >= n) { return; }
    let pl   = lid % TP;
    let b    = lid / TP;
    let pos  = p0 + pl;
    let mine = pos < n && b < NB;

    // This thread's block of K first (its loads in flight while q is staged).
    var kb: array<f32, 16>;
    if (mine) {
        let e0 = p.k_offset + kv_row(col, pos) * p.n_embd_kv + kvh * HD + 16u * b;  // element index
        if (K_F16 && K_VEC) {
            for (var h = 0u; h < 2u; h++) {
                if (16u * b + 8u * h < HD) {
                    let x = k_cache[e0 / 8u + h];
                    for (var c = 0u; c < 4u; c++) {
                        let v = unpack2x16float(x[c]);
                        kb[8u * h + 2u * c] = v.x;
                        kb[8u * h + 2u * c + 1u] = v.y;
                    }
                }
            }
        } else if (K_VEC) {
            for (var h = 0u; h < 4u; h++) {
                if (16u * b + 4u * h < HD) {
                    let x = k_cache[e0 / 4u + h];
                    for (var c = 0u; c < 4u; c++) { kb[4u * h + c] = bitcast<f32>(x[c]); }
                }
            }
        } else if (K_F16) {
            for (var w = 0u; w < 8u; w++) {
                if (16u * b + 2u * w < HD) {
                    let i = e0 / 2u + w;  // u32 word
                    let v = unpack2x16float(k_cache[i / 4u][i % 4u]);
                    kb[2u * w] = v.x;
                    kb[2u * w + 1u] = v.y;
                }
            }
        } else {
            for (var w = 0u; w < 16u; w++) {
                if (16u * b + w < HD) { kb[w] = bitcast<f32>(k_cache[(e0 + w) / 4u][(e0 + w) % 4u]); }
            }
        }
    }
    for (var i = lid; i < GROUP * HD; i += WG) {
        let v = q[p.q_offset + t * p.q_stride + kvh * GROUP * HD + i];
        q_s[i] = select(v, round_f16(v), K_F16);
    }
    workgroupBarrier();

    for (var j = 0u; j < GROUP; j++) {
        var s = 0.0;
        if (mine) {
            for (var d = 0u; d < 16u; d++) {
                if (16u * b + d < HD) { s = s + prod(q_s[j * HD + 16u * b + d], kb[d]); }
            }
        }
        blk_s[j * WG + lid] = s;
    }
    workgroupBarrier();

    let row0 = (t * p.n_head_kv + kvh) * GROUP;
    for (var j = b; j < GROUP; j += S) {
        var sc = bitcast<f32>(NEG_MAX);
        if (pos < n) {
            var acc = 0.0;
            for (var bb = 0u; bb < NB; bb++) { acc = acc + blk_s[j * WG + bb * TP + pl]; }
            sc = mul_rn(acc, p.scale);  // not fused into s - max
            scores[(row0 + j) * p.ld + pos] = sc;
        }
        sc_s[j * TP + pl] = sc;
    }
    workgroupBarrier();
    if (lid < GROUP) {
        var m = bitcast<f32>(NEG_MAX);
        for (var i = 0u; i < TP; i++) { m = max(m, sc_s[lid * TP + i]); }
        wmax[(row0 + lid) * p.wmax_ld + wid.x] = m;
    }
}
